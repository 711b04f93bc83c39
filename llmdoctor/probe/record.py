"""Send one request with httpx and record what arrives when: headers, each read, each event.

Times are seconds since the request started (before the connection is opened). A *read* is the bytes that
arrived together. httpx hands the body over in pieces (one per HTTP chunk); the probe counts the socket reads
underneath (httpcore's `network_stream`), so pieces from one socket read are one read, and a socket read that
follows the previous one within `READ_GAP_S` (data that was already waiting in the kernel: a burst larger than
one 64 KiB read) continues it. Without that extension, the time gap alone decides. The whole exchange is bounded
by the timeout: before the headers that is an error (could not probe); after, the recording stops and is
analysed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field

from llmdoctor.errors import UserError
from llmdoctor.probe.events import Decoder, EventCounter, event_format_for

READ_GAP_S = 0.001
SNIPPET_BYTES = 300


@dataclass
class ProbeRequest:
    url: str
    method: str = "GET"
    headers: list[tuple[str, str]] = field(default_factory=list)
    content: bytes | None = None
    timeout: float = 30.0
    shown_url: str = ""  # the URL with secrets redacted, for messages


@dataclass
class Read:
    t: float  # seconds since the request started
    size: int  # body bytes as received (before content decoding)
    events: int = 0  # events this read completed

    def to_dict(self) -> dict:
        return {"t": round(self.t, 4), "bytes": self.size, "events": self.events}


@dataclass
class Recording:
    status: int = 0
    reason: str = ""
    http_version: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    connect_s: float | None = None
    tls_s: float | None = None
    headers_s: float | None = None
    end_s: float | None = None
    reads: list[Read] = field(default_factory=list)
    event_times: list[float] = field(default_factory=list)
    body_bytes: int = 0
    decoded_bytes: int = 0
    complete: bool = False  # the body ended as its framing says
    timed_out: bool = False  # the timeout stopped the recording before the end
    error: str | None = None  # a protocol or network error after the headers
    event_format: str | None = None
    decodable: bool = True
    pending_bytes: int = 0  # an unfinished event left at the end
    oversized_event: bool = False
    largest_event: int = 0
    done_seen: bool = False
    snippet: bytes = b""  # the start of the decoded body (shown for error statuses)
    phase: str = "connect"  # where the exchange is: connect, tls, request, body
    _last_piece_t: float = -1.0
    _last_piece_read: int | None = None

    def header(self, name: str) -> str | None:
        name = name.lower()
        values = [v for n, v in self.headers if n.lower() == name]
        return ", ".join(values) if values else None


class _UnjoinedExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each blocking call (the DNS lookup) in a daemon thread that nobody waits for.

    asyncio's default executor is joined when the loop closes, so a resolver that hangs would hold the
    probe past its timeout; here the timeout wins and the stuck thread dies with the process.
    """

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - handed to the awaiting coroutine
                future.set_exception(err)

        threading.Thread(target=run, name="llmdoctor-probe-blocking", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


def record_trial(request: ProbeRequest) -> Recording:
    """Run the request to the end or to the timeout. Raise UserError if no response headers arrived.

    Runs its own event loop; from a thread that already runs one, it runs in a helper thread.
    """
    rec = Recording()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _run_loop(request, rec)
        return rec
    errors: list[BaseException] = []

    def in_thread() -> None:
        try:
            _run_loop(request, rec)
        except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(err)

    worker = threading.Thread(target=in_thread, daemon=True)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return rec


def _run_loop(request: ProbeRequest, rec: Recording) -> None:
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_UnjoinedExecutor(max_workers=1))
    try:
        loop.run_until_complete(_bounded(request, rec))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _bounded(request: ProbeRequest, rec: Recording) -> None:
    try:
        await asyncio.wait_for(_exchange(request, rec), timeout=request.timeout)
    except asyncio.TimeoutError:
        if rec.headers_s is None:
            raise UserError(_timeout_message(request, rec)) from None
        rec.timed_out = True
        rec.end_s = request.timeout


def _timeout_message(request: ProbeRequest, rec: Recording) -> str:
    within = f"within {request.timeout:g} s (the --timeout)"
    if rec.phase == "connect":
        return f"could not connect to {_where(request)} {within}: the host name did not resolve or nothing answered"
    if rec.phase == "tls":
        return f"the TLS handshake with {_where(request)} did not finish {within}"
    return (f"no response headers from {request.shown_url} {within}: the server accepted the request but did not "
            "answer")


def _where(request: ProbeRequest) -> str:
    import httpx

    url = httpx.URL(request.url)
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


async def _exchange(request: ProbeRequest, rec: Recording) -> None:
    import httpx

    started = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - started

    async def trace(name: str, info: dict) -> None:
        if name == "connection.connect_tcp.complete":
            rec.connect_s = now()
            rec.phase = "request"
        elif name == "connection.start_tls.started":
            rec.phase = "tls"
        elif name == "connection.start_tls.complete":
            rec.tls_s = now()
            rec.phase = "request"

    timeout = httpx.Timeout(request.timeout)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False) as client:
        started = time.perf_counter()  # the clock starts with the request, after the client's setup
        built = client.build_request(
            request.method, request.url, headers=request.headers, content=request.content,
            extensions={"trace": trace},
        )
        try:
            response = await client.send(built, stream=True)
        except httpx.HTTPError as err:
            raise could_not_probe(err, request) from None
        try:
            rec.headers_s = now()
            rec.phase = "body"
            rec.status = response.status_code
            rec.reason = response.reason_phrase
            rec.http_version = response.http_version
            rec.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
            await _read_body(response, rec, now)
        finally:
            await response.aclose()


async def _read_body(response, rec: Recording, now) -> None:
    import httpx

    decoder = Decoder(rec.header("content-encoding") or "")
    rec.decodable = decoder.supported
    counter = EventCounter(event_format_for(rec.header("content-type") or ""))
    socket_reads = _socket_read_counter(response)
    try:
        async for piece in response.aiter_raw():
            t = now()
            _add_piece(rec, t, piece, decoder if decoder.supported else None, counter,
                       socket_reads[0] if socket_reads else None)
        rec.complete = True
        if decoder.supported:
            completed = counter.finish()
            if completed:
                _count_events(rec, rec.reads[-1] if rec.reads else None, completed, now())
    except httpx.HTTPError as err:
        rec.error = _describe_body_error(err)
    except zlib.error as err:
        rec.error = f"the {decoder.encoding} body could not be decoded ({err})"
    finally:
        rec.end_s = now()
        rec.event_format = counter.format
        rec.pending_bytes = counter.pending_bytes
        rec.oversized_event = counter.oversized
        rec.largest_event = counter.largest_event
        rec.done_seen = counter.done_seen


def _socket_read_counter(response) -> list[int] | None:
    """Count the socket reads of this response's connection: a one-item list that each read increments."""
    stream = response.extensions.get("network_stream")
    original = getattr(stream, "read", None)
    if original is None:
        return None
    count = [0]

    async def counting_read(*args, **kwargs):
        data = await original(*args, **kwargs)
        count[0] += 1
        return data

    try:
        stream.read = counting_read  # the connection reads through this same object
    except AttributeError:
        return None
    return count


def _add_piece(rec: Recording, t: float, piece: bytes, decoder: Decoder | None, counter: EventCounter,
               socket_read: int | None) -> None:
    same_read = socket_read is not None and socket_read == rec._last_piece_read
    if rec.reads and (same_read or t - rec._last_piece_t <= READ_GAP_S):
        read = rec.reads[-1]
        read.size += len(piece)
    else:
        read = Read(t, len(piece))
        rec.reads.append(read)
    rec._last_piece_t = t
    rec._last_piece_read = socket_read
    rec.body_bytes += len(piece)
    if decoder is None:
        return
    decoded = decoder.decode(piece)
    rec.decoded_bytes += len(decoded)
    if len(rec.snippet) < SNIPPET_BYTES:
        rec.snippet += decoded[: SNIPPET_BYTES - len(rec.snippet)]
    _count_events(rec, read, counter.feed(decoded), t)


def _count_events(rec: Recording, read: Read | None, completed: int, t: float) -> None:
    if not completed:
        return
    if read is not None:
        read.events += completed
        t = read.t
    rec.event_times.extend([t] * completed)


def _describe_body_error(err: Exception) -> str:
    text = str(err) or type(err).__name__
    if "incomplete chunked read" in text.lower():
        return "the connection closed in the middle of the chunked body (no terminating chunk)"
    if "peer closed connection without sending complete message body" in text.lower():
        return "the connection closed before the body was complete (" + text + ")"
    return f"{type(err).__name__}: {text}"


def _cause_chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def could_not_probe(err: Exception, request: ProbeRequest) -> UserError:
    """The plain message for an error that happened before any response headers."""
    import httpx

    url = httpx.URL(request.url)
    where = _where(request)
    chain = list(_cause_chain(err))
    text = " ".join(str(e) for e in chain).lower()
    if isinstance(err, httpx.ConnectTimeout):
        return UserError(f"could not connect to {where} within {request.timeout:g} s (the --timeout)")
    if isinstance(err, httpx.TimeoutException):
        return UserError(f"no response headers from {request.shown_url} within {request.timeout:g} s "
                         "(the --timeout)")
    if isinstance(err, httpx.ConnectError):
        if any(isinstance(e, socket.gaierror) for e in chain) or "name or service not known" in text \
                or "nodename nor servname" in text or "name resolution" in text:
            return UserError(f"could not resolve the host name {url.host!r} (DNS): check the URL")
        if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
            return UserError(f"connection refused by {where}: is the server running and listening on that port?")
        if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain) or "certificate" in text:
            reason = next((str(e) for e in chain if isinstance(e, ssl.SSLError)), str(err))
            return UserError(f"TLS certificate verification failed for {url.host}: {reason}")
        if any(isinstance(e, ssl.SSLError) for e in chain) or "ssl" in text or "tls" in text:
            reason = next((str(e) for e in chain if isinstance(e, ssl.SSLError)), str(err))
            return UserError(f"TLS handshake with {where} failed ({reason}): does the server speak https "
                             "on this port? (try http://)")
        return UserError(f"could not connect to {where}: {err}")
    if isinstance(err, httpx.RemoteProtocolError):
        if "without sending a response" in text or "disconnected" in text:
            return UserError(f"{where} closed the connection without sending an HTTP response")
        return UserError(f"{where} did not answer with valid HTTP ({err}): is this the right port and scheme?")
    if isinstance(err, (httpx.ReadError, httpx.WriteError)):
        return UserError(f"the connection to {where} failed before the response headers ({err or type(err).__name__})")
    if isinstance(err, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return UserError(f"cannot probe {request.shown_url}: {err}")
    return UserError(f"could not probe {request.shown_url}: {type(err).__name__}: {err}")
