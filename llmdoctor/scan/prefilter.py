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
