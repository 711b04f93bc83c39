"""Positions (line, column) for the few nodes that were reported, without paying for the whole file.

libcst's PositionProvider re-generates the code of the entire module with bookkeeping per node: on a 1 MB
file that is ~10 s for two findings, and on small files with findings it was half of a cold scan. We run it
only over the innermost statements that hold a finding (each rendered alone in a one-statement module; an
`elif` inside its `if`) and put each back where it starts, which CPython's own `ast` parser (C, fast) tells
us: lines shift by its first line, columns by its indentation on the lines the enclosing blocks indent.
Every rendered line is checked against the source; on any doubt we fall back to the whole-module provider,
so positions are always exact (tests compare both on every call and name of the fixtures).
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider

FAST_PATH_MIN_CHARS = 0  # files shorter than this use the whole-module provider (the local path pays at any size)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Span:
    start_line: int
    start_column: int  # 0-based, as libcst
    end_line: int
    end_column: int


def positions_for(module: cst.Module, source: str, wanted: list[tuple[cst.CSTNode, cst.CSTNode | None]],
                  *, min_chars: int = FAST_PATH_MIN_CHARS, tree: ast.Module | None = None) -> dict[int, Span]:
    """Spans by id(node) for every (node, innermost statement holding it) in `wanted`, and for those
    statements too. `tree`: CPython's tree of `source`, when the caller has it (else it is parsed here)."""
    if len(source) >= min_chars:
        try:
            spans = _by_statement(module, source, wanted, tree)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            spans = None
        if spans is not None:
            return spans
    return _whole_module(module, [n for pair in wanted for n in pair if n is not None])


def provider_positions(module: cst.Module):
    """What `MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)` computes, without
    the wrapper's extra batched visit of the whole tree (run even when no batchable provider is asked
    for: it rebuilt every node, about as costly as the code generation itself)."""
    provider = PositionProvider()
    provider._computed = {}
    provider._gen_impl(module)
    return provider._computed


def _whole_module(module: cst.Module, nodes: list[cst.CSTNode]) -> dict[int, Span]:
    positions = provider_positions(module)
    return {id(node): _span(positions[node], 0) for node in nodes if node in positions}


def _span(code_range, shift: int) -> Span:
    return Span(code_range.start.line + shift, code_range.start.column,
                code_range.end.line + shift, code_range.end.column)


def _by_statement(module, source, wanted, tree: ast.Module | None = None) -> dict[int, Span] | None:
    """Positions from the statements holding the wanted nodes, each rendered alone (a one-statement module)
    and put back where CPython's `ast` says it starts; every rendered line is checked against the source
    (verbatim, or with the statement's indentation in front), else None: the caller falls back."""
    rendered_as = _statement_first_lines(module, source, tree)
    if rendered_as is None:
        return None
    needed: dict[int, tuple[cst.CSTNode, int, list[cst.CSTNode]]] = {}
    for node, statement in wanted:
        if statement is None or id(statement) not in rendered_as:
            return None
        rendered, first = rendered_as[id(statement)]
        needed.setdefault(id(rendered), (rendered, first, []))[2].extend(n for n in (node, statement) if n is not None)
    source_lines = _LINE_BREAK.split(source)
    spans: dict[int, Span] = {}
    for statement, first, nodes in needed.values():
        placed = _place(module, statement, first, source_lines)
        if placed is None:
            return None
        positions, line_shift, column_shift = placed
        for node in nodes:
            where = positions.get(node)
            if where is None or where.start.line not in column_shift or where.end.line not in column_shift:
                return None
            spans[id(node)] = Span(where.start.line + line_shift, where.start.column + column_shift[where.start.line],
                                   where.end.line + line_shift, where.end.column + column_shift[where.end.line])
    return spans


def _place(module: cst.Module, statement: cst.CSTNode, first: int, source_lines: list[str]):
    """(positions in the statement rendered alone, line shift, column shift per rendered line) or None."""
    mini = cst.Module(body=[statement], header=(), footer=(), encoding=module.encoding,
                      default_indent=module.default_indent, default_newline=module.default_newline,
                      has_trailing_newline=True)
    leading = len(statement.leading_lines) if hasattr(statement, "leading_lines") else 0
    mini_lines = _LINE_BREAK.split(mini.code)[:-1]  # the last item follows the trailing newline
    count = len(mini_lines) - leading
    if count <= 0 or first - 1 + count > len(source_lines):
        return None
    head = source_lines[first - 1]
    if not head.endswith(mini_lines[leading]):
        return None
    indent = head[: len(head) - len(mini_lines[leading])]
    if indent.strip(" \t\f"):
        return None
    column_shift: dict[int, int] = {}
    for offset in range(count):
        rendered, original = mini_lines[leading + offset], source_lines[first - 1 + offset]
        if original == rendered:
            column_shift[leading + offset + 1] = 0  # written as in the source (inside brackets, strings)
        elif original == indent + rendered:
            column_shift[leading + offset + 1] = len(indent)  # indented by the enclosing blocks
        else:
            return None
    return provider_positions(mini), first - 1 - leading, column_shift


def _statement_first_lines(module: cst.Module, source: str, tree: ast.Module | None = None,
                           ) -> dict[int, tuple[cst.CSTNode, int]] | None:
    """id(libcst statement) -> (the statement to render for it, the line where that one's code starts,
    decorators included), from `ast` (`tree`, or `source` parsed): itself, except an `elif`, which only
    renders inside its `if`. None when the two trees' statements do not pair up."""
    if tree is None:
        try:
            with warnings.catch_warnings():  # SyntaxWarning (invalid escapes...) is the user's business, not ours
                warnings.simplefilter("ignore")
                tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    out: dict[int, tuple[cst.CSTNode, int]] = {}
    return out if _pair(module.body, tree.body, out) else None


def _pair(statements, nodes: list[ast.stmt], out: dict, owner: tuple[cst.CSTNode, int] | None = None) -> bool:
    index = 0
    for statement in statements:
        if index >= len(nodes):
            return False
        node = nodes[index]
        decorators = getattr(node, "decorator_list", None)
        line = min(node.lineno, *(d.lineno for d in decorators)) if decorators else node.lineno
        out[id(statement)] = rendered = owner or (statement, line)
        if isinstance(statement, cst.SimpleStatementLine):
            index += len(statement.body)
            continue
        index += 1
        for inner, inner_nodes, is_elif in _blocks(statement, node):
            if not _pair(inner, inner_nodes, out, rendered if is_elif else None):
                return False
    return index == len(nodes)


def _blocks(statement: cst.CSTNode, node: ast.stmt) -> list[tuple[list, list, bool]]:
    """The statement lists of a compound statement, each with its ast counterpart and whether it is an
    `elif` (one-line suites hold no statement of their own)."""
    pairs: list[tuple[list, list, bool]] = []

    def add(suite, ast_body) -> None:
        if isinstance(suite, cst.IndentedBlock):
            pairs.append((list(suite.body), ast_body, False))

    add(getattr(statement, "body", None), getattr(node, "body", []))
    for handler, ast_handler in zip(getattr(statement, "handlers", ()) or (), getattr(node, "handlers", [])):
        add(handler.body, ast_handler.body)
    for case, ast_case in zip(getattr(statement, "cases", ()) or (), getattr(node, "cases", [])):
        add(case.body, ast_case.body)
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        pairs.append(([orelse], getattr(node, "orelse", []), True))  # elif: an If in the else branch
    elif orelse is not None:
        add(orelse.body, getattr(node, "orelse", []))
    final = getattr(statement, "finalbody", None)
    if final is not None:
        add(final.body, getattr(node, "finalbody", []))
    return pairs
