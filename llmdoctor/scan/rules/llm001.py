"""LLM001: a text-generation call that does not stream (knowledge: rules/sdk-*.yaml, see docs/sdk-knowledge.md).

Where someone waits for the answer is the project model's context (the YAML's `contexts:`). One call is a bug
in every context: a non-streaming anthropic `messages.create` the SDK refuses to send because it expects it
to run over 10 minutes (`nonstreaming_refusal:` in rules/sdk-anthropic.yaml).
"""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.rule import Rule
from llmdoctor.scan.rules.sdk_knowledge import Exemptions, Method, SdkKnowledge, sdk_knowledge

UNKNOWN = object()  # a keyword value that is not a literal


class NonStreamingGeneration(Rule):
    code = "LLM001"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._tests_stream: dict[int, bool] = {}  # id(def) -> its code branches on a stream flag

    def visit_Call(self, node: cst.Call) -> None:
        knowledge = sdk_knowledge(self.catalog)
        method = resolve_method(knowledge, self.context.callee_name(node), node)
        if method is None or method.kind != "generation":
            return
        if _streams_or_unknowable(node, method):
            return
        refused = self._refusal(node, method)
        if refused is not None:
            self.report(node, refused[0], severity="error", fix=refused[1], everywhere=True,
                        call=f"{method.receiver.name}.{method.path}", sdk=method.receiver.table)
            return
        if _exempt(node, method.exempt):
            return
        if _literal_keyword(node, method.stream_kwarg) is False and self._branches_on_stream():
            return  # `if stream: ... else: create(..., stream=False)`: chosen, not forgotten
        if _result_discarded(node, self.context.statement):
            return  # a probe (health check, key validation): nobody waits for the tokens
        shown = ".".join(attribute_chain(node.func) or [method.path])
        if method.stream_twin:
            owner = shown[: -len(method.path)] if shown.endswith(method.path) else "<client>."
            fix = f"stream it: `{owner}{method.stream_twin}(...)`, and forward the chunks as they arrive"
        else:
            fix = f"pass `{method.stream_kwarg}=True` and forward the chunks as they arrive"
        self.report(
            node,
            f"`{shown}()` generates the whole completion before returning anything: the caller waits for "
            "every output token (time to first token = total generation time)",
            fix=fix,
            call=f"{method.receiver.name}.{method.path}",
            sdk=method.receiver.table,
        )


    def _branches_on_stream(self) -> bool:
        function = self.context.function
        if function is None:
            return False
        found = self._tests_stream.get(id(function.node))
        if found is None:
            found = self._tests_stream[id(function.node)] = _tests_stream(function.node)
        return found

    def _refusal(self, node: cst.Call, method: Method) -> tuple[str, str] | None:
        """(message, fix) when the SDK refuses this non-streaming call before sending it."""
        refusal = (self.catalog.knowledge.get(method.receiver.table) or {}).get("nonstreaming_refusal")
        if not isinstance(refusal, dict) or method.path not in (refusal.get("methods") or ()):
            return None
        timeout = refusal.get("timeout_keyword", "timeout")
        if any(arg.star == "**" or (arg.keyword is not None and arg.keyword.value == timeout) for arg in node.args):
            return None
        if self._client_sets(node.func, timeout):
            return None
        max_tokens = _literal_keyword(node, refusal.get("max_tokens_keyword", "max_tokens"))
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            return None
        model = _literal_keyword(node, "model")
        limit = (refusal.get("model_limits") or {}).get(model) if isinstance(model, str) else None
        expected = refusal["maximum_seconds"] * max_tokens / refusal["per_tokens"]
        shown = ".".join(attribute_chain(node.func) or [method.path])
        if expected > refusal["default_seconds"]:
            why = (f"{refusal['maximum_seconds']} s x {max_tokens:,} / {refusal['per_tokens']:,} = {expected:,.0f} s "
                   f"expected, over its {refusal['default_seconds']} s limit")
        elif limit is not None and max_tokens > limit:
            why = f"max_tokens {max_tokens:,} is over its non-streaming limit of {limit:,} for {model}"
        else:
            return None
        owner = shown[: -len(method.path)] if shown.endswith(method.path) else "client."
        sdk = method.receiver.name.split(".")[0]
        message = (f"`{shown}()` with max_tokens={max_tokens} and no stream: {sdk}'s SDK raises ValueError "
                   f"(\"Streaming is required for operations that may take longer than 10 minutes\") before sending "
                   f"it: {why}")
        fix = (f"stream it: `with {owner}{method.stream_twin or 'messages.stream'}(...) as s: reply = "
               "s.get_final_message()`; or pass an explicit `timeout=` if waiting that long is intended")
        return message, fix

    def _client_sets(self, func: cst.BaseExpression, keyword: str) -> bool:
        """Whether the client this call goes through was built with `keyword=` (as far as it can be seen)."""
        expr = func
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        call = expr if isinstance(expr, cst.Call) else None
        if isinstance(expr, cst.Name):
            binding = self.context.lookup(expr.value)
            call = binding.call if binding is not None else None
        return call is not None and any(arg.star == "**" or (arg.keyword is not None and arg.keyword.value == keyword)
                                        for arg in call.args)


def _tests_stream(function: cst.CSTNode) -> bool:
    """Whether an `if` (or conditional expression) in `function` tests a stream flag (`stream`, `req.stream`,
    `body.get("stream")`)."""
    stack: list[cst.CSTNode] = [function]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.If, cst.IfExp)) and _mentions_stream(node.test):
            return True
        stack.extend(node.children)
    return False


def _mentions_stream(test: cst.BaseExpression) -> bool:
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and "stream" in node.value.lower():
            return True
        if isinstance(node, cst.Attribute) and "stream" in node.attr.value.lower():
            return True
        if isinstance(node, cst.SimpleString) and "stream" in node.value.lower():
            return True  # `if body.get("stream"):`
        stack.extend(node.children)
    return False


def _literal_keyword(node: cst.Call, name: str):
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return literal(arg.value)
    return None


def resolve_method(knowledge: SdkKnowledge, callee: str | None, node: cst.Call) -> Method | None:
    """The SDK method `node` calls: its resolved callee, else its attribute chain on an unknown receiver."""
    method = knowledge.lookup(callee)
    if method is None:
        chain = attribute_chain(node.func)
        if chain:
            method = knowledge.lookup_unknown(".".join(part.removesuffix("()") for part in chain))
    return method


def attribute_chain(expr: cst.BaseExpression) -> list[str]:
    """`self.llm.chat.completions.create` -> its names; a call segment is kept as `name()`; [] otherwise."""
    parts: list[str] = []
    while True:
        if isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        elif isinstance(expr, cst.Call):
            inner = attribute_chain(expr.func)
            if not inner:
                return []
            inner[-1] += "()"
            return inner + parts[::-1]
        elif isinstance(expr, cst.Name):
            parts.append(expr.value)
            return parts[::-1]
        else:
            return []


def _streams_or_unknowable(node: cst.Call, method: Method) -> bool:
    for arg in node.args:
        if arg.star == "**":
            return True  # stream=True may arrive through **kwargs
        if arg.keyword is not None and arg.keyword.value == method.stream_kwarg:
            value = literal(arg.value)
            return value is UNKNOWN or bool(value)
    return False


def _result_discarded(node: cst.Call, statement: cst.CSTNode | None) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    value = None
    if isinstance(small, cst.Expr) or (isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None
          and all(isinstance(t.target, cst.Name) and t.target.value == "_"
                  for t in (small.targets if isinstance(small, cst.Assign) else [small]))):
        value = small.value
    if isinstance(value, cst.Await):
        value = value.expression
    return value is node


def _exempt(node: cst.Call, exempt: Exemptions) -> bool:
    keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
    if exempt.kwargs & keywords.keys():
        return True
    for name, limit in exempt.kwarg_at_most:
        value = literal(keywords[name]) if name in keywords else None
        if isinstance(value, int) and not isinstance(value, bool) and value <= limit:
            return True  # a few output tokens: the first token is nearly the whole answer
    for name, expected in exempt.kwarg_equals:
        if name in keywords and literal(keywords[name]) == expected:
            return True
    for name, keys in exempt.kwarg_has_key:
        if name in keywords:
            present = _keys_of(keywords[name])
            if present is None or present & keys:
                return True  # a config we cannot read may ask for structured output: no guess
    return False


def _keys_of(value: cst.BaseExpression) -> set[str] | None:
    """String keys of a dict literal or keywords of a call (`types.GenerateContentConfig(...)`); None if unknown."""
    if isinstance(value, cst.Dict):
        keys = set()
        for element in value.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                keys.add(element.key.evaluated_value)
            else:
                return None
        return keys
    if isinstance(value, cst.Call):
        if any(arg.star for arg in value.args):
            return None
        return {arg.keyword.value for arg in value.args if arg.keyword is not None}
    if isinstance(value, cst.Name) and value.value == "None":
        return set()
    return None


def literal(value: cst.BaseExpression):
    """The Python value of a simple literal (True/False/None, numbers, strings), else UNKNOWN."""
    if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[value.value]
    if isinstance(value, cst.Integer):
        return int(value.value, 0)
    if isinstance(value, cst.SimpleString):
        return value.evaluated_value
    return UNKNOWN
