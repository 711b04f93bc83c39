"""Which files to read: directories recursively, minus what should never be linted or counted.

The one directory walker of llmdoctor: `scan` takes `*.py`/`*.pyi` (the default `select`), `tokens` passes
its own `select` (every file, or its `--glob`) so both commands skip exactly the same things.

Skipped while walking: VCS and tool folders, virtualenvs (any folder with a `pyvenv.cfg`), `node_modules`,
`__pycache__`, build output, `exclude` globs, and what `.gitignore` files ignore. Symlinked directories are
not followed (a symlink loop can never hang the walk). Files named explicitly on the command line are
scanned even when excluded, unless `force_exclude` (pre-commit passes file names; `--force-exclude` keeps
the project's excludes in force). Files larger than `max_file_size` are skipped with a notice.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath

from llmdoctor.report.model import InputError, display_path
from llmdoctor.scan.gitignore import GitIgnore
from llmdoctor.scan.globs import matches_any

SOURCE_SUFFIXES = (".py", ".pyi")
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".tox", ".nox", ".venv", "venv", "node_modules",
    "__pycache__", ".mypy_cache", ".direnv", ".pyenv", ".pytype", ".pants.d", ".vscode", ".pytest_cache",
    ".ruff_cache", ".llmdoctor_cache", "build", "dist",
    "site-packages", ".eggs", "__pypackages__", ".ipynb_checkpoints", "_build", "buck-out",
})


def is_python_source(relative_posix: str) -> bool:
    return relative_posix.endswith(SOURCE_SUFFIXES)


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)  # absolute paths, sorted, unique
    errors: list[InputError] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def discover(paths: list[str], *, root: str, exclude: tuple[str, ...] = (), force_exclude: bool = False,
             respect_gitignore: bool = True, max_file_size: int | None = None,
             select: Callable[[str], bool] = is_python_source) -> Discovery:
    """Expand `paths` (files or directories) into the files to read. `root`: where `exclude` globs are
    relative to. `select`: which files found in a directory to take, given their POSIX path relative to
    the directory named in `paths` (files named in `paths` are always taken)."""
    found = Discovery()
    seen: set[str] = set()
    ignore = GitIgnore() if respect_gitignore else None

    exclude = _root_relative_globs(exclude, root)

    def excluded(absolute: str) -> bool:
        return bool(exclude) and matches_any(exclude, _relative(absolute, root))

    def add(absolute: str, shown: str) -> None:
        if absolute in seen:
            return
        seen.add(absolute)
        try:
            info = os.stat(absolute)
        except OSError as err:
            found.errors.append(InputError(shown, f"cannot read: {err.strerror or err}"))
            return
        if not stat.S_ISREG(info.st_mode):  # a FIFO or device would block the read forever
            found.errors.append(InputError(shown, "cannot read: not a regular file"))
            return
        if max_file_size is not None:
            size = info.st_size
            if size > max_file_size:
                found.notices.append(f"{display_path(shown)}: skipped, {size} bytes is over the max-file-size limit of "
                                     f"{max_file_size} bytes")
                return
        found.files.append(absolute)

    for given in paths:
        absolute = os.path.abspath(given)
        if os.path.isdir(absolute):
            if force_exclude and (excluded(absolute) or _ignored(ignore, absolute, is_dir=True)):
                continue
            for file in _walk(absolute, select, excluded, ignore, found):
                add(file, file)
        elif os.path.exists(absolute) or os.path.islink(absolute):
            if force_exclude and (excluded(absolute) or _ignored(ignore, absolute, is_dir=False)):
                continue
            if not os.path.exists(absolute):
                found.errors.append(InputError(given, "broken symbolic link or symlink loop"))
                continue
            add(absolute, given)
        else:
            found.errors.append(InputError(given, _unreachable_reason(absolute)))
    found.files.sort()
    return found


def is_excluded(path: str, *, root: str, exclude: tuple[str, ...] = (), respect_gitignore: bool = True) -> bool:
    """Whether `path` (a file, which need not exist: `scan - --stdin-filename`) is excluded by the `exclude`
    globs or a `.gitignore`, as a file named with --force-exclude would be."""
    absolute = os.path.abspath(path)
    globs = _root_relative_globs(exclude, root)
    if globs and matches_any(globs, _relative(absolute, root)):
        return True
    return _ignored(GitIgnore() if respect_gitignore else None, absolute, is_dir=False)


def _root_relative_globs(patterns: tuple[str, ...], root: str) -> tuple[str, ...]:
    """`--exclude $PWD/gen` means the folder: an absolute pattern is made relative to the root; `**/gen`
    also matches `gen` at the root (zero folders), as in ruff and .gitignore."""
    out: list[str] = []
    for pattern in patterns:
        if os.path.isabs(pattern):
            relative = _relative(pattern, root)
            pattern = relative if not relative.startswith("../") else pattern
        out.append(pattern)
        if pattern.startswith("**/") and len(pattern) > 3:
            out.append(pattern[3:])
    return tuple(out)


def _unreachable_reason(path: str) -> str:
    """Why `os.path.exists` said no: missing, or in a folder this user may not enter."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "no such file or directory"
    except OSError as err:
        return f"cannot read: {err.strerror or err}"
    return "no such file or directory"


def _ignored(ignore: GitIgnore | None, path: str, *, is_dir: bool) -> bool:
    return ignore is not None and ignore.ignored(path, is_dir=is_dir, ancestors=True)


def _walk(top: str, select: Callable[[str], bool], excluded: Callable[[str], bool], ignore: GitIgnore | None,
          found: Discovery) -> Iterator[str]:
    prefix = top if top.endswith(os.sep) else top + os.sep

    def unreadable(err: OSError) -> None:  # the files below it are not checked: say so
        folder = err.filename if isinstance(err.filename, str) else top
        found.errors.append(InputError(folder, f"cannot read folder: {err.strerror or err}"))

    for current, dirs, files in os.walk(top, followlinks=False, onerror=unreadable):
        below = "" if current == top else current[len(prefix):].replace(os.sep, "/") + "/"
        kept = []
        for name in sorted(dirs):
            path = os.path.join(current, name)
            if name in SKIP_DIRS or name.endswith(".egg-info") or os.path.islink(path):
                continue
            if os.path.exists(os.path.join(path, "pyvenv.cfg")) or excluded(path):
                continue
            if ignore is not None and ignore.ignored(path, is_dir=True):
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if not select(below + name):
                continue
            path = os.path.join(current, name)
            if excluded(path) or (ignore is not None and ignore.ignored(path, is_dir=False)):
                continue
            if not os.path.exists(path):  # broken link or a link loop: never followed forever
                found.notices.append(f"{display_path(path)}: skipped, broken symbolic link or symlink loop")
                continue
            yield path


def _relative(absolute: str, root: str) -> str:
    try:
        return PurePath(os.path.relpath(absolute, root)).as_posix()
    except ValueError:
        return PurePath(absolute).as_posix()

