"""LLM payload tracking for LLM005 (knowledge: rules/sdk-logging.yaml, schema in docs/sdk-knowledge.md).

`LoggingKnowledge` is the validated `sdk-logging.yaml`: log sinks and their levels, payload vs metadata
shapes, sampling guards. `PayloadEvaluator.evaluate(expr)` answers what an expression carries:

- a `Source` (it carries a prompt or a completion, and says where it came from), or
- `METADATA` (known not to carry the text: a length, a token count, an id, a number or constant string), or
- None (unknown: nothing is reported on it; a payload-like *name* may still make it payload).

Values flow through formatting (f-strings, `%`, `+`, `.format`, `str()`, `json.dumps`, containers,
comprehensions) and attribute/subscript chains from a generation result; a metadata attribute or function
ends the flow. Names are looked up through a callback: the rule keeps the per-function assignments
(payloadflow.py). `prompt_arguments(facts, ...)`: the names a def passes to a model as its prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import libcst as cst

from llmdoctor.scan.functionfacts import FunctionFacts
from llmdoctor.scan.rules.logging_knowledge import (  # noqa: F401 - LLM005's knowledge, re-exported
    FIRST_ARGUMENT,
    KNOWLEDGE_STEM,
    LEVELS,
    LoggingKnowledge,
    build_logging_knowledge,
    logging_knowledge,
    printf_excerpts,
)
from llmdoctor.scan.rules.sdk_knowledge import Method, SdkKnowledge


@dataclass(frozen=True)
class Source:
    """Where a payload comes from, in words for the message."""

    what: str
    stream: bool = False  # a stream object: its repr is not the text, iterating it yields payload chunks
    maybe_stream: bool = False  # stream=True may arrive through **kwargs: a stream unless read as a message
    node: cst.BaseExpression | None = field(default=None, compare=False)  # the logged expression carrying it


class _Metadata:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


METADATA = _Metadata("METADATA")
OPAQUE = _Metadata("OPAQUE")  # bound to something unknown that a payload-like name must not turn into payload
Value = Source | _Metadata | None


def runtime_module_imports(module: cst.Module) -> set[str]:
    """Qualified names imported at module level at run time (`if TYPE_CHECKING:` blocks and defs skipped)."""
    found: set[str] = set()
    stack = list(module.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    found.update(imported_names(small))
        elif isinstance(statement, cst.If):
            if "TYPE_CHECKING" in dotted(statement.test):
                continue
            stack.extend(_statements(statement.body))
            if statement.orelse is not None:
                stack.extend(_statements(statement.orelse.body) if isinstance(statement.orelse, cst.Else)
                             else [statement.orelse])
        elif isinstance(statement, (cst.Try, cst.TryStar)):
            stack.extend(_statements(statement.body))
            for handler in statement.handlers:
                stack.extend(_statements(handler.body))
    return found


def imported_names(node: cst.Import | cst.ImportFrom) -> list[str]:
    """What an import statement imports, qualified: `import a.b` -> `a.b`; `from a import b` -> `a`, `a.b`
    (`from a import *` -> `a`; a relative import -> nothing)."""
    if isinstance(node, cst.Import):
        return [dotted(alias.name) for alias in node.names]
    if node.module is None or node.relative:
        return []
    module = dotted(node.module)
    if isinstance(node.names, cst.ImportStar):
        return [module]
    return [module, *(f"{module}.{alias.name.value}" for alias in node.names if isinstance(alias.name, cst.Name))]


def _statements(block: cst.BaseSuite) -> list:
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    return [cst.SimpleStatementLine(body=block.body)]


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""


# ---------------------------------------------------------------------------------------- generation calls

def attribute_chain(expr: cst.BaseExpression) -> list[str]:
    """`self.llm.chat.completions.create` -> its names; a call segment is kept as `name()`; [] otherwise."""
    from llmdoctor.scan.rules.llm001 import attribute_chain as chain

    return chain(expr)


def generation_method(knowledge: SdkKnowledge, callee: str | None, node: cst.Call) -> Method | None:
    """The generating SDK method `node` calls (known receiver, or a generation-specific chain), else None."""
    from llmdoctor.scan.rules.llm001 import resolve_method

    method = resolve_method(knowledge, callee, node)
    return method if method is not None and method.generates else None


def returns_stream(node: cst.Call, method: Method) -> bool | None:
    """Whether the result is a stream object (its repr is not the text): True for a streaming method or
    stream=<not False>, None when only **kwargs may carry stream=True, False otherwise."""
    if method.kind == "streaming":
        return True
    maybe = False
    for arg in node.args:
        if arg.star == "**":
            maybe = True
        elif arg.keyword is not None and arg.keyword.value == method.stream_kwarg:
            return not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))
    return None if maybe else False


def payload_arguments(node: cst.Call, method: Method, logging: LoggingKnowledge) -> list[tuple[str, cst.BaseExpression]]:
    """(parameter name, value) of the arguments of a generation call that carry the prompt."""
    kwargs = method.payload_kwargs | logging.payload_kwargs
    out = []
    positional = 0
    for arg in node.args:
        if arg.star:
            continue
        if arg.keyword is None:
            if positional < len(method.positional) and method.positional[positional] in kwargs:
                out.append((method.positional[positional], arg.value))
            positional += 1
        elif arg.keyword.value in kwargs:
            out.append((arg.keyword.value, arg.value))
    return out


def shown_call(node: cst.Call) -> str:
    chain = attribute_chain(node.func)
    return ".".join(chain) if chain else "<call>"


# ---------------------------------------------------------------------------------------- per function

CONSOLE_PROMPTS = frozenset({"builtins.input", "getpass.getpass", "click.prompt", "typer.prompt",
                             "rich.prompt.Prompt.ask"})


def calls_model(facts: FunctionFacts, context, sdk: SdkKnowledge) -> bool:
    """The function (nested defs included) calls a generation method; callees resolved as `context` is now."""
    return any(generation_method(sdk, context.callee_name(node), node) is not None for node in facts.calls)


def prompt_arguments(facts: FunctionFacts, context, sdk: SdkKnowledge, logging: LoggingKnowledge) -> dict:
    """Names a function passes to a generation call as its prompt (`messages=msgs`), in any order, and the
    local names that went into them (`msgs = history + [{"content": question}]`: `question` too), each with
    the Source it carries; names it passes to `input()` are a terminal prompt (METADATA). Callees are
    resolved as `context` is now."""
    found: dict[str, Value] = {}
    consoles: set[str] = set()
    pending: list[tuple[str, Source]] = []
    for node in facts.calls:
        callee = context.callee_name(node)
        if callee in CONSOLE_PROMPTS and node.args and isinstance(node.args[0].value, cst.Name):
            consoles.add(node.args[0].value.value)  # `input(prompt)`: a terminal prompt like "> "
        method = generation_method(sdk, callee, node)
        if method is not None:
            arguments = payload_arguments(node, method, logging)
            for keyword, value in arguments:
                what = Source(f"the prompt passed as `{keyword}=` to `{shown_call(node)}()`")
                pending += [(name, what) for name in prompt_parts(value, logging)]
            if not arguments:  # `create(**payload)`: the prompt can only be in the dict
                for arg in node.args:
                    if arg.star == "**" and isinstance(arg.value, cst.Name):
                        what = Source(f"the request passed as `**{arg.value.value}` to "
                                      f"`{shown_call(node)}()`, which holds its prompt")
                        pending.append((arg.value.value, what))
    assigned = facts.assignments
    while pending:
        name, what = pending.pop()
        if name not in found:
            found[name] = what
            pending += [(part, what) for value in assigned.get(name, ()) for part in prompt_parts(value, logging)]
    for name in consoles - found.keys():
        found[name] = METADATA
    return found


def prompt_parts(value: cst.BaseExpression, logging: LoggingKnowledge) -> list[str]:
    """Local names whose text goes into a prompt argument: `msgs`, `[{"content": question}]`, `h + [..]`."""
    if isinstance(value, cst.Name):
        return [value.value]
    if isinstance(value, (cst.List, cst.Tuple)):
        return [n for el in value.elements for n in prompt_parts(el.value, logging)]
    if isinstance(value, cst.Dict):
        names = []
        for el in value.elements:
            key = el.key.evaluated_value if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) else None
            if key in logging.metadata_attributes:
                continue  # {"role": role}
            names += prompt_parts(el.value, logging)
        return names
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        return prompt_parts(value.left, logging) + prompt_parts(value.right, logging)
    if isinstance(value, cst.FormattedString):
        return [n for part in value.parts if isinstance(part, cst.FormattedStringExpression)
                for n in prompt_parts(part.expression, logging)]
    return []


# ---------------------------------------------------------------------------------------- evaluation



_METADATA_BUILTINS = frozenset({"builtins.int", "builtins.float", "builtins.bool", "builtins.round",
                                "builtins.len", "builtins.type", "builtins.id", "builtins.hash",
                                "builtins.isinstance", "builtins.sum", "builtins.min", "builtins.max",
                                "builtins.abs", "builtins.sorted"})
_NUMERIC_OPERATORS = (cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power, cst.MatrixMultiply,
                      cst.BitAnd, cst.BitOr, cst.BitXor, cst.LeftShift, cst.RightShift)


SDK_MODULE = "in a module that uses an LLM SDK"
MODEL_PROGRAM = "in a program that calls a model"


class PayloadEvaluator:
    """Evaluates expressions against the rule's name state (`lookup(name) -> Value | MISSING`)."""

    MISSING = object()

    def __init__(self, logging: LoggingKnowledge, sdk: SdkKnowledge, context,
                 lookup: Callable[[str], object]) -> None:
        self.logging = logging
        self.sdk = sdk
        self.context = context
        self._lookup = lookup
        # the module calls the model itself (it uses an LLM SDK); else payload-like names are the program's, which
        # the project model decides, and `names_beside_model` do not count
        self.beside_model = True
        # whether a test samples or opts in (`random.random() < RATE`, `settings.log_prompts`): the rule's answer
        self.sampling_test: Callable[[cst.BaseExpression], bool] = lambda test: False
        self._comprehension: list[dict[str, Value]] = []

    # a name ------------------------------------------------------------------------------------------------
    def name(self, name: str) -> Value:
        for frame in reversed(self._comprehension):
            if name in frame:
                return frame[name]
        found = self._lookup(name)
        if found is OPAQUE:
            return None
        if found is not self.MISSING:
            return found  # type: ignore[return-value]
        return self._named(name)

    def _named(self, name: str) -> Value:
        """A payload-like name, attribute or key name (`prompt`, `request.prompt`, `data["messages"]`)."""
        if self.logging.is_payload_name(name, self.beside_model):
            where = SDK_MODULE if self.beside_model else MODEL_PROGRAM
            return Source(f"a prompt or completion by its name (`{name}`, {where})")
        return None

    # any expression ----------------------------------------------------------------------------------------
    def evaluate(self, expr: cst.BaseExpression) -> Value:
        if isinstance(expr, cst.Await):
            return self.evaluate(expr.expression)
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return METADATA
            return _at(self.name(expr.value), expr)
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.Comparison)):
            return METADATA
        if isinstance(expr, cst.SimpleString):
            return METADATA  # a constant: no user data
        if isinstance(expr, cst.ConcatenatedString):  # `f"a {x} " f"b {y}"`: each part, as one f-string's
            return self._first([expr.left, expr.right])
        if isinstance(expr, cst.UnaryOperation):
            return METADATA if isinstance(expr.operator, (cst.Not, cst.Minus, cst.Plus)) else None
        if isinstance(expr, cst.FormattedString):  # `{question:.50}` shows at most 50 characters of it
            return self._first(part.expression for part in expr.parts
                               if isinstance(part, cst.FormattedStringExpression) and not self._short_spec(part))
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, _NUMERIC_OPERATORS):
                return METADATA
            if isinstance(expr.operator, cst.Modulo):
                if isinstance(expr.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
                    values = [element.value for element in expr.right.elements] \
                        if isinstance(expr.right, cst.Tuple) else [expr.right]
                    return self._first(self.formatted_arguments(expr.left, values))
                return METADATA
            return self._first([expr.left, expr.right])  # +
        if isinstance(expr, cst.BooleanOperation):
            return self._first([expr.left, expr.right])
        if isinstance(expr, cst.IfExp):  # `": " + prompt if settings.log_prompts else ""`: the body is opted in
            return self._first([expr.orelse] if self.sampling_test(expr.test) else [expr.body, expr.orelse])
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return self._first(el.value for el in expr.elements)
        if isinstance(expr, cst.Dict):
            found = self._first(el.value for el in expr.elements)
            if found is None or found is METADATA:
                keyed = self._payload_key(expr)
                if keyed is not None:
                    return keyed
            return found
        if isinstance(expr, (cst.GeneratorExp, cst.ListComp, cst.SetComp)):
            return self._comprehension_value(expr.for_in, [expr.elt])
        if isinstance(expr, cst.DictComp):
            return self._comprehension_value(expr.for_in, [expr.value])
        if isinstance(expr, cst.Subscript) and self._excerpt(expr):
            return METADATA  # `question[:50]`: a short label for the line
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return _at(self._chain(expr), expr)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        return None

    def formatted_arguments(self, template: cst.BaseExpression,
                            arguments: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
        """The arguments of a `%` template that it shows whole: not those its conversion cuts to an excerpt
        (`%.50s`, `%.60r`: at most that many characters); all of them where the template cannot be read."""
        text = template.evaluated_value if isinstance(template, (cst.SimpleString, cst.ConcatenatedString)) else None
        if not isinstance(text, str):
            return arguments
        cut = printf_excerpts(text, self.logging.excerpt_max_chars)
        if cut is None:
            return arguments
        return [argument for index, argument in enumerate(arguments) if index not in cut]

    def _short_spec(self, part: cst.FormattedStringExpression) -> bool:
        """`{text:.50}` / `{text!r:.50s}`: a literal format spec whose precision cuts a string to an excerpt."""
        spec = part.format_spec
        if not spec or not all(isinstance(piece, cst.FormattedStringText) for piece in spec):
            return False
        return self.logging.spec_cuts("".join(piece.value for piece in spec))

    def _excerpt(self, expr: cst.Subscript) -> bool:
        """`text[:N]` or `text[-N:]` with a literal N up to `excerpt_max_chars`: at most N characters."""
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Slice):
            return False
        part = expr.slice[0].slice
        return part.step is None and self.logging.slice_cuts(_literal_int(part.lower), _literal_int(part.upper))

    def _payload_key(self, expr: cst.Dict) -> Value:
        """`{"model": m, "prompt": conv}`: a request body whose prompt is not a literal."""
        for element in expr.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                    and element.key.evaluated_value in self.logging.payload_keys \
                    and self.evaluate(element.value) is not METADATA:
                return Source(f"a request's `{element.key.evaluated_value}`", node=element.value)
        return None

    def _first(self, exprs) -> Value:
        """The first payload among `exprs`; METADATA only when every one (at least one) is metadata: an empty
        container is filled later, with anything."""
        all_metadata = True
        seen = False
        for expr in exprs:
            seen = True
            value = self.evaluate(expr)
            if isinstance(value, Source):
                if value.stream:
                    all_metadata = False
                    continue  # a stream object's repr is not the text
                return value
            if value is not METADATA:
                all_metadata = False
        return METADATA if all_metadata and seen else None

    def _comprehension_value(self, for_in: cst.CompFor, elements) -> Value:
        frame: dict[str, Value] = {}
        self._comprehension.append(frame)
        try:
            comp: cst.CompFor | None = for_in
            while comp is not None:
                iterated = self.iterated(comp.iter)
                for name in target_names(comp.target):
                    frame[name] = iterated
                comp = comp.inner_for_in
            return self._first(elements)
        finally:
            self._comprehension.pop()

    def iterated(self, iterable: cst.BaseExpression) -> Value:
        """What iterating `iterable` yields: payload from a payload or a stream."""
        value = self.evaluate(iterable)
        if isinstance(value, Source):
            return Source(value.what) if value.stream else value
        return None

    # attribute / subscript chains --------------------------------------------------------------------------
    def _chain(self, expr: cst.BaseExpression) -> Value:
        named: list[str] = []  # attribute names and string keys, outermost first
        node = expr
        while True:
            if isinstance(node, cst.Attribute):
                named.append(node.attr.value)
                node = node.value
            elif isinstance(node, cst.Subscript):
                key = _string_key(node)
                if key is not None:
                    named.append(key)
                node = node.value
            else:
                break
        if any(name in self.logging.metadata_attributes for name in named):
            return METADATA
        if isinstance(node, cst.Name) and named and self.logging.chat_message_text:
            platform = self.context.instance_type(node)
            if platform is not None and tuple(reversed(named)) in self.logging.chat_message_text.get(platform, ()):
                return Source(f"the user's chat message (`.{'.'.join(reversed(named))}` of a `{platform}`)")
        root = self.evaluate(node)
        if isinstance(root, Source):
            if not named:
                return root  # messages[-1], text[:200]
            if named[0] in self.logging.payload_attributes:
                return Source(root.what)
            return None  # an attribute we know nothing about (`response.headers`)
        if root is METADATA:
            return None
        if named and not (isinstance(node, cst.Name) and node.value in ("self", "cls") and len(named) > 1):
            return self._named(named[0])
        return None

    # calls --------------------------------------------------------------------------------------------------
    def _call(self, call: cst.Call) -> Value:
        logging = self.logging
        callee = self.context.callee_name(call)
        method = generation_method(self.sdk, callee, call)
        if method is not None:
            stream = returns_stream(call, method)
            return Source(f"the result of `{shown_call(call)}()`", stream=stream is not False,
                          maybe_stream=stream is None)
        args = [arg.value for arg in call.args if not arg.star]
        if callee is not None:
            last = callee.rsplit(".", 1)[-1]
            if callee in _METADATA_BUILTINS or callee in logging.metadata_functions or last in logging.metadata_functions:
                return METADATA
            if callee in logging.preserving_functions or callee.removeprefix("builtins.") in logging.preserving_functions:
                return self._first_source(args)
        func = call.func
        if isinstance(func, cst.Name) and func.value in logging.metadata_functions:
            return METADATA
        if isinstance(func, cst.Attribute):
            method_name = func.attr.value
            if method_name in logging.metadata_functions:
                return METADATA
            if method_name == "get" and args and isinstance(args[0], cst.SimpleString):
                key = args[0].evaluated_value
                if isinstance(key, str):
                    if key in logging.metadata_attributes:
                        return METADATA
                    owner = self.evaluate(func.value)
                    if isinstance(owner, Source) and key in logging.payload_attributes:
                        return Source(owner.what)
                    return self._named(key) if owner is None else None
            if method_name in logging.stream_final_methods:
                owner = self.evaluate(func.value)  # `stream.get_final_message()`: the whole completion
                if isinstance(owner, Source):
                    return Source(owner.what)
            if method_name in logging.preserving_methods:
                owner = self.evaluate(func.value)
                if isinstance(owner, Source) and not owner.stream:
                    return owner
                return self._first_source(args)  # "{}".format(payload), ", ".join(messages)
        return None

    def _first_source(self, exprs) -> Value:
        value = self._first(exprs)
        return value if isinstance(value, Source) else None


def _at(value: Value, expr: cst.BaseExpression) -> Value:
    return replace(value, node=expr) if isinstance(value, Source) else value


def _literal_int(node: cst.BaseExpression | None) -> int | None:
    """`50`, `-40`: the value of an integer literal, else None."""
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
            and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value, 0)
    return None


def _string_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    key = node.slice[0].slice.value
    if isinstance(key, cst.SimpleString):
        value = key.evaluated_value
        return value if isinstance(value, str) else None
    return None


def target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for el in target.elements for name in target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []
