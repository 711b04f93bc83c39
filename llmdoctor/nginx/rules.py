"""NGX001–NGX007: what breaks a streamed response behind nginx, read from effective values (design.md §4).

Each check is a function named for what it finds, registered under its catalog id with `@reports`; it takes
one proxied block (`Unit`) and yields `Hit`s: the statement to change (or the location when a directive is
missing), a message and one concrete fix. The checker turns them into Findings. The documentation,
declared severities and examples of each id are in `rules/ngx00N.yaml` (`llmdoctor explain NGX001`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from llmdoctor.nginx.config import Stmt
from llmdoctor.nginx.effective import Level, Unit, parse_time
from llmdoctor.report.model import display_path

DEFAULT_READ_TIMEOUT_S = 60.0
HTTP11_DEFAULT_SINCE = (1, 29, 7)  # nginx >= 1.29.7 speaks HTTP/1.1 to proxied upstreams by default


@dataclass(frozen=True)
class Hit:
    severity: str
    stmt: Stmt
    message: str
    fix: str


@dataclass(frozen=True)
class Options:
    nginx_version: tuple[int, ...] | None = None  # None: assume a version before 1.29.7

    @property
    def default_http_version(self) -> str:
        if self.nginx_version is not None and self.nginx_version >= HTTP11_DEFAULT_SINCE:
            return "1.1"
        return "1.0"


Check = Callable[[Unit, "Options"], Iterator[Hit]]
CHECKS: dict[str, Check] = {}  # catalog id -> the function that checks it


def reports(rule_id: str) -> Callable[[Check], Check]:
    """Register a check under its catalog id (tests/test_catalog.py: every NGX id has exactly one)."""
    def register(function: Check) -> Check:
        assert rule_id not in CHECKS, rule_id
        CHECKS[rule_id] = function
        return function
    return register


def _where(stmt: Stmt) -> str:
    return f"{display_path(stmt.path)}:{stmt.line}"


def buffering_on(unit: Unit) -> tuple[bool, Stmt | None]:
    stmt = unit.level.single(unit.directive("buffering"))
    return (stmt is None or (stmt.args[:1] != ["off"])), stmt


def _ignores_x_accel(unit: Unit) -> Stmt | None:
    _, lines = unit.level.listed(unit.directive("ignore_headers"))
    return next((s for s in lines if any(a.lower() == "x-accel-buffering" for a in s.args)), None)


@reports("NGX001")
def response_buffering(unit: Unit, options: Options) -> Iterator[Hit]:
    on, stmt = buffering_on(unit)
    if not on:
        return
    name = unit.directive("buffering")
    setting = f"`{stmt.text()}` ({_where(stmt)})" if stmt else f"{name} is on by default"
    target = stmt or unit.anchor
    ignored = _ignores_x_accel(unit)
    upstream_opt_out = (
        "An `X-Accel-Buffering: no` header in the upstream's response would also turn it off per response, "
        f"but `{ignored.text()}` ({_where(ignored)}) makes nginx ignore it."
        if ignored
        else "An `X-Accel-Buffering: no` header in the upstream's response also turns it off per response."
    )
    fix = f"add `{name} off;` in {unit.label()}, or send `X-Accel-Buffering: no` from the upstream"
    if unit.family != "proxy":
        yield Hit("warning", target,
                  f"Response buffering is on for {unit.label()}: {setting}; nginx collects the upstream's "
                  f"response in its buffers before passing it on, so tokens arrive late and in bursts. "
                  + upstream_opt_out, fix)
        return
    version_stmt = unit.level.single("proxy_http_version")
    if version_stmt is not None and version_stmt.args:
        version = version_stmt.args[0]
        version_text = f"`{version_stmt.text()}` ({_where(version_stmt)})"
    else:
        version = options.default_http_version
        version_text = (f"proxy_http_version defaults to {version} "
                        + ("(nginx before 1.29.7; nginx >= 1.29.7 defaults to 1.1)" if version == "1.0"
                           else "(nginx >= 1.29.7)"))
    if version == "1.0":
        yield Hit("error", target,
                  f"Response buffering is on for {unit.label()}: {setting}, and the upstream is spoken to in "
                  f"HTTP/1.0: {version_text}. nginx then holds the headers and the whole body until the upstream "
                  "closes: the stream arrives in one piece at the end. " + upstream_opt_out, fix)
    else:
        yield Hit("warning", target,
                  f"Response buffering is on for {unit.label()}: {setting}, with HTTP/1.1 to the upstream "
                  f"({version_text}). A chunked upstream response is passed on chunk by chunk, but a "
                  "close-delimited or Content-Length response is held to the end: streaming depends on the "
                  "upstream's framing. " + upstream_opt_out, fix)


@reports("NGX002")
def ignored_x_accel_buffering(unit: Unit, options: Options) -> Iterator[Hit]:
    on, _ = buffering_on(unit)
    ignored = _ignores_x_accel(unit)
    if not on or ignored is None:
        return
    keep = [a for a in ignored.args if a.lower() != "x-accel-buffering"]
    fix = (f"`{ignored.directive} {' '.join(keep)};` (X-Accel-Buffering removed)" if keep
           else f"delete `{ignored.text()}`")
    yield Hit("warning", ignored,
              f"`{ignored.text()}` makes nginx ignore the upstream's `X-Accel-Buffering: no`, the per-response "
              f"way to turn buffering off, and buffering is on for {unit.label()}.", fix)


@reports("NGX003")
def short_read_timeout(unit: Unit, options: Options) -> Iterator[Hit]:
    name = unit.directive("read_timeout")
    stmt = unit.level.single(name)
    seconds = parse_time(stmt.args[0]) if stmt and stmt.args else DEFAULT_READ_TIMEOUT_S
    if seconds is None or seconds > DEFAULT_READ_TIMEOUT_S:
        return
    shown = f"`{stmt.text()}`" if stmt else f"{name} is {DEFAULT_READ_TIMEOUT_S:g}s by default"
    yield Hit("warning", stmt or unit.anchor,
              f"{shown} for {unit.label()}: it is the longest gap allowed between two reads from the upstream, "
              f"so a first token or a pause slower than {seconds:g}s cuts the stream (the client gets status 200 "
              "and a truncated body).",
              f"`{name} 300s;` in {unit.label()} (longer than the slowest first token and longest pause), "
              "or have the upstream send an SSE comment line as a heartbeat more often than that")


@reports("NGX004")
def gzip_event_stream(unit: Unit, options: Options) -> Iterator[Hit]:
    gzip = unit.level.single("gzip")
    if gzip is None or gzip.args[:1] != ["on"]:
        return
    _, types = unit.level.listed("gzip_types")
    stmt = next((s for s in types if any(a in ("text/event-stream", "*") for a in s.args)), None)
    if stmt is None:
        return
    matched = "text/event-stream" if "text/event-stream" in stmt.args else "*"
    yield Hit("warning", stmt,
              f"`{stmt.text()}` with `gzip on` ({_where(gzip)}) compresses {matched} responses of "
              f"{unit.label()}: compressed server-sent events hold small events in the compressor and break "
              "clients and proxies that read the stream line by line.",
              f"remove {matched} from gzip_types, or add `gzip off;` in {unit.label()}")


@reports("NGX005")
def cached_stream(unit: Unit, options: Options) -> Iterator[Hit]:
    name = unit.directive("cache")
    stmt = unit.level.single(name)
    if stmt is None or stmt.args[:1] == ["off"]:
        return
    on, _ = buffering_on(unit)
    fix = f"`{name} off;` in {unit.label()}"
    if on:
        yield Hit("error", stmt,
                  f"`{stmt.text()}` caches {unit.label()}: nginx stores whole responses and replays a cached one "
                  "as a single burst without asking the upstream, and a stream of generated tokens is not the "
                  "same twice.", fix)
    else:
        yield Hit("info", stmt,
                  f"`{stmt.text()}` is set for {unit.label()}, where {unit.directive('buffering')} is off: nginx "
                  "then stores nothing (every request goes to the upstream), but turning buffering back on would "
                  "start replaying cached streams.", fix)


_NO_OP_REASONS = {
    "add_header": "adds the header to the response sent to the client; nginx reads X-Accel-Buffering only "
                  "from the upstream's response",
    "proxy_set_header": "sends the header to the upstream in the request; nginx reads X-Accel-Buffering only "
                        "from the upstream's response",
    "max_temp_file_size": "only stops spilling buffered responses to a temporary file; the response is still "
                          "buffered in memory",
    "chunked_transfer_encoding": "changes only the framing towards the client; the response is still buffered",
    "request_buffering": "concerns the request body sent to the upstream, not the response",
}


def _no_op_lines(unit: Unit) -> Iterator[tuple[Stmt, str]]:
    level: Level = unit.level
    for header_directive in ("add_header", "proxy_set_header"):
        _, lines = level.listed(header_directive)
        for stmt in lines:
            if stmt.args and stmt.args[0].lower() == "x-accel-buffering":
                yield stmt, _NO_OP_REASONS[header_directive]
    stmt = level.single(unit.directive("max_temp_file_size"))
    if stmt is not None and stmt.args and re.fullmatch(r"0+[kKmMgG]?", stmt.args[0]):
        yield stmt, _NO_OP_REASONS["max_temp_file_size"]
    stmt = level.single("chunked_transfer_encoding")
    if stmt is not None and stmt.args[:1] == ["off"]:
        yield stmt, _NO_OP_REASONS["chunked_transfer_encoding"]
    stmt = level.single(unit.directive("request_buffering"))
    if stmt is not None and stmt.args[:1] == ["off"]:
        yield stmt, _NO_OP_REASONS["request_buffering"]


@reports("NGX006")
def no_op_streaming_fix(unit: Unit, options: Options) -> Iterator[Hit]:
    on, _ = buffering_on(unit)
    if not on:
        return
    name = unit.directive("buffering")
    for stmt, reason in _no_op_lines(unit):
        yield Hit("warning", stmt,
                  f"`{stmt.text()}` does not stop response buffering: it {reason}. Buffering is still on for "
                  f"{unit.label()}.",
                  f"replace it with `{name} off;` in {unit.label()} (or have the upstream send "
                  "`X-Accel-Buffering: no`)")


LIST_DIRECTIVES = ("proxy_set_header", "add_header", "proxy_hide_header", "proxy_pass_header",
                   "fastcgi_param", "uwsgi_param", "scgi_param", "fastcgi_hide_header", "uwsgi_hide_header",
                   "scgi_hide_header", "add_trailer")


@reports("NGX007")
def list_directive_not_inherited(unit: Unit, options: Options) -> Iterator[Hit]:
    for level in unit.level.chain():
        if level.parent is None:
            continue
        for name in LIST_DIRECTIVES:
            own = level.defined(name)
            if not own:
                continue
            source, inherited = level.parent.listed(name)
            kept = {s.args[0].lower() for s in own if s.args}
            lost = [s for s in inherited if s.args and s.args[0].lower() not in kept]
            if not lost or source is None:
                continue
            where = f"{source.kind} block" + (f" at {_where(source.stmt)}" if source.stmt else "")
            shown = "; ".join(f"`{s.text()}` ({_where(s)})" for s in lost)
            yield Hit("warning", own[0],
                      f"{name} here replaces every {name} inherited from the {where}: {shown} "
                      f"no longer appl{'ies' if len(lost) == 1 else 'y'} to {unit.label()}.",
                      "repeat " + " ".join(f"`{s.text()}`" for s in lost) + " next to this line")

