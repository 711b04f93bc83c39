"""A small `.gitignore` matcher: the rules git documents (gitignore(5)) that matter for picking files.

Supported: comments, blank lines, `!` negation, trailing `/` (directories only), leading or middle `/`
(anchored to the .gitignore's folder), `*`, `?`, `[...]`, `**`. Patterns come from every `.gitignore` in
the folders from the repository root (the folder holding `.git`) down to the file; deeper files win, the
last matching line wins, as in git. Outside a git work tree nothing is ignored.
"""

from __future__ import annotations

import os
from functools import lru_cache

from llmdoctor.scan.globs import PathGlob


class _Rules:
    def __init__(self, base: str, lines: list[str]) -> None:
        self.base = base
        self.rules: list[tuple[PathGlob, bool, bool]] = []  # glob, negated, dir_only
        for raw in lines:
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            line = line.rstrip() if not line.endswith("\\ ") else line
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            dir_only = line.endswith("/")
            glob = PathGlob.parse(line.rstrip("/"))
            if glob is not None:
                self.rules.append((glob, negated, dir_only))

    def verdict(self, relative: str, is_dir: bool) -> bool | None:
        """True ignored, False re-included, None no opinion."""
        result = None
        for glob, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if glob.matches(relative):
                result = not negated
        return result


class GitIgnore:
    def __init__(self) -> None:
        self._rules = lru_cache(maxsize=None)(self._load)
        self._roots: dict[str, str | None] = {}

    def _load(self, directory: str) -> _Rules | None:
        path = os.path.join(directory, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return _Rules(directory, handle.readlines())
        except OSError:
            return None

    def _repo_root(self, directory: str) -> str | None:
        if directory in self._roots:
            return self._roots[directory]
        if os.path.exists(os.path.join(directory, ".git")):
            root = directory
        else:
            parent = os.path.dirname(directory)
            root = None if parent == directory else self._repo_root(parent)
        self._roots[directory] = root
        return root

    def ignored(self, path: str, *, is_dir: bool, ancestors: bool = False) -> bool:
        """Whether git would ignore `path`; with `ancestors`, also when a folder above it is ignored
        (the walk never enters ignored folders, so it only asks about the path itself)."""
        if ancestors:
            root = self._repo_root(os.path.dirname(path))
            directory = os.path.dirname(path)
            while root is not None and directory != root and directory.startswith(root):
                if self._self_ignored(directory, is_dir=True):
                    return True
                directory = os.path.dirname(directory)
        return self._self_ignored(path, is_dir=is_dir)

    def _self_ignored(self, path: str, *, is_dir: bool) -> bool:
        parent = os.path.dirname(path)
        root = self._repo_root(parent)
        if root is None:
            return False
        # a path is ignored if it or any parent directory is (git does not descend into ignored folders)
        chain = []
        directory = parent
        while True:
            chain.append(directory)
            if directory == root:
                break
            directory = os.path.dirname(directory)
        result = False
        for directory in reversed(chain):
            rules = self._rules(directory)
            if rules is None:
                continue
            verdict = rules.verdict(os.path.relpath(path, directory).replace(os.sep, "/"), is_dir)
            if verdict is not None:
                result = verdict
        return result
