"""Where a project starts and how its files name each other: the root, the roots imports are searched from,
and the file an import names (absolute, relative, `src/` layouts, namespace packages, script folders)."""

from __future__ import annotations

import os
import re
import sys

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
_ENTRY_POINT = re.compile(r"""["']?[\w.-]+["']?\s*=\s*["']?([A-Za-z_][\w.]*)\s*:\s*([A-Za-z_][\w.]*)""")


def project_root(path: str, memo: dict[str, str | None] | None = None) -> str | None:
    """The nearest folder at or above `path` holding pyproject.toml, setup.cfg, setup.py or .git; None when
    there is none (the scanned files are then the whole program). A marker inside a package of the project
    around it does not start a project of its own: a plugin's `setup.py` in `app/plugins/telegram/`, a module
    named `setup.py` (`app/cli/setup.py`), vendored code with its own `pyproject.toml` under
    `app/thirdparty/` are imported as parts of that package. `memo` remembers the answer per folder."""
    start = os.path.abspath(path)
    probe = start if os.path.isdir(start) else os.path.dirname(start)
    visited = []
    while True:
        if memo is not None and probe in memo:
            return _remember(memo, visited, memo[probe])
        visited.append(probe)
        if _marked(probe):
            break
        parent = os.path.dirname(probe)
        if parent == probe:
            return _remember(memo, visited, None)
        probe = parent
    found = probe
    above = os.path.dirname(probe)
    while above != os.path.dirname(above) and not _marked(above):
        if os.path.exists(os.path.join(above, "__init__.py")):  # inside a package: the project above owns it
            found = project_root(above, memo) or probe
            break
        above = os.path.dirname(above)
    return _remember(memo, visited, found)


def _marked(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, marker)) for marker in ROOT_MARKERS)


def _remember(memo: dict[str, str | None] | None, folders: list[str], root: str | None) -> str | None:
    if memo is not None:
        memo.update(dict.fromkeys(folders, root))
    return root


class Layout:
    """The project's Python files and the module each import names."""

    def __init__(self, root: str, files, libraries=frozenset()) -> None:
        self.root = root
        # top-level names of libraries (the standard library, the SDKs the knowledge knows): an absolute import
        # of one never means a folder inside the importer's own package (vanna/integrations/openai/)
        self.libraries = frozenset(libraries) | frozenset(sys.stdlib_module_names)
        self.files = set(files)
        self.dirs: set[str] = set()
        for path in self.files:
            folder = os.path.dirname(path)
            while folder.startswith(root) and folder not in self.dirs:
                self.dirs.add(folder)
                folder = os.path.dirname(folder)
        self._bases: dict[str, tuple[list[str], int]] = {}
        self._memo: dict[tuple[str, str], tuple[str, int] | None] = {}
        self._modules: dict[str, dict[str, str]] = {}  # search root -> dotted module name -> file or folder

    def relative(self, path: str) -> str:
        try:
            return os.path.relpath(path, self.root).replace(os.sep, "/")
        except ValueError:
            return path

    def module_file(self, folder: str, parts: list[str]) -> str | None:
        """`folder/a/b.py` or `folder/a/b/__init__.py` for parts a, b (a namespace folder: its path)."""
        base = os.path.join(folder, *parts)
        for candidate in (os.path.join(base, "__init__.py"), base + ".py", base + ".pyi"):  # as CPython's finder
            if candidate in self.files:
                return candidate
        if base in self.dirs:
            return base  # a namespace package (a folder of modules without __init__.py)
        return None

    def shadowed(self, path: str) -> bool:
        """`x.py` beside a package `x/`: the package is what `import x` finds, so the module never runs."""
        return (path.endswith(".py") and not path.endswith("__init__.py")
                and os.path.join(path[:-3], "__init__.py") in self.files)

    def search_roots(self, importer: str) -> list[str]:
        """Folders an absolute import from `importer` is looked up in, nearest first: the first folder above
        the importer's package (where `python -m` or a script would run), each folder above it up to the
        project root that is not itself a package, and the root's `src/`; then, as a last resort, the folders
        inside the importer's package, from its own folder up (a server started from `backend/` that imports
        `server.utils`, or a `sys.path` edit that puts its folder first), and the package folders above it (a
        template `pkg/deployment/fly.io/app.py` that imports `pkg` means the package, not `pkg/pkg.py`).
        `absolute` skips those inner folders for a library's name (`from openai import OpenAI` inside a
        project folder `integrations/openai/` is the SDK)."""
        return self._search_roots(importer)[0]

    def _search_roots(self, importer: str) -> tuple[list[str], int]:
        """`search_roots` and how many of them come before the importer's own package folders."""
        folder = os.path.dirname(importer)
        found = self._bases.get(folder)
        if found is not None:
            return found
        current = folder
        inner = []
        while os.path.join(current, "__init__.py") in self.files and current != self.root:
            inner.append(current)
            current = os.path.dirname(current)
        roots, packages_above = [], []
        while True:
            if current == self.root or os.path.join(current, "__init__.py") not in self.files:
                roots.append(current)
            else:
                packages_above.append(current)
            if current == self.root or not current.startswith(self.root):
                break
            current = os.path.dirname(current)
        source = os.path.join(self.root, "src")
        if source in self.dirs and source not in roots:
            roots.append(source)
        outer = len(roots)
        roots += inner + packages_above
        self._bases[folder] = (roots, outer)
        return roots, outer

    def absolute(self, importer: str, dotted: str) -> tuple[str, int] | None:
        """(the file or namespace folder, how many leading parts of `dotted` name it) for the longest module
        prefix of `dotted` found in the project, else None (a library)."""
        key = (os.path.dirname(importer), dotted)
        if key in self._memo:
            return self._memo[key]
        parts = dotted.split(".")
        found = None
        roots, outer = self._search_roots(importer)
        if parts[0] in self.libraries:
            roots = roots[:outer]
        for root in roots:
            if root not in self._modules and self.module_file(root, parts[:1]) is None:
                continue  # nothing of that name there (and no need to list the folder's modules)
            modules = self._modules_under(root)
            for end in range(len(parts), 0, -1):
                target = modules.get(".".join(parts[:end]))
                if target is not None:
                    found = (target, end)
                    break
            if found is not None:
                break
        self._memo[key] = found
        return found

    def _modules_under(self, root: str) -> dict[str, str]:
        """Every module (and namespace folder) below `root`, by the dotted name an import from `root` uses."""
        found = self._modules.get(root)
        if found is not None:
            return found
        found: dict[str, str] = {}
        prefix = root.rstrip(os.sep) + os.sep
        packages = {}
        for path in sorted(self.files, key=lambda p: (not p.endswith(".py"), p)):  # .py before .pyi
            if not path.startswith(prefix):
                continue
            relative = path[len(prefix):]
            if relative.endswith(("/__init__.py", "/__init__.pyi")):
                packages.setdefault(relative.rsplit("/", 1)[0].replace("/", "."), path)
            elif relative.endswith((".py", ".pyi")):
                found.setdefault(relative.rsplit(".", 1)[0].replace("/", "."), path)
        found.update(packages)  # a package (its __init__) before a module of the same name, as Python looks
        for folder in self.dirs:  # a namespace package last
            if folder.startswith(prefix):
                found.setdefault(folder[len(prefix):].replace(os.sep, "."), folder)
        self._modules[root] = found
        return found

    def relative_import(self, importer: str, level: int, dotted: str) -> tuple[str, int] | None:
        """`from ..a import b` in `importer`: (the file or folder, the number of parts of `dotted` it names)."""
        folder = os.path.dirname(importer)
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        parts = dotted.split(".") if dotted else []
        for end in range(len(parts), 0, -1):
            target = self.module_file(folder, parts[:end])
            if target is not None:
                return target, end
        init = os.path.join(folder, "__init__.py")
        if init in self.files:
            return init, 0
        return (folder, 0) if folder in self.dirs else None


def console_scripts(root: str) -> list[tuple[str, str]]:
    """(module, function) of the console scripts pyproject.toml, setup.cfg or setup.py declare."""
    found: list[tuple[str, str]] = []
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.isfile(pyproject):
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            with open(pyproject, "rb") as handle:
                data = tomllib.loads(handle.read(2_000_000).decode("utf-8", "replace"))
        except (OSError, ValueError, RecursionError):  # a broken pyproject is the config loader's to report
            data = {}
        project = data.get("project") if isinstance(data.get("project"), dict) else {}
        poetry = ((data.get("tool") or {}).get("poetry") or {}) if isinstance(data.get("tool"), dict) else {}
        for table in (project.get("scripts"), project.get("gui-scripts"),
                      poetry.get("scripts") if isinstance(poetry, dict) else None):
            if isinstance(table, dict):
                for value in table.values():
                    if isinstance(value, str) and ":" in value:
                        module, _, function = value.partition(":")
                        found.append((module.strip(), function.strip().split(".")[0]))
    for name in ("setup.cfg", "setup.py"):
        path = os.path.join(root, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(1_000_000)
            except OSError:
                continue
            if "console_scripts" in text or "entry_points" in text:
                found.extend((m.group(1), m.group(2).split(".")[0]) for m in _ENTRY_POINT.finditer(text))
    return found
