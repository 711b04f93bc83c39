"""Suppression comments. Each names exactly the codes it silences:

- `x()  # noqa: LLM004` or `# noqa: LLM004, E501` on the line of the finding (bare `# noqa`: every code);
- `# llmdoctor: ignore[LLM004]` on the line, or on its own line right above the statement
  (bare `# llmdoctor: ignore`: every code);
- either one on the FIRST line of a multi-line statement silences findings on its later lines;
- `# llmdoctor: ignore-file` (or `ignore-file[LLM004]`) on a line of its own: the whole file.

Comments are found with the tokenizer (not a regex over lines), so a `# noqa` inside a string does nothing;
the tokenizer only runs on files that have findings and contain a suppression-like text.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

ALL = "*"
_CODE_LIST = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
IGNORE = re.compile(r"#\s*llmdoctor:\s*ignore(?!-)(?:\[(?P<codes>[^\]]*)\])?")
IGNORE_FILE = re.compile(r"^[ \t]*#\s*llmdoctor:\s*ignore-file(?:\[(?P<codes>[^\]]*)\])?", re.MULTILINE)
_HINT = re.compile(r"noqa|llmdoctor:", re.IGNORECASE)


def _codes(text: str | None) -> set[str]:
    if text is None:
        return {ALL}
    codes = {c.upper() for c in re.split(r"[\s,]+", text) if c}
    return codes or {ALL}


def file_ignores(source: str) -> set[str]:
    """Codes silenced for the whole file ({"*"} = all), from `# llmdoctor: ignore-file[...]` lines."""
    codes: set[str] = set()
    for match in IGNORE_FILE.finditer(source):
        codes |= _codes(match.group("codes"))
    return codes


@dataclass
class Suppressions:
    on_line: dict[int, set[str]] = field(default_factory=dict)  # same-line comments
    above: dict[int, set[str]] = field(default_factory=dict)  # own-line ignore comments -> next code line

    def silences(self, code: str, lines: tuple[int, ...], peers: frozenset[str] = frozenset()) -> bool:
        for line in lines:
            for table in (self.on_line, self.above):
                codes = table.get(line)
                if codes and silenced_by(codes, code, peers):
                    return True
        return False


def silenced_by(codes, code: str, peers: frozenset[str] = frozenset()) -> bool:
    """Whether a comment's `codes` silence `code`: they name it, every code, or one of `peers` (another linter's
    code for the same check: `# noqa: S113` written for ruff silences LLM006 on that line)."""
    return ALL in codes or code in codes or not peers.isdisjoint(codes)


def parse_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    if not _HINT.search(source):
        return result
    pending_above: set[str] = set()
    last_code_line = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result  # unreachable for code libcst parsed; never suppress on doubt about comments
    for token in tokens:
        if token.type == tokenize.COMMENT:
            line = token.start[0]
            own_line = token.line[: token.start[1]].strip() == ""
            noqa = NOQA.search(token.string)
            ignore = IGNORE.search(token.string)
            if own_line:
                if ignore:
                    pending_above |= _codes(ignore.group("codes"))
                continue
            codes: set[str] = set()
            if noqa:
                codes |= _codes(noqa.group("codes"))
            if ignore:
                codes |= _codes(ignore.group("codes"))
            if codes:
                result.on_line.setdefault(line, set()).update(codes)
        elif token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        else:
            line = token.start[0]
            if line != last_code_line:
                last_code_line = line
                if pending_above:
                    result.above.setdefault(line, set()).update(pending_above)
                    pending_above = set()
    return result
