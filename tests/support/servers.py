"""Local HTTP servers for the probe and nginx tests, written on raw sockets so the framing is exact.

Every server is a context manager: it binds a free port on 127.0.0.1, serves from background (daemon)
threads, and on exit stops accepting, wakes every sleeping handler and closes every connection::

    from support.servers import PacedSSEServer

    with PacedSSEServer(events=10, interval=0.05) as upstream:
        result = run_probe(upstream.url)          # upstream.url == "http://127.0.0.1:PORT/"
        assert upstream.requests[0].version == "HTTP/1.1"

Common attributes: `.host`, `.port`, `.url` (with a trailing "/"), `.address` ("127.0.0.1:PORT", for an nginx
`proxy_pass http://...;`), `.requests` (a list of `Request(method, target, version, headers, body)`, one per
request received; header names lower-cased). Request bodies are read by Content-Length (not chunked).

`PacedSSEServer` — a streaming upstream that frames like ASGI servers (uvicorn): to an HTTP/1.1 request it
answers `Transfer-Encoding: chunked`, one chunk per event, and keeps the connection alive; to an HTTP/1.0
request it answers close-delimited (no Content-Length, the body ends when it closes). Any method and path
answer the same stream. Options (all keyword):

    events=10            content events sent, each `data: {chat.completion.chunk JSON}\\n\\n`
    interval=0.05        seconds between events (scheduled from the start, so no drift)
    first_delay=0.0      seconds before the first event (a slow first token); headers go out at once
    pause=None           (k, seconds): an extra pause after the k-th event (a mid-stream stall)
    done=True            end with one more event, `data: [DONE]` (OpenAI style); `.total_events` counts it
    accel_buffering=False  send `X-Accel-Buffering: no` (nginx then stops buffering this response)
    cache_control="no-cache"  the Cache-Control header, or None for none
    event_format="sse"   or "ndjson": one JSON object per line, `application/x-ndjson`, no [DONE]
    event_bytes=0        pad each event's text to about this many bytes
    burst=1              send events in groups of `burst`, each group in one write at its last event's time
    hold=None            "body": headers at once, whole body at the end; "all": headers and body together at
                         the end (what nginx does with proxy_buffering on and an HTTP/1.0 upstream)
    gzip=False           `Content-Encoding: gzip`; gzip_flush=True flushes (Z_SYNC_FLUSH) after each event,
                         gzip_flush=False lets the compressor hold everything until the end
    content_length=False declare the whole body's Content-Length up front (then pace it, no chunking);
                         content_length_extra=N declares N bytes more than it sends, then closes
    close_after=None     after this many events, close the connection abruptly (no terminating chunk)
    status="200 OK"
    content_type=None    override the Content-Type header (default text/event-stream or application/x-ndjson)
    date=FIXED_DATE      the Date header; None sends the current time (a cache computes freshness from it)

Named presets of misbehaving streams (each a PacedSSEServer; keyword options override the preset):
`ClosesEarlyServer` (close_after=3), `BufferedServer` (hold="all"), `CoalescedServer` (burst=5),
`GzipSSEServer` (gzip=True), `ContentLengthServer` (content_length=True).

Other misbehaving servers:
    SilentServer(close_after=None)   reads the request, never answers; with close_after=S it closes after S s
    HugeLineServer(size=4 MiB)       200 text/event-stream whose body is one line `data: xxxx...` of `size` bytes
    GarbageServer(payload=...)       answers the request with bytes that are not HTTP, then closes
    ErrorServer(status="401 Unauthorized")  a JSON error (Content-Length framed) that echoes the request's
                                     Authorization header back in its message, as some APIs do

`free_port()` returns a port on 127.0.0.1 with nothing listening (for "connection refused" tests).
"""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field

__all__ = [
    "BufferedServer",
    "ClosesEarlyServer",
    "CoalescedServer",
    "ContentLengthServer",
    "ErrorServer",
    "GarbageServer",
    "GzipSSEServer",
    "HugeLineServer",
    "PacedSSEServer",
    "Request",
    "SilentServer",
    "free_port",
]

_MAX_HEAD = 64 * 1024
FIXED_DATE = "Mon, 30 Nov 2026 00:00:00 GMT"


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class _ClientGone(Exception):
    """The peer closed, or the server is stopping: stop handling this connection."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Server:
    """Accept loop, per-connection threads, request parsing and a clean stop. Subclasses define `respond`."""

    host = "127.0.0.1"

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.port = 0

    # -- lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        self.port = listener.getsockname()[1]
        accept = threading.Thread(target=self._accept_loop, name=f"{type(self).__name__}-accept", daemon=True)
        self._threads.append(accept)
        accept.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in list(self._threads):
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connection handling

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections.add(conn)
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(worker)
            worker.start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = bytearray()
        try:
            while not self._stopping.is_set():
                request = self._read_request(conn, buffer)
                self.requests.append(request)
                if not self.respond(conn, request):
                    break
        except _ClientGone:
            pass
        except OSError:
            pass
        finally:
            with self._lock:
                self._connections.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _recv(self, conn: socket.socket) -> bytes:
        conn.settimeout(0.1)
        while not self._stopping.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise _ClientGone()
            return data
        raise _ClientGone()

    def _read_request(self, conn: socket.socket, buffer: bytearray) -> Request:
        while b"\r\n\r\n" not in buffer:
            if buffer.startswith(b"\x16\x03"):  # a TLS ClientHello: answer in plain HTTP, as real servers do
                self.send(conn, _head("400 Bad Request", [("content-length", "0"), ("connection", "close")]))
                raise _ClientGone()
            if len(buffer) > _MAX_HEAD:
                raise _ClientGone()
            buffer += self._recv(conn)
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = (lines[0].split(" ") + ["", "", ""])[:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        body = bytearray(rest)
        while len(body) < length:
            body += self._recv(conn)
        buffer[:] = body[length:]
        return Request(method, target, version, headers, bytes(body[:length]))

    def respond(self, conn: socket.socket, request: Request) -> bool:
        """Answer one request; return True to keep the connection for another request."""
        raise NotImplementedError

    # -- helpers for subclasses

    def sleep_until(self, deadline: float) -> None:
        """Sleep until the monotonic `deadline`; raise _ClientGone if the server stops meanwhile."""
        if self._stopping.wait(max(0.0, deadline - time.monotonic())):
            raise _ClientGone()

    @staticmethod
    def send(conn: socket.socket, data: bytes) -> None:
        try:
            conn.sendall(data)
        except OSError as err:
            raise _ClientGone() from err


def _head(status: str, headers: list[tuple[str, str]], version: str = "HTTP/1.1") -> bytes:
    lines = [f"{version} {status}"] + [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


class PacedSSEServer(_Server):
    """A paced SSE (or NDJSON) upstream framed like uvicorn; see the module docstring for the options."""

    def __init__(
        self,
        *,
        events: int = 10,
        interval: float = 0.05,
        first_delay: float = 0.0,
        pause: tuple[int, float] | None = None,
        done: bool = True,
        accel_buffering: bool = False,
        cache_control: str | None = "no-cache",
        event_format: str = "sse",
        event_bytes: int = 0,
        burst: int = 1,
        hold: str | None = None,
        gzip: bool = False,
        gzip_flush: bool = True,
        content_length: bool = False,
        content_length_extra: int = 0,
        close_after: int | None = None,
        status: str = "200 OK",
        content_type: str | None = None,
        date: str | None = FIXED_DATE,
    ) -> None:
        super().__init__()
        if event_format not in ("sse", "ndjson"):
            raise ValueError("event_format is 'sse' or 'ndjson'")
        if hold not in (None, "body", "all"):
            raise ValueError("hold is None, 'body' or 'all'")
        self.events = events
        self.interval = interval
        self.first_delay = first_delay
        self.pause = pause
        self.done = done and event_format == "sse"
        self.accel_buffering = accel_buffering
        self.cache_control = cache_control
        self.event_format = event_format
        self.event_bytes = event_bytes
        self.burst = max(1, burst)
        self.hold = hold
        self.gzip = gzip
        self.gzip_flush = gzip_flush
        self.content_length = content_length
        self.content_length_extra = content_length_extra
        self.close_after = close_after
        self.status = status
        self.content_type = content_type
        self.date = date

    @property
    def total_events(self) -> int:
        """Events a client receives when nothing goes wrong (the content events plus `[DONE]`)."""
        return self.events + (1 if self.done else 0)

    @property
    def duration(self) -> float:
        """Seconds from the headers to the last event, as scheduled."""
        extra = self.pause[1] if self.pause else 0.0
        return self.first_delay + max(0, self.total_events - 1) * self.interval + extra

    def event_payloads(self) -> list[bytes]:
        payloads = []
        for i in range(self.events):
            text = f"tok{i} "
            if self.event_bytes > len(text):
                text += "x" * (self.event_bytes - len(text))
            if self.event_format == "ndjson":
                payloads.append(json.dumps({"index": i, "text": text}).encode() + b"\n")
                continue
            chunk = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "test",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
            }
            payloads.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if self.done:
            payloads.append(b"data: [DONE]\n\n")
        return payloads

    def _schedule(self, count: int, start: float) -> list[float]:
        times = []
        for i in range(count):
            t = start + self.first_delay + i * self.interval
            if self.pause and i >= self.pause[0]:
                t += self.pause[1]
            times.append(t)
        return times

    def respond(self, conn: socket.socket, request: Request) -> bool:
        start = time.monotonic()
        http11 = request.version == "HTTP/1.1"
        payloads = self.event_payloads()
        if self.gzip:
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            encoded = []
            for i, payload in enumerate(payloads):
                piece = compressor.compress(payload)
                if self.gzip_flush:
                    piece += compressor.flush(zlib.Z_SYNC_FLUSH)
                if i == len(payloads) - 1:
                    piece += compressor.flush(zlib.Z_FINISH)
                encoded.append(piece)
            payloads = encoded
        content_type = self.content_type or (
            "text/event-stream; charset=utf-8" if self.event_format == "sse" else "application/x-ndjson")
        date = self.date or email.utils.formatdate(usegmt=True)
        headers = [("date", date), ("server", "uvicorn"),
                   ("content-type", content_type)]
        if self.cache_control:
            headers.append(("cache-control", self.cache_control))
        if self.accel_buffering:
            headers.append(("x-accel-buffering", "no"))
        if self.gzip:
            headers.append(("content-encoding", "gzip"))
        chunked = http11 and not self.content_length
        keep_alive = http11 and request.headers.get("connection", "").lower() != "close"
        if self.content_length:
            declared = sum(len(p) for p in payloads) + self.content_length_extra
            headers.append(("content-length", str(declared)))
            keep_alive = keep_alive and not self.content_length_extra
        elif chunked:
            headers.append(("transfer-encoding", "chunked"))
        if self.close_after is not None:
            keep_alive = False
        if not keep_alive:
            headers.append(("connection", "close"))
        head = _head(self.status, headers, "HTTP/1.1" if http11 else "HTTP/1.0")

        def frame(data: bytes) -> bytes:
            return _chunk(data) if chunked else data

        times = self._schedule(len(payloads), start)
        if self.hold:
            if self.hold == "body":
                self.send(conn, head)
            self.sleep_until(times[-1] if times else start)
            body = b"".join(frame(p) for p in payloads) + (b"0\r\n\r\n" if chunked else b"")
            self.send(conn, head + body if self.hold == "all" else body)
            return keep_alive
        self.send(conn, head)
        pending = b""
        for i, (payload, when) in enumerate(zip(payloads, times)):
            if self.close_after is not None and i >= self.close_after:
                return False
            pending += frame(payload)
            last = i == len(payloads) - 1
            if (i + 1) % self.burst and not last:
                continue
            self.sleep_until(when)
            self.send(conn, pending)
            pending = b""
        if self.close_after is not None and self.close_after <= len(payloads):
            return False
        if self.content_length_extra:
            return False
        if chunked:
            self.send(conn, b"0\r\n\r\n")
        return keep_alive


def ClosesEarlyServer(**options) -> PacedSSEServer:
    """Sends 3 events of a chunked stream, then closes without the terminating chunk."""
    return PacedSSEServer(**{"close_after": 3, **options})


def BufferedServer(**options) -> PacedSSEServer:
    """Holds headers and the whole body until the last event's time, then sends them in one write."""
    return PacedSSEServer(**{"hold": "all", **options})


def CoalescedServer(**options) -> PacedSSEServer:
    """Sends the events in bursts of 5 (a layer that flushes when its buffer fills)."""
    return PacedSSEServer(**{"burst": 5, **options})


def GzipSSEServer(**options) -> PacedSSEServer:
    """A gzip-encoded stream (flushed per event unless gzip_flush=False)."""
    return PacedSSEServer(**{"gzip": True, **options})


def ContentLengthServer(**options) -> PacedSSEServer:
    """Declares the whole body's Content-Length up front, then paces the events."""
    return PacedSSEServer(**{"content_length": True, **options})


class SilentServer(_Server):
    """Reads the request and never answers (or closes after `close_after` seconds without a byte)."""

    def __init__(self, *, close_after: float | None = None) -> None:
        super().__init__()
        self.close_after = close_after

    def respond(self, conn: socket.socket, request: Request) -> bool:
        if self.close_after is None:
            self._stopping.wait()
        else:
            self.sleep_until(time.monotonic() + self.close_after)
        return False


class HugeLineServer(_Server):
    """A 200 text/event-stream (chunked) whose body is a single line of `size` bytes, sent in 64 KiB pieces."""

    def __init__(self, *, size: int = 4 * 1024 * 1024, terminate: bool = True) -> None:
        super().__init__()
        self.size = size
        self.terminate = terminate

    def respond(self, conn: socket.socket, request: Request) -> bool:
        self.send(conn, _head("200 OK", [("content-type", "text/event-stream"),
                                         ("transfer-encoding", "chunked"), ("connection", "close")]))
        self.send(conn, _chunk(b"data: "))
        piece = b"x" * 65536
        sent = 0
        while sent < self.size:
            part = piece[: self.size - sent]
            self.send(conn, _chunk(part))
            sent += len(part)
        if self.terminate:
            self.send(conn, _chunk(b"\n\n"))
        self.send(conn, b"0\r\n\r\n")
        return False


class GarbageServer(_Server):
    """Answers with bytes that are not HTTP (by default an SSH banner and binary noise), then closes."""

    def __init__(self, *, payload: bytes = b"SSH-2.0-OpenSSH_9.2p1\r\n\x00\xff\x13\x37garbage\r\n\r\n") -> None:
        super().__init__()
        self.payload = payload

    def respond(self, conn: socket.socket, request: Request) -> bool:
        self.send(conn, self.payload)
        return False


class ErrorServer(_Server):
    """A JSON error response whose message echoes the request's Authorization header."""

    def __init__(self, *, status: str = "401 Unauthorized") -> None:
        super().__init__()
        self.status = status

    def respond(self, conn: socket.socket, request: Request) -> bool:
        echoed = request.headers.get("authorization", "")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {echoed}"}}).encode()
        self.send(conn, _head(self.status, [("content-type", "application/json"), ("server", "uvicorn"),
                                            ("content-length", str(len(body))), ("connection", "close")]) + body)
        return False
