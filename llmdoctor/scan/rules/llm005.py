"""LLM005: prompts or completions logged at INFO or above on every call, unsampled.

Knowledge: rules/sdk-logging.yaml (sinks, payload vs metadata, sampling guards) and the SDK tables
(generation calls, their payload_kwargs, `imports`); see docs/sdk-knowledge.md. Payload tracking is in
payload.py; this module keeps the per-function state (what each local name holds, which names were passed
to a generation call as the prompt, which blocks run under a sampling guard) and decides what a sink is.
"""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from llmdoctor.scan.fastwalk import code_children
from llmdoctor.scan.rule import Rule
from llmdoctor.scan.rules.payload import (
    LEVELS,
    METADATA,
    OPAQUE,
    LoggingKnowledge,
    PayloadEvaluator,
    Source,
    Value,
    dotted,
    generation_method,
    logging_knowledge,
    payload_arguments,
    runtime_module_imports,
    shown_call,
    target_names,
)
from llmdoctor.scan.rules.sdk_knowledge import sdk_knowledge

NOT_LOGGED_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel", "file", "sep", "end", "flush"})
COLLECTING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add"})
NUMERIC_ANNOTATIONS = frozenset({"int", "float", "bool", "complex", "datetime", "timedelta", "Decimal"})
CONSOLE_PROMPTS = frozenset({"builtins.input", "getpass.getpass", "click.prompt", "typer.prompt",
                             "rich.prompt.Prompt.ask"})
FIRST_WORD = re.compile(r"[\s\W_]*([A-Za-z]+)")
WORD_MAX = 12  # `"yes"`, `"relevant"`, `"irrelevant"`: a label word, not a phrase
NORMALISING_METHODS = frozenset({"strip", "lower", "upper", "casefold", "lstrip", "rstrip", "title"})
STREAM_ATTRIBUTES = frozenset({"response"})  # a stream object has these too (openai `Stream.response`)
UNKNOWN = object()  # a local bound to something we cannot read
LEVEL_NAMES = {number: name for name, number in LEVELS.items()}


class UnsampledPayloadLogging(Rule):
    code = "LLM005"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sinks: LoggingKnowledge = logging_knowledge(self.catalog)
        self.sdk = sdk_knowledge(self.catalog)
        self._frames: list[dict[str, Value]] = [{}]  # module, then one per enclosing def or class
        self._class_frames: set[int] = set()  # id() of the class frames: not visible from the methods
        self._functions: list[cst.FunctionDef | None] = [None]
        self._prompt_args: dict[int, dict[str, Value]] = {}  # def id -> names passed as prompts
        self._blocks: list[bool] = [False]  # per block: runs under a sampling guard
        self._guarded_bodies: set[int] = set()
        self._branch_bodies: set[int] = set()  # bodies of if/elif/else and except handlers
        self._branches: list[bool] = [False]  # per block: inside such a body
        self._empty_bodies: dict[int, set[str]] = {}  # body id -> names the `if` found empty
        self._empty: list[set[str]] = []
        self._late_imports: set[str] = set()
        self._imports_cache: dict[tuple[str, ...], bool] = {}
        self._runtime_imports: set[str] | None = None
        self._http_module: bool | None = None
        self._message_reads: dict[tuple[int, str], bool] = {}
        self._model_callers: dict[int, bool] = {}
        self._labels: dict[int, set[str]] = {}
        self._block_nodes: list[cst.BaseSuite] = []
        self.evaluator = PayloadEvaluator(self.sinks, self.sdk, self.context, self._lookup, names_apply=False)

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
            prompts = self._prompts_of(function)
            if name in prompts:
                return prompts[name]
            if self.sinks.is_payload_name(name) and name in self._labels_of(function):
                return METADATA  # `return "yes" in answer`: a one-word classification, not text
        return PayloadEvaluator.MISSING

    def _labels_of(self, function: cst.FunctionDef) -> set[str]:
        """Names the function tests against a one-word literal (`"yes" in answer`, `verdict == "relevant"`,
        `answer.lower().startswith("no")`, `label in ("a", "b")`): the model was asked for a label."""
        found = self._labels.get(id(function))
        if found is None:
            found = self._labels[id(function)] = set()
            stack: list[cst.CSTNode] = [function.body]
            while stack:
                node = stack.pop()
                if isinstance(node, cst.Comparison):
                    left = node.left
                    for target in node.comparisons:
                        right = target.comparator
                        if isinstance(target.operator, (cst.In, cst.NotIn)):
                            if _word(left):
                                found.update(_tested_name(right))
                            elif isinstance(right, (cst.Tuple, cst.List, cst.Set)) and right.elements and all(
                                    _word(el.value) for el in right.elements):
                                found.update(_tested_name(left))
                        elif isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                            if _word(right):
                                found.update(_tested_name(left))
                            elif _word(left):
                                found.update(_tested_name(right))
                        left = right
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                        and node.func.attr.value in ("startswith", "endswith") and node.args \
                        and _word(node.args[0].value):
                    found.update(_tested_name(node.func.value))
                stack.extend(code_children(node))
        return found

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
        key = (id(function), name)
        found = self._message_reads.get(key)
        if found is None:
            fields = (self.sinks.payload_attributes | self.sinks.metadata_attributes) - STREAM_ATTRIBUTES
            read = iterated = False
            stack: list[cst.CSTNode] = [function.body]
            while stack:
                node = stack.pop()
                if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.iter, cst.Name) \
                        and node.iter.value == name:
                    iterated = True
                else:
                    read = read or _reads_field(node, name, fields)
                stack.extend(code_children(node))
            found = self._message_reads[key] = read and not iterated
        return found

    def _prompts_of(self, function: cst.FunctionDef) -> dict[str, Value]:
        """Names this function passes to a generation call as its prompt (`messages=msgs`), in any order;
        names it passes to `input()` are a terminal prompt (METADATA)."""
        found = self._prompt_args.get(id(function))
        if found is None:
            found = self._prompt_args[id(function)] = {}
            assigned: dict[str, list[cst.BaseExpression]] = {}
            consoles: set[str] = set()
            pending: list[tuple[str, Source]] = []
            stack: list[cst.CSTNode] = [function.body]
            while stack:
                node = stack.pop()
                if isinstance(node, cst.Call):
                    callee = self.context.callee_name(node)
                    if callee in CONSOLE_PROMPTS and node.args and isinstance(node.args[0].value, cst.Name):
                        consoles.add(node.args[0].value.value)  # `input(prompt)`: a terminal prompt like "> "
                    method = generation_method(self.sdk, callee, node)
                    if method is not None:
                        arguments = payload_arguments(node, method, self.sinks)
                        for keyword, value in arguments:
                            what = Source(f"the prompt passed as `{keyword}=` to `{shown_call(node)}()`")
                            pending += [(name, what) for name in self._prompt_parts(value)]
                        if not arguments:  # `create(**payload)`: the prompt can only be in the dict
                            for arg in node.args:
                                if arg.star == "**" and isinstance(arg.value, cst.Name):
                                    what = Source(f"the request passed as `**{arg.value.value}` to "
                                                  f"`{shown_call(node)}()`, which holds its prompt")
                                    pending.append((arg.value.value, what))
                elif isinstance(node, cst.Assign):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            assigned.setdefault(target.target.value, []).append(node.value)
                stack.extend(code_children(node))
            while pending:  # `msgs = history + [{"content": question}]; create(messages=msgs)`: question too
                name, what = pending.pop()
                if name not in found:
                    found[name] = what
                    pending += [(part, what) for value in assigned.get(name, ()) for part in self._prompt_parts(value)]
            for name in consoles - found.keys():
                found[name] = METADATA
        return found

    def _prompt_parts(self, value: cst.BaseExpression) -> list[str]:
        """Local names whose text goes into a prompt argument: `msgs`, `[{"content": question}]`, `h + [..]`."""
        if isinstance(value, cst.Name):
            return [value.value]
        if isinstance(value, (cst.List, cst.Tuple)):
            return [n for el in value.elements for n in self._prompt_parts(el.value)]
        if isinstance(value, cst.Dict):
            names = []
            for el in value.elements:
                key = el.key.evaluated_value if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) else None
                if key in self.sinks.metadata_attributes:
                    continue  # {"role": role}
                names += self._prompt_parts(el.value)
            return names
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            return self._prompt_parts(value.left) + self._prompt_parts(value.right)
        if isinstance(value, cst.FormattedString):
            return [n for part in value.parts if isinstance(part, cst.FormattedStringExpression)
                    for n in self._prompt_parts(part.expression)]
        return []

    def _imports_any(self, prefixes) -> bool:
        key = tuple(sorted(prefixes))
        found = self._imports_cache.get(key)
        if found is None:
            imported = {b.value for b in self.context.module_scope.bindings.values() if b.kind == "import" and b.value}
            imported |= self._late_imports
            found = any(name == p or name.startswith(p + ".") for name in imported for p in prefixes)
            self._imports_cache[key] = found
        return found

    def _runtime_imports_any(self, prefixes) -> bool:
        """Imported at module level when the program runs (not under `if TYPE_CHECKING:`, not in a function)."""
        if self._runtime_imports is None:
            self._runtime_imports = runtime_module_imports(self.context.module_scope.node)
        return any(name == p or name.startswith(p + ".") for name in self._runtime_imports for p in prefixes)

    def _note_import(self, names: list[str]) -> None:
        self._late_imports.update(names)
        self._imports_cache.clear()

    def visit_Import(self, node: cst.Import) -> None:
        self._note_import([dotted(alias.name) for alias in node.names])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            module = dotted(node.module)
            names = [module]
            if not isinstance(node.names, cst.ImportStar):
                names += [f"{module}.{alias.name.value}" for alias in node.names if isinstance(alias.name, cst.Name)]
            self._note_import(names)

    # ------------------------------------------------------------------ scopes and assignments

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        frame: dict[str, Value] = {}
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            annotation = param.annotation.annotation if param.annotation else None
            if annotation is not None and _annotation_name(annotation) in NUMERIC_ANNOTATIONS:
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
        value = self._evaluate(node.value)
        if isinstance(value, Source) and not value.stream and isinstance(node.operator, cst.AddAssign):
            self._bind(target_names(node.target), value)  # `partial += chunk.choices[0].delta.content`

    def leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign([node.target], node.value)

    def _assign(self, targets, value_node: cst.BaseExpression) -> None:
        for target in targets:
            if isinstance(target, cst.Name):
                self._bind([target.value], self._evaluate(value_node))
            elif isinstance(target, (cst.Tuple, cst.List)):
                if isinstance(value_node, (cst.Tuple, cst.List)) and len(value_node.elements) == len(target.elements):
                    for sub, val in zip(target.elements, value_node.elements):
                        self._assign([sub.value], val.value)
                else:  # `text, _ = handle_error(e)`: a part of something unknown, whatever its name says
                    value = self._evaluate(value_node)
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
                value = self._evaluate(arg.value)
                if isinstance(value, Source) and not value.stream:
                    return True
        return False

    def visit_For(self, node: cst.For) -> None:
        self._bind(target_names(node.target), self._iterated(node.iter))

    def leave_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._assign([node.asname.name], node.item)

    def _evaluate(self, expr: cst.BaseExpression) -> Value:
        self.evaluator.names_apply = self._sdk_module()
        return self.evaluator.evaluate(expr)

    def _iterated(self, expr: cst.BaseExpression) -> Value:
        self.evaluator.names_apply = self._sdk_module()
        return self.evaluator.iterated(expr)

    def _sdk_module(self) -> bool:
        """An LLM module: it imports an LLM SDK, or calls a model over HTTP (`/v1/chat/completions`...)."""
        if self._http_module is None:
            source = self.context.source
            self._http_module = bool(source) and any(path in source for path in self.sinks.http_paths)
        return self._http_module or self._imports_any(self.sdk.imports)

    # ------------------------------------------------------------------ sampling guards

    def visit_If(self, node: cst.If) -> None:
        self._branch_bodies.add(id(node.body))
        if isinstance(node.orelse, cst.Else):
            self._branch_bodies.add(id(node.orelse.body))
        empty = _tested_empty(node.test)
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

    def _guarded(self) -> bool:
        if any(self._blocks):
            return True
        names = self.sinks.sample_names
        return names is not None and any(
            f is not None and names.fullmatch(f.name.value) and not self._calls_model(f) for f in self._functions)

    def _calls_model(self, function: cst.FunctionDef) -> bool:
        """The function calls a generation method: its `sampling` is the model's decoding (`sampling_loop`),
        not a sample of the log lines."""
        found = self._model_callers.get(id(function))
        if found is None:
            found = False
            stack: list[cst.CSTNode] = [function.body]
            while stack and not found:
                node = stack.pop()
                if isinstance(node, cst.Call) and generation_method(
                        self.sdk, self.context.callee_name(node), node) is not None:
                    found = True
                stack.extend(code_children(node))
            self._model_callers[id(function)] = found
        return found

    def _is_sampling_test(self, test: cst.BaseExpression) -> bool:
        sinks = self.sinks
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Name) and sinks.sample_names is not None and sinks.sample_names.fullmatch(node.value):
                return True
            if isinstance(node, cst.Attribute) and sinks.sample_names is not None and sinks.sample_names.fullmatch(node.attr.value):
                return True
            if isinstance(node, cst.Call):
                if self.context.callee_name(node) in sinks.random_functions:
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in sinks.enabled_checks:
                    return True
            if sinks.modulo and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo) \
                    and not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                return True
            stack.extend(code_children(node))
        return False

    # ------------------------------------------------------------------ sinks

    def visit_Call(self, node: cst.Call) -> None:
        self._note_collected(node)
        sink = self._sink_of(node)
        if sink is None:
            return
        shown, level, skip_first = sink
        if level < self.sinks.min_level or self._guarded():
            return
        if level >= self.sinks.error_path_level and any(self._branches):
            return  # `if not reply: logger.warning(...); raise`: logged when something went wrong
        args = [arg for arg in node.args if not arg.star
                and not (arg.keyword is not None and arg.keyword.value in NOT_LOGGED_KEYWORDS)]
        if skip_first and args and args[0].keyword is None:
            args = args[1:]
        for arg in args:
            value = self._evaluate(arg.value)
            if isinstance(value, Source) and not value.stream:
                self._report(node, shown, level, arg.value, value)
                return

    def _note_collected(self, node: cst.Call) -> None:
        """`parts.append(chunk)` / `parts.extend(...)` / `parts.insert(0, ...)` with a payload: `parts` holds
        it from here on (a list built in a loop, then logged)."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in COLLECTING_METHODS
                and isinstance(func.value, cst.Name) and node.args):
            return
        for arg in node.args:
            if arg.keyword is None and not arg.star:
                value = self._evaluate(arg.value)
                if isinstance(value, Source) and not value.stream:
                    self._bind([func.value.value], value)
                    return

    def _report(self, node: cst.Call, shown: str, level: int, expr: cst.BaseExpression, source: Source) -> None:
        text = " ".join(cst.Module([]).code_for_node(source.node or expr).split())
        if len(text) > 60:
            text = text[:57] + "..."
        level_name = LEVEL_NAMES.get(level, str(level))
        self.report(
            node,
            f"`{shown}()` logs `{text}` at {level_name}, unsampled: it carries {source.what}. Prompts and "
            "completions copy user data into every log sink, ~16 kB per line for a 4,000-token prompt",
            fix="log metadata instead (`len(...)`, ids, `.usage` token counts, latency); log the text only under "
                "a sampling guard (`if random.random() < SAMPLE_RATE:`) or redacted",
            sink=shown,
            level=level_name,
            payload=text,
        )

    def _sink_of(self, node: cst.Call) -> tuple[str, int, bool] | None:
        """(shown name, level, level is the first argument) of a logging call at a known level, else None."""
        sinks = self.sinks
        func = node.func
        callee = self.context.callee_name(node)
        if callee is not None:
            if callee == "builtins.print":
                if "print" in sinks.functions and self._runtime_imports_any(sinks.print_modules):
                    return "print", self._print_level() or sinks.functions["print"] or LEVELS["INFO"], False
                return None
            if callee in sinks.functions:
                return self._leveled(callee, sinks.functions[callee], node)
            owner, _, method = callee.rpartition(".")
            if method in sinks.logger_methods and (
                    owner in sinks.logger_factories or owner in sinks.logger_objects
                    or (isinstance(func, cst.Attribute) and sinks.is_logger_name(owner.rpartition(".")[2]))):
                return self._leveled(_shown(func, callee), sinks.logger_methods[method], node)  # `from app.log import logger`
            return None
        if not isinstance(func, cst.Attribute) or func.attr.value not in sinks.logger_methods:
            return None
        receiver = func.value
        name = receiver.value if isinstance(receiver, cst.Name) else (
            receiver.attr.value if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)
            and receiver.value.value in ("self", "cls") else None)
        if name is not None and sinks.is_logger_name(name):
            return self._leveled(_shown(func, callee), sinks.logger_methods[func.attr.value], node)
        return None

    def _print_level(self) -> int | None:
        """The level a block's prints announce (`print("ERROR. NO CHUNKS SENT. TRYING AGAIN.")`, then
        `print("Messages:", messages)`): the first word of a print's literal, in this block up to this line."""
        words = self.sinks.print_level_words
        block = self._block_nodes[-1] if self._block_nodes else None
        if not words or not isinstance(block, cst.IndentedBlock):
            return None
        statements = self.context.statements
        for statement in block.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    call = small.value if isinstance(small, cst.Expr) else None
                    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "print" \
                            and call.args and call.args[0].keyword is None:
                        word = _first_word(call.args[0].value)
                        if word in words:
                            return words[word]
            if any(statement is current for current in statements):
                break
        return None

    def _leveled(self, shown: str, level: int | None, node: cst.Call) -> tuple[str, int, bool] | None:
        if level is not None:
            return shown, level, False
        first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if first is None:
            return None
        if isinstance(first.value, cst.Integer):
            return shown, int(first.value.value, 0), True
        constant = self.context.qualified_name(first.value)
        if constant in self.sinks.level_constants:
            return shown, self.sinks.level_constants[constant], True
        return None  # a level we cannot read: no guess


def _shown(func: cst.BaseExpression, callee: str | None) -> str:
    from llmdoctor.scan.rules.payload import attribute_chain

    chain = attribute_chain(func)
    return ".".join(chain) if chain else (callee or "<logger>")


def _reads_field(node: cst.CSTNode, name: str, fields: frozenset) -> bool:
    """`name.usage` or `getattr(name, "usage", ...)` with a field of a complete message."""
    if isinstance(node, cst.Attribute):
        return isinstance(node.value, cst.Name) and node.value.value == name and node.attr.value in fields
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr" \
            and len(node.args) >= 2:
        owner, field = node.args[0].value, node.args[1].value
        return isinstance(owner, cst.Name) and owner.value == name and isinstance(field, cst.SimpleString) \
            and field.evaluated_value in fields
    return False


def _tested_empty(test: cst.BaseExpression) -> set[str]:
    """Root names an `if` test finds empty: `not x`, `x is None`, `x == ""`, `len(x) == 0`, `*empty*(x.content)`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _roots([test.expression])
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _tested_empty(test.left) | _tested_empty(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        empty_literal = (isinstance(target.comparator, cst.Name) and target.comparator.value == "None") or (
            isinstance(target.comparator, cst.SimpleString) and target.comparator.evaluated_value == "") or (
            isinstance(target.comparator, cst.Integer) and target.comparator.value == "0")
        if empty_literal and isinstance(target.operator, (cst.Is, cst.Equal)):
            left = test.left
            if isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "len":
                return _roots([a.value for a in left.args])
            return _roots([left])
    if isinstance(test, cst.Call):
        name = test.func.attr.value if isinstance(test.func, cst.Attribute) else (
            test.func.value if isinstance(test.func, cst.Name) else "")
        if "empty" in name.lower():
            return _roots([a.value for a in test.args])
    return set()


def _first_word(expr: cst.BaseExpression) -> str | None:
    """The first word of a string literal or f-string's text, lower case (`"ERROR. No chunks"` -> `error`)."""
    text = None
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        text = value if isinstance(value, str) else None
    elif isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[0], cst.FormattedStringText):
        text = expr.parts[0].value
    if not text:
        return None
    match = FIRST_WORD.match(text)
    return match.group(1).lower() if match else None


def _word(expr: cst.BaseExpression) -> bool:
    """A one-word string literal (`"yes"`, `"RELEVANT"`): what a model asked for a label answers."""
    if not isinstance(expr, cst.SimpleString):
        return False
    value = expr.evaluated_value
    return isinstance(value, str) and 0 < len(value) <= WORD_MAX and value.isalpha()


def _tested_name(expr: cst.BaseExpression) -> set[str]:
    """The name a test reads, through normalising calls: `answer`, `answer.strip().lower()`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value in NORMALISING_METHODS:
        expr = expr.func.value
    return {expr.value} if isinstance(expr, cst.Name) else set()


def _roots(exprs) -> set[str]:
    roots = set()
    for expr in exprs:
        while isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        if isinstance(expr, cst.Name):
            roots.add(expr.value)
    return roots


def _annotation_name(annotation: cst.BaseExpression) -> str | None:
    if isinstance(annotation, cst.Name):
        return annotation.value
    if isinstance(annotation, cst.Attribute):
        return annotation.attr.value
    return None
