"""Positions (line, column) for the few nodes that were reported, without paying for the whole file.

libcst's PositionProvider re-generates the code of the entire module with bookkeeping per node: on a 1 MB
file that is ~10 s for two findings. For large files we run it only over the top-level statements that
hold a finding (each wrapped in a one-statement module) and shift the lines by where that statement
starts, which CPython's own `ast` parser (C, fast) tells us. Every shifted statement is checked against the
source text; on any doubt we fall back to the whole-module provider, so positions are always exact.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider

FAST_PATH_MIN_CHARS = 20_000  # below this the whole-module provider is cheap enough
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Span:
    start_line: int
    start_column: int  # 0-based, as libcst
    end_line: int
    end_column: int


def positions_for(module: cst.Module, source: str, wanted: list[tuple[cst.CSTNode, cst.CSTNode | None]],
                  *, min_chars: int = FAST_PATH_MIN_CHARS) -> dict[int, Span]:
    """Spans by id(node) for every (node, innermost statement holding it) in `wanted`, and for those
    statements too."""
    if len(source) >= min_chars:
        try:
            spans = _by_statement(module, source, wanted)
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


def _by_statement(module, source, wanted) -> dict[int, Span] | None:
    top_of = _top_level_index(module)
    needed: dict[int, list[cst.CSTNode]] = {}
    for node, statement in wanted:
        index = top_of.get(id(statement)) if statement is not None else None
        if index is None:
            return None
        needed.setdefault(index, []).extend(n for n in (node, statement) if n is not None)
    first_lines = _first_code_lines(module, source)
    if first_lines is None:
        return None
    source_lines = _LINE_BREAK.split(source)
    spans: dict[int, Span] = {}
    for index, nodes in needed.items():
        statement = module.body[index]
        mini = cst.Module(body=[statement], header=(), footer=(), encoding=module.encoding,
                          default_indent=module.default_indent, default_newline=module.default_newline,
                          has_trailing_newline=True)
        leading = len(statement.leading_lines) if hasattr(statement, "leading_lines") else 0
        first = first_lines[index]
        mini_lines = _LINE_BREAK.split(mini.code)
        if first - 1 >= len(source_lines) or leading >= len(mini_lines):
            return None
        if mini_lines[leading] != source_lines[first - 1]:
            return None  # the statement does not start where ast says: use the exact slow path
        shift = first - 1 - leading
        positions = provider_positions(mini)
        for node in nodes:
            if node not in positions:
                return None
            spans[id(node)] = _span(positions[node], shift)
    return spans


_SUITE_PARTS = (cst.BaseSuite, cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Else, cst.Finally,
                cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)


def _top_level_index(module: cst.Module) -> dict[int, int]:
    """id(statement) -> index of the top-level statement that contains it (statements only: cheap)."""
    out: dict[int, int] = {}
    for index, top in enumerate(module.body):
        stack: list[cst.CSTNode] = [top]
        while stack:
            node = stack.pop()
            out[id(node)] = index
            if isinstance(node, cst.SimpleStatementLine):
                continue
            stack.extend(child for child in node.children if isinstance(child, _SUITE_PARTS))
    return out


def _first_code_lines(module: cst.Module, source: str) -> list[int] | None:
    """Line where each top-level libcst statement's code starts (decorators included), from `ast`."""
    with warnings.catch_warnings():  # SyntaxWarning (invalid escapes...) is the user's business, not ours
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    body = tree.body
    lines: list[int] = []
    cursor = 0
    for statement in module.body:
        if cursor >= len(body):
            return None
        node = body[cursor]
        line = node.lineno
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            line = min(line, *(d.lineno for d in decorators))
        lines.append(line)
        cursor += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return lines if cursor == len(body) else None
