"""From a recording to a verdict, with the numbers it rests on (design.md §4, "Probe signals").

With N events sent T apart, a client behind a healthy path sees about one read per event, spread over
~(N-1)T; behind a buffering layer it sees one burst at the end (often with the headers held too); behind a
layer that flushes when a buffer fills or on a timer it sees a few bursts. An error or early close before the
end of the body is a truncation. Too few events cannot tell these apart: inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdoctor.probe.events import NOT_A_STREAM, SSE
from llmdoctor.probe.record import Recording

STREAMED = "streamed"
BUFFERED = "buffered"
COALESCED = "coalesced"
TRUNCATED = "truncated"
INCONCLUSIVE = "inconclusive"
VERDICTS = (STREAMED, BUFFERED, COALESCED, TRUNCATED, INCONCLUSIVE)
# The catalog id (rules/prb00N.yaml, `llmdoctor explain PRB001`) and severity of each verdict that is a problem.
VERDICT_RULES = {BUFFERED: ("PRB001", "error"), COALESCED: ("PRB002", "warning"), TRUNCATED: ("PRB003", "error"),
                 INCONCLUSIVE: ("PRB004", "info")}

DEFAULT_MIN_EVENTS = 5
# A response that ends this soon after the request cannot show whether anything held it.
TOO_FAST_S = 0.1
# Buffered: the last read carries at least this share of the events.
BUFFERED_FINAL_SHARE = 0.8
# Streamed: on average at most this many events per read, and no read with more than this share of them.
STREAMED_EVENTS_PER_READ = 2.0
STREAMED_LARGEST_SHARE = 0.5
# Headers "held": they arrived within this time of the end of the body (and with all of it).
HELD_WITHIN_S = 0.01


@dataclass
class Metrics:
    events: int = 0
    reads: int = 0
    event_reads: int = 0  # reads that completed at least one event
    events_per_read: float = 0.0  # events / event_reads
    largest_burst: int = 0  # the most events completed by one read
    final_burst: int = 0  # events completed by the last event-carrying read
    first_event_s: float | None = None
    last_event_s: float | None = None
    spread_s: float = 0.0  # last event - first event
    headers_held: bool = False  # the headers came together with the whole body, at the end

    def to_dict(self) -> dict:
        return {
            "events": self.events,
            "reads": self.reads,
            "event_reads": self.event_reads,
            "events_per_read": round(self.events_per_read, 2),
            "largest_burst": self.largest_burst,
            "final_burst": self.final_burst,
            "first_event_s": _round(self.first_event_s),
            "last_event_s": _round(self.last_event_s),
            "spread_s": round(self.spread_s, 4),
            "headers_held": self.headers_held,
        }


@dataclass
class Analysis:
    verdict: str
    reason: str
    metrics: Metrics
    notes: list[str] = field(default_factory=list)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def measure(rec: Recording) -> Metrics:
    m = Metrics(events=len(rec.event_times), reads=len(rec.reads))
    carrying = [r for r in rec.reads if r.events]
    m.event_reads = len(carrying)
    if carrying:
        m.events_per_read = m.events / m.event_reads
        m.largest_burst = max(r.events for r in carrying)
        m.final_burst = carrying[-1].events
    if rec.event_times:
        m.first_event_s = rec.event_times[0]
        m.last_event_s = rec.event_times[-1]
        m.spread_s = m.last_event_s - m.first_event_s
    if rec.headers_s is not None and rec.reads:
        body_end = rec.reads[-1].t
        m.headers_held = body_end - rec.headers_s <= HELD_WITHIN_S and rec.headers_s > TOO_FAST_S
    return m


def analyze(rec: Recording, *, min_events: int = DEFAULT_MIN_EVENTS, expect_done: bool = False) -> Analysis:
    m = measure(rec)
    verdict, reason = _verdict(rec, m, min_events, expect_done)
    return Analysis(verdict, reason, m, _notes(rec, m))


def _verdict(rec: Recording, m: Metrics, min_events: int, expect_done: bool) -> tuple[str, str]:
    if not 200 <= rec.status < 300:
        return INCONCLUSIVE, _status_reason(rec)
    if rec.error:
        return TRUNCATED, f"the stream broke after {m.events} event(s): {rec.error}"
    if rec.complete and rec.decodable and rec.event_format == SSE and rec.pending_bytes:
        return TRUNCATED, (f"the body ended in the middle of an event ({rec.pending_bytes} bytes after the last "
                           "blank line)")
    if rec.complete and expect_done and rec.decodable and not rec.done_seen:
        return TRUNCATED, ("the body ended without `data: [DONE]`, which OpenAI-compatible servers send last: "
                           "something closed the stream early")
    if not rec.decodable:
        return INCONCLUSIVE, (f"the body is {rec.header('content-encoding')}-encoded, which the probe cannot "
                              "decode, so its events cannot be counted")
    if rec.event_format == NOT_A_STREAM:
        return INCONCLUSIVE, (f"the response is {rec.header('content-type')}, not an event stream: did the request "
                              'ask for streaming (e.g. "stream": true)?')
    stopped = " before the --timeout stopped the recording" if rec.timed_out else ""
    if m.events < min_events:
        return INCONCLUSIVE, (f"only {m.events} event(s) arrived{stopped}; at least {min_events} are needed to "
                              "tell streaming from buffering")
    assert m.last_event_s is not None
    if m.event_reads == 1 and m.last_event_s < TOO_FAST_S:
        return INCONCLUSIVE, (f"all {m.events} events arrived together {m.last_event_s * 1000:.0f} ms after the "
                              "request: too fast to tell streaming from buffering")
    held = " and the headers were held until then" if m.headers_held else ""
    if m.event_reads == 1:
        return BUFFERED, (f"all {m.events} events arrived in one read, {m.last_event_s:.2f} s after the "
                          f"request{held}")
    if m.final_burst >= BUFFERED_FINAL_SHARE * m.events:
        return BUFFERED, (f"{m.final_burst} of {m.events} events arrived in one read at the end, "
                          f"{m.last_event_s:.2f} s after the request{held}")
    if m.events_per_read <= STREAMED_EVENTS_PER_READ and m.largest_burst <= STREAMED_LARGEST_SHARE * m.events:
        return STREAMED, (f"{m.events} events arrived in {m.event_reads} reads spread over {m.spread_s:.2f} s "
                          f"({m.events_per_read:.1f} events per read){stopped}")
    return COALESCED, (f"{m.events} events arrived in {m.event_reads} bursts over {m.spread_s:.2f} s "
                       f"({m.events_per_read:.1f} events per read, the largest {m.largest_burst})")


def _status_reason(rec: Recording) -> str:
    base = f"the server answered HTTP {rec.status} {rec.reason}".rstrip() + ", not a stream"
    hints = {
        401: "check the credentials (-H 'Authorization: Bearer ...')",
        403: "check the credentials (-H 'Authorization: Bearer ...')",
        404: "check the URL's path",
        405: "check --method (an OpenAI-compatible endpoint wants POST: use --openai MODEL)",
        415: "send a JSON body with --json or --openai MODEL",
        422: "check the request body",
        400: "check the request body",
        502: "the proxy could not reach its upstream",
        504: "the proxy's upstream sent no headers in time (nginx: proxy_read_timeout)",
    }
    if 300 <= rec.status < 400 and rec.header("location"):
        return f"{base}: it redirects to {rec.header('location')}; probe that URL"
    hint = hints.get(rec.status)
    return f"{base}: {hint}" if hint else base


def _notes(rec: Recording, m: Metrics) -> list[str]:
    notes = []
    content_type = (rec.header("content-type") or "").lower()
    streaming_type = "event-stream" in content_type or "ndjson" in content_type
    length = rec.header("content-length")
    if length and streaming_type:
        notes.append(f"Content-Length {length} on a {content_type.split(';')[0]} response: whoever set it had "
                     "the whole body before sending the headers, and a client or proxy may wait for all of it")
    encoding = rec.header("content-encoding")
    if encoding and streaming_type and encoding.lower() != "identity":
        notes.append(f"Content-Encoding {encoding} on {content_type.split(';')[0]}: compression holds data "
                     "unless flushed per event, and breaks some clients and proxies; serve streams uncompressed")
    if rec.event_format == SSE and content_type and "event-stream" not in content_type:
        notes.append(f"the body is SSE but the Content-Type is {content_type}: proxies and browsers key their "
                     "streaming behaviour on text/event-stream")
    if rec.status and 200 <= rec.status < 300 and "event-stream" in content_type:
        cache = (rec.header("cache-control") or "").lower()
        if "no-cache" not in cache and "no-store" not in cache:
            notes.append("no `Cache-Control: no-cache` on the event stream: a caching proxy or CDN may hold or "
                         "replay it")
    if rec.oversized_event:
        notes.append(f"one event was larger than 1 MiB ({rec.largest_event} bytes): only its end was kept in "
                     "memory")
    if rec.timed_out:
        notes.append(f"the stream had not ended when the --timeout stopped the recording at {rec.end_s:g} s; "
                     "the verdict rests on what arrived until then")
    return notes
