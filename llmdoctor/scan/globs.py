"""Path globs: `exclude` / `per-file-ignores` globs, and gitignore(5)-style patterns (`.gitignore` lines,
`tokens --glob`).

`matches` (exclude, per-file-ignores): a pattern without `/` matches any path component (`build`,
`*_pb2.py`); a pattern with `/` matches the path from the root (`tests/*`, `src/**/generated/*.py`); a
pattern also matches everything below a directory it matches. `**` and `*` both match across `/` (fnmatch
semantics).

`PathGlob` (gitignore-style): a pattern with a `/` (a trailing one aside) is anchored and matches the whole
path from its root; one without matches the last name at any depth. `*`, `?` and `[...]` stay within a
name, `**/` matches any number of folders, `\\` escapes.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache


def matches(pattern: str, relative_posix: str) -> bool:
    pattern = pattern.strip().removeprefix("./").rstrip("/")
    if not pattern:
        return False
    parts = relative_posix.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    pattern = pattern.lstrip("/")
    for end in range(1, len(parts) + 1):
        if fnmatch.fnmatchcase("/".join(parts[:end]), pattern):
            return True
    return False


def matches_any(patterns, relative_posix: str) -> bool:
    return any(matches(p, relative_posix) for p in patterns)


@dataclass(frozen=True)
class PathGlob:
    regex: re.Pattern[str]
    anchored: bool

    @classmethod
    def parse(cls, pattern: str) -> PathGlob | None:
        """The glob of a gitignore-style `pattern` whose trailing `/` is already removed; None when empty."""
        anchored = "/" in pattern
        body = pattern.lstrip("/")
        return cls(glob_regex(body), anchored) if body else None

    def matches(self, relative_posix: str) -> bool:
        target = relative_posix if self.anchored else relative_posix.rsplit("/", 1)[-1]
        return self.regex.match(target) is not None


@lru_cache(maxsize=64)
def _parsed(pattern: str) -> PathGlob | None:
    return PathGlob.parse(pattern.rstrip("/"))


def glob_matches(pattern: str, relative_posix: str) -> bool:
    """Whether the gitignore-style `pattern` matches the file at `relative_posix`."""
    parsed = _parsed(pattern)
    return parsed is not None and parsed.matches(relative_posix)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a `/`-separated gitignore(5) glob, matched against a whole relative path."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")
