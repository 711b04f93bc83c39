"""Putting `await` in front of a call: where that is sound, and the parentheses it needs."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.fix.base import FixContext


def async_context_problem(node: cst.CSTNode, context: FixContext) -> str | None:
    """Why `await` cannot go where `node` is (None: directly in the body of an `async def`, or in a list,
    set or dict comprehension there)."""
    child, parent = node, context.parent(node)
    while parent is not None:
        if isinstance(parent, cst.FunctionDef):
            if child is not parent.body:
                return "in a decorator, default or annotation: evaluated outside the function body"
            return None if parent.asynchronous is not None else "not inside `async def`"
        if isinstance(parent, cst.Lambda):
            return "inside a lambda (synchronous code)"
        if isinstance(parent, cst.GeneratorExp):
            return "inside a generator expression: `await` would turn it into an async generator"
        if isinstance(parent, cst.ClassDef):
            return "in a class body"
        child, parent = parent, context.parent(parent)
    return "not inside `async def`"


def needs_parentheses(node: cst.CSTNode, context: FixContext) -> bool:
    """`await x` binds looser than `.attr`, `[i]` and `(...)`: `(await f()).json()`."""
    if node.lpar:
        return False  # the call's own parentheses move to the await
    parent = context.parent(node)
    return (isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node) or (
        isinstance(parent, cst.Call) and parent.func is node)


def awaited(call: cst.Call, original: cst.Call, parenthesize: bool) -> cst.Await:
    """`await call`, taking over the parentheses `original` had (or adding a pair)."""
    lpar, rpar = list(original.lpar), list(original.rpar)
    if parenthesize and not lpar:
        lpar, rpar = [cst.LeftParen()], [cst.RightParen()]
    return cst.Await(expression=call.with_changes(lpar=[], rpar=[]), lpar=lpar, rpar=rpar)


def attribute(base: str, name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name(base), attr=cst.Name(name))
