"""`scan --fix` / `--diff` over a finished scan: fix every file that has an allowed fix (project-wide rounds,
see `fix_report`), write it back (or keep the diff), and put what remains into the report.

Files are written through a temporary file in the same folder and `os.replace` (the real path behind a
symlink; the file's permission bits kept), so an interrupted run never leaves half a file.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.report.model import FixSummary, InputError, Report, display_path
from llmdoctor.scan.decoding import SourceError
from llmdoctor.scan.engine import FileResult
from llmdoctor.scan.fix.apply import MAX_PASSES, FileFix, FixOutcome, SourceText, fix_requests
from llmdoctor.scan.fix.base import FixPolicy
from llmdoctor.scan.runner import ScanPlan, describe_fix


@dataclass
class FixRun:
    outcomes: list[FixOutcome] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)  # unified diffs of the changed files (in `--diff` order)


def fix_report(plan: ScanPlan, report: Report, policy: FixPolicy, *, write: bool, cwd: str,
               sources: dict[str, bytes] | None = None) -> FixRun:
    """Fix the files of `report` (a finished scan of `plan`) to a fixed point; `report` then holds what
    remains. `sources`: file bytes by absolute path, for input that is not on disk (stdin).

    The findings are decided by the project model (LLM004 follows calls across modules), so the fixed point
    is the project's: each round applies one pass to every file with an allowed fix, re-analyses the files
    it changed and re-links their projects once, until a round changes nothing."""
    run = FixRun()
    summary = report.fixes = FixSummary(mode="fix" if write else "diff")
    shown_of: dict[str, str] = {}
    current: dict[str, list] = {}  # absolute path -> its findings as reported now
    for finding in report.findings:
        absolute = os.path.normpath(os.path.join(cwd, finding.path))
        shown_of.setdefault(absolute, finding.path)
        current.setdefault(absolute, []).append(dataclasses.replace(finding, path=absolute))
    states: dict[str, FileFix] = {}
    relinked: dict[str, FileResult] = {}
    converged = False
    for _ in range(MAX_PASSES):
        changed = []
        for absolute, findings in sorted(current.items()):
            state = states.get(absolute)
            if state is None:
                if not fix_requests(findings, plan.catalog, policy):
                    continue
                state = states[absolute] = _start(absolute, shown_of[absolute], sources, report)
                if state is None:
                    continue
            if not state.settled and state.step(findings, plan.catalog, policy):
                changed.append(absolute)
        if not changed:
            converged = True
            break
        fresh = relink(plan, {path: states[path].source.encode(states[path].text) for path in changed}, cwd)
        relinked.update(fresh)
        current = {path: result.findings for path, result in fresh.items()
                   if not (path in states and states[path].settled)}
    for absolute, result in relinked.items():  # what remains, as the last link decided it
        shown = shown_of.setdefault(absolute, display_path(absolute, Path(cwd)))
        report.findings = [f for f in report.findings if f.path != shown]
        report.findings.extend(describe_fix(dataclasses.replace(f, path=shown), plan.catalog)
                               for f in result.findings)
    titles = {(spec.id, fix.kind): fix.title for spec in plan.catalog.rules.values() for fix in spec.fixes}
    for absolute, state in sorted(states.items()):
        shown = shown_of[absolute]
        summary.applied.extend({"path": shown, "rule": a.rule, "kind": a.kind,
                                "title": titles.get((a.rule, a.kind), "")} for a in state.applied)
        summary.skipped.extend({"path": shown, "line": k.line, "column": k.column, "rule": k.rule, "kind": k.kind,
                                "reason": k.reason} for k in state.skipped)
        if not (converged or state.settled):
            summary.unconverged.append(shown)
        outcome = FixOutcome(path=absolute, original=state.source.text, fixed=state.text,
                             result=relinked.get(absolute) or FileResult(absolute), applied=state.applied,
                             skipped=state.skipped, converged=converged or state.settled)
        run.outcomes.append(outcome)
        if not outcome.changed:
            continue
        if write and sources is None:
            try:
                write_atomically(absolute, state.source.encode(state.text))
            except OSError as err:
                report.errors.append(InputError(shown, f"cannot write the fixed file: {err.strerror or err}"))
                continue
        summary.changed_files.append(shown)
        if not write:
            run.diffs.append(unified_diff(shown, state.source.text, state.text))
    report.sorted()
    return run


def _start(absolute: str, shown: str, sources: dict[str, bytes] | None, report: Report) -> FileFix | None:
    try:
        data = sources.get(absolute, b"") if sources is not None else Path(absolute).read_bytes()
        return FileFix.start(absolute, SourceText.from_bytes(data))
    except (OSError, SourceError) as err:
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or str(err)
        report.errors.append(InputError(shown, f"cannot fix: {reason}"))
        return None


def relink(plan: ScanPlan, changed: dict[str, bytes], cwd: str) -> dict[str, FileResult]:
    """Re-analyse the `changed` files (absolute path -> new bytes) and re-link each project holding one:
    the results of every scanned file of those projects, by absolute path (`plan.results` updated)."""
    from llmdoctor.scan.engine import analyze_module, analyze_path
    from llmdoctor.scan.project.link import link_results

    for path, data in changed.items():
        plan.results[path] = analyze_module(path, data, plan.catalog, plan.config)
    checked = set(plan.files)
    for path in changed:  # a project the link cache answered whole was not analysed: its files are read now
        for other in plan.project_of(path)[1]:
            if other not in plan.results:
                plan.results[other] = analyze_path(other, plan.catalog, plan.config, rules=other in checked)

    def show(path: str) -> str:
        return display_path(path, Path(cwd))

    out: dict[str, FileResult] = {}
    for path in changed:
        if path in out:
            continue
        root, files = plan.project_of(path)
        results = [plan.results[p] for p in files if p in plan.results]
        for result in link_results(results, plan.catalog, plan.config, root, show=show):
            out[os.path.abspath(result.path)] = result
    return out


def unified_diff(shown: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=shown, tofile=shown)
    text = ""
    for line in lines:
        text += line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
    return text


def write_atomically(path: str, data: bytes) -> None:
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    handle, temporary = tempfile.mkstemp(prefix=".llmdoctor-fix-", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        shutil.copymode(real, temporary)
        os.replace(temporary, real)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def attach_sarif_fixes(plan: ScanPlan, report: Report, cwd: str) -> None:
    """SARIF `fixes` for the findings that have a safe fix: each one applied alone to the file as it is,
    as whole-line replacements (a fix that would not compile is left out)."""
    from llmdoctor.scan.fix.apply import compile_problem, single_fix
    from llmdoctor.scan.fix.base import FixRequest

    by_path: dict[str, list] = {}
    for finding in report.findings:
        if report.fix_available(finding) == "safe":
            by_path.setdefault(finding.path, []).append(finding)
    for shown, findings in by_path.items():
        absolute = os.path.normpath(os.path.join(cwd, shown))
        try:
            source = SourceText.from_bytes(Path(absolute).read_bytes())
        except (OSError, SourceError):
            continue
        original_compiles = compile_problem(absolute, source.text) is None
        for finding in findings:
            request = FixRequest.from_finding(finding, "safe")
            fixed = single_fix(source.text, request) if request else None
            if fixed is None or (original_compiles and compile_problem(absolute, fixed) is not None):
                continue
            title = finding.extra["autofix"].get("title", "")
            report.sarif_fixes[(finding.path, finding.line, finding.column, finding.rule)] = [
                {"description": title, "replacements": line_replacements(source.text, fixed)}]


def line_replacements(before: str, after: str) -> list[dict]:
    """SARIF replacements turning `before` into `after`: whole lines, 1-based, the deleted region ending at
    the start of the first line kept (the end of the file is the line after the last)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    replacements = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        replacements.append({
            "deletedRegion": {"startLine": i1 + 1, "startColumn": 1, "endLine": i2 + 1, "endColumn": 1},
            "insertedContent": {"text": "".join(new[j1:j2])},
        })
    return replacements
