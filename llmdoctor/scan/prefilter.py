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
        self.exact_by_last: dict[str, list[tuple[str, ...]]] = {}  # names without wildcards, by last part
        self.pattern_lasts: set[str] = set()  # last parts of wildcard names (`*` may span dots: no more known)
        self.last_is_pattern = False  # some name ends in a wildcard part: any call may be to it
        for name in names:
            self.empty = False
            parts = name.split(".")
            if parts[0] == "builtins":
                parts = parts[1:]
            if not parts or "*" in parts[-1]:
                self.last_is_pattern = True
            elif "*" in name:
                self.pattern_lasts.add(parts[-1])
            else:
                self.exact_by_last.setdefault(parts[-1], []).append(tuple(parts))
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
        return self.may_match_words(identifiers(source), source)

    def may_match_words(self, words, source: str) -> bool:
        """`may_match` for text already split into its identifiers `words`."""
        if self.empty or self.always:
            return True
        for fragments in self.fragments_only:
            if all(f in source for f in fragments):
                return True
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
# (codefacts.py): every identifier the grammar holds, every dotted attribute chain (for literals such as
# `chat.completions.create`), every Python keyword (so literals such as `async` never fail here), `async def`
# once per coroutine function, and `<keyword>=None` per keyword argument given a literal None. A rule that
# passed on the raw text is kept only if it also passes on this text. A file `ast` cannot parse (other
# Python versions' syntax) keeps every rule the first stage kept.

import ast
import warnings

from llmdoctor.scan.codefacts import read_code


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
    facts = read_code(source)
    return None if facts is None else facts.code_text()
