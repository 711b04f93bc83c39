"""The rule catalog: rule documentation and call tables loaded from YAML (knowledge as data).

Sources, in order:
1. every `*.yaml` shipped with the package (`llmdoctor/rules/` in a wheel, the repository's `rules/` in a
   source or editable checkout);
2. user files from `--rules-dir` / config `rules-dir`, which may only ADD entries to existing tables.

Two file kinds:
- a rule file: a check of `command: scan` (documentation, severity and examples as every check in
  `llmdoctor.catalog`, validated by its `parse_check`), plus optional `prefilter` (the declarative spec of
  which files and bodies the rule can fire in: `Prefilter` below, derived into tests by prefilter.py),
  `contexts` and `tables` (name -> entries); check files of other commands (NGX..., KV...) are not the scan
  engine's and are skipped;
- a knowledge file: `kind: tables` and no `id`, read by any rule (e.g. the SDK tables). Its optional
  `tables` key is validated like a rule's; the whole document is also kept as-is in
  `catalog.knowledge[<file stem>]` for rules with richer schemas (whose own code validates them).

Table names form one namespace: the same name in two files is one table with both files' entries.
A table entry is a dotted qualified name (`time.sleep`), optionally with `*` wildcards
(`transformers.*Tokenizer*.from_pretrained`), written either as a string or as a mapping with a `name`
key plus free attributes (`{name: time.sleep, use_instead: "await asyncio.sleep(...)"}`).
Everything here is plain data: a Catalog pickles, so a process pool can ship it to workers.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmdoctor.catalog import (
    PREFIXES_FILE,
    SCAN_KEYS,
    FixSpec,
    did_you_mean,
    help_markdown,
    load_prefixes,
    parse_check,
    read_bytes,
    read_yaml,
    shipped_rules_dir,
)
from llmdoctor.errors import UserError
from llmdoctor.limits import brief, brief_text, load_yaml
from llmdoctor.report.model import RuleInfo

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
QUALIFIED_NAME = re.compile(r"^[A-Za-z_*][A-Za-z0-9_*]*(\.[A-Za-z_*][A-Za-z0-9_*]*)*$")

# llmdoctor/scan/project/model.py
CONTEXT_NAMES = ("serving", "worker", "control-plane", "scheduled", "run-once", "offline", "unknown")
CONTEXT_VERDICTS = ("report", "off", "error", "warning", "info")
USER_TABLES_KEYS = {"kind", "description", "tables"}
# SDK knowledge a user file may carry (docs/sdk-knowledge.md), stored in `catalog.knowledge["user:<stem>"]`
USER_SDK_KEYS = {"name", "imports", "clients", "modules", "method_sets", "libraries", "verified", "entrypoints"}
USER_RULE_KEYS = {"id", "tables"}


@dataclass(frozen=True)
class TableEntry:
    name: str
    attrs: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def root(self) -> str:
        """First component of the dotted name: the literal a file must contain to use this entry."""
        return self.name.split(".", 1)[0]


@dataclass
class Table:
    name: str
    entries: list[TableEntry] = field(default_factory=list)
    _exact: dict[str, TableEntry] = field(default_factory=dict, repr=False)
    # the wildcard patterns by their first dotted component (None: a wildcard there, `*.on_event`), in order:
    # (position in the table, the text before the first wildcard, which a name must start with, the entry)
    _patterns: dict[str | None, list[tuple[int, str, TableEntry]]] = field(default_factory=dict, repr=False)

    def add(self, entry: TableEntry) -> None:
        self.entries.append(entry)
        if "*" in entry.name:
            root = entry.root
            prefix = entry.name.split("*", 1)[0]
            key = None if "*" in root else root
            self._patterns.setdefault(key, []).append((len(self.entries), prefix, entry))
        else:
            self._exact.setdefault(entry.name, entry)

    def match(self, qualified_name: str | None) -> TableEntry | None:
        """The entry naming `qualified_name` (exact names first, then the first wildcard pattern in the table's
        order), or None. Only the patterns of the name's own first component (or with a wildcard there) that
        it starts like are tried: a warm pre-commit run asks about a thousand names of 161 patterns."""
        if not qualified_name:
            return None
        found = self._exact.get(qualified_name)
        if found is not None or not self._patterns:
            return found
        rooted, anywhere = self._patterns.get(qualified_name.split(".", 1)[0], ()), self._patterns.get(None, ())
        candidates = sorted((*rooted, *anywhere)) if rooted and anywhere else rooted or anywhere  # table order
        for _, prefix, entry in candidates:
            if qualified_name.startswith(prefix) and fnmatch.fnmatchcase(qualified_name, entry.name):
                return entry
        return None

    def __contains__(self, qualified_name: object) -> bool:
        return isinstance(qualified_name, str) and self.match(qualified_name) is not None

    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def literals(self) -> set[str]:
        """Strings a file must contain (any of them) to possibly use an entry of this table."""
        out = set()
        for entry in self.entries:
            root = entry.root
            if root == "builtins":  # `open(...)` is written without its module
                out.add(entry.name.rsplit(".", 1)[-1])
            else:
                out.add(root if "*" not in root else "")
        return out


# ----------------------------------------------------------------------------- the pre-filter spec
#
# A rule's `prefilter:` says, as data, what a file and a def/class body must hold for the rule to possibly
# fire there; llmdoctor/scan/prefilter.py derives from it the text pre-filter, its second stage on what the
# code spells out (CPython's ast) and the test of which bodies libcst must parse (regions.py). A name
# SET is a table of the catalog (`tokenizer_constructors`) or one of KNOWLEDGE_SETS, read from the SDK /
# HTTP / logging knowledge files (user additions from --rules-dir included). docs/scan-architecture.md.

KNOWLEDGE_SETS = {
    "sdk.calls": "every SDK method's qualified call name (rules/sdk-*.yaml)",
    "sdk.unknown_chains": "method chains reported on any receiver (`chat.completions.create`): spelled whole",
    "sdk.receivers": "SDK client constructors and modules",
    "sdk.imports": "modules an SDK is imported from",
    "http.pooled_clients": "constructors of clients that hold a connection pool (HTTP libraries, SDK clients)",
    "http.module_functions": "module-level request functions (`requests.get`)",
    "http.timeout_clients": "constructors and modules with a `timeout:` entry",
    "http.timeout_required": "calls reported when the timeout keyword is missing (`missing_is_finding`)",
    "http.timeout_keywords": "keywords whose literal None disables a timeout (`none_disables`)",
}
CHAIN_SETS = frozenset({"sdk.unknown_chains"})  # names matched on any receiver: the whole chain is the literal
# code facts a condition may require, and the stages each one has a form for (prefilter.py `_text_fact`,
# `_region_fact`)
FACTS = {
    "async_def": ("file", "region"),  # an `async def` (text: the word `async`)
    "logging_sink": ("file", "region"),  # a call of a logging sink at a reported level (rules/sdk-logging.yaml)
    "llm_literal": ("file",),  # a model's HTTP path or a quoted payload key, in a string literal
    "payload": ("region",),  # a generation call, or a payload-like name, attribute or string key
    "sdk_import_in_body": ("region",),  # the body imports an LLM SDK the module-level code does not
}
NAMES_ARE = ("callees", "receivers")
_CONDITION_KEYS = ("names", "all", "any", "one_of", "keyword_none", "stores", "facts")
_PREFILTER_KEYS = ("names_are", "region", *_CONDITION_KEYS)


@dataclass(frozen=True)
class Condition:
    """Every part given must hold; an empty Condition holds everywhere."""

    names: tuple[str, ...] = ()  # SETs: one of their names spelled out (each part a word) and, for a call
    #                              rule (`names_are: callees`), a call in a body that can resolve to one
    all: tuple[str, ...] = ()  # literals that must all occur as whole words
    any: tuple[tuple[str, str], ...] = ()  # ("word", literal) / ("roots", SET): one of them as a whole word
    one_of: tuple[Condition, ...] = ()  # one of these must hold
    keyword_none: tuple[str, ...] = ()  # a keyword argument given a literal None (keywords, or SETs of them)
    stores: tuple[str, ...] = ()  # bodies only: an attribute the body assigns (`x.request = ...`)
    facts: tuple[str, ...] = ()  # FACTS that must all hold

    def sets(self) -> list[str]:
        found = [*self.names, *(value for kind, value in self.any if kind == "roots"),
                 *(k for k in self.keyword_none if "." in k)]
        for part in self.one_of:
            found.extend(part.sets())
        return found


@dataclass(frozen=True)
class Prefilter:
    file: Condition  # the text pre-filter and its second stage on the code
    region: Condition  # a def or class body (regions.py); default: the file's `names`
    names_are: str = "callees"  # receivers: a name begins the reported call (`requests.Session` -> `s.get()`)


def _prefilter(path: Path, value: Any) -> Prefilter:
    if not isinstance(value, dict):
        raise _fail(path, "prefilter", "must be a mapping with keys among " + ", ".join(_PREFILTER_KEYS)
                    + " (a list of literals that must all occur is written `all: [...]`)")
    names_are = value.get("names_are", "callees")
    if names_are not in NAMES_ARE:
        raise _fail(path, "prefilter.names_are", f"must be one of {', '.join(NAMES_ARE)}")
    file = _condition(path, "prefilter", {k: v for k, v in value.items() if k not in ("names_are", "region")},
                      stage="file", allowed=_PREFILTER_KEYS)
    if "region" in value:
        region = _condition(path, "prefilter.region", value["region"], stage="region")
    else:
        region = Condition(names=file.names)
    if not (file.names or region.names) and "names_are" in value:
        raise _fail(path, "prefilter.names_are", "says how `names` are called, and no `names` are given")
    return Prefilter(file=file, region=region, names_are=names_are)


def _condition(path: Path, key: str, value: Any, *, stage: str, allowed=_CONDITION_KEYS) -> Condition:
    if not isinstance(value, dict) or not value:
        raise _fail(path, key, f"must be a non-empty mapping with keys among {', '.join(_CONDITION_KEYS)}")
    for name in value:
        if name not in allowed:
            raise _fail(path, f"{key}.{str(name)[:40]}",
                        f"unknown key{_close(str(name), allowed)}; allowed keys: {', '.join(allowed)}")

    def strings(name: str) -> tuple[str, ...]:
        items = value.get(name, [])
        if not isinstance(items, list) or not items or not all(isinstance(i, str) and i.strip() for i in items):
            raise _fail(path, f"{key}.{name}", "must be a non-empty list of non-empty strings")
        return tuple(items)

    def known_sets(name: str, items: tuple[str, ...]) -> tuple[str, ...]:
        for index, item in enumerate(items):
            _check_set(path, f"{key}.{name}[{index}]", item)
        return items

    parts: dict[str, Any] = {}
    if "names" in value:
        parts["names"] = known_sets("names", strings("names"))
    if "all" in value:
        parts["all"] = strings("all")
    if "any" in value:
        items = value["any"]
        if not isinstance(items, list) or not items:
            raise _fail(path, f"{key}.any", "must be a non-empty list of literals or {roots: SET} mappings")
        found = []
        for index, item in enumerate(items):
            where = f"{key}.any[{index}]"
            if isinstance(item, str) and item.strip():
                found.append(("word", item))
            elif isinstance(item, dict) and list(item) == ["roots"] and isinstance(item["roots"], str):
                _check_set(path, f"{where}.roots", item["roots"])
                found.append(("roots", item["roots"]))
            else:
                raise _fail(path, where, "must be a literal (a non-empty string) or {roots: SET}: the first part "
                                         "of each name of the set")
        parts["any"] = tuple(found)
    if "keyword_none" in value:
        items = strings("keyword_none")
        for index, item in enumerate(items):
            if "." in item:
                _check_set(path, f"{key}.keyword_none[{index}]", item)
            elif not item.isidentifier():
                raise _fail(path, f"{key}.keyword_none[{index}]", "must be a keyword name or a SET of them")
        parts["keyword_none"] = items
    if "stores" in value:
        if stage != "region":
            raise _fail(path, f"{key}.stores", "applies to bodies only: write it under `prefilter.region`")
        items = strings("stores")
        if not all(item.isidentifier() for item in items):
            raise _fail(path, f"{key}.stores", "must be a list of attribute names")
        parts["stores"] = items
    if "facts" in value:
        items = strings("facts")
        for index, item in enumerate(items):
            stages = FACTS.get(item)
            if stages is None:
                raise _fail(path, f"{key}.facts[{index}]", f"unknown fact {brief(item)}{_close(item, FACTS)}; "
                                                           f"known: {', '.join(FACTS)}")
            if stage not in stages:
                where = "under `prefilter.region`" if stage == "file" else "at the top of `prefilter`"
                raise _fail(path, f"{key}.facts[{index}]", f"{item} is a fact of {' and '.join(stages)} "
                                                           f"only: write it {where}")
        parts["facts"] = items
    if "one_of" in value:
        items = value["one_of"]
        if not isinstance(items, list) or len(items) < 2:
            raise _fail(path, f"{key}.one_of", "must be a list of two or more conditions (mappings)")
        parts["one_of"] = tuple(_condition(path, f"{key}.one_of[{index}]", item, stage=stage)
                                for index, item in enumerate(items))
    return Condition(**parts)


def _check_set(path: Path, key: str, name: str) -> None:
    """A knowledge set must be one of KNOWLEDGE_SETS; a table name is checked once every file is loaded."""
    if "." in name:
        if name not in KNOWLEDGE_SETS:
            raise _fail(path, key, f"unknown set {brief(name)}{_close(name, KNOWLEDGE_SETS)}; known: "
                                   f"{', '.join(KNOWLEDGE_SETS)}, or a table name")
    elif not TABLE_NAME.match(name):
        raise _fail(path, key, f"{brief(name)} is neither a table name (lower_snake_case) nor a knowledge set "
                               f"({', '.join(KNOWLEDGE_SETS)})")


def _check_prefilter_tables(catalog: Catalog, spec: RuleSpec) -> None:
    for condition, where in ((spec.prefilter.file, "prefilter"), (spec.prefilter.region, "prefilter.region")):
        for name in condition.sets():
            if "." not in name and name not in catalog.tables:
                raise _fail(Path(spec.source), where, f"no table {brief(name)} in any rule file"
                            f"{_close(name, catalog.tables)}")


def _close(name: str, known) -> str:
    import difflib

    found = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {found[0]}?)" if found else ""


@dataclass
class RuleSpec:
    id: str
    name: str
    severity: str
    summary: str
    why: str
    example: str
    use_instead: str
    fix_safety: str
    source: str
    prefilter: Prefilter | None = None  # None: no condition (every file, every body)
    table_names: list[str] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)
    near_misses: list[str] = field(default_factory=list)
    contexts: dict[str, str] = field(default_factory=dict)  # execution context -> report / off / severity / if FLAG
    fixes: tuple[FixSpec, ...] = ()  # the automatic fixes the rule offers (its YAML `fixes`)
    peer_codes: frozenset[str] = frozenset()  # other linters' codes for the same check: a noqa naming one silences it

    def fix(self, kind: str) -> FixSpec | None:
        return next((f for f in self.fixes if f.kind == kind), None)

    def help_markdown(self) -> str:
        return help_markdown(self)

    def info(self) -> RuleInfo:
        return RuleInfo(id=self.id, name=self.name, severity=self.severity, summary=self.summary,
                        help=self.help_markdown())




@dataclass
class Catalog:
    rules: dict[str, RuleSpec] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    knowledge: dict[str, dict] = field(default_factory=dict)  # `kind: tables` documents, by file stem
    fingerprint: str = ""  # sha256 of every source file's bytes, in load order (cache key material)
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # derived data (indexes, regexes)
    gates: dict = field(default_factory=dict, repr=False, compare=False)  # prefilter.gate's tests, per process

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["gates"] = {}  # closures: rebuilt where they are used
        return state

    def table(self, name: str) -> Table:
        """The table `name`; an empty one when no file defines it (optional knowledge tables)."""
        return self.tables.get(name) or Table(name)

    def rule(self, rule_id: str) -> RuleSpec:
        try:
            return self.rules[rule_id]
        except KeyError:
            known = ", ".join(sorted(self.rules)) or "none"
            raise UserError(f"unknown rule {rule_id!r}{did_you_mean(rule_id, self.rules)}; known rules: {known} "
                            "(see `llmdoctor rules`)") from None



# ----------------------------------------------------------------------------- loading


def load_catalog(user_dirs: list[str | Path] | tuple = (), shipped_dir: Path | None = None,
                 cache_dir: str | None = None) -> Catalog:
    """Load and validate the shipped rule files, then apply the user's table additions. `cache_dir`: the scan
    cache's folder, where the shipped files' parsed YAML is kept (`ShippedDocuments`)."""
    shipped = shipped_dir or shipped_rules_dir()
    files = sorted(shipped.glob("*.yaml")) if shipped.is_dir() else []
    if not files:
        raise UserError(f"no rule files found in {shipped}: the installation is incomplete; "
                        "reinstall llmdoctor")
    documents = ShippedDocuments(files, cache_dir)
    prefixes = load_prefixes(shipped, documents.data)
    catalog = Catalog()
    digest = hashlib.sha256()
    for path in files:
        if path.name == PREFIXES_FILE:
            continue
        raw = documents.raw[path]
        if _load_shipped(catalog, path, documents.data(path), prefixes):
            digest.update(str(path.name).encode() + b"\0" + raw + b"\0")
    documents.save()
    for directory in user_dirs:
        directory = Path(directory)
        if not directory.is_dir():
            raise UserError(f"rules-dir {directory}: not a directory; pass a folder of *.yaml table files")
        for path in sorted(directory.glob("*.y*ml")):
            raw = _read_user_file(path)
            digest.update(str(path.name).encode() + b"\0" + raw + b"\0")
            data = load_yaml(raw, str(path))  # bounded: nesting, YAML aliases expanded (llmdoctor/limits.py)
            if not isinstance(data, dict):
                raise UserError(f"{path}: a rule file must be a YAML mapping (id, name, ... or kind: tables)")
            try:
                _load_user(catalog, path, data)
            except (TypeError, AttributeError, ValueError) as err:  # a value of a type the schema does not expect
                raise UserError(f"{path}: malformed rule file ({type(err).__name__}: {brief_text(str(err))}); see "
                                "docs/sdk-knowledge.md for the schema") from None
    for spec in catalog.rules.values():
        for name in spec.table_names:
            catalog.tables.setdefault(name, Table(name))
    for spec in catalog.rules.values():
        if spec.prefilter is not None:
            _check_prefilter_tables(catalog, spec)
    catalog.fingerprint = digest.hexdigest()
    return catalog


class ShippedDocuments:
    """The parsed YAML of the shipped rule files, read from `cache_dir` when it holds the documents of these
    very bytes (cache.py `read_catalog_documents`: keyed by every file's name and bytes and the YAML library),
    else parsed and stored there for the next run. A run that finds them skips the YAML parser and its import
    (~0.06 s of a pre-commit run); what they hold is validated by the same code either way."""

    def __init__(self, files: list[Path], cache_dir: str | None) -> None:
        self.raw = {path: read_bytes(path) for path in files}
        self.cache_dir = cache_dir
        self.parsed: dict[str, dict] = {}
        self.cached = None
        if cache_dir is not None:
            from llmdoctor.scan.cache import catalog_key, read_catalog_documents

            self.key = catalog_key([(path.name, raw) for path, raw in self.raw.items()])
            self.cached = read_catalog_documents(cache_dir, self.key, [path.name for path in files])

    def data(self, path: Path) -> dict:
        if self.cached is not None:
            return self.cached[path.name]
        found = read_yaml(path, self.raw[path])
        if self.cache_dir is not None:
            self.parsed[path.name] = _as_json(found)  # as parsed (the loading keeps and may reshape `found`)
        return found

    def save(self) -> None:
        """Store the documents parsed this run, once every file was loaded (a file in error stores nothing) and
        when JSON gives each back exactly (not a YAML date, nor a number as a key)."""
        if (self.cache_dir is not None and self.cached is None and len(self.parsed) == len(self.raw)
                and None not in self.parsed.values()):
            from llmdoctor.scan.cache import write_catalog_documents

            write_catalog_documents(self.cache_dir, self.key, self.parsed)


def _as_json(data: dict) -> dict | None:
    """A copy of `data` through JSON, or None when JSON would not give it back equal."""
    import json

    try:
        copy = json.loads(json.dumps(data))
    except (TypeError, ValueError, RecursionError):
        return None
    return copy if copy == data else None


MAX_RULE_FILE_BYTES = 10 * 2**20  # the largest shipped table file is ~40 KB


def _read_user_file(path: Path) -> bytes:
    """A user's rule file: a regular file of at most MAX_RULE_FILE_BYTES (a FIFO is named, not waited for)."""
    from llmdoctor.limits import InputProblem, read_bounded

    try:
        return read_bounded(path, MAX_RULE_FILE_BYTES, what="a rule file")
    except InputProblem as problem:
        raise UserError(f"{path}: cannot read rule file: {problem.reason}") from None


def _fail(path: Path, key: str, problem: str) -> UserError:
    return UserError(f"{path}: key {brief(key)}: {problem}")


def _load_shipped(catalog: Catalog, path: Path, data: dict, prefixes) -> bool:
    """Add one shipped file; False for a check of another command (not the scan engine's)."""
    if data.get("kind") == "tables" and "id" not in data:
        catalog.sources.append(str(path))
        _add_tables(catalog, path, data.get("tables"), allow_new=True)
        catalog.knowledge[path.stem] = data
        return True
    if "kind" in data:
        raise _fail(path, "kind", "the only kind is 'tables' (a knowledge file, which has no 'id')")
    check = parse_check(path, data, prefixes, extra_keys=SCAN_KEYS)
    if check.command != "scan":
        return False
    catalog.sources.append(str(path))
    if check.id in catalog.rules:
        raise _fail(path, "id", f"{check.id} is already defined in {catalog.rules[check.id].source}")
    prefilter = _prefilter(path, data["prefilter"]) if data.get("prefilter") is not None else None
    for kind, items in (("hit", check.hits), ("near_miss", check.near_misses)):
        if not all(isinstance(i, str) for i in items):
            raise _fail(path, f"examples.{kind}", "must be a non-empty list of code strings")
    table_names = _add_tables(catalog, path, data.get("tables", {}), allow_new=True)
    catalog.rules[check.id] = RuleSpec(
        id=check.id, name=check.name, severity=check.severity, summary=check.summary, why=check.why,
        example=check.example, use_instead=check.use_instead, fix_safety=check.fix_safety, source=str(path),
        prefilter=prefilter, table_names=table_names, hits=check.hits, near_misses=check.near_misses,
        contexts=_contexts(path, data.get("contexts")),
        fixes=check.fixes, peer_codes=check.peer_codes,
    )
    return True


def _contexts(path: Path, value: Any) -> dict[str, str]:
    """`contexts:` of a rule file: where its findings are reported (docs/scan.md "Execution contexts")."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(path, "contexts", f"must be a mapping of context ({', '.join(CONTEXT_NAMES)}) -> verdict")
    out = {}
    for name, verdict in value.items():
        if name not in CONTEXT_NAMES:
            raise _fail(path, f"contexts.{str(name)[:40]}", f"unknown context; known: {', '.join(CONTEXT_NAMES)}")
        if not isinstance(verdict, str) or not (verdict in CONTEXT_VERDICTS or (
                verdict.startswith("if ") and all(flag.strip().isidentifier() for flag in verdict[3:].split(" or ")))):
            raise _fail(path, f"contexts.{name}",
                        f"must be one of {', '.join(CONTEXT_VERDICTS)}, 'if FLAG' or 'if FLAG or FLAG'")
        out[name] = verdict
    return out


def _load_user(catalog: Catalog, path: Path, data: dict) -> None:
    catalog.sources.append(str(path))
    if data.get("kind") == "tables" and "id" not in data:
        _check_keys(path, data, USER_TABLES_KEYS | USER_SDK_KEYS)
        if USER_SDK_KEYS & data.keys():
            _add_user_knowledge(catalog, path, data)
    else:
        _check_keys(path, data, USER_RULE_KEYS | {"kind"})
        rule_id = data.get("id")
        if rule_id is None:
            raise _fail(path, "id", "missing: name the rule whose tables this file extends (e.g. 'id: LLM004'), "
                                    "or write 'kind: tables' for an SDK/HTTP table file")
        if not isinstance(rule_id, str) or rule_id not in catalog.rules:
            known = ", ".join(sorted(catalog.rules))
            raise _fail(path, "id", f"no rule {brief(rule_id)} to extend (known: {known}); user files can only "
                                    "add table entries (or use 'kind: tables')")
    _add_tables(catalog, path, data.get("tables"), allow_new=False)


def _add_user_knowledge(catalog: Catalog, path: Path, data: dict) -> None:
    """Validate a user's SDK table now (a malformed one exits 2 naming the file and key), then keep it next to
    the shipped ones: the SDK rules read `catalog.knowledge` whoever wrote the file."""
    from llmdoctor.scan.rules.sdk_knowledge import validate

    name = data.get("name")
    if "name" in data:
        if not isinstance(name, str) or not name.strip():
            raise _fail(path, "name", "must be a non-empty string naming the table (e.g. 'mycorp-llm')")
        for stem, doc in catalog.knowledge.items():
            if isinstance(doc, dict) and doc.get("name") == name:
                raise _fail(path, "name", f"{brief(name)} is already the name of table {stem}; pick another")
    if "imports" in data and not _dotted_names(data["imports"]):
        raise _fail(path, "imports", "must be a list of dotted module names like 'mycorp.llm'")
    if "verified" in data and not isinstance(data["verified"], str):
        raise _fail(path, "verified", "must be a string (where the names were checked)")
    validate(path.stem, data, source=str(path))
    libraries = data.get("libraries")
    if libraries is not None:
        if not isinstance(libraries, list):
            raise _fail(path, "libraries", "must be a list of {library: NAME, ...} mappings")
        for index, library in enumerate(libraries):
            key = f"libraries[{index}]"
            if not isinstance(library, dict) or not isinstance(library.get("library"), str):
                raise _fail(path, f"{key}.library", "each library needs a name")
            functions = library.get("module_functions") or []
            if not _dotted_names(functions):
                raise _fail(path, f"{key}.module_functions", "must be a list of dotted names like 'requests.get'")
            clients = library.get("clients") or []
            if not isinstance(clients, list) or not all(isinstance(c, dict) for c in clients):
                raise _fail(path, f"{key}.clients", "must be a list of client mappings")
            validate(path.stem, {"clients": [{**c, "methods": []} for c in clients]}, source=f"{path} ({key})")
    stem = f"user:{path.stem}"
    catalog.knowledge[stem if stem not in catalog.knowledge else f"user:{path}"] = data


def _dotted_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and QUALIFIED_NAME.match(v) for v in value)


def _check_keys(path: Path, data: dict, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise _fail(path, str(key), f"unknown key; allowed keys: {', '.join(sorted(allowed))}")


def _add_tables(catalog: Catalog, path: Path, tables: Any, *, allow_new: bool) -> list[str]:
    if tables is None:
        tables = {}
    if not isinstance(tables, dict):
        raise _fail(path, "tables", "must be a mapping of table name -> list of entries")
    names = []
    for name, entries in tables.items():
        key = f"tables.{name}"
        if not isinstance(name, str) or not TABLE_NAME.match(name):
            raise _fail(path, key, "table names are lower_snake_case")
        if not allow_new and name not in catalog.tables:
            known = ", ".join(sorted(catalog.tables))
            raise _fail(path, key, f"no such table to extend; known tables: {known}")
        if not isinstance(entries, list):
            raise _fail(path, key, "must be a list of dotted names or {name: ...} mappings")
        table = catalog.tables.setdefault(name, Table(name))
        for index, raw in enumerate(entries):
            for entry in _entries(path, f"{key}[{index}]", raw):
                if name == "library_results":
                    _check_library_result(path, f"{key}[{index}]", entry)
                table.add(entry)
        names.append(name)
    return names


def _check_library_result(path: Path, key: str, entry: TableEntry) -> None:
    """rules/common.yaml `library_results`: each entry names the library type its value is, or its elements are."""
    if entry.get("type") is None and entry.get("items") is None:
        raise _fail(path, key, "needs `type` (the library type the value is) or `items` (the type of its elements)")
    for part_of, what in (("type", "the value is"), ("items", "each element of the value is")):
        kind = entry.get(part_of)
        if kind is not None and (not isinstance(kind, str) or not all(part.isidentifier() for part in kind.split("."))):
            raise _fail(path, f"{key}.{part_of}", f"must be the dotted name of the library type {what} (pathlib.Path)")
    if not isinstance(entry.get("attribute", False), bool):
        raise _fail(path, f"{key}.attribute", "must be true (an attribute) or false (a call's result)")


def _entries(path: Path, key: str, raw: Any) -> list[TableEntry]:
    """One entry, or one per name of `{names: [a.b, a.c], ...}` (the same attributes for each)."""
    if not (isinstance(raw, dict) and "names" in raw and "name" not in raw):
        return [_entry(path, key, raw)]
    group = raw["names"]
    if not isinstance(group, list) or not group or not all(isinstance(n, str) for n in group):
        raise _fail(path, f"{key}.names", "must be a non-empty list of dotted names sharing the other keys")
    attrs = {k: v for k, v in raw.items() if k != "names"}
    return [_entry(path, f"{key}.names[{index}]", {"name": name, **attrs}) for index, name in enumerate(group)]


def _entry(path: Path, key: str, raw: Any) -> TableEntry:
    if isinstance(raw, str):
        name, attrs = raw, {}
    elif isinstance(raw, dict) and isinstance(raw.get("name"), str):
        attrs = {k: v for k, v in raw.items() if k != "name"}
        name = raw["name"]
        for k, v in attrs.items():
            if not isinstance(k, str) or not isinstance(v, (str, int, float, bool, list)):
                raise _fail(path, f"{key}.{k}", "attributes must be strings, numbers, booleans or lists")
            if isinstance(v, list) and not all(isinstance(i, (str, int, float, bool)) for i in v):
                raise _fail(path, f"{key}.{k}", "list attributes hold strings or numbers")
        attrs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()}
    else:
        raise _fail(path, key, "an entry is a dotted name, or a mapping with a 'name' (or a 'names' list) key")
    if not QUALIFIED_NAME.match(name):
        raise _fail(path, key, f"{brief(name)} is not a dotted name like 'time.sleep'")
    return TableEntry(name=name, attrs=tuple(sorted(attrs.items())))
