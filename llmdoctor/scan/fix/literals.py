"""Whether an expression is a literal: the same value every time it is evaluated (no names, no calls)."""

from __future__ import annotations

import libcst as cst

_ATOMS = (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)
_CONSTANTS = frozenset({"True", "False", "None"})


def is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, _ATOMS):
        return True
    if isinstance(node, cst.Name):
        return node.value in _CONSTANTS
    if isinstance(node, cst.ConcatenatedString):
        return is_literal(node.left) and is_literal(node.right)
    if isinstance(node, cst.UnaryOperation):
        return isinstance(node.operator, (cst.Minus, cst.Plus)) and isinstance(node.expression, _ATOMS[1:])
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return all(not isinstance(e, cst.StarredElement) and is_literal(e.value) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and is_literal(e.key) and is_literal(e.value)
                   for e in node.elements)
    return False


def literal_arguments(call: cst.CSTNode) -> bool:
    """A call whose every argument is a literal (and none is `*x` / `**x`): each call builds the same thing."""
    return isinstance(call, cst.Call) and all(not arg.star and is_literal(arg.value) for arg in call.args)
