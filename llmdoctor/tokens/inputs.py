"""Which files `llmdoctor tokens` reads: named files, directories walked for text files, or stdin.

Directories are walked by scan's walker (`llmdoctor.scan.discovery`), so `tokens` skips exactly what `scan`
skips: VCS and tool folders, virtualenvs, node_modules, __pycache__, build output, symlinked folders and what
.gitignore files ignore inside a git work tree. Where the two differ on purpose: `tokens` takes every file (or
what `--glob` picks) instead of Python sources, skips binary files found in folders (count.py sniffs them)
and passes over pipes and devices found in folders, which a named file may be (`tokens <(cmd)`).
`--glob` is gitignore-style, relative to the directory given (`prompts/**/*.txt`); a pattern without `/`
matches the file name at any depth.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from llmdoctor.scan.discovery import discover as discover_files
from llmdoctor.scan.globs import glob_matches

BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Discovered:
    path: Path
    explicit: bool  # named on the command line (binary → error) rather than found in a directory (skipped)


def walk(root: Path, glob: str | None) -> Iterator[Path]:
    """Files below `root` in a stable order, minus skipped folders, ignored paths and non-matching names.

    Paths come back as `root / relative`, so they print the way the user named the folder.
    """
    absolute_root = os.path.abspath(root)
    # errors are non-regular files (pipes, devices) found in the folder: not text, passed over like binaries
    found = discover_files([absolute_root], root=absolute_root, select=_selector(glob))
    for file in found.files:
        yield root / os.path.relpath(file, absolute_root)


def _selector(glob: str | None) -> Callable[[str], bool]:
    if not glob:
        return lambda relative: True
    return lambda relative: glob_matches(glob, relative)


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
