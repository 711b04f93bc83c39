"""Path glob matching for `exclude` and `per-file-ignores` (gitignore-like, on POSIX relative paths).

A pattern without `/` matches any path component (`build`, `*_pb2.py`); a pattern with `/` matches the
path from the root (`tests/*`, `src/**/generated/*.py`); a pattern also matches everything below a
directory it matches. `**` and `*` both match across `/` (fnmatch semantics).
"""

from __future__ import annotations

import fnmatch


def matches(pattern: str, relative_posix: str) -> bool:
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
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
