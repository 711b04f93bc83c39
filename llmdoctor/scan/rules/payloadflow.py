"""A rule base that knows, at each point of the visit, what an expression carries and whether it runs sampled.

`PayloadFlowRule` keeps the state the batched visit builds (a subclass that overrides one of its hooks,
as LLM005 does `visit_Call`, calls `super()` first) and answers:

- `evaluate(expr)`: what `expr` carries here (payload.py: a `Source`, METADATA or None), through what each
  local name was bound to, in this def and the ones around it (a class body's names are not visible from its
  methods), the names the def passes to a model as its prompt (`prompt_arguments`), the names it tests against
  a label word, the names an `if` found empty (`if not text:`), what was appended to a list;
- `under_sampling_guard()`: the code runs under a sampling test (`random.random() < rate`, a modulo counter, a
  `*sampl*` name, `isEnabledFor`, an early `return` under one) or in a `*sampl*` def that calls no model;
- `in_branch()`: inside an `if`/`elif`/`else` body or an `except` handler; `current_block`: the innermost block;
- `imports_at_runtime(prefixes)`: the module imports one of them at module level when it runs;
- `llm_module()`: the module imports an LLM SDK or names a model API's HTTP path (payload-like names count
  everywhere, but outside such a module only in a program that calls a model: the rule marks those findings).

Knowledge: rules/sdk-logging.yaml (`self.knowledge`: payload vs metadata shapes, sampling guards) and the SDK
tables (`self.sdk`). Per-def facts come from the semantic model's one walk per def (functionfacts.py).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from llmdoctor.scan.codefacts import COLLECTING_METHODS
from llmdoctor.scan.fastwalk import code_children
from llmdoctor.scan.functionfacts import annotation_name, holds, tested_empty
from llmdoctor.scan.rule import Rule
from llmdoctor.scan.rules.payload import (
    METADATA,
    OPAQUE,
    LoggingKnowledge,
    PayloadEvaluator,
    Source,
    Value,
    calls_model,
    imported_names,
    logging_knowledge,
    prompt_arguments,
    runtime_module_imports,
    target_names,
)
from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

NUMERIC_ANNOTATIONS = frozenset({"int", "float", "bool", "complex", "datetime", "timedelta", "Decimal"})
STREAM_ATTRIBUTES = frozenset({"response"})  # a stream object has these too (openai `Stream.response`)
UNKNOWN = object()  # a local bound to something we cannot read


class PayloadFlowRule(Rule):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.knowledge: LoggingKnowledge = logging_knowledge(self.catalog)
        self.sdk = sdk_knowledge(self.catalog)
        self.evaluator = PayloadEvaluator(self.knowledge, self.sdk, self.context, self._lookup)
        self.evaluator.sampling_test = self._is_sampling_test
        self._frames: list[dict[str, Value]] = [{}]  # module, then one per enclosing def or class
        self._class_frames: set[int] = set()  # id() of the class frames: not visible from the methods
        self._functions: list[cst.FunctionDef | None] = [None]
        self._prompt_args: dict[int, dict[str, Value]] = {}  # def id -> names passed as prompts
        self._model_callers: dict[int, bool] = {}  # def id -> it calls a generation method
        self._message_fields = (self.knowledge.payload_attributes | self.knowledge.metadata_attributes) \
            - STREAM_ATTRIBUTES
        self._blocks: list[bool] = [False]  # per block: runs under a sampling guard
        self._guarded_bodies: set[int] = set()
        self._branch_bodies: set[int] = set()  # bodies of if/elif/else and except handlers
        self._branches: list[bool] = [False]  # per block: inside such a body
        self._empty_bodies: dict[int, set[str]] = {}  # body id -> names the `if` found empty
        self._empty: list[set[str]] = []
        self._block_nodes: list[cst.BaseSuite] = []
        self._late_imports: set[str] = set()
        self._imports_cache: dict[tuple[str, ...], bool] = {}
        self._runtime_imports: set[str] | None = None
        self._http_module: bool | None = None

    # ------------------------------------------------------------------ questions for the rule

    def evaluate(self, expr: cst.BaseExpression) -> Value:
        self.evaluator.beside_model = self.llm_module()
        return self.evaluator.evaluate(expr)

    def under_sampling_guard(self) -> bool:
        if any(self._blocks):
            return True
        names = self.knowledge.sample_names
        return names is not None and any(
            f is not None and names.fullmatch(f.name.value) and not self._calls_model(f) for f in self._functions)

    def in_branch(self) -> bool:
        return any(self._branches)

    @property
    def current_block(self) -> cst.BaseSuite | None:
        return self._block_nodes[-1] if self._block_nodes else None

    def imports_at_runtime(self, prefixes) -> bool:
        """Imported at module level when the program runs (not under `if TYPE_CHECKING:`, not in a function)."""
        if self._runtime_imports is None:
            self._runtime_imports = runtime_module_imports(self.context.module_scope.node)
        return _under_any(self._runtime_imports, prefixes)

    # ------------------------------------------------------------------ names

    def _lookup(self, name: str) -> object:
        if any(name in empty for empty in self._empty):
            return METADATA  # inside `if not text:` / `if is_none_or_empty(msg.content):`
        innermost = self._frames[-1]
        for frame in reversed(self._frames):
            if frame is not innermost and id(frame) in self._class_frames:
                continue  # a class body's names are not visible from its methods
            if name in frame:
                if frame[name] is not UNKNOWN:
                    return frame[name]
                break  # a local of unknown value hides an outer payload; it may still be a prompt argument
        function = self._functions[-1]
        if function is not None:
            prompts = self._prompt_args.get(id(function))
            if prompts is None:  # resolved once per def, with the scopes of this first question
                prompts = self._prompt_args[id(function)] = prompt_arguments(
                    self.context.function_facts(function), self.context, self.sdk, self.knowledge)
            if name in prompts:
                return prompts[name]
            if self.knowledge.is_payload_name(name) and name in self.context.function_facts(function).label_names:
                return METADATA  # `return "yes" in answer`: a one-word classification, not text
        return PayloadEvaluator.MISSING

    def _bind(self, names: list[str], value: Value) -> None:
        frame = self._frames[-1]
        for name in names:
            bound = value
            if isinstance(bound, Source) and bound.maybe_stream and self._read_as_message(name):
                bound = replace(bound, stream=False, maybe_stream=False)
            frame[name] = UNKNOWN if bound is None else bound  # unknown: a payload-like name may still count

    def _read_as_message(self, name: str) -> bool:
        """`resp = client.messages.create(**payload)` may be a stream (stream=True in the dict); the function
        reads `resp.usage` / `resp.content` / `getattr(resp, "stop_reason")` and never iterates it: a message."""
        function = self._functions[-1]
        if function is None:
            return False
        facts = self.context.function_facts(function)
        return facts.reads_field(name, self._message_fields) and name not in facts.iterated_names

    def _calls_model(self, function: cst.FunctionDef) -> bool:
        """The def calls a generation method: its `sampling` is the model's decoding (`sampling_loop`), not a
        sample of the log lines. Resolved once per def, with the scopes of the first question."""
        found = self._model_callers.get(id(function))
        if found is None:
            found = self._model_callers[id(function)] = calls_model(
                self.context.function_facts(function), self.context, self.sdk)
        return found

    def llm_module(self) -> bool:
        """An LLM module: it imports an LLM SDK, or calls a model over HTTP (`/v1/chat/completions`...). Elsewhere
        payload-like names count only in a program that calls a model (the project model decides)."""
        if self._http_module is None:
            source = self.context.source
            self._http_module = bool(source) and any(path in source for path in self.knowledge.http_paths)
        return self._http_module or self._imports_any(self.sdk.imports)

    def _imports_any(self, prefixes) -> bool:
        key = tuple(sorted(prefixes))
        found = self._imports_cache.get(key)
        if found is None:
            imported = {b.value for b in self.context.module_scope.bindings.values() if b.kind == "import" and b.value}
            imported |= self._late_imports
            found = _under_any(imported, prefixes)
            self._imports_cache[key] = found
        return found

    def visit_Import(self, node: cst.Import) -> None:
        self._note_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._note_import(node)

    def _note_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """An import anywhere (a def's too) counts from where it stands on."""
        names = imported_names(node)
        if names:
            self._late_imports.update(names)
            self._imports_cache.clear()

    # ------------------------------------------------------------------ scopes and assignments

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame: dict[str, Value] = {}
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            annotation = param.annotation.annotation if param.annotation else None
            if annotation is not None and annotation_name(annotation) in NUMERIC_ANNOTATIONS:
                frame[param.name.value] = METADATA  # `completion: float` is a progress ratio, not text
            else:
                frame[param.name.value] = UNKNOWN  # hides a module-level name
        self._frames.append(frame)
        self._functions.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._frames.pop()
        self._functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        frame: dict[str, Value] = {}
        self._class_frames.add(id(frame))
        self._frames.append(frame)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_frames.discard(id(self._frames.pop()))

    def leave_Assign(self, node: cst.Assign) -> None:
        self._assign([t.target for t in node.targets], node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        value = self.evaluate(node.value)
        if isinstance(value, Source) and not value.stream and isinstance(node.operator, cst.AddAssign):
            self._bind(target_names(node.target), value)  # `partial += chunk.choices[0].delta.content`

    def leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign([node.target], node.value)

    def _assign(self, targets, value_node: cst.BaseExpression) -> None:
        for target in targets:
            if isinstance(target, cst.Name):
                self._bind([target.value], self.evaluate(value_node))
            elif isinstance(target, (cst.Tuple, cst.List)):
                if isinstance(value_node, (cst.Tuple, cst.List)) and len(value_node.elements) == len(target.elements):
                    for sub, val in zip(target.elements, value_node.elements):
                        self._assign([sub.value], val.value)
                else:  # `text, _ = handle_error(e)`: a part of something unknown, whatever its name says
                    value = self.evaluate(value_node)
                    if value is None and self._given_payload(value_node):
                        self._bind(target_names(target), None)  # `answer, usage = get_answer(prompt)`: names count
                    else:
                        self._bind(target_names(target), OPAQUE if value is None else value)

    def _given_payload(self, expr: cst.BaseExpression) -> bool:
        """A call handed a prompt or completion: what it returns derives from it (`get_answer_from_llm(prompt)`)."""
        if isinstance(expr, cst.Await):
            expr = expr.expression
        if not isinstance(expr, cst.Call):
            return False
        for arg in expr.args:
            if not arg.star:
                value = self.evaluate(arg.value)
                if isinstance(value, Source) and not value.stream:
                    return True
        return False

    def visit_For(self, node: cst.For) -> None:
        self.evaluator.beside_model = self.llm_module()
        self._bind(target_names(node.target), self.evaluator.iterated(node.iter))

    def leave_For(self, node: cst.For) -> None:
        if _returns_on_success(node):
            self._branches[-1] = True  # what follows a retry loop runs once every attempt failed

    def leave_While(self, node: cst.While) -> None:
        if _returns_on_success(node):
            self._branches[-1] = True

    def leave_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._assign([node.asname.name], node.item)

    def visit_Call(self, node: cst.Call) -> None:
        """`parts.append(chunk)` / `parts.extend(...)` / `parts.insert(0, ...)` with a payload: `parts` holds
        it from here on (a list built in a loop, then logged)."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in COLLECTING_METHODS
                and isinstance(func.value, cst.Name) and node.args):
            return
        for arg in node.args:
            if arg.keyword is None and not arg.star:
                value = self.evaluate(arg.value)
                if isinstance(value, Source) and not value.stream:
                    self._bind([func.value.value], value)
                    return

    # ------------------------------------------------------------------ blocks and sampling guards

    def visit_If(self, node: cst.If) -> None:
        self._branch_bodies.add(id(node.body))
        if isinstance(node.orelse, cst.Else):
            self._branch_bodies.add(id(node.orelse.body))
        empty = tested_empty(node.test)
        if empty:
            self._empty_bodies[id(node.body)] = empty
        if not self._is_sampling_test(node.test):
            return
        self._guarded_bodies.add(id(node.body))
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
        last = body[-1] if body else None
        if node.orelse is None and isinstance(last, cst.SimpleStatementLine) and last.body and isinstance(
                last.body[-1], (cst.Return, cst.Continue, cst.Raise)):
            self._blocks[-1] = True  # `if random.random() > RATE: return` -> the rest of the block is sampled

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._branch_bodies.add(id(node.body))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._enter_block(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._leave_block(node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._enter_block(node)

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._leave_block(node)

    def _enter_block(self, node: cst.BaseSuite) -> None:
        self._block_nodes.append(node)
        self._blocks.append(id(node) in self._guarded_bodies)
        self._branches.append(id(node) in self._branch_bodies)
        self._empty.append(self._empty_bodies.get(id(node), set()))

    def _leave_block(self, node: cst.BaseSuite) -> None:
        self._block_nodes.pop()
        self._blocks.pop()
        self._branches.pop()
        self._empty.pop()

    def _is_sampling_test(self, test: cst.BaseExpression) -> bool:
        knowledge = self.knowledge
        names = knowledge.sample_names
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Name) and names is not None and names.fullmatch(node.value):
                return True
            if isinstance(node, cst.Attribute) and names is not None and names.fullmatch(node.attr.value):
                return True
            if isinstance(node, cst.Call):
                if self.context.callee_name(node) in knowledge.random_functions:
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in knowledge.enabled_checks:
                    return True
            if knowledge.modulo and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) \
                    and not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return True
            stack.extend(code_children(node))
        return False


def _returns_on_success(loop: cst.For | cst.While) -> bool:
    """A retry loop: a `try` in its body returns (the attempt worked) and handles what went wrong (`for attempt in
    range(3): try: ...; return answer / except Exception: time.sleep(1)`), so the loop ends only when every
    attempt failed; a loop with an `else:` or a `break` ends otherwise too."""
    if loop.orelse is not None or holds(loop.body, (cst.Break,)):
        return False
    statements = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    return any(isinstance(statement, cst.Try) and statement.handlers and holds(statement.body, (cst.Return,))
               for statement in statements)


def _under_any(names, prefixes) -> bool:
    """One of `names` is one of the modules `prefixes` or inside one (`openai.types` under `openai`)."""
    return any(name == p or name.startswith(p + ".") for name in names for p in prefixes)
