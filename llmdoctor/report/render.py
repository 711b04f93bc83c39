"""Renderers shared by every checking command: text (rich), json, sarif (2.1.0) and github annotations."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from llmdoctor import __version__
from llmdoctor.report.model import Report

FORMATS = ("text", "json", "sarif", "github")
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/llmdoctor/llmdoctor"


def render(report: Report, fmt: str, out: TextIO | None = None, *, statistics: bool = False) -> None:
    out = out or sys.stdout
    if fmt == "text":
        render_text(report, out, statistics=statistics)
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


def render_text(report: Report, out: TextIO, *, statistics: bool = False) -> None:
    """One line per finding, error and notice; anything that came from outside (paths, messages quoting a
    file or a config) with its control characters escaped, so a file name cannot drive the terminal."""
    from rich.markup import escape

    from llmdoctor.limits import printable

    console = make_console(out)
    for f in report.findings:
        style = _SEVERITY_STYLE.get(f.severity, "")
        console.print(
            f"[bold]{escape(printable(f.path))}[/]:{f.line}:{f.column}: [{style}]{escape(printable(f.rule))}[/] "
            f"{escape(printable(f.message))}"
        )
        chain = via_line(f)
        if chain:
            console.print(f"    [dim]via[/] {escape(printable(chain))}")
        if f.fix:
            console.print(f"    [dim]fix:[/] {escape(printable(f.fix))}")
    for e in report.errors:
        console.print(f"[bold]{escape(printable(str(e.path)))}[/]{':' + str(e.line) if e.line else ''}: "
                      f"[bold red]error:[/] {escape(printable(e.reason))}")
    for notice in report.notices:
        console.print(f"[dim]note: {escape(printable(notice))}[/]")
    if statistics and report.findings:
        names = {r.id: r.name for r in report.rules}
        for rule, count in sorted(report.counts_by_rule().items(), key=lambda kv: (-kv[1], kv[0])):
            console.print(f"{count:>6}  {escape(printable(rule)):<8} {escape(printable(names.get(rule, '')))}")
    console.print(summary_line(report))


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
