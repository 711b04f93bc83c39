"""LLM004: a blocking call inside `async def` (innermost function decides; awaited calls are not blocking)."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.rule import Rule

BLOCKING_TABLES = ("blocking_calls", "sync_sdk_calls")  # sync_sdk_calls: optional, from the SDK tables


class BlockingCallInAsync(Rule):
    code = "LLM004"

    @classmethod
    def prefilter_tables(cls, spec):
        return [*spec.table_names, *(t for t in BLOCKING_TABLES if t not in spec.table_names)]

    def visit_Call(self, node: cst.Call) -> None:
        context = self.context
        if context.is_awaited(node):
            return
        function = context.executing_function(node)
        if function is None or not function.is_async:
            return
        callee = context.callee_name(node)
        if callee is None:
            return
        entry = None
        for table in BLOCKING_TABLES:
            entry = self.table(table).match(callee)
            if entry is not None:
                break
        if entry is None:
            return
        marker = entry.get("nonblocking_with")
        if marker and any(_mentions(arg.value, marker) for arg in node.args):
            return
        shown = callee.removeprefix("builtins.")
        instead = entry.get("use_instead")
        self.report(
            node,
            f"`{shown}()` blocks the event loop inside `async def {function.name}`",
            fix=f"use {instead}" if instead else "await an async equivalent or asyncio.to_thread(...)",
            call=callee,
        )


def _mentions(node: cst.CSTNode, name: str) -> bool:
    """Whether `name` occurs as a Name (or attribute) anywhere in `node` (e.g. WNOHANG in os.WNOHANG | x)."""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(_mentions(child, name) for child in node.children)
