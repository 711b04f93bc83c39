"""Base class of a scan rule: one small class per rule module in `llmdoctor/scan/rules/`.

A rule declares its id in `code` and implements libcst-style callbacks named after node types
(`visit_Call(node)`, `leave_FunctionDef(node)`, ...). The engine calls them during ONE visit shared by
all rules, after the shared semantic model (`self.context`) has been updated for the node (on visit)
and before it is updated (on leave, so the scope being left is still `context.scope`).
Callbacks return nothing: a rule cannot stop the traversal for the other rules.

`self.report(node, message, ...)` records a finding; its position is computed later, only for nodes
that were reported (positions are costly in libcst).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from llmdoctor.scan.prefilter import IDENTIFIER, NameIndex, identifiers

if TYPE_CHECKING:
    from llmdoctor.scan.catalog import Catalog, RuleSpec, Table
    from llmdoctor.scan.regions import Region
    from llmdoctor.scan.semantic import Scope, SemanticModel


@dataclass
class PendingFinding:
    rule: str
    node: cst.CSTNode
    statement: cst.CSTNode | None
    message: str
    severity: str
    fix: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    function: str = ""  # the project model's key of the function holding the finding ("" module level)


def frame_of(frames: list, scope: Scope | None):
    """The innermost of a rule's per-function `frames` (objects with a `.scope`) that belongs to `scope`."""
    if scope is None:
        return None
    for frame in reversed(frames):
        if frame.scope is scope:
            return frame
    return None


def root_names(names) -> set[str]:
    """The first component of each dotted name: a call to `time.sleep` can only be in a file spelling `time`."""
    return {name.split(".", 1)[0] for name in names}


class Rule:
    code: ClassVar[str] = ""  # "LLM004": must match a rules/*.yaml id

    def __init__(self, spec: RuleSpec, catalog: Catalog, context: SemanticModel,
                 sink: list[PendingFinding]) -> None:
        self.spec = spec
        self.catalog = catalog
        self.context = context
        self._sink = sink

    # ------------------------------------------------------------------ prefilter

    @classmethod
    def required_literals(cls, spec: RuleSpec, catalog: Catalog) -> frozenset[str]:
        """Strings that must ALL occur in a file for this rule to possibly fire (YAML `prefilter`)."""
        return frozenset(spec.prefilter)

    @classmethod
    def any_literals(cls, spec: RuleSpec, catalog: Catalog) -> frozenset[str]:
        """Strings of which ONE must occur: by default the root names of every entry of the rule's tables
        (an entry `time.sleep` can only match in a file that mentions `time`). Empty = no condition."""
        literals: set[str] = set()
        for name in cls.prefilter_tables(spec):
            literals |= catalog.table(name).literals()
        return frozenset(literals)

    @classmethod
    def prefilter_tables(cls, spec: RuleSpec) -> list[str]:
        """Tables whose entries the rule looks for (override to add shared knowledge tables)."""
        return list(spec.table_names)

    @classmethod
    def may_fire(cls, spec: RuleSpec, catalog: Catalog, source: str) -> bool:
        """The pre-filter: literals are matched as whole words (`os` does not match `post`)."""
        key = ("prefilter", cls.code)
        compiled = catalog.memo.get(key)
        if compiled is None:
            compiled = catalog.memo[key] = (
                [word_test([lit]) for lit in sorted(cls.required_literals(spec, catalog)) if lit],
                word_test(sorted(cls.any_literals(spec, catalog))),
            )
        required, any_of = compiled
        if not all(passes(test, source) for test in required):
            return False
        if any_of is not None and not passes(any_of, source):
            return False
        return cls.name_index(spec, catalog).may_match(source)

    @classmethod
    def name_index(cls, spec: RuleSpec, catalog: Catalog) -> NameIndex:
        """The rule's `prefilter_names`, indexed once per catalog."""
        names = catalog.memo.get(("prefilter-names", cls.code))
        if names is None:
            names = catalog.memo[("prefilter-names", cls.code)] = NameIndex(cls.prefilter_names(spec, catalog))
        return names

    # ------------------------------------------------------------------ regions (llmdoctor/scan/regions.py)

    names_are_callees: ClassVar[bool] = True  # reports calls to `prefilter_names` (not calls they only begin)

    @classmethod
    def region_may_fire(cls, spec: RuleSpec, catalog: Catalog, region: Region) -> bool:
        """Whether a def or class body with this `region` can hold a finding of this rule, or state the rule
        reads when reporting elsewhere (then override). Default: all the parts of one of `prefilter_names`
        are among the region's words and, when the rule reports calls to those names (`names_are_callees`),
        a call there can resolve to one."""
        from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

        index = cls.name_index(spec, catalog)
        if not index.may_match_words(region.words, region.text):
            return False
        return not cls.names_are_callees or region.may_call(index, sdk_knowledge(catalog).transparent)

    @classmethod
    def prefilter_names(cls, spec: RuleSpec, catalog: Catalog) -> list[str]:
        """Dotted names (wildcards allowed) of which ONE must be spelled out in a file for the rule to fire:
        by default every entry of `prefilter_tables` (see llmdoctor/scan/prefilter.py). Override when the
        rule matches names from elsewhere; return [] for no condition."""
        names: list[str] = []
        for table in cls.prefilter_tables(spec):
            names.extend(catalog.table(table).names())
        return names

    # ------------------------------------------------------------------ helpers

    def table(self, name: str) -> Table:
        return self.catalog.table(name)

    def report(self, node: cst.CSTNode, message: str, *, severity: str | None = None,
               fix: str | None = None, statement: cst.CSTNode | None = None, function: str | None = None,
               autofix: dict | None = None, **extra: Any) -> None:
        """Record a finding on `node`. `statement` / `function`: the statement and the function (its project
        model key) holding it when reporting later than its visit (e.g. from a leave_FunctionDef); by default
        the ones being visited. `autofix`: the automatic fix `node` admits, `{"kind": <one of the rule's YAML
        fixes>, ...parameters}`; the fixer (llmdoctor/scan/fix/) finds the node again by the finding's span."""
        if autofix is not None:
            extra["autofix"] = autofix
        self._sink.append(PendingFinding(
            rule=self.code, node=node, statement=statement or self.context.statement, message=message,
            severity=severity or self.spec.severity, fix=fix, extra=extra,
            function=self.context.function_key if function is None else function,
        ))


WordTest = tuple[frozenset[str], tuple[str, ...], "re.Pattern | None"]


def word_test(literals) -> WordTest | None:
    """A test that `passes` when a text holds one of `literals` as a whole word (`os` is not in `post`), or
    None for no literal. Identifier literals are looked up in the text's identifiers (a set, built once per
    text): that finds every whole-word match a regex would (and a few more: `foo` in `éfoo`), so no file is
    wrongly skipped; the others (`chat.completions.create`) go through a regex, run only when one of them
    is a substring of the text."""
    literals = [lit for lit in literals if lit]
    if not literals:
        return None
    plain = frozenset(lit for lit in literals if IDENTIFIER.fullmatch(lit))
    others = tuple(lit for lit in literals if lit not in plain)
    alternatives = "|".join(
        (r"\b" if lit[0].isalnum() or lit[0] == "_" else "") + re.escape(lit)
        + (r"\b" if lit[-1].isalnum() or lit[-1] == "_" else "")
        for lit in others
    )
    return plain, others, (re.compile(alternatives) if others else None)


def passes(test: WordTest, source: str) -> bool:
    plain, others, regex = test
    if plain and not plain.isdisjoint(identifiers(source)):
        return True
    return regex is not None and any(lit in source for lit in others) and regex.search(source) is not None
