"""Base class of a scan rule: one small class per rule module in `llmdoctor/scan/rules/`.

A rule declares its id in `code` and implements libcst-style callbacks named after node types
(`visit_Call(node)`, `leave_FunctionDef(node)`, ...). The engine calls them during ONE visit shared by
all rules, after the shared semantic model (`self.context`) has been updated for the node (on visit)
and before it is updated (on leave, so the scope being left is still `context.scope`).
Callbacks return nothing: a rule cannot stop the traversal for the other rules.

`self.report(node, message, ...)` records a finding; its position is computed later, only for nodes
that were reported (positions are costly in libcst).

Which files and bodies a rule can fire in is not code: its YAML `prefilter:` says it, and the engine derives
the text pre-filter, its second stage and the bodies libcst parses from it (prefilter.py `gate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

if TYPE_CHECKING:
    from llmdoctor.scan.catalog import Catalog, RuleSpec, Table
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


class Rule:
    code: ClassVar[str] = ""  # "LLM004": must match a rules/*.yaml id

    def __init__(self, spec: RuleSpec, catalog: Catalog, context: SemanticModel,
                 sink: list[PendingFinding]) -> None:
        self.spec = spec
        self.catalog = catalog
        self.context = context
        self._sink = sink

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
