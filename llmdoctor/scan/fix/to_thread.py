"""LLM004 any other blocking call inside `async def` -> `await asyncio.to_thread(f, *args, **kwargs)`
(unsafe: the call now runs in a worker thread of the default executor).

Works on any call at the finding's span: a table entry (`requests.get(url)`), a sync SDK method
(`client.chat.completions.create(...)`) or a sync project helper found through calls. Not where the blocking
work continues after the call returns: a `with` item, `stream=True` (the rules leave out `open`, `Popen`,
streaming methods through their tables)."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.fix.awaiting import async_context_problem, attribute, awaited, needs_parentheses
from llmdoctor.scan.fix.base import FixContext, Fixer, FixRequest, Skip


class ToThread(Fixer):
    kind = "to_thread"
    priority = 40

    def plan(self, node: cst.Call, request: FixRequest, context: FixContext):
        problem = async_context_problem(node, context)
        if problem:
            raise Skip(problem)
        parent = context.parent(node)
        if isinstance(parent, cst.WithItem) and parent.item is node:
            raise Skip("a `with` item: the blocking work goes on in the block; move the whole block into a "
                       "sync function and `await asyncio.to_thread(that_function)`")
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "stream" and _is_true(arg.value):
                raise Skip("`stream=True`: the response is read after the call returns, still on the event loop")
        asyncio = context.module_name("asyncio", node)
        parenthesize = needs_parentheses(node, context)

        def rewrite(updated: cst.Call) -> cst.CSTNode:
            # the callee becomes the first argument, on its own line when the arguments are one per line
            layout = updated.whitespace_before_args
            after = layout if isinstance(layout, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" ")
            comma = cst.Comma(whitespace_after=after) if updated.args else cst.MaybeSentinel.DEFAULT
            call = updated.with_changes(
                func=attribute(asyncio, "to_thread"),
                args=[cst.Arg(value=updated.func, comma=comma), *updated.args],
            )
            return awaited(call, updated, parenthesize)

        return rewrite


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"
