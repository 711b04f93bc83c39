"""The name pre-filter: a rule that only reports calls named in its tables can only fire in a file that
spells out every part of one of those names.

A qualified name such as `openai.OpenAI.chat.completions.create` is assembled by the semantic model from
identifiers written in the file (import statements, attribute names, constructor calls, annotations); the
only synthesised part is the `builtins.` prefix. So for a table entry to match anywhere in a file, each of
its components must occur in the file as a whole identifier, and each literal fragment of a wildcard
component (`*Tokenizer*`) as a substring. This is stricter than "the root name occurs" (`time` is in most
files; `time` AND `sleep` in far fewer) and still never skips a file where the entry could match.

`NameIndex` groups the names by their first required word, so a file is checked against the names whose
first word it contains, not against every name (the SDK tables hold thousands).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_words_memo: list = [None, frozenset()]  # (source, its identifiers) of the last file asked about


def identifiers(source: str) -> frozenset[str]:
    if _words_memo[0] is not source:
        _words_memo[0], _words_memo[1] = source, frozenset(IDENTIFIER.findall(source))
    return _words_memo[1]


class NameIndex:
    def __init__(self, names: Iterable[str]) -> None:
        self.by_first: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
        self.always = False  # some name has no literal part at all: every file passes
        self.fragments_only: list[tuple[str, ...]] = []
        self.empty = True
        for name in names:
            self.empty = False
            parts = name.split(".")
            if parts[0] == "builtins":
                parts = parts[1:]
            words = tuple(p for p in parts if p and "*" not in p)
            fragments = tuple(f for p in parts if "*" in p for f in p.split("*") if f)
            if words:
                self.by_first.setdefault(words[0], []).append((words[1:], fragments))
            elif fragments:
                self.fragments_only.append(fragments)
            else:
                self.always = True

    def may_match(self, source: str) -> bool:
        """True when some name could resolve in `source` (no names: no condition)."""
        if self.empty or self.always:
            return True
        for fragments in self.fragments_only:
            if all(f in source for f in fragments):
                return True
        words = identifiers(source)
        for first in self.by_first.keys() & words:
            for rest, fragments in self.by_first[first]:
                if all(w in words for w in rest) and all(f in source for f in fragments):
                    return True
        return False


# ---------------------------------------------------------------------------------------------------------
# Second stage: the same pre-filters, asked again about the file's code only.
#
# The literal and name pre-filters read the raw text, so a word in a comment, a docstring or any string
# literal lets a file through. Every qualified name the semantic model builds, every `async def` and every
# keyword argument a rule reads comes from code, never from a string's contents or a comment (string
# annotations are not evaluated). `code_text` lists what the code spells out, read with CPython's own parser
# (`ast`, in C, ~10x faster than libcst): every identifier the grammar holds (from the `identifier` fields of
# the ast node types: names, attributes, imported modules and aliases, defs, parameters, keyword names...),
# every dotted attribute chain (`client.chat.completions.create`, for literals such as
# `chat.completions.create`), every Python keyword (so literals such as `async` never fail here), `async def`
# once per coroutine function, and `<keyword>=None` per keyword argument given a literal None. A rule that
# passed on the raw text is kept only if it also passes on this text. A file `ast` cannot parse (other
# Python versions' syntax) keeps every rule the first stage kept.

import ast
import keyword as _keyword
import warnings

_KEYWORDS = " ".join([*_keyword.kwlist, *getattr(_keyword, "softkwlist", [])])


_SCALAR_TYPES = frozenset({"identifier", "int", "string", "constant"})
_SKIPPED_TYPES = frozenset({"expr_context", "boolop", "operator", "unaryop", "cmpop", "type_ignore"})


def _grammar() -> tuple[dict[type, tuple[str, ...]], dict[type, tuple[str, ...]]]:
    """Per ast node type: its fields of ASDL type `identifier`, and its fields that may hold nodes worth
    entering (read from the classes' signatures, e.g. `FunctionDef(identifier name, arguments args, ...)`)."""
    identifiers: dict[type, tuple[str, ...]] = {}
    nodes: dict[type, tuple[str, ...]] = {}
    for value in vars(ast).values():
        if not (isinstance(value, type) and issubclass(value, ast.AST) and value.__doc__ and value._fields):
            continue
        signature = re.match(r"\w+\((.*)\)\s*$", value.__doc__.strip().splitlines()[0])
        if signature is None:
            continue
        for declared in signature.group(1).split(","):
            kind, _, name = declared.strip().partition(" ")
            kind = kind.rstrip("*?")
            if name not in value._fields:
                continue
            if kind == "identifier":
                identifiers[value] = (*identifiers.get(value, ()), name)
            elif kind not in _SCALAR_TYPES and kind not in _SKIPPED_TYPES:
                nodes[value] = (*nodes.get(value, ()), name)
    return identifiers, nodes


IDENTIFIER_FIELDS, NODE_FIELDS = _grammar()


def python_parse_problem(source: str) -> BaseException | None:
    """Why CPython's own parser rejects `source` (SyntaxError, RecursionError, MemoryError...), or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return err
    return None


def code_text(source: str) -> str | None:
    """What the code of `source` spells out (see above), or None when `ast` cannot parse it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc.: libcst's parse is the one that reports
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out: list[str] = [_KEYWORDS]
    words: set[str] = set()
    fields_of = IDENTIFIER_FIELDS
    attribute, keyword_arg, constant = ast.Attribute, ast.keyword, ast.Constant
    node_fields = NODE_FIELDS
    stack: list = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is constant or node is None:
            continue  # a string's contents; `None` keys of `{**d}`
        for name in node_fields.get(kind, ()):
            value = getattr(node, name, None)
            if type(value) is list:
                stack.extend(value)
            elif value is not None:
                stack.append(value)
        fields = fields_of.get(kind)
        if fields is not None:
            for name in fields:
                value = getattr(node, name, None)
                if value is None:
                    continue
                if type(value) is str:
                    words.update(value.split("."))
                else:
                    for item in value:
                        words.update(item.split("."))
            if kind is attribute:
                out.append(_chain(node))
            elif kind is keyword_arg:
                if node.arg is not None and type(node.value) is constant and node.value.value is None:
                    out.append(f"{node.arg}=None")
            elif kind is ast.AsyncFunctionDef:
                out.append("async def")
    out.extend(words)
    return " ".join(out)


def _chain(node: ast.Attribute) -> str:
    parts = [node.attr]
    value = node.value
    while type(value) is ast.Attribute:
        parts.append(value.attr)
        value = value.value
    if type(value) is ast.Name:
        parts.append(value.id)
    return ".".join(reversed(parts))
