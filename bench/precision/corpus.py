"""The precision corpus and its labels: loading, validation and the matching of findings to labels.

A label is keyed by (rule, path, line) — the place a finding is (or, for a miss, should be) reported —
and carries the stripped source line as `text`, so a moved line or a different corpus version is caught
instead of silently matching the wrong code. See README.md in this folder for the format.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS_FILE = HERE / "corpus.yaml"
LABELS_DIR = HERE / "labels"
DECLARED_FILE = HERE / "declared.yaml"
DEFAULT_DEST = REPO / "bench" / "corpus" / "precision"

VERDICTS = ("real", "false", "miss", "todo")
CONTEXTS = ("serving", "worker", "control-plane", "scheduled", "run-once", "offline", "unknown")  # the engine's contexts
SETS = ("dev", "holdout", "holdout2", "holdout3", "holdout4", "holdout5", "holdout6", "holdout7", "holdout8", "holdout9", "holdout10", "holdout11", "holdout12", "holdout13", "holdout14", "holdout15", "holdout16", "holdout17", "holdout18", "holdout19", "holdout20", "holdout21", "holdout22", "holdout23", "holdout24", "holdout25", "holdout26", "holdout27", "holdout28", "holdout29", "holdout30", "holdout31", "holdout32", "holdout33", "holdout34")
RULES = ("LLM001", "LLM002", "LLM003", "LLM004", "LLM005", "LLM006")


class LabelError(Exception):
    """A corpus or label file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Project:
    name: str
    set: str
    kind: str
    source: str
    package: str = ""
    version: str = ""
    sha256: str = ""
    sdist: str = ""
    repo: str = ""
    commit: str = ""
    how_to_get: str = ""

    @property
    def sdist_stem(self) -> str:
        return self.sdist or f"{self.package}-{self.version}"


@dataclass
class Corpus:
    projects: list[Project]

    def select(self, names: Iterable[str] = (), sets: Iterable[str] = ()) -> list[Project]:
        names, sets = list(names), list(sets)
        known = {project.name for project in self.projects}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise LabelError(f"{CORPUS_FILE.name}: no project named {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        return [
            project for project in self.projects
            if (not names or project.name in names) and (not sets or project.set in sets)
        ]


def load_corpus(path: Path = CORPUS_FILE) -> Corpus:
    data = yaml.safe_load(path.read_text())
    projects = []
    for index, entry in enumerate(data.get("projects") or []):
        where = f"{path.name}: project #{index + 1}"
        if not isinstance(entry, dict) or "name" not in entry:
            raise LabelError(f"{where}: needs at least `name`, `set`, `source`")
        allowed = set(Project.__dataclass_fields__)
        extra = set(entry) - allowed
        if extra:
            raise LabelError(f"{where} ({entry['name']}): unknown keys {sorted(extra)}")
        project = Project(**{key: str(value) for key, value in entry.items()})
        if project.set not in SETS:
            raise LabelError(f"{where} ({project.name}): set must be one of {SETS}, not {project.set!r}")
        if project.source == "pypi" and not (project.package and project.version and project.sha256):
            raise LabelError(f"{where} ({project.name}): a pypi project needs package, version, sha256")
        projects.append(project)
    return Corpus(projects)


@dataclass(frozen=True)
class Label:
    rule: str
    path: str
    line: int
    text: str
    verdict: str
    reason: str = ""
    context: str = "unknown"
    entry: str = ""
    via: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.rule, self.path, self.line)

    @property
    def expected(self) -> bool:
        """A real problem the engine should report (judged real, or a miss found by reading)."""
        return self.verdict in ("real", "miss")


def _verdict(value: object) -> str:
    # YAML reads a bare `false` as the boolean False; the label format writes it bare.
    if value is False:
        return "false"
    return str(value)


def parse_labels(data: object, where: str) -> list[Label]:
    if not isinstance(data, dict) or not isinstance(data.get("labels", []), list):
        raise LabelError(f"{where}: expected a mapping with `project:` and a `labels:` list")
    labels = []
    seen: dict[tuple[str, str, int], int] = {}
    for index, entry in enumerate(data.get("labels") or []):
        at = f"{where}: label #{index + 1}"
        if not isinstance(entry, dict):
            raise LabelError(f"{at}: expected a mapping")
        missing = [key for key in ("rule", "path", "line", "text", "verdict") if key not in entry]
        if missing:
            raise LabelError(f"{at}: missing {', '.join(missing)}")
        extra = set(entry) - set(Label.__dataclass_fields__)
        if extra:
            raise LabelError(f"{at}: unknown keys {sorted(extra)}")
        verdict = _verdict(entry["verdict"])
        context = str(entry.get("context") or "unknown")
        if verdict not in VERDICTS:
            raise LabelError(f"{at}: verdict must be one of {VERDICTS}, not {entry['verdict']!r}")
        if context not in CONTEXTS:
            raise LabelError(f"{at}: context must be one of {CONTEXTS}, not {context!r}")
        if entry["rule"] not in RULES:
            raise LabelError(f"{at}: rule must be one of {RULES}, not {entry['rule']!r}")
        if not isinstance(entry["line"], int) or entry["line"] < 1:
            raise LabelError(f"{at}: line must be a positive integer")
        via = entry.get("via") or []
        if not isinstance(via, list):
            raise LabelError(f"{at}: via must be a list of 'path:line function' strings")
        label = Label(
            rule=entry["rule"], path=str(entry["path"]), line=entry["line"], text=str(entry["text"]),
            verdict=verdict, reason=str(entry.get("reason") or ""), context=context,
            entry=str(entry.get("entry") or ""), via=tuple(str(step) for step in via),
        )
        if label.key in seen:
            raise LabelError(f"{at}: same (rule, path, line) as label #{seen[label.key]}: {label.key}")
        seen[label.key] = index + 1
        labels.append(label)
    return labels


def labels_file(project: str) -> Path:
    return LABELS_DIR / f"{project}.yaml"


def load_declared(path: Path = DECLARED_FILE) -> dict[str, tuple[str, ...]]:
    """declared.yaml: per project, the `--control-plane` patterns its operator would declare."""
    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    declared = (data or {}).get("declared") or {}
    if not isinstance(declared, dict) or not all(
            isinstance(patterns, list) and all(isinstance(p, str) and p for p in patterns)
            for patterns in declared.values()):
        raise LabelError(f"{path.name}: `declared` must map project names to lists of patterns")
    return {str(name): tuple(patterns) for name, patterns in declared.items()}


def load_labels(project: str) -> list[Label]:
    path = labels_file(project)
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise LabelError(f"{path.name}: not valid YAML: {error}") from None
    return parse_labels(data, path.name)


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    severity: str = "warning"
    message: str = ""
    context: str = ""
    via: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.rule, self.path, self.line)


@dataclass
class Match:
    """Findings of one project set against its labels."""

    judged: list[tuple[Finding, Label]] = field(default_factory=list)  # verdict real, false or miss
    todo: list[Finding] = field(default_factory=list)                   # no label, or verdict todo
    found: list[Label] = field(default_factory=list)                    # expected labels reported
    lost: list[Label] = field(default_factory=list)                     # expected labels not reported
    drifted: list[tuple[Label, str]] = field(default_factory=list)      # label text != source line


def match(findings: Iterable[Finding], labels: Iterable[Label],
          source_line: Callable[[str, int], str | None]) -> Match:
    """Match findings to labels by (rule, path, line), confirming each label's text against the source.

    `source_line(path, line)` returns the stripped source line (None when the file or line is gone).
    A label whose text no longer matches is reported as drifted and matches nothing.
    """
    result = Match()
    by_key: dict[tuple[str, str, int], Label] = {}
    for label in labels:
        actual = source_line(label.path, label.line)
        if actual is None or actual != label.text.strip():
            result.drifted.append((label, actual if actual is not None else "<no such line>"))
            continue
        by_key[label.key] = label
    reported: dict[tuple[str, str, int], list[Finding]] = defaultdict(list)
    for finding in findings:
        reported[finding.key].append(finding)
        label = by_key.get(finding.key)
        if label is None or label.verdict == "todo":
            result.todo.append(finding)
        else:
            result.judged.append((finding, label))
    for label in by_key.values():
        if label.expected:
            (result.found if label.key in reported else result.lost).append(label)
    return result


def is_test_module(path: str) -> bool:
    """Test modules by the conventions pytest and unittest discover (an exemption for the ruff cross-check)."""
    parts = Path(path).parts
    name = parts[-1] if parts else ""
    return (
        any(part in ("tests", "test", "testing") for part in parts[:-1])
        or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
    )
