"""Measure `llmdoctor scan` precision and recall on the labelled real-code corpus.

    python bench/precision/run.py                    # the dev set (what tuning looks at)
    python bench/precision/run.py --set holdout      # the holdout set (only at the end of a tuning round)
    python bench/precision/run.py --set holdout2     # the second holdout set (round 4; public since, looked at)
    python bench/precision/run.py --set holdout3     # the third holdout set (round 4, final; not for tuning)
    python bench/precision/run.py --set holdout4     # the fourth holdout set (round 5, unseen; not for tuning)
    python bench/precision/run.py --set holdout5     # the fifth holdout set (round 6, unseen; not for tuning)
    python bench/precision/run.py --set holdout6     # the sixth holdout set (round 7, unseen; not for tuning)
    python bench/precision/run.py --set holdout7     # the seventh holdout set (round 8, unseen; not for tuning)
    python bench/precision/run.py --set holdout8     # the eighth holdout set (round 9, unseen; not for tuning)
    python bench/precision/run.py --set holdout9     # the ninth holdout set (round 9, second unseen; not for tuning)
    python bench/precision/run.py --set holdout10    # the tenth holdout set (round 10, unseen; not for tuning)
    python bench/precision/run.py --set holdout11    # the eleventh holdout set (round 11, unseen; not for tuning)
    python bench/precision/run.py --set holdout12    # the twelfth holdout set (round 12, unseen; not for tuning)
    python bench/precision/run.py --set holdout13    # the thirteenth holdout set (round 13, unseen; not for tuning)
    python bench/precision/run.py --set holdout14    # the fourteenth holdout set (round 14, unseen; not for tuning)
    python bench/precision/run.py --set holdout15    # the fifteenth holdout set (round 15, unseen; not for tuning)
    python bench/precision/run.py --set holdout16    # the sixteenth holdout set (round 15, second unseen; not for tuning)
    python bench/precision/run.py --set holdout17    # the seventeenth holdout set (round 16, unseen; not for tuning)
    python bench/precision/run.py --set holdout18    # the eighteenth holdout set (end of round 16, unseen; not for tuning)
    python bench/precision/run.py --set holdout19    # the nineteenth holdout set (round 17, unseen; not for tuning)
    python bench/precision/run.py --set holdout20    # the twentieth holdout set (round 17, second unseen; not for tuning)
    python bench/precision/run.py --set holdout21    # the twenty-first holdout set (round 18, unseen; not for tuning)
    python bench/precision/run.py --set holdout22    # the twenty-second holdout set (round 19, unseen; not for tuning)
    python bench/precision/run.py --set holdout23    # the twenty-third holdout set (round 19, second unseen; not for tuning)
    python bench/precision/run.py --set holdout24    # the twenty-fourth holdout set (round 20, unseen; not for tuning)
    python bench/precision/run.py --set holdout25    # the twenty-fifth holdout set (round 20, second unseen; not for tuning)
    python bench/precision/run.py --set holdout26    # the twenty-sixth holdout set (round 21, unseen; not for tuning)
    python bench/precision/run.py --set holdout27    # the twenty-seventh holdout set (round 22, unseen; not for tuning)
    python bench/precision/run.py --set holdout28    # the twenty-eighth holdout set (round 22, second unseen; not for tuning)
    python bench/precision/run.py --set holdout29    # the twenty-ninth holdout set (round 23, unseen; not for tuning)
    python bench/precision/run.py --set holdout30    # the thirtieth holdout set (round 23, second unseen; not for tuning)
    python bench/precision/run.py --set holdout31    # the thirty-first holdout set (round 24, unseen; not for tuning)
    python bench/precision/run.py --set holdout32    # the thirty-second holdout set (round 24, second unseen; not for tuning)
    python bench/precision/run.py --set holdout33    # the thirty-third holdout set (round 25, unseen; not for tuning)
    python bench/precision/run.py --set holdout34    # the thirty-fourth holdout set (round 25, second unseen; not for tuning)
    python bench/precision/run.py --set all          # every set, reported separately
    python bench/precision/run.py --project fschat   # one project (any set)
    python bench/precision/run.py --set all --declared   # with the control plane each operator would declare
    options: --write-todo  --min-severity info|warning|error  --show-misses  --json FILE  --declared
             --llmdoctor CMD  --ruff CMD  --jobs N  --corpus DIR

Not a test: it prints figures. Needs the corpus (python bench/precision/fetch_corpus.py). For every project
of corpus.yaml in the chosen sets it runs the installed `llmdoctor scan . --format json --no-cache` and
`ruff check --isolated --select ASYNC2,S113 --output-format json --no-cache .` in the project's folder,
matches each finding to labels/<project>.yaml by (rule, path, line) — confirming the label's text against
the source line — and prints, per set and per rule:

  precision  real / judged findings (a finding on a `miss` label counts as real: the miss is now found)
  recall     expected labels reported / expected labels (expected = verdict real or miss)

then the findings nobody has judged yet (`--write-todo` appends them to the labels files as
`verdict: todo`, to be judged by hand), the expected labels no longer reported, labels whose text no
longer matches the source, findings whose `context` (when the engine reports one) differs from the
label's, and ruff's ASYNC2xx / S113 findings that have no LLM004 / LLM006 finding on the same line, each
with the exemption that applies (a label judging that line false in run-once/offline code, a test module)
or marked UNMATCHED. Exit 0 after printing; 2 when the corpus, a label file or a scan cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import (
    DEFAULT_DEST,
    RULES,
    SETS,
    Finding,
    Label,
    LabelError,
    Match,
    Project,
    is_test_module,
    labels_file,
    load_corpus,
    load_declared,
    load_labels,
    match,
)

SEVERITY_ORDER = {"info": 0, "warning": 1, "error": 2}
RUFF_RULE = {"S113": "LLM006"}  # every ASYNC2xx code is LLM004's
RUFF_OUTSIDE_TABLE = {
    # ruff codes whose calls LLM004's table (design.md §3) deliberately does not list
    "ASYNC240": "os.path / pathlib stat calls: not in LLM004's table (design.md §3)",
}


def executable(name: str, given: str | None) -> list[str]:
    if given:
        return shlex.split(given)
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise LabelError(f"`{name}` not found next to {sys.executable} or on PATH; pass --{name} CMD")
    return [found]


def relative(path: str, root: Path) -> str:
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(root.resolve())
        except ValueError:
            return path
    text = candidate.as_posix()
    return text.removeprefix("./")


def context_name(value: object) -> str:
    if isinstance(value, dict):
        value = value.get("kind") or value.get("name") or value.get("context") or ""
    return str(value or "")


def via_steps(value: object) -> tuple[str, ...]:
    steps = []
    for step in value or []:
        if isinstance(step, dict):
            steps.append(f"{step.get('path', '?')}:{step.get('line', '?')} {step.get('function', '')}".strip())
        else:
            steps.append(str(step))
    return tuple(steps)


def scan(command: list[str], root: Path, jobs: int | None,
         control_plane: tuple[str, ...] = ()) -> tuple[list[Finding], float, list[str]]:
    args = [*command, "scan", ".", "--format", "json", "--no-cache"]
    if jobs:
        args += ["--jobs", str(jobs)]
    for pattern in control_plane:
        args += ["--control-plane", pattern]
    start = time.perf_counter()
    result = subprocess.run(args, cwd=root, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise LabelError(f"{root.name}: `{' '.join(args)}` exited {result.returncode}:\n"
                         f"{(result.stderr or result.stdout).strip()[-2000:]}")
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise LabelError(f"{root.name}: llmdoctor printed no JSON ({error})") from None
    findings = [
        Finding(
            rule=item["rule"], path=relative(item["path"], root), line=int(item["line"]),
            severity=item.get("severity", "warning"), message=item.get("message", ""),
            context=context_name(item.get("context")), via=via_steps(item.get("via")),
        )
        for item in report.get("findings", [])
    ]
    errors = [f"{item.get('path', '?')}: {item.get('message', item)}" if isinstance(item, dict) else str(item)
              for item in report.get("errors", [])]
    return findings, elapsed, errors


@dataclass(frozen=True)
class RuffFinding:
    code: str
    path: str
    line: int
    message: str

    @property
    def rule(self) -> str:
        return RUFF_RULE.get(self.code, "LLM004")


def ruff_check(command: list[str], root: Path) -> list[RuffFinding]:
    args = [*command, "check", "--isolated", "--select", "ASYNC2,S113", "--output-format", "json",
            "--no-cache", "--exit-zero", "."]
    result = subprocess.run(args, cwd=root, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LabelError(f"{root.name}: `{' '.join(args)}` exited {result.returncode}: {result.stderr.strip()}")
    return [  # (a file ruff cannot parse comes back as `invalid-syntax` findings: not one of the checks)
        RuffFinding(item["code"], relative(item["filename"], root), int(item["location"]["row"]),
                    item.get("message", ""))
        for item in json.loads(result.stdout or "[]") if item.get("code") and item["code"] != "invalid-syntax"
    ]


class Sources:
    """Stripped source lines of one project, read once per file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, list[str] | None] = {}

    def line(self, path: str, line: int) -> str | None:
        if path not in self.files:
            try:
                self.files[path] = (self.root / path).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self.files[path] = None
        lines = self.files[path]
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1].strip()


@dataclass
class ProjectResult:
    project: Project
    findings: list[Finding]
    labels: list[Label]
    matched: Match
    ruff: list[RuffFinding]
    ruff_verdicts: list[tuple[RuffFinding, str]]  # (finding, "matched" | "exempt: ..." | "UNMATCHED ...")
    seconds: float
    errors: list[str] = field(default_factory=list)
    appended: int = 0  # todo labels written by --write-todo


def judge_ruff(ruff: list[RuffFinding], findings: list[Finding], labels: list[Label]) -> list[tuple[RuffFinding, str]]:
    reported = {finding.key for finding in findings}
    by_key = {label.key: label for label in labels}
    verdicts = []
    for item in ruff:
        key = (item.rule, item.path, item.line)
        label = by_key.get(key)
        if key in reported:
            verdict = "matched"
        elif label is not None and label.verdict == "false" and label.context in ("run-once", "offline"):
            verdict = f"exempt: {label.context}: {label.reason}"
        elif label is not None and label.verdict == "false":
            verdict = f"exempt: judged false: {label.reason}"
        elif is_test_module(item.path):
            verdict = "exempt: test module"
        elif item.code in RUFF_OUTSIDE_TABLE:
            verdict = f"outside table: {RUFF_OUTSIDE_TABLE[item.code]}"
        elif label is not None and label.expected:
            verdict = f"UNMATCHED (labelled {label.verdict}: {label.reason})"
        else:
            verdict = "UNMATCHED (no label)"
        verdicts.append((item, verdict))
    return verdicts


def ruff_class(verdict: str) -> str:
    """The class of a ruff cross-check verdict: matched, UNMATCHED, outside table, exempt: <why>."""
    if verdict.startswith("exempt: "):
        return ":".join(verdict.split(":")[:2])
    return verdict.split(" (")[0].split(":")[0]


def run_project(project: Project, root: Path, args: argparse.Namespace, llmdoctor: list[str],
                ruff: list[str] | None, declared: dict[str, tuple[str, ...]]) -> ProjectResult:
    """`declared`: per project, the `--control-plane` patterns to scan with (declared.yaml, `--declared`)."""
    if not root.is_dir():
        raise LabelError(f"{project.name}: {root} is missing; run python bench/precision/fetch_corpus.py")
    labels = load_labels(project.name)
    findings, seconds, errors = scan(llmdoctor, root, args.jobs, declared.get(project.name, ()))
    threshold = SEVERITY_ORDER[args.min_severity]
    findings = [finding for finding in findings if SEVERITY_ORDER.get(finding.severity, 1) >= threshold]
    sources = Sources(root)
    matched = match(findings, labels, sources.line)
    ruff_findings = ruff_check(ruff, root) if ruff else []
    return ProjectResult(project, findings, labels, matched, ruff_findings,
                         judge_ruff(ruff_findings, findings, labels), seconds, errors)


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "  - "


def rule_table(results: list[ProjectResult]) -> tuple[list[str], dict[str, dict[str, int]]]:
    counts: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        for finding, label in result.matched.judged:
            counts[finding.rule]["judged"] += 1
            counts[finding.rule]["real" if label.expected else "false"] += 1
        for finding in result.matched.todo:
            counts[finding.rule]["todo"] += 1
        for label in result.matched.found:
            counts[label.rule]["expected"] += 1
            counts[label.rule]["found"] += 1
        for label in result.matched.lost:
            counts[label.rule]["expected"] += 1
            counts[label.rule]["missed_" + label.verdict] += 1
    header = (f"  {'rule':<7}{'judged':>7}{'real':>6}{'false':>6}{'precision':>10}"
              f"{'expected':>10}{'found':>6}{'recall':>7}{'todo':>6}  missed (real / miss)")
    lines = [header]
    total: Counter = Counter()
    for rule in RULES:
        row = counts.get(rule, Counter())
        total.update(row)
        lines.append(_row(rule, row))
    lines.append(_row("all", total))
    table = {rule: dict(counts.get(rule, Counter())) for rule in RULES}
    table["all"] = dict(total)
    return lines, table


def _row(name: str, row: Counter) -> str:
    return (f"  {name:<7}{row['judged']:>7}{row['real']:>6}{row['false']:>6}"
            f"{ratio(row['real'], row['judged']):>10}{row['expected']:>10}{row['found']:>6}"
            f"{ratio(row['found'], row['expected']):>7}{row['todo']:>6}"
            f"  {row['missed_real']} / {row['missed_miss']}")


def describe(finding: Finding) -> str:
    extra = f" [{finding.context}]" if finding.context else ""
    via = f" via {' → '.join(finding.via)}" if finding.via else ""
    return f"{finding.path}:{finding.line} {finding.rule} {finding.severity}{extra}{via}: {finding.message[:120]}"


def append_todo(project: Project, todo: list[Finding], sources: Sources) -> int:
    path = labels_file(project.name)
    existing = {label.key for label in load_labels(project.name)}
    entries, seen = [], set()
    for finding in todo:
        if finding.key in existing or finding.key in seen:
            continue
        seen.add(finding.key)
        entries.append({
            "rule": finding.rule, "path": finding.path, "line": finding.line,
            "text": sources.line(finding.path, finding.line) or "",
            "verdict": "todo", "reason": "", "context": finding.context or "unknown", "entry": "",
            **({"via": list(finding.via)} if finding.via else {}),
        })
    if not entries:
        return 0
    if not path.is_file():
        path.write_text(f"project: {project.name}\nlabels:\n")
    text = path.read_text()
    if not text.endswith("\n"):
        text += "\n"
    text += yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=200)
    path.write_text(text)
    return len(entries)


def report(results: list[ProjectResult], args: argparse.Namespace, versions: str) -> dict:
    print(f"precision corpus — {versions}")
    summary: dict = {"versions": versions, "sets": {}}
    for set_name in SETS:
        members = [result for result in results if result.project.set == set_name]
        if not members:
            continue
        print(f"\n== {set_name}: {len(members)} projects ==")
        for result in members:
            matched = result.matched
            real = sum(1 for _, label in matched.judged if label.expected)
            unmatched = sum(1 for _, verdict in result.ruff_verdicts if verdict.startswith("UNMATCHED"))
            print(f"  {result.project.name:<16} {result.project.version:<12} findings {len(result.findings):>4}"
                  f"  judged {len(matched.judged):>4} (real {real:>3})  todo {len(matched.todo):>3}"
                  f"  labels {len(result.labels):>4}  ruff {len(result.ruff):>3} (unmatched {unmatched})"
                  f"  {result.seconds:5.2f} s")
        lines, table = rule_table(members)
        print()
        print("\n".join(lines))
        ruff_classes = Counter(ruff_class(verdict) for result in members for _, verdict in result.ruff_verdicts)
        if ruff_classes:
            total = sum(ruff_classes.values())
            print(f"\n  ruff ASYNC2xx/S113: {total} findings: "
                  + ", ".join(f"{name} {count}" for name, count in sorted(ruff_classes.items())))
        summary["sets"][set_name] = {"rules": table, "projects": [r.project.name for r in members],
                                     "ruff": dict(ruff_classes)}
    for result in results:
        name = result.project.name
        matched = result.matched
        sections = [
            ("scan errors", result.errors),
            ("labels whose text no longer matches the source (fix the label or the corpus version)",
             [f"{label.path}:{label.line} {label.rule}: label {label.text!r} vs source {actual!r}"
              for label, actual in matched.drifted]),
            ("to judge (no label yet" + (", appended as todo" if args.write_todo else "; --write-todo appends them")
             + ")", [describe(finding) for finding in matched.todo]),
            ("labelled real, no longer reported",
             [f"{label.path}:{label.line} {label.rule}: {label.reason}" for label in matched.lost
              if label.verdict == "real"]),
            ("context differs from the label",
             [f"{describe(finding)} — label: {label.context}"
              for finding, label in matched.judged
              if finding.context and label.context != "unknown" and finding.context != label.context]),
            ("ruff findings without a matching llmdoctor finding",
             [f"{item.path}:{item.line} {item.code} → {item.rule}: {verdict}"
              for item, verdict in result.ruff_verdicts
              if verdict != "matched" and (args.show_exempt or verdict.startswith("UNMATCHED"))]),
        ]
        if args.show_misses:
            sections.append(("misses still not reported", [
                f"{label.path}:{label.line} {label.rule}: {label.reason}"
                + (f" (via {' → '.join(label.via)})" if label.via else "")
                for label in matched.lost if label.verdict == "miss"]))
        printed_header = False
        for title, items in sections:
            if not items:
                continue
            if not printed_header:
                print(f"\n--- {name} ({result.project.set})")
                printed_header = True
            print(f"  {title}: {len(items)}")
            for item in items:
                print(f"    {item}")
        if result.appended:
            print(f"  appended {result.appended} todo labels to {labels_file(name).relative_to(HERE.parents[1])}")
        ruff_classes = Counter(ruff_class(verdict) for _, verdict in result.ruff_verdicts)
        summary.setdefault("projects", {})[name] = {
            "set": result.project.set, "findings": len(result.findings), "judged": len(matched.judged),
            "todo": len(matched.todo), "drifted": len(matched.drifted), "seconds": round(result.seconds, 3),
            "ruff": len(result.ruff), "ruff_verdicts": dict(ruff_classes),
        }
    return summary


def tool_version(command: list[str]) -> str:
    result = subprocess.run([*command, "--version"], capture_output=True, text=True, check=False)
    return (result.stdout or result.stderr).strip().splitlines()[0] if result.returncode == 0 else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=(*SETS, "all"), default="dev",
                        help="which set to measure (default: dev; all: every set, reported separately)")
    parser.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    parser.add_argument("--write-todo", action="store_true", help="append unjudged findings as verdict: todo")
    parser.add_argument("--min-severity", choices=tuple(SEVERITY_ORDER), default="info",
                        help="count only findings at or above this severity (default: all)")
    parser.add_argument("--show-misses", action="store_true", help="list the misses still not reported")
    parser.add_argument("--show-exempt", action="store_true", help="also list exempt ruff findings")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--llmdoctor", help="command to run llmdoctor (default: beside this Python, or PATH)")
    parser.add_argument("--ruff", help="command to run ruff (default: beside this Python, or PATH)")
    parser.add_argument("--no-ruff", action="store_true", help="skip the ruff cross-check")
    parser.add_argument("--jobs", type=int, help="passed to llmdoctor scan --jobs")
    parser.add_argument("--declared", action="store_true",
                        help="scan each project with the control plane its operator would declare (declared.yaml)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_DEST, help="where fetch_corpus.py put it")
    args = parser.parse_args(argv)
    try:
        corpus = load_corpus()
        sets = () if args.set == "all" or args.project else (args.set,)
        projects = corpus.select(args.project, sets)
        llmdoctor = executable("llmdoctor", args.llmdoctor)
        ruff = None if args.no_ruff else executable("ruff", args.ruff)
        versions = f"{tool_version(llmdoctor)}" + (f", {tool_version(ruff)}" if ruff else "")
        declared = load_declared() if args.declared else {}
        results = [run_project(project, args.corpus / project.name, args, llmdoctor, ruff, declared)
                   for project in projects]
    except LabelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.write_todo:  # before printing, so a closed pipe cannot lose them
        for result in results:
            if result.matched.todo:
                result.appended = append_todo(result.project, result.matched.todo,
                                              Sources(args.corpus / result.project.name))
    try:
        summary = report(results, args, versions)
    except BrokenPipeError:  # `run.py | head`
        sys.stderr.close()
        return 0
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    raise SystemExit(main())
