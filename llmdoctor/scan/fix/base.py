"""What every fixer shares: the request a finding makes, the per-pass context, and the base class.

A fixer never looks inside a rule. It gets a `FixRequest` built from a finding (its rule, its span, the
`autofix` descriptor the rule attached: `{"kind": "to_thread"}`), finds the node at that span in a freshly
parsed libcst tree, checks that the rewrite is sound there (raising `Skip` with the reason when not) and
returns a function that rewrites the node. Module-level needs (an import, a helper function) go through the
`FixContext`, which applies them once after all the pass's node rewrites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import libcst as cst
from libcst.metadata import CodeRange

from llmdoctor.report.model import Finding


class Skip(Exception):
    """This fix cannot be applied here; the message says why (shown to the user)."""


@dataclass(frozen=True)
class FixRequest:
    rule: str
    kind: str
    safety: str  # "safe" | "unsafe" (from the rule's YAML `fixes`)
    line: int  # the finding's span: 1-based lines and columns, end exclusive
    column: int
    end_line: int
    end_column: int
    params: tuple[tuple[str, Any], ...] = ()  # the descriptor's other keys (e.g. timeout's `kwarg`)
    call: str | None = None  # the finding's `call` (qualified callee), when the rule gave one

    @classmethod
    def from_finding(cls, finding: Finding, safety: str) -> FixRequest | None:
        descriptor = finding.extra.get("autofix")
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("kind"), str):
            return None
        if finding.end_line is None or finding.end_column is None:
            return None
        params = tuple(sorted((k, v) for k, v in descriptor.items() if k != "kind"))
        return cls(rule=finding.rule, kind=descriptor["kind"], safety=safety, line=finding.line,
                   column=finding.column, end_line=finding.end_line, end_column=finding.end_column,
                   params=params, call=finding.extra.get("call"))

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    def contains(self, other: FixRequest) -> bool:
        return (self.line, self.column) <= (other.line, other.column) and \
            (other.end_line, other.end_column) <= (self.end_line, self.end_column)

    def overlaps(self, other: FixRequest) -> bool:
        return (self.line, self.column) < (other.end_line, other.end_column) and \
            (other.line, other.column) < (self.end_line, self.end_column)


@dataclass(frozen=True)
class FixPolicy:
    """What the user allowed: unsafe fixes, and the timeout value LLM006's fix writes (never guessed)."""

    unsafe: bool = False
    timeout: float | None = None  # seconds (`fix-timeout`)

    def allows(self, safety: str) -> bool:
        return safety == "safe" or self.unsafe


Rewrite = Callable[[cst.CSTNode], cst.CSTNode]


@dataclass
class FixContext:
    """One pass over one module: metadata for locating and checking nodes, and module-level additions."""

    module: cst.Module
    policy: FixPolicy
    positions: dict  # node -> CodeRange
    parents: dict  # node -> parent node
    wrapper: Any = None  # the MetadataWrapper, for providers resolved on demand (scopes)
    imports: list[str] = field(default_factory=list)  # `import X` statements to add
    helpers: list[tuple[cst.CSTNode, cst.FunctionDef]] = field(default_factory=list)  # (before this statement)
    memo: dict = field(default_factory=dict)  # what fixers plan together in one pass
    _scopes: dict | None = None
    _names: set[str] | None = None
    _span_index: dict | None = None

    @classmethod
    def build(cls, module: cst.Module, policy: FixPolicy) -> FixContext:
        from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        resolved = wrapper.resolve_many([PositionProvider, ParentNodeProvider])
        return cls(module=module, policy=policy, positions=resolved[PositionProvider],
                   parents=resolved[ParentNodeProvider], wrapper=wrapper)

    # ------------------------------------------------------------------ locating

    def node_at(self, request: FixRequest, kind: type = cst.Call) -> cst.CSTNode | None:
        start = (request.line, request.column - 1)
        end = (request.end_line, request.end_column - 1)
        for node, where in self._by_span().get((start, end), ()):
            if isinstance(node, kind):
                return node
        return None

    def _by_span(self) -> dict:
        if self._span_index is None:
            index: dict = {}
            for node, where in self.positions.items():
                if isinstance(where, CodeRange):
                    key = ((where.start.line, where.start.column), (where.end.line, where.end.column))
                    index.setdefault(key, []).append((node, where))
            self._span_index = index
        return self._span_index

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def top_level_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        while True:
            parent = self.parents.get(node)
            if parent is None or isinstance(parent, cst.Module):
                return node
            node = parent

    # ------------------------------------------------------------------ names

    @property
    def scopes(self) -> dict:
        if self._scopes is None:
            from libcst.metadata import ScopeProvider

            self._scopes = self.wrapper.resolve(ScopeProvider)
        return self._scopes

    def module_name(self, module: str, at: cst.CSTNode) -> str:
        """The local name that means the module `module` at `at`: an existing module-level `import module
        [as alias]`, else `module` itself, imported by the fix (raises Skip when that name means something
        else there)."""
        scope = self.scopes.get(at)
        if scope is None:
            raise Skip("the fixer could not resolve names at this place")
        aliases = self._module_imports(module)
        for alias in aliases:
            if self._means_import(scope, alias, module):
                return alias
        local = module.split(".")[0]
        if module in self.imports and not aliases:
            return local
        if "." in module or scope[local] or aliases:
            raise Skip(f"the name `{local}` means something else here (a parameter, a local name or another "
                       f"import): rename it, or import `{module}` under a free name at the top of the module")
        self.imports.append(module)
        return local

    def _module_imports(self, module: str) -> list[str]:
        aliases = []
        for statement in self.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if _dotted(alias.name) == module:
                            aliases.append(alias.asname.name.value if alias.asname else module.split(".")[0])
        return aliases

    @staticmethod
    def _means_import(scope, name: str, module: str) -> bool:
        from libcst.metadata import GlobalScope

        assignments = scope[name]
        return bool(assignments) and all(
            isinstance(a.node, cst.Import) and isinstance(a.scope, GlobalScope)
            and any(_dotted(alias.name) == module for alias in a.node.names) for a in assignments)

    def resolves_globally(self, name: str, at: cst.CSTNode) -> bool:
        """`name` at `at` is bound only at module level (so a module-level function sees the same object)."""
        from libcst.metadata import GlobalScope

        scope = self.scopes.get(at)
        if scope is None:
            return False
        assignments = scope[name]
        return bool(assignments) and all(isinstance(a.scope, GlobalScope) for a in assignments)

    def fresh_name(self, stem: str) -> str:
        """A module-level name used nowhere in the module (nor by a helper added in this pass)."""
        if self._names is None:
            names: set[str] = set()
            _collect_names(self.module, names)
            self._names = names
        candidate, number = stem, 2
        while candidate in self._names:
            candidate, number = f"{stem}_{number}", number + 1
        self._names.add(candidate)
        return candidate

    # ------------------------------------------------------------------ module-level additions

    def add_helper(self, before: cst.CSTNode, helper: cst.FunctionDef) -> None:
        self.helpers.append((before, helper))

    def finish(self, module: cst.Module) -> cst.Module:
        """`module` (the pass's rewritten tree) with the helpers and imports this pass asked for."""
        if self.helpers:
            module = _insert_helpers(module, self.helpers, self.module)
        if self.imports:
            from libcst.codemod import CodemodContext
            from libcst.codemod.visitors import AddImportsVisitor

            context = CodemodContext()
            for name in self.imports:
                AddImportsVisitor.add_needed_import(context, name)
            module = AddImportsVisitor(context).transform_module(module)
        return module


def _insert_helpers(module: cst.Module, helpers, original: cst.Module) -> cst.Module:
    """Each helper right before the top-level statement it serves, two blank lines apart; the statement's
    comments stay on it."""
    by_index: dict[int, list[cst.FunctionDef]] = {}
    for before, helper in helpers:
        index = next(i for i, statement in enumerate(original.body) if statement is before)
        by_index.setdefault(index, []).append(helper)
    body = list(module.body)
    two = [cst.EmptyLine(), cst.EmptyLine()]
    for index in sorted(by_index, reverse=True):
        target = body[index]
        blank = _leading_blank_lines(target)
        added = [h.with_changes(leading_lines=blank if i == 0 else two) for i, h in enumerate(by_index[index])]
        target = target.with_changes(leading_lines=[*two, *target.leading_lines[len(blank):]])
        body[index:index + 1] = [*added, target]
    return module.with_changes(body=body)


def _leading_blank_lines(statement: cst.CSTNode) -> list[cst.EmptyLine]:
    lines = []
    for line in getattr(statement, "leading_lines", ()):
        if line.comment is not None:
            break
        lines.append(line)
    return lines


def _collect_names(node: cst.CSTNode, names: set[str]) -> None:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.add(current.value)
        stack.extend(current.children)


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""


class Fixer:
    """One kind of fix. Subclasses set `kind` (the YAML `fixes[].kind`) and implement `plan`."""

    kind: ClassVar[str] = ""
    priority: ClassVar[int] = 50  # lower runs first when two fixes touch the same code in one pass

    def plan(self, node: cst.CSTNode, request: FixRequest, context: FixContext) -> Rewrite:
        """Check that the fix is sound for `node` (raise Skip with the reason) and return the rewrite,
        called with the node as updated by the pass."""
        raise NotImplementedError
