"""Refuse, before libcst sees it, valid Python that libcst's native parser cannot take.

libcst's parser (Rust, recursive descent) uses stack and time that grow with how deeply an expression nests:
measured with libcst 1.9 on CPython 3.11 (bench/fuzz/README.md, docs/reliability.md):
- a chain of 8,000 `and`/`or` operands, 8,000 `.attr` / `[0]` / `()` trailers, 4,000 nested `lambda`s, or
  an `import` of a 8,000-part dotted name overflow the 8 MiB main-thread stack: the process dies (SIGSEGV),
  with no Python exception to catch (CPython parses all of them);
- time is quadratic in the nesting of one statement: 500 trailers take 0.5 s, 1,000 take 4 s, 2,000 take
  22 s (nested brackets: 150 levels, 0.24 s);
- more than about 3,000 adjacent string literals (`"a" "b" ...`) are a ParserSyntaxError at a position past
  the end of the file.

CPython's own tree (codefacts.read_code parsed it already) tells how deep each statement nests, in libcst's
terms: an `and` chain of n operands is n - 1 levels there (left-nested binary nodes), a dotted name one level
per part, adjacent literals one per literal. Over a bound, the file is one input error naming the line and
the construct; the other files are scanned as usual. Real code stays far below: the deepest statement in
2,321 files of a virtualenv's site-packages nests 85 levels (bench/fuzz/README.md).
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from itertools import accumulate

MAX_NESTING = 400  # levels of one statement's expressions (libcst: ~0.3 s at 400 trailers)
MAX_CHAIN = 2_000  # operands of one and/or chain, adjacent string literals, comprehension clauses
MAX_DOTTED = 500  # parts of one dotted name in an import (libcst: RecursionError at ~1,000)
NESTING_BUDGET = 1_000_000  # sum over a file's statements nesting 50+ levels of levels² (~2-10 s of libcst)
_COUNTED_FROM = 50  # statements nesting fewer levels cost libcst about linear time
_MIN_SPAN = 40  # an expression shorter than this (characters) cannot nest _COUNTED_FROM levels

_STATEMENT_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Refusal:
    reason: str
    line: int | None


def refusal(tree: ast.Module, source: str, parsed: str | None = None) -> Refusal | None:
    """Why libcst must not parse `parsed` (`source`, whose CPython tree is `tree`, with the regions no rule
    needs left out: regions.py), or None. Statements on lines the pruning replaced are not parsed: not counted."""
    starts = _LineStarts(source)
    replaced: set[int] = set()
    if parsed is not None and parsed is not source:
        replaced = {number for number, (old, new) in enumerate(zip(source.splitlines(True), parsed.splitlines(True)), 1)
                    if old != new}
    budget = 0
    stack = list(reversed(tree.body))
    compound, blocks, short = _COMPOUND, _STATEMENT_BLOCKS, _COUNTED_FROM
    while stack:  # every statement, nested ones too (their blocks are not part of their own expressions)
        statement = stack.pop()
        if replaced and statement.lineno in replaced:
            continue  # left out of the parse, with the statements it holds (they are on replaced lines too)
        if type(statement) in compound:
            for name in blocks:
                for item in reversed(getattr(statement, name, None) or ()):
                    if isinstance(item, ast.stmt):
                        stack.append(item)
                    else:  # except handlers, match cases: their bodies
                        stack.extend(reversed(item.body))
        elif statement.lineno == statement.end_lineno and \
                (statement.end_col_offset or 0) - statement.col_offset < short:
            continue  # most statements: too short to nest 50 levels or to hold a long chain
        depth, chain, where = _statement_depth(statement, source, starts)
        limit = MAX_DOTTED if where == "a dotted name" else MAX_CHAIN
        if chain > limit:
            return Refusal(f"too long for the parser the rules run on (libcst): {where} of {chain:,} parts in one "
                           f"statement, at most {limit:,} are parsed (longer ones overflow its stack); the file "
                           "was not checked", statement.lineno)
        if depth > MAX_NESTING:
            return Refusal(f"nested too deeply for the parser the rules run on (libcst): expressions {depth:,} "
                           f"levels deep in one statement, at most {MAX_NESTING} are parsed (its time grows with "
                           "the square of the nesting; it crashes past a few thousand levels); the file was not "
                           "checked", statement.lineno)
        if depth >= short:
            budget += depth * depth
            if budget > NESTING_BUDGET:
                return Refusal(f"nested too deeply for the parser the rules run on (libcst): too many statements "
                               f"nesting {short}+ levels (this one: {depth}; its time grows with the square "
                               "of each one's nesting); the file was not checked", statement.lineno)
    return None


_COMPOUND = frozenset(kind for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For,
                                        ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                                        getattr(ast, "TryStar", None), getattr(ast, "Match", None)) if kind)


class _LineStarts:
    """The character offset of each line's start, computed on the first multi-line span asked for."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._starts: _LineStarts | None = None

    def __getitem__(self, index: int) -> int:
        if self._starts is None:
            self._starts = [0, *accumulate(len(line) for line in self.source.splitlines(True))]
        return self._starts[index]


def _span(node, starts: _LineStarts) -> int:
    """An upper bound of the node's length in characters (CPython gives columns in UTF-8 bytes); nodes without
    a position count as long."""
    line = getattr(node, "lineno", None)
    if line is None:
        return 1 << 30
    if line == node.end_lineno:
        return (node.end_col_offset or 0) - node.col_offset
    try:
        return starts[node.end_lineno - 1] + (node.end_col_offset or 0) - starts[line - 1] - node.col_offset + 1
    except (IndexError, TypeError):
        return 1 << 30


def _roots(statement: ast.stmt) -> list:
    """The statement's own parts: everything but its nested statement blocks."""
    roots = []
    for name in statement._fields:
        value = getattr(statement, name, None)
        if name in _STATEMENT_BLOCKS:
            for item in value or ():
                if type(item) is ast.ExceptHandler and item.type is not None:
                    roots.append(item.type)
                elif type(item) is getattr(ast, "match_case", None):
                    roots.append(item.pattern)
                    if item.guard is not None:
                        roots.append(item.guard)
        elif type(value) is list:
            roots.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            roots.append(value)
    return roots


_CHAINS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _statement_depth(statement: ast.stmt, source: str, starts: _LineStarts) -> tuple[int, int, str]:
    """(deepest nesting of the statement's expressions, longest chain, what that chain is). A chain (`and`/`or`
    operands, dotted-name parts, adjacent literals, comprehension clauses) costs libcst stack, not time."""
    if type(statement) is ast.Import or type(statement) is ast.ImportFrom:
        names = [alias.name for alias in statement.names]
        if type(statement) is ast.ImportFrom and statement.module:
            names.append(statement.module)
        return 0, max(name.count(".") + 1 for name in names), "a dotted name"
    if statement.end_lineno == statement.lineno and \
            (statement.end_col_offset or 0) - statement.col_offset < _COUNTED_FROM:
        return 0, 0, ""  # most statements: too short to matter
    deepest, chain, what = 0, 0, ""
    stack = [(root, 1) for root in _roots(statement) if 1 + _span(root, starts) >= _COUNTED_FROM]
    pop, push, AST = stack.pop, stack.append, ast.AST
    while stack:
        node, depth = pop()
        deepest = max(deepest, depth)
        kind = type(node)
        if kind is ast.BoolOp:
            if len(node.values) > chain:
                chain, what = len(node.values), "an `and`/`or` chain"
        elif kind in _CHAINS:
            if len(node.generators) > chain:
                chain, what = len(node.generators), "a comprehension's `for`/`if` clauses"
        elif kind is ast.Constant or kind is ast.JoinedStr:
            if isinstance(getattr(node, "value", ""), (str, bytes)) and _span(node, starts) > 2 * MAX_CHAIN:
                literals = _adjacent_literals(node, source, starts)
                if literals > chain:
                    chain, what = literals, "a run of adjacent string literals"
            if kind is ast.Constant:
                continue
        depth += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST) and depth + _span(item, starts) >= _COUNTED_FROM:
                        push((item, depth))
            elif isinstance(value, AST) and depth + _span(value, starts) >= _COUNTED_FROM:
                push((value, depth))
    return deepest, chain, what


def _adjacent_literals(node, source: str, starts: _LineStarts) -> int:
    """How many string literals a (merged) constant was written as."""
    start = _offset(source, starts, node.lineno, node.col_offset)
    end = _offset(source, starts, node.end_lineno, node.end_col_offset or 0)
    text = source[start:end]
    count = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_START", -1):
                count += 1
    except (tokenize.TokenError, SyntaxError):
        return 1
    return max(count, 1)


def _offset(source: str, starts: _LineStarts, line: int, utf8_column: int) -> int:
    """The character offset in `source` of a position CPython gives as (line, UTF-8 byte column)."""
    text = source[starts[line - 1]:starts[line]]
    return starts[line - 1] + len(text.encode("utf-8")[:utf8_column].decode("utf-8", errors="ignore"))
