"""`llmdoctor nginx`: read the inputs, find the proxied locations, run NGX001–NGX007, build a Report."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from llmdoctor.errors import UserError
from llmdoctor.limits import InputProblem, read_bounded
from llmdoctor.nginx.config import Config, load_directory, load_dump, load_file, split_dump
from llmdoctor.nginx.effective import Unit, build_levels, proxied_units
from llmdoctor.nginx.rules import CHECKS, Options
from llmdoctor.report.model import Finding, InputError, Report, display_path

STDIN = "-"
MAX_STREAM = 64 * 2**20  # bytes read from a pipe or device; `nginx -T` of a large site is a few MB


def read_input(path: str, stdin_text: str | None = None, conf_dir: str | None = None) -> Config:
    """One input: `-` (stdin: an `nginx -T` dump or a config), a dump file, a config file, or a directory."""
    if path == STDIN:
        text = stdin_text or ""
        if not text.strip():
            return _empty("<stdin>", "nothing on stdin: pipe a config or a dump, e.g. `sudo nginx -T | "
                                     "llmdoctor nginx -`")
        dump = split_dump(text)
        if dump is not None:
            return load_dump(dump)
        return _load_text(text, conf_dir)
    target = Path(path)
    if target.is_dir():
        return load_directory(target, conf_dir)
    if not target.exists():
        config = Config()
        config.errors.append(InputError(display_path(path), "no such file or directory"))
        return config
    if not target.is_file():  # a pipe (`llmdoctor nginx <(ssh host nginx -T)`) or a device: read it once
        return _read_stream(path, conf_dir)
    try:
        head = read_bounded(target, MAX_STREAM, what="an nginx config").decode("utf-8", errors="replace")
    except InputProblem as problem:
        return _empty(display_path(path), problem.reason)
    if not head.strip():
        return _empty(display_path(path), "the file is empty: nothing to check (is this the config nginx loads?)")
    dump = split_dump(head)
    return load_dump(dump) if dump is not None else load_file(target, conf_dir)


def _empty(shown: str, reason: str) -> Config:
    config = Config()
    config.errors.append(InputError(shown, reason))
    return config


def _read_stream(path: str, conf_dir: str | None) -> Config:
    """A named pipe or device: it can be read only once, and need not end (/dev/zero): at most MAX_STREAM."""
    shown = display_path(path)
    try:  # a named pipe nobody writes to is an error at once (it would block forever)
        raw = read_bounded(path, MAX_STREAM, streams=True, what="an nginx config or dump")
    except InputProblem as problem:
        return _empty(shown, problem.reason)
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return _empty(shown, "nothing to read: the pipe was empty")
    dump = split_dump(text)
    if dump is not None:
        return load_dump(dump)
    return _load_text(text, conf_dir, path)


def _load_text(text: str, conf_dir: str | None, name: str = "<stdin>") -> Config:
    """A config read from stdin or a pipe; its includes are read from disk (default: relative to the cwd)."""
    return load_dump({os.path.join(os.getcwd(), name): text}, disk_fallback=True,
                     conf_dir=conf_dir or os.getcwd())


def select_units(units: list[Unit], pattern: str | None) -> list[Unit]:
    if pattern is None:
        return units
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise UserError(f"--location {pattern!r} is not a valid regular expression: {err}") from None
    return [u for u in units if u.level.location().stmt and regex.search(" ".join(u.level.location().stmt.args))]


def check(paths: list[str], *, location: str | None = None, options: Options | None = None,
          stdin_text: str | None = None, conf_dir: str | None = None,
          enabled: Callable[[str], bool] = lambda rule_id: True) -> Report:
    """Read every input, run the enabled checks on each streamed location, one sorted Report."""
    options = options or Options()
    from llmdoctor.catalog import load_checks

    report = Report(command="nginx",
                    rules=[c.info() for c in load_checks().for_command("nginx") if enabled(c.id)])
    all_units: list[tuple[Config, Unit]] = []
    files: set[str] = set()
    for path in paths:
        config = read_input(path, stdin_text, conf_dir)
        report.errors.extend(config.errors)
        report.notices.extend(config.notices)
        files |= config.files
        levels = build_levels([stmts for _, stmts in config.roots])
        all_units.extend((config, unit) for unit in proxied_units(levels))
    report.files_checked = len(files)
    selected = select_units([u for _, u in all_units], location)
    if location is not None and all_units and not selected:
        labels = sorted({u.label() for _, u in all_units})
        raise UserError(f"--location {location!r} matches none of the proxied locations: {', '.join(labels)}")
    if not all_units and not report.errors:
        report.notices.append("no location passes requests upstream (proxy_pass, fastcgi_pass, uwsgi_pass, "
                              "scgi_pass): nothing to check")
    chosen = {id(u) for u in selected}
    seen: set[tuple[str, str, int]] = set()
    for config, unit in all_units:
        if id(unit) not in chosen:
            continue
        for rule_id, rule in CHECKS.items():
            if not enabled(rule_id):
                continue
            for hit in rule(unit, options):
                path = display_path(hit.stmt.path)
                key = (rule_id, path, hit.stmt.line)
                if key in seen:
                    continue
                seen.add(key)
                report.findings.append(Finding(
                    rule=rule_id, severity=hit.severity, path=path, line=hit.stmt.line,
                    column=config.column(hit.stmt), message=hit.message, fix=hit.fix,
                    extra={"location": unit.label()},
                ))
    report.errors = sorted(set(report.errors), key=InputError.sort_key)
    return report.sorted()


def exit_code(report: Report) -> int:
    """1 when a problem is found; 2 when an input could not be read (even if others had findings)."""
    if report.errors:
        return 2
    return report.exit_code()
