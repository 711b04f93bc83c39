"""LLM004: a blocking call inside `async def` (innermost function decides; awaited calls are not blocking).

Two sources of knowledge:
- the rule's own table `blocking_calls` (rules/llm004.yaml): time.sleep, requests, sync httpx, subprocess...;
- the SDK index (`sdk_knowledge(catalog)`, rules/sdk-*.yaml and the user's `--rules-dir` tables): a
  generation / streaming / structured call whose receiver resolved to a client or module whose effective
  `async` is false (`OpenAI()`, `litellm.completion`, genai `client.models.*`), with the async twin as fix.
  An unknown receiver is never reported: whether it is sync or async is unknown.
Test modules are not reported: an async test serves no one else on its loop (the SDKs' own tests run the
sync client against a mock transport inside async tests; others sleep or open fixture files).
"""

from __future__ import annotations

import re

import libcst as cst

from llmdoctor.scan.rule import Rule, root_names
from llmdoctor.scan.rules.llm001 import attribute_chain
from llmdoctor.scan.rules.sdk_knowledge import Method, SdkKnowledge, sdk_knowledge

GENERIC_TABLE = "blocking_calls"
ASYNC_DEF = re.compile(r"\basync[\s\\]+def\b")  # blanks or a line continuation between the two
TEST_FRAMEWORKS = "test_frameworks"  # imports that make a module test code (rules/llm004.yaml)


class BlockingCallInAsync(Rule):
    code = "LLM004"
    _test_module = False

    @classmethod
    def prefilter_tables(cls, spec) -> list[str]:
        return [GENERIC_TABLE]  # `test_frameworks` only silences: it must not let a file through

    @classmethod
    def any_literals(cls, spec, catalog) -> frozenset[str]:
        roots = root_names(_sync_generating_calls(catalog))
        return super().any_literals(spec, catalog) | roots

    @classmethod
    def prefilter_names(cls, spec, catalog) -> list[str]:
        return [*super().prefilter_names(spec, catalog), *_sync_generating_calls(catalog)]

    @classmethod
    def may_fire(cls, spec, catalog, source: str) -> bool:
        """Only calls executed by an `async def` are reported."""
        return "async" in source and ASYNC_DEF.search(source) is not None and super().may_fire(spec, catalog, source)

    @classmethod
    def region_may_fire(cls, spec, catalog, region) -> bool:
        return region.is_async and super().region_may_fire(spec, catalog, region)

    def visit_Module(self, node: cst.Module) -> None:
        self._test_module = _is_test_module(node, self.table(TEST_FRAMEWORKS))

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        if self._test_module or context.is_awaited(node):
            return
        function = context.executing_function(node)
        if function is None or not function.is_async:
            return
        callee = context.callee_name(node)
        if callee is None:
            return
        entry = self.table(GENERIC_TABLE).match(callee)
        if entry is not None:
            self._report_generic(node, callee, entry, function.name)
            return
        method = _sync_generation(sdk_knowledge(self.catalog), callee)
        if method is not None and not _no_model_call(node, method):
            self._report_sdk(node, method, function.name)

    def _report_generic(self, node: cst.Call, callee: str, entry, function_name: str) -> None:
        marker = entry.get("nonblocking_with")
        if marker and any(_mentions(arg.value, marker) for arg in node.args):
            return
        shown = callee.removeprefix("builtins.")
        instead = entry.get("use_instead")
        self.report(
            node,
            f"`{shown}()` blocks the event loop inside `async def {function_name}`",
            fix=f"use {instead}" if instead else "await an async equivalent or asyncio.to_thread(...)",
            call=callee,
        )

    def _report_sdk(self, node: cst.Call, method: Method, function_name: str) -> None:
        receiver = method.receiver
        chain = ".".join(attribute_chain(node.func))
        shown = chain or method.path
        if chain.endswith("." + method.path):
            receiver_text = chain[: -len(method.path) - 1]
        else:  # `from litellm import completion; completion(...)`, or a transparent segment in between
            receiver_text = receiver.name if receiver.is_module else "<client>"
        kind = "module" if receiver.is_module else "client"
        self.report(
            node,
            f"`{shown}()` is a call on the sync `{receiver.name}` {kind}: it blocks the event loop inside "
            f"`async def {function_name}` for the whole model request, stalling every other coroutine",
            fix=f"use {method.async_fix(receiver_text)}, or `await asyncio.to_thread(...)`"
            if (method.async_twin or receiver.async_twin) else method.async_fix(receiver_text),
            call=f"{receiver.name}.{method.path}",
            sdk=receiver.table,
        )


def _is_test_module(module: cst.Module, frameworks) -> bool:
    """A module that imports a test framework, or defines a top-level `test_*` function that is not
    decorated by anything but the framework (`@router.get("/test") async def test_endpoint()` is an app)."""
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value.startswith("test_") and all(
                _dotted(_decorator_callee(d.decorator)).split(".", 1)[0] in frameworks
                for d in statement.decorators):
            return True
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import):
                    names = [_dotted(alias.name) for alias in small.names]
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                    names = [_dotted(small.module)]
                else:
                    continue
                if any(name.split(".", 1)[0] in frameworks for name in names):
                    return True
    return False


def _decorator_callee(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.func if isinstance(expr, cst.Call) else expr


def _dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    return expr.value if isinstance(expr, cst.Name) else ""


def _sync_generating_calls(catalog) -> list[str]:
    """Qualified names of every generating call on a sync receiver (the pre-filter's names), memoized."""
    found = catalog.memo.get("llm004-sdk-names")
    if found is None:
        knowledge = sdk_knowledge(catalog)
        found = catalog.memo["llm004-sdk-names"] = sorted(
            name for name, method in knowledge.calls.items() if method.generates and not method.is_async)
    return found


def _sync_generation(knowledge: SdkKnowledge, callee: str) -> Method | None:
    method = knowledge.lookup(callee)
    if method is None or not method.generates or method.is_async:
        return None
    return method


def _no_model_call(node: cst.Call, method: Method) -> bool:
    """A keyword that means the SDK answers without calling a model (litellm `mock_response=`)."""
    exempt = method.exempt.no_model_call
    return bool(exempt) and any(arg.keyword is not None and arg.keyword.value in exempt for arg in node.args)


def _mentions(node: cst.CSTNode, name: str) -> bool:
    """Whether `name` occurs as a Name (or attribute) anywhere in `node` (e.g. WNOHANG in os.WNOHANG | x)."""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(_mentions(child, name) for child in node.children)
