"""Turn a response body, as it arrives, into events: content decoding and SSE / line splitting.

The counter keeps only the unfinished event in memory, and at most `MAX_PENDING` bytes of it, so a
server that sends one endless line cannot exhaust memory.
"""

from __future__ import annotations

import zlib

MAX_PENDING = 1024 * 1024

SSE = "sse"
LINES = "lines"
NOT_A_STREAM = "not-a-stream"

_LINE_TYPES = ("ndjson", "jsonl", "json-seq", "x-json-stream", "jsonlines", "text/plain")
_NOT_STREAM_TYPES = ("application/json", "text/html", "application/xml", "text/xml")
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def event_format_for(content_type: str) -> str | None:
    """SSE, LINES or NOT_A_STREAM from the Content-Type; None when the body must be sniffed."""
    media = content_type.split(";", 1)[0].strip().lower()
    if "event-stream" in media:
        return SSE
    if any(kind in media for kind in _LINE_TYPES):
        return LINES
    if media in _NOT_STREAM_TYPES:
        return NOT_A_STREAM
    return None


def sniff_format(first_bytes: bytes) -> str:
    return SSE if first_bytes.lstrip().startswith(_SSE_FIELDS) else LINES


class Decoder:
    """Undo Content-Encoding (gzip / deflate / identity) incrementally; `supported` is False otherwise."""

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        self.encoding = ",".join(codings)
        self.supported = codings in ([], ["gzip"], ["x-gzip"], ["deflate"])
        self._raw_deflate_tried = False
        self._z = zlib.decompressobj(47) if codings else None  # 47: zlib or gzip header, auto-detected

    def decode(self, data: bytes) -> bytes:
        if self._z is None:
            return data
        try:
            return self._z.decompress(data)
        except zlib.error:
            if self.encoding == "deflate" and not self._raw_deflate_tried:
                self._raw_deflate_tried = True  # some servers send raw deflate without the zlib header
                self._z = zlib.decompressobj(-15)
                return self._z.decompress(data)
            raise


class EventCounter:
    """Count completed events: SSE blocks separated by a blank line, or non-empty lines."""

    def __init__(self, event_format: str | None) -> None:
        self.format = event_format
        self._pending = bytearray()
        self._pending_size = 0  # the true size, also after the buffer was trimmed
        self.oversized = False  # an event grew beyond MAX_PENDING
        self.largest_event = 0
        self.done_seen = False  # an SSE `data: [DONE]`
        self._sniff = bytearray()

    def feed(self, data: bytes) -> int:
        """Add decoded bytes; return how many events they completed."""
        if not data:
            return 0
        if self.format is None:
            self._sniff += data
            if len(self._sniff.strip()) < 8 and b"\n" not in self._sniff:
                return 0
            self.format = sniff_format(bytes(self._sniff))
            data, self._sniff = bytes(self._sniff), bytearray()
        if self.format == NOT_A_STREAM:
            return 0
        data = data.replace(b"\r\n", b"\n")
        if self._pending.endswith(b"\r") and data.startswith(b"\n"):
            self._pending[-1:] = b""
            self._pending_size -= 1
        separator = b"\n\n" if self.format == SSE else b"\n"
        self._pending += data
        self._pending_size += len(data)
        completed = 0
        while True:
            index = self._pending.find(separator)
            if index < 0:
                break
            block = bytes(self._pending[:index])
            size = self._pending_size - (len(self._pending) - index)
            del self._pending[: index + len(separator)]
            self._pending_size = len(self._pending)
            if self._is_event(block):
                completed += 1
                self.largest_event = max(self.largest_event, size)
        if len(self._pending) > MAX_PENDING:
            self.oversized = True
            keep = len(separator)
            del self._pending[:-keep]
        return completed

    def _is_event(self, block: bytes) -> bool:
        lines = [line for line in block.split(b"\n") if line.strip()]
        if self.format == LINES:
            return bool(lines)
        fields = [line for line in lines if not line.startswith(b":")]  # comments are keep-alives
        if any(line.strip() in (b"data: [DONE]", b"data:[DONE]") for line in fields):
            self.done_seen = True
        return bool(fields)

    @property
    def pending_bytes(self) -> int:
        """Bytes of an event begun and not finished (what an early close leaves behind)."""
        if self.format is None:
            return len(self._sniff.strip())
        if self.format == NOT_A_STREAM:
            return 0
        return self._pending_size if self._pending.strip() else 0

    def finish(self) -> int:
        """At the end of the body: decide the format if still undecided and count what is left."""
        if self.format is None and self._sniff.strip():
            self.format = sniff_format(bytes(self._sniff))
            data, self._sniff = bytes(self._sniff), bytearray()
            completed = self.feed(data)
        else:
            completed = 0
        if self.format == LINES and self._pending.strip():
            completed += 1  # a last line without its newline is still a line
            self.largest_event = max(self.largest_event, self._pending_size)
            self._pending.clear()
            self._pending_size = 0
        return completed
