"""Effective directive values per location, by nginx's inheritance rules (design.md §4).

Levels nest http -> server -> location -> nested location / `if` / `limit_except`. A single-value
directive comes from the deepest level that sets it. A list directive (`proxy_set_header`, `add_header`,
`proxy_hide_header`, `*_param`, ...) comes whole from the deepest level that has *any* line of it; the
levels above are then ignored. Named locations sit at server level, so they inherit from the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from llmdoctor.nginx.config import Stmt

PASS_DIRECTIVES = {"proxy_pass": "proxy", "fastcgi_pass": "fastcgi", "uwsgi_pass": "uwsgi", "scgi_pass": "scgi"}
_NESTED = {"location", "if", "limit_except"}


@dataclass
class Level:
    kind: str  # http, server, location, if, limit_except
    stmt: Stmt | None  # the block's own statement; None for an implicit top level
    parent: Level | None
    own: list[Stmt] = field(default_factory=list)  # the directives written directly in this block

    def chain(self) -> Iterator[Level]:
        level: Level | None = self
        while level is not None:
            yield level
            level = level.parent

    def defined(self, name: str) -> list[Stmt]:
        return [s for s in self.own if s.directive == name]

    def single(self, name: str) -> Stmt | None:
        """The statement that sets a single-value directive here (deepest level wins), or None (default)."""
        for level in self.chain():
            found = level.defined(name)
            if found:
                return found[-1]
        return None

    def listed(self, name: str) -> tuple[Level | None, list[Stmt]]:
        """The level a list directive is taken from, and its lines there (all or nothing per level)."""
        for level in self.chain():
            found = level.defined(name)
            if found:
                return level, found
        return None, []

    def location(self) -> Level:
        """The location this level belongs to (itself for a location; the enclosing one for if/limit_except)."""
        for level in self.chain():
            if level.kind == "location":
                return level
        return self

    def server(self) -> Level | None:
        return next((lv for lv in self.chain() if lv.kind == "server"), None)


@dataclass
class Unit:
    """A block that passes requests upstream: what the rules check."""

    level: Level
    pass_stmt: Stmt

    @property
    def family(self) -> str:
        return PASS_DIRECTIVES[self.pass_stmt.directive]

    def directive(self, suffix: str) -> str:
        """`buffering` -> `proxy_buffering` / `fastcgi_buffering` ... for this unit's module."""
        return f"{self.family}_{suffix}"

    @property
    def anchor(self) -> Stmt:
        """Where a missing directive belongs: the location block (even for an `if` inside it)."""
        location = self.level.location()
        return location.stmt or self.pass_stmt

    def label(self) -> str:
        location = self.level.location()
        where = f"location {' '.join(location.stmt.args)}" if location.stmt else "top level"
        server = self.level.server()
        if server is not None:
            names = [a for s in server.defined("server_name") for a in s.args]
            if names:
                where += f" (server {names[0]})"
        return where


def build_levels(roots: list[list[Stmt]]) -> list[Level]:
    """Every http/server/location/if/limit_except level, parents linked."""
    levels: list[Level] = []
    for stmts in roots:
        http_blocks = [s for s in stmts if s.directive == "http" and s.block is not None]
        if http_blocks:
            for http in http_blocks:
                _add(Level("http", http, None), http.block or [], levels)
        elif any(s.directive == "location" for s in stmts):
            # a snippet included inside a server block
            _add(Level("server", None, Level("http", None, None)), stmts, levels)
        else:
            # a conf.d/sites file: server blocks at the top, implicitly inside http
            _add(Level("http", None, None), stmts, levels)
    return levels


def _add(level: Level, body: list[Stmt], levels: list[Level]) -> None:
    levels.append(level)
    for stmt in body:
        if stmt.block is None:
            level.own.append(stmt)
        elif level.kind == "http" and stmt.directive == "server":
            _add(Level("server", stmt, level), stmt.block, levels)
        elif level.kind in ("server", "location") and stmt.directive == "location":
            _add(Level("location", stmt, level), stmt.block, levels)
        elif level.kind == "location" and stmt.directive in _NESTED:
            _add(Level(stmt.directive, stmt, level), stmt.block, levels)


def proxied_units(levels: list[Level]) -> list[Unit]:
    units = []
    for level in levels:
        for stmt in level.own:
            if stmt.directive in PASS_DIRECTIVES:
                units.append(Unit(level, stmt))
                break
    return units


_TIME_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|M|y)?")
_TIME_UNIT = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400, "w": 604800,
              "M": 2592000, "y": 31536000}


def parse_time(value: str) -> float | None:
    """nginx time syntax in seconds (`60`, `90s`, `1m30s`, `500ms`); None when it is not one."""
    value = value.strip()
    if not value:
        return None
    total, position = 0.0, 0
    for match in _TIME_PART.finditer(value):
        if match.start() != position:
            return None
        total += int(match.group(1)) * _TIME_UNIT[match.group(2)]
        position = match.end()
    return total if position == len(value) else None
