"""The batched visitor: one libcst traversal drives the semantic model and every active rule."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.fastwalk import walk
from llmdoctor.scan.rule import PendingFinding
from llmdoctor.scan.semantic import LOCAL, Binding, SemanticModel

OFFLOAD_TABLE = "offload_calls"

_STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# every type on_visit / on_leave below react to (keep in sync): other nodes are walked through silently
_MODEL_TYPES = (*_STATEMENT_TYPES, cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Await, cst.Call, cst.For,
                cst.Assign, cst.AnnAssign, cst.NamedExpr, cst.WithItem, cst.Import, cst.ImportFrom,
                cst.ExceptHandler)


class BatchedVisitor(cst.CSTVisitor):
    def __init__(self, context: SemanticModel, rules: list) -> None:
        super().__init__()
        self.context = context
        self._visit: dict[str, list] = {}
        self._leave: dict[str, list] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self._visit.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self._leave.setdefault(attr[6:], []).append(getattr(rule, attr))

    def handles(self, node_type: type) -> bool:
        """Whether on_visit / on_leave do anything for nodes of this type (a rule callback or the model)."""
        name = node_type.__name__
        return issubclass(node_type, _MODEL_TYPES) or name in self._visit or name in self._leave

    def on_visit(self, node: cst.CSTNode) -> bool:
        context = self.context
        if isinstance(node, _STATEMENT_TYPES):
            context.statements.append(node)
        if isinstance(node, cst.FunctionDef):
            context.enter_function(node)
        elif isinstance(node, cst.Lambda):
            context.enter_lambda(node)
        elif isinstance(node, cst.ClassDef):
            context.enter_class(node)
        elif isinstance(node, cst.Await):
            context.note_await(node)
        elif isinstance(node, cst.Call):
            context.note_call(node)
        elif isinstance(node, cst.For):
            context.bind_targets([node.target], None)
        callbacks = self._visit.get(type(node).__name__)
        if callbacks:
            for callback in callbacks:
                callback(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        callbacks = self._leave.get(type(original_node).__name__)
        if callbacks:
            for callback in callbacks:
                callback(original_node)
        context = self.context
        node = original_node
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            context.leave_scope()
        elif isinstance(node, cst.Assign):
            context.bind_targets([t.target for t in node.targets], node.value)
        elif isinstance(node, cst.AnnAssign):
            context.bind_targets([node.target], node.value)
        elif isinstance(node, cst.NamedExpr):
            context.bind_targets([node.target], node.value)
        elif isinstance(node, cst.WithItem):
            if node.asname is not None:
                context.bind_targets([node.asname.name], node.item)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            context.bind_imports(node)
        elif isinstance(node, cst.ExceptHandler):
            if node.name is not None and isinstance(node.name.name, cst.Name):
                context.bind(node.name.name.value, Binding(LOCAL))
        if isinstance(node, _STATEMENT_TYPES):
            context.statements.pop()


def run_rules(module: cst.Module, active, catalog, offload_methods) -> list[PendingFinding]:
    """Visit `module` once with every (rule class, spec) in `active`; return what they reported."""
    context = SemanticModel(catalog.table(OFFLOAD_TABLE), offload_methods)
    context.start_module(module)
    sink: list[PendingFinding] = []
    rules = [cls(spec, catalog, context, sink) for cls, spec in active]
    visitor = BatchedVisitor(context, rules)
    # libcst's module.visit() would rebuild every node; walk() reads the same nodes in the same order
    walk(module, visitor.on_visit, visitor.on_leave, wanted=(*visitor._visit, *visitor._leave),
         handles=visitor.handles)
    return sink
