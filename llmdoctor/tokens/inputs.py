"""Which files `llmdoctor tokens` reads: named files, directories walked for text files, or stdin.

Directory walks skip what `scan` skips (.git, virtualenvs, node_modules, __pycache__, tool caches and
what .gitignore files ignore) and binary files. This is a small local walker; it supports the common
.gitignore forms (`name`, `dir/`, `/anchored`, `*.ext`, `**`, `!negation`) of the files found on the way
down. `--glob` picks files by their path relative to the directory given (`prompts/**/*.txt`); a pattern
without `/` matches the file name at any depth.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "site-packages",
})
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Discovered:
    path: Path
    explicit: bool  # named on the command line (binary → error) rather than found in a directory (skipped)


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a `/`-separated glob: `**` any number of directories, `*` and `?` within one name."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matches(pattern: str, relative: str) -> bool:
    if "/" not in pattern.strip("/"):
        return bool(glob_regex(pattern).match(relative.rsplit("/", 1)[-1]))
    return bool(glob_regex(pattern.lstrip("/")).match(relative))


@lru_cache(maxsize=256)
def _gitignore_rules(directory: str) -> tuple[_Rule, ...]:
    try:
        text = Path(directory, ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line
        line = line.removeprefix("\\")
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        if "/" in line:  # anchored to the .gitignore's folder
            regex = glob_regex(line.lstrip("/"))
        else:
            regex = re.compile(r"(?:.*/)?" + glob_regex(line).pattern)
        rules.append(_Rule(regex, negated, dir_only))
    return tuple(rules)


def _ignored(path: Path, is_dir: bool, ignore_dirs: list[Path]) -> bool:
    """Git's rule: the last matching pattern wins, deeper .gitignore files after shallower ones."""
    ignored = False
    for directory in ignore_dirs:
        try:
            relative = path.relative_to(directory).as_posix()
        except ValueError:
            continue
        for rule in _gitignore_rules(str(directory)):
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(relative):
                ignored = not rule.negated
    return ignored


def _is_venv(directory: Path) -> bool:
    return (directory / "pyvenv.cfg").is_file()


def walk(root: Path, glob: str | None) -> Iterator[Path]:
    """Files below `root` in a stable order, minus skipped folders, ignored paths and non-matching names.

    Paths come back as `root / relative`, so they print the way the user named the folder.
    """
    absolute_root = Path(os.path.abspath(root))
    for relative in _walk(absolute_root, absolute_root, glob, _enclosing_ignore_dirs(absolute_root)):
        yield root / relative


def _enclosing_ignore_dirs(root: Path) -> list[Path]:
    """Folders from the enclosing git work tree's top down to `root` that hold a .gitignore."""
    chain = []
    for folder in [root, *root.parents]:
        chain.append(folder)
        if (folder / ".git").exists():
            break
    else:
        chain = [root]
    return [folder for folder in reversed(chain) if (folder / ".gitignore").is_file()]


def _walk(root: Path, directory: Path, glob: str | None, ignore_dirs: list[Path]) -> Iterator[str]:
    if directory != root and (directory / ".gitignore").is_file():
        ignore_dirs = [*ignore_dirs, directory]
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            if entry.name in SKIP_DIRS or _is_venv(path) or _ignored(path, True, ignore_dirs):
                continue
            yield from _walk(root, path, glob, ignore_dirs)
        elif entry.is_file():
            if _ignored(path, False, ignore_dirs):
                continue
            relative = path.relative_to(root).as_posix()
            if glob and not glob_matches(glob, relative):
                continue
            yield relative


def discover(paths: list[str], glob: str | None) -> Iterator[Discovered | str]:
    """Each input in order: "-" for stdin, a Discovered file; missing paths come back as Discovered too
    (reading them reports the error)."""
    for given in paths:
        if given == "-":
            yield "-"
            continue
        path = Path(given)
        if path.is_dir():
            for found in walk(path, glob):
                yield Discovered(found, explicit=False)
        else:
            yield Discovered(path, explicit=True)


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_SNIFF_BYTES]
