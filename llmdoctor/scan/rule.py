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

from llmdoctor.scan.prefilter import NameIndex

if TYPE_CHECKING:
    from llmdoctor.scan.catalog import Catalog, RuleSpec, Table
    from llmdoctor.scan.regions import Region
    from llmdoctor.scan.semantic import SemanticModel


@dataclass
class PendingFinding:
    rule: str
    node: cst.CSTNode
    statement: cst.CSTNode | None
    message: str
    severity: str
    fix: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
                [_word_regex([lit]) for lit in sorted(cls.required_literals(spec, catalog))],
                _word_regex(sorted(cls.any_literals(spec, catalog))),
            )
        required, any_of = compiled
        if not all(regex.search(source) for regex in required):
            return False
        if any_of is not None and any_of.search(source) is None:
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

    follows_calls: ClassVar[bool] = False  # reads which module-level functions call which (a run-once graph)

    @classmethod
    def region_may_fire(cls, spec: RuleSpec, catalog: Catalog, region: Region) -> bool:
        """Whether a def or class body with this `region` can hold a finding of this rule, or state the rule
        reads when reporting elsewhere (then override). Default: one of `prefilter_names` can resolve there,
        i.e. all its parts are among the region's words."""
        return cls.name_index(spec, catalog).may_match_words(region.words, region.text)

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
               fix: str | None = None, statement: cst.CSTNode | None = None, **extra: Any) -> None:
        """Record a finding on `node`. `statement`: the statement holding it when reporting later than
        its visit (e.g. from a leave_FunctionDef); by default the statement being visited."""
        self._sink.append(PendingFinding(
            rule=self.code, node=node, statement=statement or self.context.statement, message=message,
            severity=severity or self.spec.severity, fix=fix, extra=extra,
        ))


def _word_regex(literals) -> re.Pattern | None:
    literals = [lit for lit in literals if lit]
    if not literals:
        return None
    alternatives = "|".join(
        (r"\b" if lit[0].isalnum() or lit[0] == "_" else "") + re.escape(lit)
        + (r"\b" if lit[-1].isalnum() or lit[-1] == "_" else "")
        for lit in literals
    )
    return re.compile(alternatives)
