"""Count a long text in chunks whose counts add up to exactly the count of the whole text, in bounded memory.

tiktoken splits a text with its encoding's regex into pieces and runs byte-pair merging on each piece alone,
so a text cut where one piece ends and the next begins counts the same in two parts. Measured on o200k_base
(docs/reliability.md): the whole-text call keeps every token id (a Python int each) and, per piece, ~45 bytes
of merge state per byte of the piece; 100 MB without whitespace took 79 s and 4.9 GB in one call. In chunks of
about CHUNK_CHARS, memory is bounded by the chunk, and the counts come from tiktoken's token buffer (4 bytes a
token) instead of a list.

Where a piece boundary surely is, for the regexes of cl100k_base and o200k_base (o200k_harmony shares
o200k's): between a numeric character (`\\p{N}`) and a non-numeric one, the left one not whitespace (digits
are only ever a piece of digits; a whitespace run at the end of a chunk would meet end-of-text in its
`\\s+(?!\\S)` lookahead instead of the next character); and after a line feed followed by a character that
is neither whitespace nor `/` (only whitespace alternatives, and o200k's `[\\r\\n/]*` suffix, take a line feed).
Where none is near, the encoding's own regex, run from the chunk's start (a piece start), finds the next
piece end after a non-whitespace character. A single piece longer than MAX_PIECE_CHARS (a run of letters or
punctuation with no break at all) is not counted: tiktoken needs ~3 s and ~45 MB per MB for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

CHUNK_CHARS = 1 << 20  # count in parts of about this many characters
SEARCH_CHARS = 1 << 16  # how far past a chunk's nominal end to look for a sure boundary first
MAX_PIECE_CHARS = 4 << 20  # one regex piece longer than this is not counted (minutes, gigabytes)

_KNOWN_FAMILIES = ("cl100k", "o200k")  # tiktoken's split patterns (tiktoken_ext/openai_public.py)


class PieceTooLong(ValueError):
    """A single regex piece too long to count within the bounds."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length


def _family(pattern: str) -> str | None:
    """Which of the known split patterns `pattern` is (by its distinctive parts), or None."""
    if r"\p{N}{1,3}" not in pattern:
        return None
    if r"[\r\n/]*" in pattern and r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" in pattern:
        return "o200k"
    if r"\p{L}+" in pattern or r"\p{L}++" in pattern:
        return "cl100k"
    return None


@lru_cache(maxsize=4)
def _compiled(pattern: str):
    import regex

    return regex.compile(pattern)


@lru_cache(maxsize=1)
def _sure_boundary():
    import regex

    # a position between: a non-whitespace non-numeric and a numeric char; a numeric and a non-numeric char;
    # a line feed and a char that is neither whitespace nor "/"
    return regex.compile(r"(?<=[^\s\p{N}])(?=\p{N})|(?<=\p{N})(?=\P{N})|(?<=\n)(?=[^\s/])")


def chunks(text: str, pattern: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """`text` in consecutive parts, each starting at a piece boundary of `pattern` (a tiktoken split regex of
    a known family); the whole text when it is short or the pattern is not one this module knows."""
    if len(text) <= chunk_chars or _family(pattern) not in _KNOWN_FAMILIES:
        yield text
        return
    sure = _sure_boundary()
    start = 0
    while len(text) - start > chunk_chars:
        target = start + chunk_chars
        found = sure.search(text, target, min(len(text), target + SEARCH_CHARS)) or \
            sure.search(text, start + chunk_chars // 2, target)
        end = found.start() if found else _piece_end(text, pattern, start, target)
        if end is None:
            break
        yield text[start:end]
        start = end
    yield text[start:]


def _piece_end(text: str, pattern: str, start: int, target: int) -> int | None:
    """The first end of a piece at or after `target`, after a non-whitespace character, by the encoding's own
    regex run from `start` (a piece start), on ASCII text only (where Python's `regex` and tiktoken's Rust
    engine agree on every character class); None when there is none to be sure of. PieceTooLong when one
    piece runs past MAX_PIECE_CHARS."""
    limit = min(len(text), target + MAX_PIECE_CHARS)
    if not text[start:limit].isascii():
        return None
    compiled = _compiled(pattern)
    position = start
    while position < limit:
        match = compiled.match(text, position)
        if match is None or match.end() == position:
            return None
        end = match.end()
        if end - position > MAX_PIECE_CHARS:
            raise PieceTooLong(end - position)
        if end >= target and end < len(text) and not text[end - 1].isspace():
            return end
        position = end
    return None


def count(encoding, text: str) -> int:
    """The number of tokens `encoding.encode_ordinary(text)` returns, chunk by chunk."""
    pattern = getattr(encoding, "_pat_str", "")
    core = getattr(encoding, "_core_bpe", None)
    to_buffer = getattr(core, "encode_to_tiktoken_buffer", None)
    total = 0
    for part in chunks(text, pattern):
        if to_buffer is not None:  # 4 bytes a token instead of a Python int each
            total += memoryview(to_buffer(part, set())).nbytes // 4
        else:
            total += len(encoding.encode_ordinary(part))
    return total
