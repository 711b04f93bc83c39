"""The catalog of every check of every command: one YAML file per check under `rules/` (knowledge as data).

    rules/prefixes.yaml   which command reports the checks of each id prefix (LLM -> scan, NGX -> nginx...)
                          and the language of their examples; a new family of checks is a new line here
    rules/llm004.yaml     one check: id, name, command, severity (+ `severities` when it emits more than
                          one, each with when), summary, why (with the measured figure), example,
                          use_instead, fix_safety, optional `fixes` (the automatic fixes it offers: kind,
                          safety safe|unsafe, title, description; `scan --fix` applies them), and
                          `examples: {hit: [...], near_miss: [...]}` that the test suite runs through the
                          command

`llmdoctor rules` and `llmdoctor explain` read this module only (PyYAML, no libcst, httpx or tiktoken).
The scan engine's own loader (`llmdoctor.scan.catalog`) reads the same files for the LLM rules' call
tables and validates their documentation with `parse_check` below, so both read one schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmdoctor.errors import UserError
from llmdoctor.report.model import SEVERITIES, RuleInfo

PREFIXES_FILE = "prefixes.yaml"
CHECK_ID = re.compile(r"^(?P<prefix>[A-Z]{2,})(?P<number>[0-9]{3})$")
DOC_KEYS = ("name", "severity", "summary", "why", "example", "use_instead", "fix_safety")
CHECK_KEYS = {"id", "command", "severities", "examples", "fixes", *DOC_KEYS}
FIX_SAFETIES = ("safe", "unsafe")
FIX_KEYS = ("kind", "safety", "title", "description")
_SAFETY_WORDS = {"safe": "applied by `--fix`", "unsafe": "applied by `--fix --unsafe-fixes`"}
_TOP_LEVEL_ID = re.compile(rb"^id:", re.MULTILINE)


@dataclass(frozen=True)
class Prefix:
    """One family of checks: its id prefix, the command that reports it and how its examples are written."""

    prefix: str
    command: str
    title: str
    language: str  # the Markdown fence of `example` / `use_instead` (python, nginx, console, text)


@dataclass(frozen=True)
class SeverityCase:
    severity: str
    when: str


@dataclass(frozen=True)
class FixSpec:
    """An automatic fix a check offers (its YAML `fixes`): which fixer applies it and how safe it is."""

    kind: str  # the fixer (for scan: llmdoctor/scan/fix/<kind>.py)
    safety: str  # "safe": `--fix` applies it; "unsafe": only with `--unsafe-fixes` (behaviour may change)
    title: str  # one imperative line ("Replace `time.sleep(x)` with `await asyncio.sleep(x)`")
    description: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "safety": self.safety, "title": self.title,
                "description": " ".join(self.description.split())}


@dataclass
class Check:
    id: str
    name: str
    command: str
    severity: str  # the declared (default) severity
    summary: str
    why: str
    example: str
    use_instead: str
    fix_safety: str
    source: str
    language: str = "text"
    severities: tuple[SeverityCase, ...] = ()  # when the check emits more than one severity
    hits: list = field(default_factory=list)
    near_misses: list = field(default_factory=list)
    fixes: tuple[FixSpec, ...] = ()
    peer_codes: frozenset[str] = frozenset()  # other linters' codes for the same check: a noqa naming one silences it

    @property
    def prefix(self) -> str:
        return id_prefix(self.id)

    def declared_severities(self) -> set[str]:
        return {self.severity} | {case.severity for case in self.severities}

    def severity_text(self) -> str:
        """`error` or `error (HTTP/1.0 upstream), warning (HTTP/1.1 upstream)`."""
        if not self.severities:
            return self.severity
        return ", ".join(f"{case.severity} ({case.when})" for case in self.severities)

    def help_markdown(self) -> str:
        return help_markdown(self)

    def info(self) -> RuleInfo:
        return RuleInfo(id=self.id, name=self.name, severity=self.severity, summary=self.summary,
                        help=self.help_markdown())

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "command": self.command, "severity": self.severity,
            "severities": [{"severity": c.severity, "when": c.when} for c in self.severities],
            "summary": self.summary, "why": self.why, "example": self.example, "use_instead": self.use_instead,
            "fix_safety": self.fix_safety, "fixes": [f.to_dict() for f in self.fixes],
        }


# the keys a scan rule file has besides a check's (its pre-filter, tables and contexts; `peer_codes` is a check's)
SCAN_KEYS = frozenset({"prefilter", "tables", "contexts", "peer_codes"})
PEER_CODE = re.compile(r"^[A-Z]+[0-9]+$")  # a linter's rule code: `S113`, `ASYNC230`


def help_markdown(doc: Any) -> str:
    """The documentation of a check in ruff's order (What it does / Why it matters / Example / Use instead /
    Fix safety); `doc` is a Check or a scan RuleSpec (same fields)."""
    fence = getattr(doc, "language", "python") or "text"
    fixes = "".join(f"- **{f.title}** ({f.safety}: {_SAFETY_WORDS[f.safety]}). {' '.join(f.description.split())}\n"
                    for f in getattr(doc, "fixes", ()))
    peers = ", ".join(f"`{code}`" for code in sorted(doc.peer_codes))
    return (
        f"## What it does\n{doc.summary.strip()}\n\n## Why it matters\n{doc.why.strip()}\n\n"
        f"## Example\n```{fence}\n{doc.example.rstrip()}\n```\n\n"
        f"## Use instead\n```{fence}\n{doc.use_instead.rstrip()}\n```\n\n"
        f"## Fix safety\n{doc.fix_safety.strip()}\n"
        + (f"\n## Automatic fixes\n{fixes}" if fixes else "")
        + (f"\n## Suppressing\n`# noqa: {doc.id}` on the line, or a `# noqa` naming this check's code in another "
           f"linter: {peers}\n" if peers else "")
    )


def id_prefix(check_id: str) -> str:
    match = CHECK_ID.match(check_id)
    return match.group("prefix") if match else check_id.rstrip("0123456789")


@dataclass
class CheckCatalog:
    checks: dict[str, Check] = field(default_factory=dict)
    prefixes: dict[str, Prefix] = field(default_factory=dict)

    def commands(self) -> list[str]:
        return list(dict.fromkeys(p.command for p in self.prefixes.values()))

    def check(self, check_id: str) -> Check:
        wanted = check_id.strip().upper()
        try:
            return self.checks[wanted]
        except KeyError:
            family = [c for c in sorted(self.checks) if id_prefix(c) == id_prefix(wanted)]
            known = (f"known rules: {', '.join(family)}" if family else "the families are "
                     + ", ".join(f"{p.prefix} ({p.command})" for p in self.prefixes.values()))
            raise UserError(f"unknown rule {wanted!r}{did_you_mean(wanted, self.checks)}; {known} "
                            "(see `llmdoctor rules`)") from None

    def for_command(self, command: str) -> list[Check]:
        return [c for _, c in sorted(self.checks.items()) if c.command == command]

    def select(self, command: str | None = None, prefix: str | None = None) -> list[Check]:
        """The checks of `command` and/or whose id starts with `prefix` (UserError naming what is known)."""
        if command is not None and command not in self.commands():
            raise UserError(f"--command {command!r}: no such command with checks; choose one of "
                            f"{', '.join(self.commands())}")
        order = {prefix: index for index, prefix in enumerate(self.prefixes)}
        chosen = sorted((c for c in self.checks.values() if command is None or c.command == command),
                        key=lambda c: (order.get(c.prefix, len(order)), c.id))
        if prefix is not None:
            wanted = prefix.strip().upper()
            chosen = [c for c in chosen if c.id.startswith(wanted)]
            if not chosen:
                raise UserError(f"no check id starts with {prefix!r}{did_you_mean(wanted, self.checks)}; "
                                f"the prefixes are {', '.join(self.prefixes)}")
        return chosen

    def ids_for(self, command: str) -> set[str]:
        return {c.id for c in self.checks.values() if c.command == command}


def did_you_mean(check_id: str, known) -> str:
    """' (did you mean LLM004?)' for `LLM04`, `llm-4`, `LLM0004`, `NGX02` -> NGX002; '' when nothing is close."""
    number = re.sub(r"\D", "", check_id).lstrip("0")
    letters = re.sub(r"[^A-Z]", "", check_id.upper())
    close = [k for k in sorted(known) if number and re.sub(r"\D", "", k).lstrip("0") == number and k != check_id]
    same_family = [k for k in close if letters and k.startswith(letters)]
    pick = (same_family or close)[:1]
    return f" (did you mean {pick[0]}?)" if pick else ""


# ----------------------------------------------------------------------------- loading


def shipped_rules_dir() -> Path:
    """`llmdoctor/rules` inside an installed wheel, else the repository's `rules/` (source checkout)."""
    package_dir = Path(__file__).resolve().parent
    inside = package_dir / "rules"
    if inside.is_dir():
        return inside
    return package_dir.parent / "rules"


def read_yaml(path: Path, raw: bytes) -> dict:
    import yaml

    try:
        # libyaml's loader when present: ~9x faster than the pure-Python one on the shipped tables
        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a rule file must be a YAML mapping (id, name, ... or kind: tables)")
    return data


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise UserError(f"{path}: cannot read rule file: {err.strerror or err}") from None


def load_prefixes(shipped: Path, read: Callable[[Path], dict] | None = None) -> dict[str, Prefix]:
    """`read(path)`: the file's parsed YAML (default: parsed here)."""
    path = shipped / PREFIXES_FILE
    if not path.is_file():
        raise UserError(f"{path}: missing: the installation is incomplete; reinstall llmdoctor")
    data = read(path) if read is not None else read_yaml(path, read_bytes(path))
    if data.get("kind") != "prefixes" or not isinstance(data.get("prefixes"), dict):
        raise _fail(path, "prefixes", "expected `kind: prefixes` and a mapping `prefixes: {LLM: {...}}`")
    out: dict[str, Prefix] = {}
    for prefix, entry in data["prefixes"].items():
        key = f"prefixes.{prefix}"
        if not isinstance(prefix, str) or not re.fullmatch(r"[A-Z]{2,}", prefix):
            raise _fail(path, key, "a prefix is two or more capital letters, e.g. NGX")
        if not isinstance(entry, dict) or set(entry) - {"command", "title", "language"}:
            raise _fail(path, key, "must be a mapping with command, title and language")
        for field_name in ("command", "title", "language"):
            if not isinstance(entry.get(field_name), str) or not entry[field_name].strip():
                raise _fail(path, f"{key}.{field_name}", "missing or not a non-empty string")
        out[prefix] = Prefix(prefix, entry["command"], entry["title"], entry["language"])
    return out


def load_checks(shipped_dir: Path | None = None) -> CheckCatalog:
    """Every check documented under `rules/` (validated; UserError naming the file and key)."""
    shipped = shipped_dir or shipped_rules_dir()
    catalog = CheckCatalog(prefixes=load_prefixes(shipped))
    for path in sorted(shipped.glob("*.yaml")):
        raw = read_bytes(path)
        if path.name == PREFIXES_FILE or not _TOP_LEVEL_ID.search(raw):  # knowledge tables have no id
            continue
        data = read_yaml(path, raw)
        check = parse_check(path, data, catalog.prefixes, extra_keys=SCAN_KEYS)
        if check.id in catalog.checks:
            raise _fail(path, "id", f"{check.id} is already defined in {catalog.checks[check.id].source}")
        catalog.checks[check.id] = check
    if not catalog.checks:
        raise UserError(f"no rule files found in {shipped}: the installation is incomplete; reinstall llmdoctor")
    return catalog


def _fail(path: Path, key: str, problem: str) -> UserError:
    return UserError(f"{path}: key {key!r}: {problem}")


def _text(path: Path, data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, key, "missing or not a non-empty string")
    return value


def parse_check(path: Path, data: dict, prefixes: dict[str, Prefix], extra_keys: set[str] = frozenset()) -> Check:
    """One check file, validated: its id's prefix is registered for its `command`, its severities are known,
    it has documentation and at least one hit and one near-miss example."""
    for key in data:
        if key not in CHECK_KEYS | extra_keys:
            raise _fail(path, str(key), f"unknown key; allowed keys: {', '.join(sorted(CHECK_KEYS | extra_keys))}")
    check_id = data.get("id")
    match = CHECK_ID.match(check_id) if isinstance(check_id, str) else None
    if match is None:
        raise _fail(path, "id", "missing or not like 'LLM004' (capital letters, then three digits)")
    prefix = prefixes.get(match.group("prefix"))
    if prefix is None:
        raise _fail(path, "id", f"prefix {match.group('prefix')!r} is not registered in {PREFIXES_FILE} "
                                f"(known: {', '.join(prefixes)})")
    command = data.get("command")
    if command != prefix.command:
        raise _fail(path, "command", f"{prefix.prefix} checks belong to `{prefix.command}` ({PREFIXES_FILE}), "
                                     f"got {command!r}")
    severity = _text(path, data, "severity")
    if severity not in SEVERITIES:
        raise _fail(path, "severity", f"must be one of {', '.join(SEVERITIES)} (got {severity!r})")
    cases = _severities(path, data.get("severities"), severity)
    examples = data.get("examples")
    if not isinstance(examples, dict) or set(examples) - {"hit", "near_miss"}:
        raise _fail(path, "examples", "must be a mapping with 'hit' and 'near_miss' lists")
    lists = {}
    for kind in ("hit", "near_miss"):
        items = examples.get(kind)
        if not isinstance(items, list) or not items or not all(isinstance(i, (str, dict)) for i in items):
            raise _fail(path, f"examples.{kind}", "must be a non-empty list of examples (text, or mappings)")
        lists[kind] = items
    peers = data.get("peer_codes", [])
    if not isinstance(peers, list) or not all(isinstance(code, str) and PEER_CODE.match(code) for code in peers):
        raise _fail(path, "peer_codes", "must be a list of upper-case linter codes like 'S113' or 'ASYNC230'")
    return Check(id=check_id, command=command, source=str(path), language=prefix.language, severities=cases,
                 hits=lists["hit"], near_misses=lists["near_miss"], fixes=_fixes(path, data.get("fixes", [])),
                 peer_codes=frozenset(peers), **{key: _text(path, data, key) for key in DOC_KEYS})


def _fixes(path: Path, raw: Any) -> tuple[FixSpec, ...]:
    if not isinstance(raw, list):
        raise _fail(path, "fixes", "must be a list of {kind, safety, title, description} mappings")
    fixes: list[FixSpec] = []
    for index, item in enumerate(raw):
        key = f"fixes[{index}]"
        if not isinstance(item, dict) or set(item) - set(FIX_KEYS):
            raise _fail(path, key, f"must be a mapping with {', '.join(FIX_KEYS)}")
        for name in FIX_KEYS:
            if not isinstance(item.get(name), str) or not item[name].strip():
                raise _fail(path, f"{key}.{name}", "missing or not a non-empty string")
        if item["safety"] not in FIX_SAFETIES:
            raise _fail(path, f"{key}.safety", f"must be one of {', '.join(FIX_SAFETIES)} (got {item['safety']!r})")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", item["kind"]) or any(f.kind == item["kind"] for f in fixes):
            raise _fail(path, f"{key}.kind", "a lower_snake_case fixer name, once per check")
        fixes.append(FixSpec(kind=item["kind"], safety=item["safety"], title=item["title"].strip(),
                             description=item["description"]))
    return tuple(fixes)


def _severities(path: Path, raw: Any, default: str) -> tuple[SeverityCase, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) < 2:
        raise _fail(path, "severities", "a list of at least two {severity, when} mappings (leave it out when "
                                        "the check has one severity)")
    cases = []
    for index, item in enumerate(raw):
        key = f"severities[{index}]"
        if not isinstance(item, dict) or set(item) != {"severity", "when"}:
            raise _fail(path, key, "must be a mapping {severity: ..., when: ...}")
        if item["severity"] not in SEVERITIES:
            raise _fail(path, f"{key}.severity", f"must be one of {', '.join(SEVERITIES)}")
        if not isinstance(item["when"], str) or not item["when"].strip():
            raise _fail(path, f"{key}.when", "say when this severity applies")
        cases.append(SeverityCase(item["severity"], item["when"].strip()))
    if default not in {c.severity for c in cases}:
        raise _fail(path, "severity", f"{default!r} is not one of the severities listed under `severities`")
    return tuple(cases)
