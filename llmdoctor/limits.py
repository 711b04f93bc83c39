"""Bounds on what llmdoctor reads from outside, in one place for every command (docs/reliability.md).

- `read_bounded`: a file's bytes, at most a limit, without hanging on a FIFO that nobody writes to or
  reading a device (`/dev/zero`) forever;
- `load_json` / `load_yaml` / `load_toml`: parsed data nested at most `MAX_DEPTH` levels (deeper input
  stops the parser's recursion: its RecursionError becomes the message), YAML aliases expanded to at most
  `MAX_NODES` values (a "billion laughs" document is refused, never expanded), JSON integers of at most
  `MAX_INT_DIGITS` digits (TOML and YAML: Python's own 4,300-digit limit); a failure is a `UserError`
  naming the file (and line);
- `brief`: a value for an error message, never longer than a line however large the value is;
- `printable` / `json_path`: text from outside (file names, headers, config values) as it may be shown
  on a terminal (control characters escaped) or written to strict JSON (undecodable bytes escaped).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from typing import Any

from llmdoctor.errors import UserError

MAX_DEPTH = 100  # nesting of lists/mappings in a config, rule file, request body (real ones: under 10)
MAX_NODES = 200_000  # values in one document once YAML aliases are expanded (the shipped rules: ~6,000)
MAX_INT_DIGITS = 100  # digits of an integer in a config (a real one has at most ~20)
BRIEF_CHARS = 80


class InputProblem(Exception):
    """An input that cannot be read within the bounds; `reason` is a message without the path."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------- reading files


def file_kind(mode: int) -> str:
    """`a named pipe (FIFO)`, `a directory`, ... for what is not a regular file."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: str | os.PathLike, limit: int, *, streams: bool = False, what: str = "a file",
                 follow: bool = True, stop: Callable[[bytes], bool] | None = None) -> bytes:
    """The bytes of `path`, at most `limit` of them (more: InputProblem).

    A regular file is read whole. With `streams`, a pipe or character device is read once, up to `limit`
    (`<(cmd)`, `/dev/stdin`): a named pipe that no process has open for writing is an error at once instead
    of a wait forever. Without `streams`, anything but a regular file is an InputProblem naming its kind.
    With `follow=False` a symbolic link is not opened (an InputProblem). `stop(first bytes)` true: a stream
    returns what it read so far (a pipe that starts binary is not read to its, maybe no, end).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise InputProblem("is a directory") from None
    except FileNotFoundError:
        raise InputProblem("no such file or directory") from None
    except OSError as err:
        if not follow and os.path.islink(path):
            raise InputProblem("is a symbolic link") from None
        raise InputProblem(f"cannot read: {err.strerror or err}") from None
    try:
        mode = os.fstat(fd).st_mode
        chunks: list[bytes] = []
        if not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise InputProblem("is a directory")
            if not (streams and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))):
                raise InputProblem(f"is {file_kind(mode)}, not a regular file")
            if stat.S_ISFIFO(mode):
                try:
                    first = os.read(fd, 1)  # non-blocking: b"" = no process has the pipe open for writing
                except BlockingIOError:
                    first = None  # a writer, nothing written yet: wait for it like any reader of a pipe
                if first == b"":
                    raise InputProblem("is a named pipe (FIFO) that no process writes to: nothing to read")
                if first:
                    chunks.append(first)
        elif os.fstat(fd).st_size > limit:
            raise InputProblem(f"is larger than {describe_bytes(limit)}: too large for {what}")
        _blocking(fd)
        size = sum(len(c) for c in chunks)
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if stop is not None and not stat.S_ISREG(mode):
                head = b"".join(chunks)
                if stop(head):
                    return head
                stop = None  # asked once, of the first bytes
        if size > limit:
            raise InputProblem(f"holds more than {describe_bytes(limit)}: too large for {what}")
        return b"".join(chunks)
    except OSError as err:
        raise InputProblem(f"cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _blocking(fd: int) -> None:
    try:
        os.set_blocking(fd, True)
    except (AttributeError, OSError):
        pass


def describe_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


# ----------------------------------------------------------------------------- parsing with bounds


def data_size(data: Any, limit: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> tuple[int, int]:
    """(values, depth) of parsed data, each shared value counted every time it is reached (what a YAML alias
    expands to); stops counting past `limit` values or `max_depth` levels."""
    count = deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        count += 1
        deepest = max(deepest, depth)
        if count > limit or deepest > max_depth:
            break
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for item in value.items() for v in item)
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
    return count, deepest


def check_data(data: Any, source: str, *, limit: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """`data`, or UserError (naming the top-level key at fault) when it expands to more than `limit` values or
    nests deeper than `max_depth`."""
    count, depth = data_size(data, limit, max_depth)
    if count <= limit and depth <= max_depth:
        return data
    where = ""
    if isinstance(data, dict):
        for key, value in data.items():
            inner_count, inner_depth = data_size(value, limit, max_depth - 1)
            if inner_count > limit or inner_depth > max_depth - 1:
                where = f" key {brief_text(str(key), 40)!r}:"
                break
    if count > limit:
        raise UserError(f"{source}:{where} more than {limit:,} values once YAML aliases are expanded: not a file "
                        "llmdoctor reads (a 'billion laughs' document?)")
    raise UserError(f"{source}:{where} nested more than {max_depth} levels deep: not a file llmdoctor reads")


_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}\n]')
_KEY = re.compile(r"\s*[\"']?([\w.-]+)[\"']?\s*[=:]")


def _too_deep(text: str | bytes, source: str, max_depth: int = MAX_DEPTH) -> UserError:
    """The error for input whose parser ran out of recursion: the line where brackets first nest past
    `max_depth` and the key that line starts with, when a scan outside strings and comments finds them."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth, line, key = 0, 1, None
    line_start = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
            line_start = match.end()
        elif token in "[{":
            depth += 1
            if depth > max_depth:
                found = _KEY.match(text, line_start)
                key = found.group(1) if found else None
                break
        elif token in "]}":
            depth = max(0, depth - 1)
    else:
        return UserError(f"{source}: nested too deeply to read: not a file llmdoctor reads")
    named = f" key {brief_text(key, 40)!r}:" if key else ""
    return UserError(f"{source}:{line}:{named} nested more than {max_depth} levels deep: not a file llmdoctor "
                     "reads")


def load_json(raw: str | bytes, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` bounded in depth and integer size; UserError `<source>:<line>:<col>: invalid JSON (...)`."""
    import json

    try:
        data = json.loads(raw, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise UserError(f"{source}:{err.lineno}:{err.colno}: invalid JSON ({err.msg})") from None
    except _Refused as err:
        raise UserError(f"{source}: invalid JSON ({err})") from None
    except UnicodeDecodeError:
        raise UserError(f"{source}: not UTF-8 text") from None
    except (RecursionError, MemoryError):
        raise _too_deep(raw, source, max_depth) from None
    return check_data(data, source, max_depth=max_depth)


class _Refused(ValueError):
    pass


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not JSON")


def load_yaml(raw: str | bytes, source: str, *, loader: Any = None, max_depth: int = MAX_DEPTH) -> Any:
    """`yaml` safe load, bounded: the parser's own nesting limit (libyaml) or RecursionError, then the
    aliases expanded and the nesting of the result; UserError `<source>:<line>: invalid YAML: <problem>`."""
    import yaml

    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            line = err.object[: err.start].count(b"\n") + 1
            raise UserError(f"{source}:{line}: not UTF-8 (byte 0x{err.object[err.start]:02x}): save the file as "
                            "UTF-8") from None
    loader = loader or getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw, Loader=loader)  # a safe loader (SafeLoader or its C twin)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{where}: invalid YAML: {brief_text(problem)}") from None
    except ValueError as err:  # an integer past Python's digit limit
        raise UserError(f"{source}: invalid YAML: {_value_problem(err)}") from None
    except (RecursionError, MemoryError):
        raise _too_deep(raw, source, max_depth) from None
    return check_data(data, source, max_depth=max_depth)


def _value_problem(err: ValueError) -> str:
    if "integer string conversion" in str(err):
        return "an integer of more than 4,300 digits (Python's limit; a real setting has a few)"
    return brief_text(str(err))


def load_toml(text: str, source: str, max_depth: int = MAX_DEPTH) -> dict:
    """`tomllib.loads`, bounded; UserError `<source>: invalid TOML: ...`."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    try:
        data = tomllib.loads(text, parse_float=float)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{source}: invalid TOML: {brief_text(str(err))}") from None
    except ValueError as err:  # an integer past Python's digit limit
        raise UserError(f"{source}: invalid TOML: {_value_problem(err)}") from None
    except (RecursionError, MemoryError):
        raise _too_deep(text, source, max_depth) from None
    return check_data(data, source, max_depth=max_depth)


# ----------------------------------------------------------------------------- options

MAX_SECONDS = 86_400  # a timeout option: a day at most (inf, 1e400 would never time out; nan compares false)


def check_seconds(value: float, option: str = "--timeout", maximum: float = MAX_SECONDS) -> float:
    if not 0 < value <= maximum:
        raise UserError(f"{option} must be more than 0 and at most {maximum:,} seconds (got {value:g})")
    return value


# ----------------------------------------------------------------------------- values in messages


def brief(value: Any, limit: int = BRIEF_CHARS) -> str:
    """`repr(value)` for a message, at most about `limit` characters, computed without formatting the whole
    value (a YAML alias bomb has a repr of gigabytes)."""
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple, short.maxset = 3, 4, 4, 4, 4
    short.maxstring, short.maxother, short.maxlong = limit, limit, 40
    if hasattr(short, "maxfrozenset"):
        short.maxfrozenset = 4
    text = short.repr(value)
    return text if len(text) <= limit + 10 else text[:limit] + "..."


def brief_text(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# ----------------------------------------------------------------------------- text from outside

# C0 and C1 controls, DEL, and the bidirectional overrides/isolates ("Trojan source"); lone surrogates are the
# undecodable bytes of a file name (surrogateescape)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control characters (escape sequences, carriage returns, line
    breaks), bidi overrides and undecodable bytes are shown as `\\x1b`, `\\u202e`, `\\xff`."""
    if not isinstance(text, str):
        text = str(text)
    return _UNPRINTABLE.sub(_escape, text) if _UNPRINTABLE.search(text) else text


def escape_markup(text: str) -> str:
    """`rich.markup.escape(printable(text))`: a value from outside, safe inside a rich markup line (renderers
    import it as their `escape`)."""
    from rich.markup import escape

    return escape(printable(text))


def printable_lines(text: str) -> str:
    """`printable`, keeping line breaks (multi-line messages)."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_path(path: str) -> str:
    """A file name for strict JSON: valid Unicode as it is; one with undecodable bytes (lone surrogates, which
    strict JSON parsers reject) written with `\\xNN` for those bytes and `\\\\` for its backslashes, so that
    `os.fsdecode(codecs.escape_decode(text)[0])` gives the name back."""
    if not _SURROGATE.search(path):
        return path
    raw = os.fsencode(path)
    return raw.replace(b"\\", b"\\\\").decode("utf-8", errors="backslashreplace")


def json_safe(value: Any) -> Any:
    """`value` with every string made valid Unicode (see `json_path`), for `json.dumps`."""
    if isinstance(value, str):
        return json_path(value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
