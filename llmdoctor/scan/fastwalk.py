"""A read-only traversal of a libcst tree that does not rebuild it.

`node.visit(visitor)` in libcst rebuilds every node it passes (`_visit_and_replace_children` constructs and
validates a new dataclass per node, and calls `on_visit_attribute`/`on_leave_attribute` per field), even
for a read-only `CSTVisitor`: profiled on 546 real files it was ~80% of the scan time, five times the
parse. `walk` calls the same `on_visit(node)` / `on_leave(node)` on the same (original) nodes in the same
order, reading children straight from the dataclass fields:

- the lexical order of a node's fields is learned from libcst itself (`node.children`) once per
  (node type, set of fields holding nodes) and checked: if the children are not exactly the fields'
  contents laid end to end, that shape keeps using `node.children`;
- whitespace, comment and operator nodes (`libcst._nodes.whitespace` / `libcst._nodes.op`, whose
  subtrees hold nothing but more of them) are not entered, unless the visitor asks for any of those
  types by name (`wanted`), in which case nothing is skipped;
- `handles(type)` lets the caller skip the callbacks for node types it does nothing with (most nodes
  are names, attributes, arguments and literals), while still walking their children;
- the traversal is iterative: a deeply nested file cannot exhaust the recursion limit here.

tests/test_scan_parallel_walk.py checks the event sequence equals libcst's on every fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter

import libcst as cst

TRIVIA_MODULES = ("libcst._nodes.whitespace", "libcst._nodes.op")

_getters: dict[type, tuple[tuple[str, ...], Callable]] = {}
_orders: dict[tuple, tuple[int, ...] | None] = {}
_node_types: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    """issubclass(kind, CSTNode), memoised: CSTNode is an ABC, whose isinstance checks are slow."""
    found = _node_types.get(kind)
    if found is None:
        found = _node_types[kind] = issubclass(kind, cst.CSTNode)
    return found


def _fields_of(cls: type) -> tuple[tuple[str, ...], Callable]:
    """The dataclass field names of `cls` and one C-level getter returning all their values as a tuple."""
    names = tuple(cls.__dataclass_fields__)
    if len(names) > 1:
        getter = attrgetter(*names)
    elif names:
        only = attrgetter(names[0])
        getter = lambda node: (only(node),)
    else:
        getter = lambda node: ()
    _getters[cls] = (names, getter)
    return names, getter


def _learn(node: cst.CSTNode, values: tuple, present: tuple[int, ...]) -> tuple[int, ...] | None:
    """Field order (indices) libcst visits these fields in, or None when children are not field-contiguous."""
    children = list(node.children)
    owner: dict[int, int] = {}
    for index in present:
        value = values[index]
        for child in (value if isinstance(value, (list, tuple)) else (value,)):
            owner[id(child)] = index
    order: list[int] = []
    for child in children:
        index = owner.get(id(child))
        if index is None:
            return None
        if not order or order[-1] != index:
            if index in order:
                return None  # a field's children interleaved with another field's
            order.append(index)
    laid_out: list[cst.CSTNode] = []
    for index in order:
        value = values[index]
        laid_out.extend(value if isinstance(value, (list, tuple)) else (value,))
    if set(order) != set(present) or [id(c) for c in laid_out] != [id(c) for c in children]:
        return None
    return tuple(order)


def children(node: cst.CSTNode) -> list[cst.CSTNode] | Sequence[cst.CSTNode]:
    """`node.children` (same nodes, same order) without rebuilding `node`."""
    cls = type(node)
    entry = _getters.get(cls)
    _, getter = entry if entry is not None else _fields_of(cls)
    values = getter(node)
    node_types = _node_types
    present = []
    for index, value in enumerate(values):
        kind = type(value)
        if kind is list or kind is tuple:
            if not value:
                continue
            kind = type(value[0])
        is_node = node_types.get(kind)
        if is_node is None:
            is_node = _is_node_type(kind)
        if is_node:
            present.append(index)
    key = (cls, *present)
    try:
        order = _orders[key]
    except KeyError:
        order = _orders[key] = _learn(node, values, tuple(present))
    if order is None:
        return node.children
    out: list[cst.CSTNode] = []
    for index in order:
        value = values[index]
        if type(value) in (list, tuple):
            out.extend(value)
        else:
            out.append(value)
    return out


_trivia: dict[type, bool] = {}


def _is_trivia(cls: type) -> bool:
    found = _trivia.get(cls)
    if found is None:
        found = _trivia[cls] = cls.__module__ in TRIVIA_MODULES
    return found


def code_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`children(node)` without the whitespace, comment and operator nodes (their subtrees hold only more
    of them): for subtree searches that look for expressions and statements."""
    out = []
    for child in children(node):
        trivia = _trivia.get(type(child))
        if trivia is None:
            trivia = _is_trivia(type(child))
        if not trivia:
            out.append(child)
    return out


def trivia_names() -> frozenset[str]:
    return frozenset(name for name, value in vars(cst).items()
                     if isinstance(value, type) and value.__module__ in TRIVIA_MODULES)


def walk(root: cst.CSTNode, on_visit: Callable[[cst.CSTNode], object],
         on_leave: Callable[[cst.CSTNode], object], wanted: Iterable[str] = (),
         handles: Callable[[type], bool] | None = None) -> None:
    """Pre-order `on_visit`, post-order `on_leave` over `root` (children always entered). Trivia is
    skipped unless `wanted` (node type names the visitor handles) names a trivia type. `handles(type)`:
    when given, the callbacks run only for node types it accepts (their children are still walked)."""
    prune = not (frozenset(wanted) & trivia_names())
    handled: dict[type, bool] = {}
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    while stack:
        node, entered = stack.pop()
        if entered:
            on_leave(node)
            continue
        kind = type(node)
        wanted_here = handled.get(kind)
        if wanted_here is None:
            wanted_here = handled[kind] = handles is None or handles(kind)
        if wanted_here:
            on_visit(node)
            stack.append((node, True))
        kids = children(node)
        for child in reversed(kids if isinstance(kids, list) else list(kids)):
            if prune:
                trivia = _trivia.get(type(child))
                if trivia is None:
                    trivia = _is_trivia(type(child))
                if trivia:
                    continue
            stack.append((child, False))
