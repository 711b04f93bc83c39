"""Renderers shared by every checking command: text (rich), json, sarif (2.1.0) and github annotations;
concise, grouped, gitlab and `--statistics` live in formats.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from llmdoctor import __version__
from llmdoctor.report.model import Report

FORMATS = ("text", "json", "sarif", "github", "concise", "grouped", "gitlab")
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/llmdoctor/llmdoctor"


def render(report: Report, fmt: str, out: TextIO | None = None, *, statistics: bool = False,
           quiet: bool = False, show_fixes: bool = False) -> None:
    """`statistics`: only the counts per rule (text or json); `quiet`: only the findings (text formats);
    `show_fixes`: also list the fixes applied (text)."""
    from llmdoctor.report import formats

    out = out or sys.stdout
    if statistics and fmt in ("text", "json", "concise", "grouped"):
        formats.render_statistics(report, out, "json" if fmt == "json" else "text")
    elif fmt == "text":
        render_text(report, out, quiet=quiet, show_fixes=show_fixes)
    elif fmt == "concise":
        formats.render_concise(report, out, quiet=quiet)
    elif fmt == "grouped":
        formats.render_grouped(report, out, quiet=quiet)
    elif fmt == "gitlab":
        formats.render_gitlab(report, out)
    elif fmt == "json":
        out.write(to_json(report) + "\n")
    elif fmt == "sarif":
        from llmdoctor.limits import json_safe

        out.write(json.dumps(json_safe(to_sarif(report)), indent=2) + "\n")
    elif fmt == "github":
        render_github(report, out)
    else:  # the CLI validates the choice; this guards programmatic use
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


# ----------------------------------------------------------------------------- text


def make_console(out: TextIO, *, stderr: bool = False):
    """A rich console that colours only on a terminal and honours NO_COLOR (rich reads it itself)."""
    from rich.console import Console

    return Console(file=out, stderr=stderr, highlight=False, soft_wrap=True, emoji=False)


_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_text(report: Report, out: TextIO, *, quiet: bool = False, show_fixes: bool = False) -> None:
    """`path:line:col: CODE [severity] [*] message` and the fix in words under it; `[*]`: `--fix` (with the
    options given) can fix it. Then input errors, fixes skipped, notes and the summary (not with `quiet`).
    Anything that came from outside (paths, messages quoting a file or a config) has its control characters
    escaped, so a file name cannot drive the terminal."""
    from rich.markup import escape

    from llmdoctor.limits import printable

    console = make_console(out)
    for f in report.findings:
        style = _SEVERITY_STYLE.get(f.severity, "")
        mark = "[*] " if report.fix_available(f) in ("safe", "unsafe") else ""
        console.print(f"[bold]{escape(printable(f.path))}[/]:{f.line}:{f.column}: "
                      f"[{style}]{escape(printable(f.rule))} {escape(f'[{f.severity}]')}[/] "
                      f"{escape(mark)}{escape(printable(f.message))}")
        chain = via_line(f)
        if chain:
            console.print(f"    [dim]via[/] {escape(printable(chain))}")
        if f.fix:
            console.print(f"    [dim]fix:[/] {escape(printable(f.fix))}")
    for e in report.errors:
        console.print(f"[bold]{escape(printable(str(e.path)))}[/]{':' + str(e.line) if e.line else ''}: "
                      f"[bold red]error:[/] {escape(printable(e.reason))}")
    for line in fix_lines(report, show_fixes=show_fixes):
        console.print(escape(printable(line)))
    if quiet:
        return
    for notice in report.notices:
        console.print(f"[dim]note: {escape(printable(notice))}[/]")
    for line in summary_lines(report):
        console.print(escape(line))


def fix_lines(report: Report, *, show_fixes: bool = False) -> list[str]:
    """Fixes that could not be applied (always: a user who asked for them must know), the files still
    changing after the last pass, and with `show_fixes` what was fixed (per file, per rule, as ruff)."""
    fixes = report.fixes
    if fixes is None:
        return []
    lines = [f"{s['path']}:{s['line']}:{s['column']}: {s['rule']} fix not applied: {s['reason']}"
             for s in fixes.skipped]
    lines += [f"{path}: still changing after the last fix pass; run the fix again" for path in fixes.unconverged]
    if show_fixes and fixes.applied:
        verb = "Fixed" if fixes.mode == "fix" else "Would fix"
        lines.append(f"{verb} {_count(len(fixes.applied), 'finding')}:")
        per_file: dict[str, dict[tuple[str, str], int]] = {}
        for applied in fixes.applied:
            key = (applied["rule"], applied["title"])
            counts = per_file.setdefault(applied["path"], {})
            counts[key] = counts.get(key, 0) + 1
        for path, counts in per_file.items():
            lines.append(f"- {path}:")
            lines.extend(f"    {n} × {rule} ({title})" for (rule, title), n in sorted(counts.items()))
    return lines


def summary_lines(report: Report) -> list[str]:
    """The summary line, and the fixes the options given would or could apply (ruff's hint)."""
    lines = [summary_line(report)]
    available = [report.fix_available(f) for f in report.findings]
    fixable = sum(1 for a in available if a in ("safe", "unsafe"))
    unsafe, timeout = available.count("needs-unsafe"), available.count("needs-timeout")
    if not (fixable or unsafe or timeout):
        return lines
    fixing = report.fixes is not None and report.fixes.mode == "fix"
    hint = (f"[*] {fixable} {'still ' if fixing else ''}fixable with `--fix`" if fixable
            else "No fixes available")
    hidden = []
    if unsafe:
        hidden.append(f"{_count(unsafe, 'hidden fix', 'hidden fixes')} can be enabled with `--unsafe-fixes`")
    if timeout:
        hidden.append(f"{timeout} more with `--fix-timeout SECONDS`")
    lines.append(hint + (f" ({'; '.join(hidden)})" if hidden else "") + ".")
    return lines


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def via_line(finding) -> str:
    """A finding's chain of calls on one line: `get_user → app/clients.py:4 fetch_user` (the first step is
    the function the finding is reported in, or the entry point); '' when it has none."""
    steps = finding.extra.get("via") if isinstance(finding.extra, dict) else None
    if not isinstance(steps, list) or len(steps) < 2:
        return ""
    first, *rest = steps
    return " → ".join([str(first.get("function", "?")),
                       *(f"{step.get('path')}:{step.get('line')} {step.get('function')}" for step in rest)])


def summary_line(report: Report) -> str:
    """`Found 138 findings in 19 of 23 files; 2 inputs could not be checked.` — findings counted in the files
    that have them, out of the files read; `All checks passed in 23 files.` only when nothing failed."""
    n, e, read = len(report.findings), len(report.errors), report.files_checked
    with_findings = len({f.path for f in report.findings})

    def files(count: int) -> str:
        return f"{count} file{'s' if count != 1 else ''}"

    failed = f"{e} input{'s' if e != 1 else ''} could not be checked"
    fixed = len(report.fixes.applied) if report.fixes is not None else 0
    if fixed:  # ruff's "Found 4 errors (1 fixed, 3 remaining)."
        done = "fixed" if report.fixes.mode == "fix" else "would be fixed"
        return (f"Found {_count(n + fixed, 'finding')} ({fixed} {done}, {n} remaining) in {files(read)}"
                + (f"; {failed}." if e else "."))
    if n:
        where = files(with_findings) if with_findings >= read else f"{with_findings} of {files(read)}"
        return f"Found {n} finding{'s' if n != 1 else ''} in {where}" + (f"; {failed}." if e else ".")
    if not e:
        return f"All checks passed in {files(read)}."
    return f"No findings in {files(read)}; {failed}." if read else f"Nothing was checked: {failed}."


# ----------------------------------------------------------------------------- json


def to_json(report: Report) -> str:
    data = {
        "findings": [f.to_dict() for f in report.findings],
        "errors": [e.to_dict() for e in report.errors],
        "summary": report.summary(),
    }
    if report.notices:
        data["notices"] = list(report.notices)
    if report.fixes is not None:
        data["fixes"] = report.fixes.to_dict()
    from llmdoctor.limits import json_safe

    return json.dumps(json_safe(data), indent=2)  # undecodable file names: valid Unicode, see json_path


# ----------------------------------------------------------------------------- sarif


def repo_root(start: Path | None = None) -> Path:
    """The enclosing git work tree (what GitHub code scanning resolves URIs against), else the cwd."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return Path.cwd().resolve()


def _artifact_uri(path: str, root: Path) -> str:
    absolute = Path(path).resolve() if not os.path.isabs(path) else Path(path)
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        return absolute.as_uri()
    return quote(relative.as_posix(), errors="surrogateescape")  # undecodable file names: their bytes


def _report_root(report: Report) -> Path:
    """The git work tree of the reported files (URIs are resolved against the repository that holds them,
    even when the tool ran from a folder above the checkout), else the cwd's."""
    for path in [f.path for f in report.findings[:1]] + [e.path for e in report.errors[:1]]:
        folder = Path(path).resolve().parent
        if folder.is_dir():
            return repo_root(folder)
    return repo_root()


def to_sarif(report: Report) -> dict:
    root = _report_root(report)
    rule_ids = sorted({f.rule for f in report.findings} | {r.id for r in report.rules})
    known = {r.id: r for r in report.rules}
    rules = []
    for rid in rule_ids:
        info = known.get(rid)
        entry: dict = {"id": rid}
        if info:
            entry.update(
                {
                    "name": info.name,
                    "shortDescription": {"text": info.summary},
                    "fullDescription": {"text": info.help or info.summary},
                    "help": {"text": info.help or info.summary, "markdown": info.help or info.summary},
                    "defaultConfiguration": {"level": SARIF_LEVEL.get(info.severity, "warning")},
                }
            )
            if info.help_uri:
                entry["helpUri"] = info.help_uri
        rules.append(entry)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    results = []
    for f in report.findings:
        region = {"startLine": f.line, "startColumn": f.column}
        if f.end_line:
            region.update({"endLine": f.end_line, "endColumn": f.end_column})
        fixes = report.sarif_fixes.get((f.path, f.line, f.column, f.rule))
        if fixes:
            fixes = [{"description": {"text": fix["description"]}, "artifactChanges": [{
                "artifactLocation": {"uri": _artifact_uri(f.path, root), "uriBaseId": "%SRCROOT%"},
                "replacements": fix["replacements"]}]} for fix in fixes]
        result = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": SARIF_LEVEL.get(f.severity, "warning"),
            "message": {"text": f.message + (f"\nFix: {f.fix}" if f.fix else "")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _artifact_uri(f.path, root), "uriBaseId": "%SRCROOT%"},
                        "region": region,
                    }
                }
            ],
        }
        chain = _sarif_chain(f, root)
        if chain:
            result.update(chain)
        if fixes:
            result["fixes"] = fixes
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": e.reason},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _artifact_uri(e.path, root), "uriBaseId": "%SRCROOT%"},
                        **({"region": {"startLine": e.line}} if e.line else {}),
                    }
                }
            ],
        }
        for e in report.errors
    ]
    notifications += [{"level": "note", "message": {"text": notice}} for notice in report.notices]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "llmdoctor",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }


# ----------------------------------------------------------------------------- github


def _escape_data(text: str) -> str:
    """A workflow command's value: GitHub's own escapes for `%`, CR and LF, and every other control character
    escaped as text (`\x1b`): a file name or message cannot drive the log's terminal emulation."""
    from llmdoctor.limits import printable_lines

    text = text.replace("%", "%25").replace("\r", "%0D")
    return printable_lines(text).replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _repo_path(path: str, root: Path) -> str:
    """GitHub attaches an annotation to a file only by its repository-relative POSIX path (not `../x`, not
    relative to a `working-directory`)."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return path


def _sarif_chain(finding, root) -> dict:
    """The finding's `via` chain as SARIF: each step a related location (GitHub shows them as links) and, in
    order, one thread flow (code scanning's "show paths")."""
    steps = finding.extra.get("via") if isinstance(finding.extra, dict) else None
    if not isinstance(steps, list) or len(steps) < 2:
        return {}
    locations = []
    for number, step in enumerate(steps, 1):
        locations.append({
            "id": number,
            "physicalLocation": {
                "artifactLocation": {"uri": _artifact_uri(str(step.get("path")), root), "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": step.get("line") or 1},
            },
            "message": {"text": f"in {step.get('function')}"},
        })
    flow = [{"location": {key: value for key, value in location.items() if key != "id"}} for location in locations]
    return {"relatedLocations": locations, "codeFlows": [{"threadFlows": [{"locations": flow}]}]}


def render_github(report: Report, out: TextIO) -> None:
    """GitHub Actions workflow commands: one annotation per finding and per input error."""
    root = _report_root(report)
    for f in report.findings:
        props = f"file={_escape_property(_repo_path(f.path, root))},line={f.line},col={f.column}"
        if f.end_line:
            props += f",endLine={f.end_line},endColumn={f.end_column}"
        props += f",title={_escape_property(f.rule)}"
        chain = via_line(f)
        message = f.message + (f"\nVia: {chain}" if chain else "") + (f"\nFix: {f.fix}" if f.fix else "")
        out.write(f"::{GITHUB_LEVEL.get(f.severity, 'warning')} {props}::{_escape_data(message)}\n")
    for e in report.errors:
        props = f"file={_escape_property(_repo_path(e.path, root))}" + (f",line={e.line}" if e.line else "")
        out.write(f"::error {props},title=llmdoctor::{_escape_data(e.reason)}\n")
    # skipped files: a CI log must say what was not checked
    out.writelines(f"::notice title=llmdoctor::{_escape_data(notice)}\n" for notice in report.notices)
    out.write(summary_line(report) + "\n")
