"""Bytes -> text the way Python itself reads a source file (PEP 263 / PEP 3120)."""

from __future__ import annotations

import io
import tokenize


class SourceError(Exception):
    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def decode_source(data: bytes) -> str:
    """Decode with the BOM or `# -*- coding: ... -*-` cookie (default UTF-8); raise SourceError."""
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise SourceError("binary data (NUL byte): not a Python source file", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        reason = f"invalid encoding declaration: {getattr(err, 'msg', err)}"
        if data.startswith(b"\xef\xbb\xbf"):
            reason += " (the file starts with a UTF-8 byte order mark: declare utf-8 or drop the mark)"
        raise SourceError(reason, getattr(err, "lineno", None) or _cookie_line(data)) from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise SourceError(f"cannot decode as {encoding} (byte 0x{data[err.start]:02x}); "
                          "declare the encoding with a '# -*- coding: ... -*-' line or save as UTF-8",
                          line) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r} in the coding declaration", 1) from None
    text = text.removeprefix("\ufeff")
    return text



def _cookie_line(data: bytes) -> int | None:
    """PEP 263: the declaration is on line 1 or 2."""
    for number, line in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n", 2)[:2], 1):
        if line.lstrip().startswith(b"#") and b"coding" in line:
            return number
    return None
