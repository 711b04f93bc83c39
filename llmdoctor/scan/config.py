"""Project configuration: `[tool.llmdoctor]` in pyproject.toml or a `.llmdoctor.yaml`.

The nearest one wins, walking up from the scanned path (the first one given) to the filesystem root; in
one folder `.llmdoctor.yaml` is preferred over pyproject.toml (a pyproject.toml without a
`[tool.llmdoctor]` table does not count). Keys (kebab-case; snake_case is accepted too):

    select = ["LLM"]                       # rule ids or prefixes; default: every rule
    ignore = ["LLM002"]
    exclude = ["migrations", "tests/fixtures/*"]
    per-file-ignores = { "tests/*" = ["LLM004"] }
    rules-dir = ["llmdoctor-rules"]        # folders of extra table entries (relative to the config file)
    severity = { LLM002 = "info" }
    max-file-size = 2000000                # bytes
    respect-gitignore = true
    every-context = false                  # true: report in every execution context (library authors)
    control-plane = ["app/admin/*", "app/api.py::reset_*"]   # entry points that are not the data plane
    python-platform = "linux"              # where the code is served: linux, darwin, win32 or all
    fix = true                             # `scan` applies the safe fixes (as --fix)
    unsafe-fixes = true                    # ... and the unsafe ones (as --unsafe-fixes)
    fix-timeout = 30                       # seconds: the value LLM006's fix writes (never guessed)

`control-plane`: request entry points (routes, tools, handlers) that serve an admin console, provisioning or
settings rather than the traffic the service exists for, as a file glob, optionally `::` and a glob of the
function's qualified name (`Class.method`). What only they reach gets the context `control-plane`, which the
rules' YAML `contexts:` mostly leave unreported; a helper reached from another entry point stays `serving`.

`python-platform`: the `sys.platform` the served code runs on, as pyright's `pythonPlatform` and mypy's
`--platform`: a branch that a platform test (`sys.platform == "win32"`, `os.name == "nt"`, `platform.system()
== "Windows"`, or a name bound to one) rules out there does not run, nor what follows a branch that leaves the
block (`if platform.system() != "Windows": return`), so nothing in it is reported or followed. Default `linux`,
where LLM servers run; `all` decides no platform test.

Globs and folders are relative to the folder holding the config file. An invalid file exits 2 naming the
file and the key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llmdoctor.errors import UserError
from llmdoctor.limits import InputProblem, brief, brief_text, load_toml, load_yaml, read_bounded
from llmdoctor.report.model import SEVERITIES
from llmdoctor.scan.settings import DEFAULT_MAX_FILE_SIZE, MAX_FILE_SIZE_LIMIT, ScanConfig

MAX_CONFIG_BYTES = 10 * 2**20  # a pyproject.toml or .llmdoctor.yaml is a few KB
KEYS = ("select", "ignore", "exclude", "per-file-ignores", "rules-dir", "severity", "max-file-size",
        "respect-gitignore", "every-context", "control-plane", "python-platform", "fix", "unsafe-fixes", "fix-timeout")
PLATFORMS = ("linux", "darwin", "win32", "all")


def find_config(start: str | os.PathLike) -> Path | None:
    here = Path(os.path.abspath(start))
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / ".llmdoctor.yaml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _has_tool_table(pyproject):
            return pyproject
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        text = read_bounded(pyproject, MAX_CONFIG_BYTES, what="a configuration file").decode("utf-8", "replace")
    except InputProblem:
        return False
    return "tool.llmdoctor" in text and _load_pyproject(pyproject) is not None


def _read(path: Path) -> bytes:
    try:
        return read_bounded(path, MAX_CONFIG_BYTES, what="a configuration file")
    except InputProblem as problem:
        raise UserError(f"{path}: {problem.reason}") from None


def _load_pyproject(path: Path) -> dict | None:
    raw = _read(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: invalid TOML: not UTF-8 (byte 0x{raw[err.start]:02x})") from None
    data = load_toml(text, str(path))
    table = data.get("tool", {}).get("llmdoctor") if isinstance(data.get("tool"), dict) else None
    if table is not None and not isinstance(table, dict):
        raise UserError(f"{path}: key 'tool.llmdoctor': must be a table")
    return table


def _load_yaml(path: Path) -> dict:
    data = load_yaml(_read(path), str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a mapping of settings ({', '.join(KEYS)})")
    return data


def load_config(path: Path | None) -> ScanConfig:
    """Settings from `path` (None: defaults, relative to the cwd is decided by the caller)."""
    if path is None:
        return ScanConfig()
    path = Path(os.path.abspath(path))
    if path.is_dir() or not path.exists():
        problem = "is a folder: name the pyproject.toml or .llmdoctor.yaml in it" if path.is_dir() else "no such file"
        raise UserError(f"--config {path}: {problem}")
    raw = _load_pyproject(path) if path.suffix == ".toml" else _load_yaml(path)
    raw = raw or {}
    return parse_settings(raw, path)


def parse_settings(raw: dict[str, Any], path: Path) -> ScanConfig:
    prefix = "tool.llmdoctor." if path.suffix == ".toml" else ""
    values: dict[str, Any] = {}
    for key, value in raw.items():
        norm = str(key).replace("_", "-")
        if norm not in KEYS:
            raise UserError(f"{path}: key '{prefix}{brief_text(str(key), 40)}': unknown setting; known: {', '.join(KEYS)}")
        values[norm] = (value, f"{prefix}{key}")
    base = path.parent

    def fail(key: str, problem: str) -> UserError:
        return UserError(f"{path}: key '{values[key][1]}': {problem}")

    def str_list(key: str) -> tuple[str, ...]:
        if key not in values:
            return ()
        value = values[key][0]
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(key, "must be a list of strings")
        return tuple(value)

    def rule_ids(key: str) -> tuple[str, ...]:
        ids = str_list(key)
        for rule_id in ids:
            if not rule_id.isalnum():
                raise fail(key, f"{brief(rule_id)} is not a rule id or prefix like 'LLM004' or 'LLM'")
        return tuple(i.upper() for i in ids)

    per_file: list[tuple[str, tuple[str, ...]]] = []
    if "per-file-ignores" in values:
        mapping = values["per-file-ignores"][0]
        if not isinstance(mapping, dict):
            raise fail("per-file-ignores", "must be a mapping of glob -> list of rule ids")
        for glob, ids in mapping.items():
            if isinstance(ids, str):
                ids = [ids]
            if not isinstance(ids, list) or not all(isinstance(i, str) and i.isalnum() for i in ids):
                raise fail("per-file-ignores", f"{brief(glob)} must map to a list of rule ids")
            per_file.append((str(glob), tuple(i.upper() for i in ids)))

    severity: list[tuple[str, str]] = []
    if "severity" in values:
        mapping = values["severity"][0]
        if not isinstance(mapping, dict):
            raise fail("severity", "must be a mapping of rule id -> error|warning|info")
        for rule_id, level in mapping.items():
            if not isinstance(level, str) or level not in SEVERITIES:
                raise fail("severity", f"{brief_text(str(rule_id), 40)}: must be one of {', '.join(SEVERITIES)} "
                                       f"(got {brief(level)})")
            severity.append((str(rule_id).upper(), level))

    max_size = DEFAULT_MAX_FILE_SIZE
    if "max-file-size" in values:
        max_size = values["max-file-size"][0]
        if isinstance(max_size, bool) or not isinstance(max_size, int) or not 0 < max_size <= MAX_FILE_SIZE_LIMIT:
            raise fail("max-file-size", f"must be a positive number of bytes, at most {MAX_FILE_SIZE_LIMIT:,} "
                                        f"(got {brief(max_size)})")
    gitignore = True
    if "respect-gitignore" in values:
        gitignore = values["respect-gitignore"][0]
        if not isinstance(gitignore, bool):
            raise fail("respect-gitignore", "must be true or false")
    every_context = False
    if "every-context" in values:
        every_context = values["every-context"][0]
        if not isinstance(every_context, bool):
            raise fail("every-context", "must be true or false")
    control_plane = []
    for pattern in str_list("control-plane"):
        try:
            control_plane.append(control_plane_pattern(pattern))
        except ValueError as problem:
            raise fail("control-plane", str(problem)) from None
    python_platform = "linux"
    if "python-platform" in values:
        python_platform = values["python-platform"][0]
        if python_platform not in PLATFORMS:
            raise fail("python-platform", f"must be one of {', '.join(PLATFORMS)} (got {brief(python_platform)})")
    fix_timeout = None
    if "fix-timeout" in values:
        fix_timeout = values["fix-timeout"][0]
        if isinstance(fix_timeout, bool) or not isinstance(fix_timeout, (int, float)) or not 0 < fix_timeout < 10**6:
            raise fail("fix-timeout", "must be a number of seconds, above 0 (e.g. 30)")
    fix, unsafe_fixes = (_flag(values, key, fail) for key in ("fix", "unsafe-fixes"))

    rules_dirs = tuple(str((base / d).resolve()) for d in str_list("rules-dir"))
    for folder in rules_dirs:
        if not Path(folder).is_dir():
            raise fail("rules-dir", f"{folder} is not a directory")
    return ScanConfig(
        root=str(base), select=rule_ids("select"), ignore=rule_ids("ignore"),
        per_file_ignores=tuple(per_file), severity=tuple(severity), exclude=str_list("exclude"),
        rules_dirs=rules_dirs, max_file_size=max_size, respect_gitignore=gitignore, every_context=every_context,
        control_plane=tuple(control_plane), python_platform=python_platform, source=str(path), fix=fix, unsafe_fixes=unsafe_fixes,
        fix_timeout=fix_timeout,
    )


def control_plane_pattern(pattern: str) -> tuple[str, str]:
    """`app/api.py::reset_*` -> ("app/api.py", "reset_*"); ValueError saying what is expected."""
    glob, separator, function = pattern.partition("::")
    if not glob.strip() or (separator and not function.strip()):
        raise ValueError(f"{brief(pattern)}: expected a file glob, optionally followed by '::' and a function name "
                         "glob (e.g. 'app/admin/*' or 'app/api.py::reset_*')")
    return glob.strip(), function.strip()


def _flag(values: dict, key: str, fail) -> bool:
    value = values[key][0] if key in values else False
    if not isinstance(value, bool):
        raise fail(key, "must be true or false")
    return value
