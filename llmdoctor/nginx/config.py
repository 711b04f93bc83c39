"""Read nginx configuration the way nginx does: one file, a directory of files, or an `nginx -T` dump.

Each file is parsed on its own with crossplane (`single=True`, `combine=False`, `check_ctx=False`,
`check_args=False`, `strict=False`: design.md §4) and includes are spliced here, so every statement keeps
the file it really comes from. Relative include paths are resolved against the directory of the main
configuration file (nginx's `conf_prefix`), not the including file's folder; globs are expanded in sorted
order and may match nothing; a plain include that cannot be opened, an include cycle, a syntax error or an
unreadable file becomes an `InputError` with file and line, and the rest is still read.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.limits import InputProblem, file_kind, read_bounded
from llmdoctor.report.model import InputError, display_path

_DUMP_HEADER = re.compile(r"^# configuration file (?P<path>.+):\s*$")
MAX_FILE_BYTES = 64 * 2**20  # one config file (an `nginx -T` dump of a large site is a few MB)
MAX_NESTING = 100  # blocks and includes around a statement (real configs: under 10)
MAX_INCLUDE_DEPTH = 50  # files in one include chain


@dataclass
class Stmt:
    """One directive, with the real file and 1-based line it was written on."""

    directive: str
    args: list[str]
    path: str
    line: int
    block: list[Stmt] | None = None

    def text(self) -> str:
        args = " ".join(_quote(a) for a in self.args)
        return f"{self.directive} {args};" if args else f"{self.directive};"


def _quote(arg: str) -> str:
    if arg == "" or re.search(r"[\s;{}\"']", arg):
        return '"' + arg.replace('"', '\\"') + '"'
    return arg


@dataclass
class Config:
    """What was read: top-level statement lists (one per root file) and the problems met on the way."""

    roots: list[tuple[str, list[Stmt]]] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    lines: dict[str, list[str]] = field(default_factory=dict)  # file -> its lines (for columns)

    def column(self, stmt: Stmt) -> int:
        lines = self.lines.get(stmt.path)
        if not lines or not 0 < stmt.line <= len(lines):
            return 1
        found = lines[stmt.line - 1].find(stmt.directive)
        return found + 1 if found >= 0 else 1


class _Files:
    """Where file contents come from: the disk, or the files of an `nginx -T` dump."""

    def __init__(self, dump: dict[str, str] | None = None, disk_fallback: bool = False) -> None:
        self._dump = dump
        self._disk = _Files() if disk_fallback else None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._on_disk: dict[str, str] = {}
        if dump is not None:
            self._tmp = tempfile.TemporaryDirectory(prefix="llmdoctor-nginx-")
            for index, (name, text) in enumerate(dump.items()):
                copy = os.path.join(self._tmp.name, f"{index}.conf")
                with open(copy, "w", encoding="utf-8") as handle:
                    handle.write(text)
                self._on_disk[name] = copy

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def is_file(self, path: str) -> bool:
        if self._disk is not None and self._dump is not None and path not in self._dump:
            return self._disk.is_file(path)
        return path in self._dump if self._dump is not None else os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        if self._dump is not None and self._disk is None:
            return False
        return os.path.isdir(path)

    def glob(self, pattern: str) -> list[str]:
        if self._disk is not None:
            return self._disk.glob(pattern)
        if self._dump is None:
            return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
        parts = pattern.split("/")
        return sorted(
            name
            for name in self._dump
            if len(name.split("/")) == len(parts)
            and all(fnmatch.fnmatchcase(n, p) for n, p in zip(name.split("/"), parts))
            and not any(n.startswith(".") and not p.startswith(".") for n, p in zip(name.split("/"), parts))
        )

    def read(self, path: str) -> tuple[str | None, str]:
        """(path crossplane should parse, text) or (None, reason) when the file cannot be read."""
        if self._disk is not None and self._dump is not None and path not in self._dump:
            return self._disk.read(path)
        if self._dump is not None:
            if path not in self._dump:
                return None, "not in the nginx -T dump"
            return self._on_disk[path], self._dump[path]
        try:
            raw = read_bounded(path, MAX_FILE_BYTES, what="an nginx config")
        except InputProblem as problem:
            reason = problem.reason
            return None, reason if reason.startswith(("cannot read", "no such")) else f"cannot read: it {reason}"
        return path, raw.decode("utf-8", errors="replace")

    def kind(self, path: str) -> str | None:
        """What `path` is when it exists but is neither a regular file nor a folder (a FIFO...), else None."""
        if self._dump is not None and (self._disk is None or path in self._dump):
            return None
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None
        return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else file_kind(mode)


class _Reader:
    def __init__(self, files: _Files, conf_dir: str, config: Config) -> None:
        self.files = files
        self.conf_dir = conf_dir
        self.config = config
        self._parsed: dict[str, list[dict] | None] = {}

    @property
    def visited(self) -> set[str]:
        """Every file this reader opened (parsed or not): what nginx would read from its main config."""
        return set(self._parsed)

    def error(self, path: str, reason: str, line: int | None = None) -> None:
        self.config.errors.append(InputError(display_path(path), reason, line))

    def _parse(self, path: str, origin: tuple[str, int, str] | None = None) -> list[dict] | None:
        """crossplane's statements for one file (cached), or None when it cannot be read or parsed.

        `origin` (including file, line, include argument): where a read failure is reported, as nginx does.
        """
        if path in self._parsed:
            return self._parsed[path]
        import crossplane

        parse_path, text = self.files.read(path)
        parsed: list[dict] | None = None
        if parse_path is None:
            if origin is None:
                self.error(path, text)
            else:
                self.error(origin[0], f"include {origin[2]}: {text}: {path}", origin[1])
        else:
            self.config.files.add(path)
            self.config.lines[path] = text.splitlines()
            problem = syntax_error(parse_path, text)  # also refuses blocks nested past MAX_NESTING
            if problem is None:
                try:
                    payload = crossplane.parse(
                        parse_path,
                        single=True,
                        combine=False,
                        check_ctx=False,
                        check_args=False,
                        strict=False,
                        catch_errors=True,
                        onerror=lambda e: getattr(e, "strerror", None) or str(e),
                    )
                except RecursionError:
                    payload = {"config": [{"parsed": []}], "errors": [
                        {"error": f"blocks nested too deeply to read (at most {MAX_NESTING} levels)", "line": None}]}
                entry = payload["config"][0]
                if payload["errors"]:
                    first = payload["errors"][0]
                    problem = (first.get("callback") or first["error"], first["line"])
            if problem is not None:
                self.error(path, f"syntax error: {problem[0]}", problem[1])
            else:
                parsed = entry["parsed"]
        self._parsed[path] = parsed
        return parsed

    def read(self, path: str, stack: tuple[str, ...] = (), origin: tuple[str, int, str] | None = None,
             depth: int = 0) -> list[Stmt]:
        parsed = self._parse(path, origin)
        if parsed is None:
            return []
        return self._convert(parsed, path, (*stack, path), depth)

    def _convert(self, parsed: list[dict], path: str, stack: tuple[str, ...], depth: int = 0) -> list[Stmt]:
        """Statements with includes spliced in; `depth`: blocks and includes around them (at most MAX_NESTING,
        which bounds every walk of the tree that follows)."""
        out: list[Stmt] = []
        for item in parsed:
            if item["directive"] == "include" and "block" not in item:
                out.extend(self._include(item, path, stack, depth))
                continue
            block = None
            if "block" in item:
                if depth >= MAX_NESTING:
                    self.error(path, f"blocks and includes nested more than {MAX_NESTING} levels deep: not read "
                                     "further (nginx configs nest a few levels)", item["line"])
                    block = []
                else:
                    block = self._convert(item["block"], path, stack, depth + 1)
            out.append(Stmt(item["directive"], list(item["args"]), path, item["line"], block))
        return out

    def _include(self, item: dict, path: str, stack: tuple[str, ...], depth: int = 0) -> list[Stmt]:
        line = item["line"]
        if len(item["args"]) != 1:
            self.error(path, "include takes exactly one file name or glob", line)
            return []
        pattern = item["args"][0]
        full = pattern if os.path.isabs(pattern) else os.path.normpath(os.path.join(self.conf_dir, pattern))
        if glob.has_magic(full):
            names = self.files.glob(full)
        elif self.files.is_file(full):
            names = [full]
        elif self.files.is_dir(full):
            self.error(path, f"include {pattern}: {full} is a directory; include takes a file or a glob, e.g. "
                             f"`include {pattern.rstrip('/')}/*.conf;`", line)
            return []
        elif self.files.kind(full):
            self.error(path, f"include {pattern}: {full} is {self.files.kind(full)}, not a config file (nginx "
                             "would wait on it or read it forever): not read", line)
            return []
        else:
            where = (" (check the dump of the server's config: `nginx -T > dump.txt`)" if os.path.isabs(pattern)
                     else f" (nginx resolves relative includes against {self.conf_dir}; see --conf-dir)")
            self.error(path, f"include {pattern}: file not found: {full}{where}", line)
            return []
        out: list[Stmt] = []
        for name in names:
            if name in stack:
                chain = " -> ".join(display_path(p) for p in (*stack[stack.index(name):], name))
                self.error(path, f"include cycle: {chain}", line)
                continue
            if depth >= MAX_NESTING or len(stack) >= MAX_INCLUDE_DEPTH:
                chain = " -> ".join(display_path(p) for p in (stack[0], "...", stack[-1], name))
                self.error(path, f"includes nested more than {min(len(stack), MAX_INCLUDE_DEPTH)} files deep "
                                 f"({chain}): not followed further", line)
                return out
            out.extend(self.read(name, stack, (path, line, pattern), depth + 1))
        return out


def syntax_error(parse_path: str, text: str) -> tuple[str, int | None] | None:
    """The first syntax error as nginx reports it (message, line), or None.

    crossplane accepts a directive closed by `}` instead of `;` (nginx: `unexpected "}"`) and puts an
    unclosed block's error on the last token's line (nginx: the line after the last newline), so the token
    stream is checked here the way nginx's own parser does.
    """
    import crossplane
    from crossplane.errors import NgxParserSyntaxError

    in_statement = False
    depth = 0
    try:
        for token, line, quoted in crossplane.lex(parse_path):
            if quoted or token not in ("{", ";", "}"):
                if quoted or not token.startswith("#"):
                    in_statement = True
                continue
            if token == "}" and in_statement:
                return 'unexpected "}"', line
            if token in ("{", ";") and not in_statement:
                return f'unexpected "{token}"', line
            depth += {"{": 1, "}": -1}.get(token, 0)
            if depth > MAX_NESTING:  # crossplane's parser recurses per level: refused before it runs
                return f"blocks nested more than {MAX_NESTING} levels deep (nginx configs nest a few)", line
            in_statement = False
    except NgxParserSyntaxError as err:
        line = err.lineno
        if "end of file" in (err.strerror or ""):
            line = text.count("\n") + 1
        return err.strerror, line
    if in_statement:
        return 'unexpected end of file, expecting ";" or "}"', text.count("\n") + 1
    return None


def split_dump(text: str) -> dict[str, str] | None:
    """The files of an `nginx -T` dump, in order (main file first), or None when `text` is not a dump."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    seen_header = False
    for line in text.splitlines(keepends=True):
        match = _DUMP_HEADER.match(line.rstrip("\r\n"))
        if match:
            seen_header = True
            current = files.setdefault(match.group("path"), [])
            continue
        if current is None:
            if line.strip() and not line.startswith("nginx:"):
                return None
            continue
        current.append(line)
    if not seen_header:
        return None
    return {name: "".join(lines) for name, lines in files.items()}


def load_dump(files: dict[str, str], disk_fallback: bool = False, conf_dir: str | None = None) -> Config:
    """The files of a dump (main first); with `disk_fallback`, includes not in it are read from disk."""
    config = Config()
    main = next(iter(files))
    source = _Files(files, disk_fallback)
    try:
        reader = _Reader(source, conf_dir or os.path.dirname(main), config)
        config.roots.append((main, reader.read(main)))
    finally:
        source.close()
    return config


def load_file(path: Path, conf_dir: str | None = None) -> Config:
    """A main config; relative includes resolve against `conf_dir` (default: the file's folder, as nginx)."""
    config = Config()
    name = os.path.normpath(os.path.abspath(path))
    reader = _Reader(_Files(), conf_dir or os.path.dirname(name), config)
    config.roots.append((name, reader.read(name)))
    return config


MAIN_CONTEXT = ("http", "events", "stream")  # top-level blocks that only a main config holds


def load_directory(path: Path, conf_dir: str | None = None) -> Config:
    """A folder, read the way nginx would read each main config in it.

    - The folder's own `nginx.conf`, when there is one: the one main config (nginx -c DIR/nginx.conf).
    - Else every main config below it — a file named `nginx.conf`, or one with an `http`/`events`/`stream`
      block at its top level — with its own folder as the prefix its relative includes resolve against
      (`--conf-dir` overrides it); the files it includes are checked only through it, and other `*.conf`
      files in the folder of an `nginx.conf` are not read by nginx (a notice says so).
    - The remaining `*.conf` files are fragments (`sites-enabled/` style): each one that no other fragment
      includes, with the folder given as the prefix.
    """
    directory = os.path.normpath(os.path.abspath(path))
    config = Config()
    main = os.path.join(directory, "nginx.conf")
    if os.path.isfile(main):
        reader = _Reader(_Files(), conf_dir or directory, config)
        config.roots.append((main, reader.read(main)))
        return config
    candidates = sorted(str(p) for p in Path(directory).rglob("*.conf") if p.is_file())
    if not candidates:
        _Reader(_Files(), directory, config).error(directory, "no nginx.conf and no *.conf file in this folder: "
                                                              "nothing to check")
        return config
    named = [c for c in candidates if os.path.basename(c) == "nginx.conf"]
    mains = named + [c for c in candidates if c not in named and _is_main(c)]
    consumed: set[str] = set()
    for name in mains:
        if name in consumed:  # included by a main config read before it
            continue
        reader = _Reader(_Files(), conf_dir or os.path.dirname(name), config)
        config.roots.append((name, reader.read(name)))
        consumed |= reader.visited
    owners = [os.path.dirname(n) for n in named]
    fragments = []
    for name in candidates:
        if name in consumed:
            continue
        owner = next((o for o in owners if name.startswith(o + os.sep)), None)
        if owner is not None:
            config.notices.append(f"{display_path(name)}: not included by {display_path(os.path.join(owner, 'nginx.conf'))}, "
                                  "so nginx does not read it: not checked")
        else:
            fragments.append(name)
    reader = _Reader(_Files(), conf_dir or directory, config)
    trees = {name: reader.read(name) for name in fragments}
    included = {s.path for name, tree in trees.items() for s in _walk(tree) if s.path != name}
    config.roots.extend((name, tree) for name, tree in trees.items() if name not in included)
    return config


def _is_main(path: str) -> bool:
    """Whether `path` holds a main-context block at its top level (read cheaply: its tokens, no includes)."""
    import crossplane
    from crossplane.errors import NgxParserBaseException

    depth = 0
    expect_block = None
    try:
        for token, _, quoted in crossplane.lex(path):
            if quoted:
                expect_block = None
                continue
            if token == "{":
                if depth == 0 and expect_block in MAIN_CONTEXT:
                    return True
                depth += 1
            elif token == "}":
                depth = max(0, depth - 1)
            elif token == ";":
                expect_block = None
            elif depth == 0 and expect_block is None:
                expect_block = token
    except (NgxParserBaseException, OSError, UnicodeDecodeError):
        return False  # read as a fragment: its error is reported there
    return False


def _walk(stmts: list[Stmt]):
    for stmt in stmts:
        yield stmt
        if stmt.block:
            yield from _walk(stmt.block)
