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
                cst.ExceptHandler, cst.Global, cst.Nonlocal)


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
        kind = type(node)
        plan = _PLANS.get(kind)
        if plan is None:
            plan = _plan(kind)
        context = self.context
        if plan[0]:
            context.statements.append(node)
        if plan[1] is not None:
            plan[1](context, node)
        callbacks = self._visit.get(kind.__name__)
        if callbacks:
            for callback in callbacks:
                callback(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        callbacks = self._leave.get(kind.__name__)
        if callbacks:
            for callback in callbacks:
                callback(original_node)
        plan = _PLANS.get(kind)
        if plan is None:
            plan = _plan(kind)
        if plan[2] is not None:
            plan[2](self.context, original_node)
        if plan[0]:
            self.context.statements.pop()


# What the model does per node type, decided once per type (isinstance on libcst's abstract base classes
# goes through ABCMeta.__instancecheck__, which was ~4.5 M calls on the LiteLLM corpus):
# (is a statement, on visit, on leave).
def _bind_for(context: SemanticModel, node: cst.For) -> None:
    context.bind_targets([node.target], None)


def _bind_assign(context: SemanticModel, node: cst.Assign) -> None:
    context.bind_targets([t.target for t in node.targets], node.value)


def _bind_single(context: SemanticModel, node: cst.AnnAssign | cst.NamedExpr) -> None:
    context.bind_targets([node.target], node.value)


def _bind_with_item(context: SemanticModel, node: cst.WithItem) -> None:
    if node.asname is not None:
        context.bind_targets([node.asname.name], node.item)


def _bind_except(context: SemanticModel, node: cst.ExceptHandler) -> None:
    if node.name is not None and isinstance(node.name.name, cst.Name):
        context.bind(node.name.name.value, Binding(LOCAL))


_VISIT_ACTIONS = (
    (cst.FunctionDef, SemanticModel.enter_function), (cst.Lambda, SemanticModel.enter_lambda),
    (cst.ClassDef, SemanticModel.enter_class), (cst.Await, SemanticModel.note_await),
    (cst.Call, SemanticModel.note_call), (cst.For, _bind_for),
    ((cst.Global, cst.Nonlocal), SemanticModel.note_global),
)
_LEAVE_ACTIONS = (
    ((cst.FunctionDef, cst.Lambda, cst.ClassDef), lambda context, node: context.leave_scope()),
    (cst.Assign, _bind_assign), (cst.AnnAssign, _bind_single), (cst.NamedExpr, _bind_single),
    (cst.WithItem, _bind_with_item), ((cst.Import, cst.ImportFrom), SemanticModel.bind_imports),
    (cst.ExceptHandler, _bind_except),
)
_PLANS: dict[type, tuple] = {}


def _plan(kind: type) -> tuple:
    on_visit = next((action for types, action in _VISIT_ACTIONS if issubclass(kind, types)), None)
    on_leave = next((action for types, action in _LEAVE_ACTIONS if issubclass(kind, types)), None)
    plan = _PLANS[kind] = (issubclass(kind, _STATEMENT_TYPES), on_visit, on_leave)
    return plan


def run_rules(module: cst.Module, active, catalog, offload_methods, source: str = "") -> list[PendingFinding]:
    """Visit `module` once with every (rule class, spec) in `active`; return what they reported. `source`: the
    file as written (rules that look for literals anywhere in it, even in bodies left out of the parse)."""
    context = SemanticModel(catalog.table(OFFLOAD_TABLE), offload_methods)
    context.source = source
    context.start_module(module)
    sink: list[PendingFinding] = []
    rules = [cls(spec, catalog, context, sink) for cls, spec in active]
    visitor = BatchedVisitor(context, rules)
    # libcst's module.visit() would rebuild every node; walk() reads the same nodes in the same order
    walk(module, visitor.on_visit, visitor.on_leave, wanted=(*visitor._visit, *visitor._leave),
         handles=visitor.handles)
    for rule in rules:  # a rule's state may hold its own bound methods (a cycle that would keep the tree alive)
        vars(rule).clear()
    return sink
