"""LLM001: a text-generation call that does not stream (knowledge: rules/sdk-*.yaml, see docs/sdk-knowledge.md)."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.rule import Rule, root_names
from llmdoctor.scan.rules.sdk_knowledge import Exemptions, Method, SdkKnowledge, sdk_knowledge

UNKNOWN = object()  # a keyword value that is not a literal


class NonStreamingGeneration(Rule):
    code = "LLM001"

    @classmethod
    def any_literals(cls, spec, catalog) -> frozenset[str]:
        knowledge = sdk_knowledge(catalog)
        roots = root_names(knowledge.receivers)
        return frozenset(roots | set(knowledge.unknown_chains))

    @classmethod
    def prefilter_names(cls, spec, catalog) -> list[str]:
        knowledge = sdk_knowledge(catalog)  # a reported call resolves to one of these (or a suffix chain)
        return [*knowledge.calls, *knowledge.unknown_chains]

    def visit_Call(self, node: cst.Call) -> None:
        knowledge = sdk_knowledge(self.catalog)
        method = resolve_method(knowledge, self.context.callee_name(node), node)
        if method is None or method.kind != "generation":
            return
        if _streams_or_unknowable(node, method) or _exempt(node, method.exempt):
            return
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
