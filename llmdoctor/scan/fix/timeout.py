"""LLM006 a missing or `None` timeout -> `timeout=<fix-timeout>` (unsafe: the call can now raise a timeout
error). The value is the user's (`fix-timeout` in the config, `--fix-timeout`): never a guessed default."""

from __future__ import annotations

import libcst as cst

from llmdoctor.scan.fix.base import FixContext, Fixer, FixRequest, Skip


class Timeout(Fixer):
    kind = "timeout"
    priority = 10  # before to_thread moves the call into an argument list

    def plan(self, node: cst.Call, request: FixRequest, context: FixContext):
        seconds = context.policy.timeout
        if seconds is None:
            raise Skip("no timeout value: set `fix-timeout = <seconds>` in the config (or pass "
                       "`--fix-timeout SECONDS`); llmdoctor does not guess one")
        kwarg = request.param("kwarg") or "timeout"
        value = timeout_literal(seconds, request.param("unit", "s"))
        if any(arg.star for arg in node.args):
            raise Skip("`*args`/`**kwargs` in the call: the timeout may already arrive through them")
        existing = [i for i, arg in enumerate(node.args) if arg.keyword is not None and arg.keyword.value == kwarg]
        if request.param("missing"):
            if existing:
                raise Skip(f"the call already passes `{kwarg}=`")
            return lambda updated: append_keyword(updated, kwarg, value)
        if not existing or not _is_none(node.args[existing[0]].value):
            raise Skip(f"no `{kwarg}=None` in this call")
        index = existing[0]

        def rewrite(updated: cst.Call) -> cst.CSTNode:
            args = list(updated.args)
            args[index] = args[index].with_changes(value=value)
            return updated.with_changes(args=args)

        return rewrite


def timeout_literal(seconds: float, unit: str) -> cst.BaseExpression:
    amount = seconds * 1000 if unit == "ms" else seconds
    if float(amount).is_integer():
        return cst.Integer(str(int(amount)))
    return cst.Float(repr(float(amount)))


def append_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added last, in the layout of the arguments already there (one per line with a
    trailing comma stays one per line with a trailing comma)."""
    new = cst.Arg(keyword=cst.Name(name), value=value, equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument inherits the last one's place
        before = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        if before is None:
            before = cst.Comma(whitespace_after=call.whitespace_before_args
                               if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace)
                               else cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=before)
        args.append(new.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
