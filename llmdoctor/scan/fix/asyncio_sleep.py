"""LLM004 `time.sleep(x)` inside `async def` -> `await asyncio.sleep(x)` (safe: same arguments, same None
result; the loop serves other coroutines meanwhile, which is the point)."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.fix.awaiting import async_context_problem, attribute, awaited, needs_parentheses
from llmdoctor.scan.fix.base import FixContext, Fixer, FixRequest, Skip


class AsyncioSleep(Fixer):
    kind = "asyncio_sleep"
    priority = 20

    def plan(self, node: cst.Call, request: FixRequest, context: FixContext):
        problem = async_context_problem(node, context)
        if problem:
            raise Skip(problem)
        if any(arg.keyword is not None for arg in node.args):
            raise Skip("keyword arguments: `time.sleep` takes its delay positionally")
        asyncio = context.module_name("asyncio", node)
        parenthesize = needs_parentheses(node, context)

        def rewrite(updated: cst.Call) -> cst.CSTNode:
            return awaited(updated.with_changes(func=attribute(asyncio, "sleep")), updated, parenthesize)

        return rewrite
