"""What every checking command reports: findings, inputs it could not check, and the rules it applied."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # one of SEVERITIES
    path: str  # as displayed: relative to the working directory when below it (see display_path)
    line: int  # 1-based
    column: int  # 1-based
    message: str
    end_line: int | None = None
    end_column: int | None = None
    fix: str | None = None  # one concrete change that removes the finding, in plain words or a config line
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.rule, self.message)

    def to_dict(self) -> dict:
        data = {
            "rule": self.rule,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }
        if self.end_line is not None:
            data["end_line"] = self.end_line
            data["end_column"] = self.end_column
        if self.fix:
            data["fix"] = self.fix
        data.update(self.extra)
        return data


@dataclass(frozen=True)
class InputError:
    """An input that could not be checked (missing, unreadable, undecodable, syntax error...)."""

    path: str
    reason: str
    line: int | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line or 0, self.reason)

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "reason": self.reason}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class RuleInfo:
    """Rule metadata the renderers need (SARIF's tool.driver.rules, --statistics)."""

    id: str
    name: str
    severity: str
    summary: str
    help: str = ""  # full documentation, markdown
    help_uri: str | None = None


@dataclass
class FixSummary:
    """What `scan --fix` (or `--diff`) did: the fixes applied, those it could not apply, the files changed."""

    mode: str  # "fix": files written (or stdin's text printed); "diff": nothing written
    applied: list[dict] = field(default_factory=list)  # {"path", "rule", "kind", "title"}
    skipped: list[dict] = field(default_factory=list)  # {"path", "line", "column", "rule", "kind", "reason"}
    changed_files: list[str] = field(default_factory=list)
    unconverged: list[str] = field(default_factory=list)  # files still changing after the last pass

    def to_dict(self) -> dict:
        return {"mode": self.mode, "applied": self.applied, "skipped": self.skipped,
                "changed_files": self.changed_files, "unconverged": self.unconverged}


@dataclass
class Report:
    command: str  # "scan", "nginx", ...
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    rules: list[RuleInfo] = field(default_factory=list)
    files_checked: int = 0
    notices: list[str] = field(default_factory=list)  # informational lines (skipped large files...)
    summary_extra: dict = field(default_factory=dict)
    fixes: FixSummary | None = None  # set by `scan --fix` / `--diff`
    unsafe_fixes: bool = False  # unsafe fixes count as available (`--unsafe-fixes`): the `[*]` marks
    fix_timeout: bool = False  # a `fix-timeout` is set, so LLM006's fix is available
    sarif_fixes: dict = field(default_factory=dict)  # (path, line, column, rule) -> SARIF `fixes` (safe ones)

    def fix_available(self, finding: Finding) -> str | None:
        """"safe" or "unsafe" when `finding` has an automatic fix the current options would apply; when they
        would not, "needs-unsafe" (an unsafe fix without --unsafe-fixes) or "needs-timeout" (LLM006's fix
        without `fix-timeout`); None when it has no automatic fix."""
        autofix = finding.extra.get("autofix")
        if not isinstance(autofix, dict) or autofix.get("safety") not in ("safe", "unsafe"):
            return None
        if autofix["safety"] == "unsafe" and not self.unsafe_fixes:
            return "needs-unsafe"
        if autofix.get("kind") == "timeout" and not self.fix_timeout:
            return "needs-timeout"
        return autofix["safety"]

    def sorted(self) -> Report:
        self.findings.sort(key=Finding.sort_key)
        self.errors.sort(key=InputError.sort_key)
        return self

    def exit_code(self) -> int:
        """0 clean; 1 findings (even if some inputs failed); 2 inputs failed and nothing was found."""
        if self.findings:
            return 1
        if self.errors:
            return 2
        return 0

    def counts_by_rule(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
        return dict(sorted(counts.items()))

    def summary(self) -> dict:
        by_severity = {s: 0 for s in SEVERITIES}
        for finding in self.findings:
            by_severity[finding.severity] = by_severity.get(finding.severity, 0) + 1
        return {
            "findings": len(self.findings),
            "errors": len(self.errors),
            "files": self.files_checked,
            "files_with_findings": len({f.path for f in self.findings}),
            "by_rule": self.counts_by_rule(),
            "by_severity": by_severity,
            **self.summary_extra,
            **({"fixed": len(self.fixes.applied)} if self.fixes is not None else {}),
        }


def display_path(path: str | os.PathLike, cwd: Path | None = None) -> str:
    """The path as a report shows it: relative to the working directory when below it, else as given."""
    cwd = cwd or Path.cwd()
    absolute = Path(os.path.normpath(Path(cwd, path)))
    try:
        return str(absolute.relative_to(cwd))
    except ValueError:
        return os.fspath(path)
