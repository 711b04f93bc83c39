"""LLM002: an uncached tokenizer built inside a function (`tiktoken.Encoding(...)`, `load_tiktoken_bpe`,
`AutoTokenizer.from_pretrained`, ...). tiktoken's `get_encoding` / `encoding_for_model` cache: not findings.

Decided when the function is left: a tokenizer stored somewhere that outlives the call (an attribute, a
subscript, a global, a container, a storing method) is a cache, not reported; one that is returned makes
the function a factory, per call exactly when the factory runs per call. Whether the function runs per
request is the project model's context (the YAML's `contexts:`); in unknown code only a tokenizer built and
dropped within the call (`dropped`) is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from llmdoctor.scan.fix.literals import literal_arguments
from llmdoctor.scan.rule import Rule, frame_of
from llmdoctor.scan.semantic import Scope

CONSTRUCTORS = "tokenizer_constructors"
CARRYING_BUILTINS = frozenset({"builtins.list", "builtins.tuple", "builtins.dict", "builtins.set",
                               "builtins.frozenset", "builtins.iter", "builtins.zip", "builtins.map"})


@dataclass
class _Candidate:
    call: cst.Call
    statement: cst.CSTNode | None
    callee: str
    cost: str | None
    function: str
    bound_to: str | None = None


@dataclass
class _Frame:
    scope: Scope
    candidates: list[_Candidate] = field(default_factory=list)
    stored_names: set[str] = field(default_factory=set)  # kept beyond the call (a cache)
    stored_calls: set[int] = field(default_factory=set)
    returned_names: set[str] = field(default_factory=set)  # handed to the caller (a factory)
    returned_calls: set[int] = field(default_factory=set)


class TokenizerPerCall(Rule):
    code = "LLM002"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._frames: list[_Frame] = []
        self._open: list[int] = []  # candidate calls being visited (to skip nested ones)
        self._assigned_to: dict[int, str] = {}  # id(call) -> local name it is assigned to
        self._storing = self.table("storing_methods")

    # -------------------------------------------------------------- function frames

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.append(_Frame(self.context.scope))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._finish(self._frames.pop())

    def visit_Lambda(self, node: cst.Lambda) -> None:
        frame = _Frame(self.context.scope)
        self._frames.append(frame)
        self._escape(node.body, frame, top=True, returned=True)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._finish(self._frames.pop())

    # -------------------------------------------------------------- what escapes

    def visit_Assign(self, node: cst.Assign) -> None:
        self._note_assignment([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._note_assignment([node.target], node.value)

    def _note_assignment(self, targets, value) -> None:
        if not self._frames:
            return
        frame = self._frames[-1]
        stored = False
        for target in targets:
            if isinstance(target, cst.Name):
                if target.value in frame.scope.global_names:
                    stored = True
                elif isinstance(value, cst.Call):
                    self._assigned_to[id(value)] = target.value
            else:  # self.x = ..., cache[k] = ..., a, b = ...
                stored = True
        if stored:
            self._escape(value, frame, top=True)

    def visit_Return(self, node: cst.Return) -> None:
        if self._frames and node.value is not None:
            self._escape(node.value, self._frames[-1], top=True, returned=True)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._frames and isinstance(node.value, cst.BaseExpression):
            self._escape(node.value, self._frames[-1], top=True, returned=True)

    def _escape(self, expr: cst.CSTNode, frame: _Frame, top: bool, returned: bool = False) -> None:
        """Mark the names and calls whose VALUE flows out through `expr` (not the ones only used in it):
        to the caller (`returned`) or into something that outlives the call."""
        names = frame.returned_names if returned else frame.stored_names
        calls = frame.returned_calls if returned else frame.stored_calls
        if isinstance(expr, cst.Name):
            names.add(expr.value)
        elif isinstance(expr, cst.Call):
            calls.add(id(expr))
            callee = self.context.callee_name(expr) or ""
            if callee.startswith("builtins.") and callee not in CARRYING_BUILTINS:
                return  # len(tok), str(tok), isinstance(tok, ...): the value does not flow out
            for arg in expr.args:  # a wrapper built around the tokenizer carries it out too
                self._escape(arg.value, frame, top=False, returned=returned)
        elif isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            for element in expr.elements:
                self._escape(element.value, frame, top=False, returned=returned)
        elif isinstance(expr, cst.Dict):
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    self._escape(element.value, frame, top=False, returned=returned)
        elif isinstance(expr, (cst.IfExp, cst.BooleanOperation)):
            parts = (expr.body, expr.orelse) if isinstance(expr, cst.IfExp) else (expr.left, expr.right)
            for part in parts:
                self._escape(part, frame, top=False, returned=returned)
        elif isinstance(expr, cst.Await):
            self._escape(expr.expression, frame, top=False, returned=returned)
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            # Wrapper(enc._pat_str), self.__dict__ = enc.__dict__: state of the tokenizer flows out
            self._escape(expr.value, frame, top=False, returned=returned)

    # -------------------------------------------------------------- candidates

    def visit_Call(self, node: cst.Call) -> None:
        frame = self._frame_executing(node)
        if frame is None:
            return
        func = node.func
        callee = self.context.callee_name(node)
        storing = isinstance(func, cst.Attribute) and func.attr.value in self._storing
        if storing or callee == "builtins.setattr":
            for arg in node.args:  # registry.add(tok), cache.setdefault(k, tok), setattr(self, "t", tok)
                self._escape(arg.value, frame, top=False)
        if callee is None:
            return
        entry = self.table(CONSTRUCTORS).match(callee)
        if entry is None:
            return
        self._open.append(id(node))
        if len(self._open) > 1:  # Encoding(**cl100k_base()): one tokenizer, reported once (outermost)
            return
        frame.candidates.append(_Candidate(
            call=node, statement=self.context.statement, callee=callee, cost=entry.get("cost"),
            function=self.context.function_key, bound_to=self._assigned_to.get(id(node)),
        ))

    def _frame_executing(self, node: cst.Call) -> _Frame | None:
        """The frame of the function that evaluates `node` (a default value belongs to the outer one)."""
        return frame_of(self._frames, self.context.executing_function(node))

    def leave_Call(self, node: cst.Call) -> None:
        if self._open and self._open[-1] == id(node):
            self._open.pop()

    def _finish(self, frame: _Frame) -> None:
        for candidate in frame.candidates:
            bound = candidate.bound_to
            if id(candidate.call) in frame.stored_calls or (bound is not None and (
                    bound in frame.stored_names or bound in frame.scope.global_names)):
                continue
            returned = id(candidate.call) in frame.returned_calls or (
                bound is not None and bound in frame.returned_names)
            self._report(candidate, frame.scope, returned)

    def _report(self, candidate: _Candidate, scope: Scope, returned: bool) -> None:
        shown = candidate.callee
        where = "a lambda" if scope.kind == "lambda" else f"`{scope.name}`"
        cost = f": {candidate.cost}" if candidate.cost else ""
        if returned:
            message = f"`{shown}()` builds a new tokenizer each time {where} runs, and hands it to the caller{cost}"
        else:
            message = f"`{shown}()` builds a tokenizer on every call of {where}{cost}"
        self.report(
            candidate.call, message, statement=candidate.statement, function=candidate.function,
            fix="build it once: at module level, in __init__, or in a functools.cache'd factory",
            # one shared instance only where the tokenizer is not handed out (callers may change theirs)
            autofix={"kind": "cache_tokenizer"} if literal_arguments(candidate.call) and not returned else None,
            call=shown, dropped=not returned,
        )
