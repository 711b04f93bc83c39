"""The effective scan settings for one run: plain, frozen, picklable data (a cache key can hash it)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import PurePath

from llmdoctor.scan.globs import matches_any

DEFAULT_MAX_FILE_SIZE = 2_000_000  # bytes; larger files are skipped with a notice
MAX_FILE_SIZE_LIMIT = 2**30  # what --max-file-size / max-file-size may raise it to (libcst: ~0.5 GB per MB)


@dataclass(frozen=True)
class ScanConfig:
    root: str = ""  # directory that `exclude` / `per-file-ignores` globs are relative to
    select: tuple[str, ...] = ()  # rule ids or prefixes ("LLM"); empty = every rule
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, ids)
    severity: tuple[tuple[str, str], ...] = ()  # (rule id, severity) overrides
    exclude: tuple[str, ...] = ()
    rules_dirs: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    respect_gitignore: bool = True
    every_context: bool = False  # report candidates in every execution context (ignore the rules' `contexts:`)
    control_plane: tuple[tuple[str, str], ...] = ()  # (path glob, function glob or ""): entry points declared
    # control plane (admin consoles, provisioning): what only they reach has its own context
    python_platform: str = "linux"  # the `sys.platform` the code is served on; "all": no platform test decided
    source: str | None = None  # the config file these settings came from, if any
    # what `scan` does with the findings, not what it finds: kept out of repr(), so out of the cache key
    fix: bool = field(default=False, repr=False)
    unsafe_fixes: bool = field(default=False, repr=False)
    fix_timeout: float | None = field(default=None, repr=False)  # seconds, for LLM006's fix

    def relative(self, path: str) -> str:
        """`path` relative to `root` in POSIX form (as given when it is not below root)."""
        if self.root and os.path.isabs(path):
            try:
                return PurePath(os.path.relpath(path, self.root)).as_posix()
            except ValueError:
                pass
        return PurePath(path).as_posix()

    def rule_enabled(self, rule_id: str, path: str) -> bool:
        if self.select and not any(rule_id.startswith(s) for s in self.select):
            return False
        if any(rule_id.startswith(i) for i in self.ignore):
            return False
        if self.per_file_ignores:
            relative = self.relative(path)
            for pattern, ids in self.per_file_ignores:
                if any(rule_id.startswith(i) for i in ids) and matches_any([pattern], relative):
                    return False
        return True

    def declared_control_plane(self, path: str, function: str) -> bool:
        """Whether the entry point `function` (its qualified name in the module, `Class.method`) of the file
        `path` is declared control plane (`control-plane = ["app/admin/*", "app/api.py::reset_*"]`)."""
        if not self.control_plane:
            return False
        relative = self.relative(path)
        return any(matches_any([glob], relative) and (not name or fnmatch.fnmatchcase(function, name))
                   for glob, name in self.control_plane)

    def severity_for(self, rule_id: str, default: str) -> str:
        for rid, severity in self.severity:
            if rid == rule_id:
                return severity
        return default

    def fingerprint(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()
