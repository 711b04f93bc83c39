"""The renderers people scan by eye or feed to GitLab: concise, grouped, gitlab, and `--statistics`.

Each takes a finished Report and a stream, like the others in render.py (from which `render` dispatches).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TextIO

from llmdoctor.limits import json_safe, printable
from llmdoctor.report.model import Finding, Report

GITLAB_SEVERITY = {"error": "critical", "warning": "major", "info": "info"}
FIX_MARK = {"safe": "[*] ", "unsafe": "[*] "}


def finding_head(finding: Finding, report: Report) -> str:
    """`path:line:col: CODE [severity] [*] message` (plain text; `[*]`: the current options can fix it;
    control characters of paths and messages escaped, as in every text renderer)."""
    mark = FIX_MARK.get(report.fix_available(finding) or "", "")
    return (f"{printable(finding.path)}:{finding.line}:{finding.column}: {printable(finding.rule)} "
            f"[{finding.severity}] {mark}{printable(finding.message)}")


def render_concise(report: Report, out: TextIO, *, quiet: bool = False) -> None:
    """One line per finding and per input error, then the summary (ruff's `concise`)."""
    out.writelines(finding_head(finding, report) + "\n" for finding in report.findings)
    _tail(report, out, quiet)


def render_grouped(report: Report, out: TextIO, *, quiet: bool = False) -> None:
    """Findings under their file, with a count per file (ruff's `grouped`)."""
    by_path: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_path.setdefault(finding.path, []).append(finding)
    for path, findings in by_path.items():
        out.write(f"{printable(path)}: {len(findings)} finding{'s' if len(findings) != 1 else ''}\n")
        width = max(len(f"{f.line}:{f.column}") for f in findings)
        out.writelines(f"  {f'{f.line}:{f.column}':<{width}}  {printable(f.rule)} [{f.severity}] "
                       f"{FIX_MARK.get(report.fix_available(f) or '', '')}{printable(f.message)}\n" for f in findings)
        out.write("\n")
    _tail(report, out, quiet)


def _tail(report: Report, out: TextIO, quiet: bool) -> None:
    """Input errors, fixes not applied, then (unless quiet) notes and the summary."""
    from llmdoctor.report.render import fix_lines, summary_lines

    out.writelines(f"{printable(e.path)}{_at(e.line)}: error: {printable(e.reason)}\n" for e in report.errors)
    out.writelines(printable(line) + "\n" for line in fix_lines(report))
    if not quiet:
        out.writelines(f"note: {printable(notice)}\n" for notice in report.notices)
        out.writelines(line + "\n" for line in summary_lines(report))


def _at(line: int | None) -> str:
    return f":{line}" if line else ""


# ----------------------------------------------------------------------------- gitlab


def to_gitlab(report: Report, root: Path | None = None) -> list[dict]:
    """GitLab's code quality report (a JSON array of issues with the fields GitLab reads: description,
    check_name, fingerprint, severity, location with positions). The fingerprint is a hash of the rule, the
    repository-relative path, the message and the text of the finding's first line, plus its rank among
    identical ones: stable when code moves up or down the file, different for two identical findings."""
    from llmdoctor.report.render import _repo_path, _report_root

    root = root or _report_root(report)
    issues, seen = [], {}
    lines_of: dict[str, list[str]] = {}
    for f in report.findings:
        path = _repo_path(f.path, root)
        text = _source_line(f.path, f.line, lines_of).strip()
        key = f"{f.rule}\0{path}\0{f.message}\0{text}"
        rank = seen[key] = seen.get(key, -1) + 1
        fingerprint = hashlib.sha256(f"{key}\0{rank}".encode("utf-8", "surrogateescape")).hexdigest()
        issues.append({
            "check_name": f.rule,
            "description": f"{f.rule} {f.message}",
            "severity": GITLAB_SEVERITY.get(f.severity, "major"),
            "fingerprint": fingerprint,
            "location": {"path": path, "positions": {
                "begin": {"line": f.line, "column": f.column},
                "end": {"line": f.end_line or f.line, "column": f.end_column or f.column}}},
        })
    return issues


def _source_line(path: str, line: int, cache: dict[str, list[str]]) -> str:
    lines = cache.get(path)
    if lines is None:
        try:
            lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        cache[path] = lines
    return lines[line - 1] if 0 < line <= len(lines) else ""


def render_gitlab(report: Report, out: TextIO) -> None:
    out.write(json.dumps(json_safe(to_gitlab(report)), indent=2) + "\n")


# ----------------------------------------------------------------------------- statistics


def statistics_rows(report: Report) -> list[dict]:
    """Per rule: count, name, and how many the current options can fix, most frequent first."""
    names = {r.id: r.name for r in report.rules}
    rows: dict[str, dict] = {}
    for f in report.findings:
        row = rows.setdefault(f.rule, {"code": f.rule, "name": names.get(f.rule, ""), "count": 0, "fixable": 0})
        row["count"] += 1
        if report.fix_available(f) in ("safe", "unsafe"):
            row["fixable"] += 1
    return sorted(rows.values(), key=lambda r: (-r["count"], r["code"]))


def render_statistics(report: Report, out: TextIO, fmt: str) -> None:
    """Only the counts (ruff's `--statistics`): `count  code  [*] name`; `[*]` all fixable (with the options
    given), `[-]` some, `[ ]` none; no marks when no finding has an automatic fix."""
    rows = statistics_rows(report)
    if fmt == "json":
        out.write(json.dumps(json_safe(rows), indent=2) + "\n")
        return
    from llmdoctor.report.render import summary_lines

    width = max([6, *(len(str(r["count"])) for r in rows)])
    marks = any(report.fix_available(f) for f in report.findings)  # no column where nothing has a fix
    for row in rows:
        mark = "[*]" if row["fixable"] == row["count"] else "[-]" if row["fixable"] else "[ ]"
        out.write(f"{row['count']:>{width}}  {printable(row['code']):<7} {mark + ' ' if marks else ''}"
                  f"{printable(row['name'])}\n")
    out.writelines(line + "\n" for line in summary_lines(report))
