"""`probe URL --direct UPSTREAM_URL`: probe the upstream and the public URL, and name the hop that holds.

Both are probed with the same request, trial after trial alternately (direct, public, direct, ...), so a
drift in the upstream's speed hits both. Per path: time to first event, gaps between events (p50/p99), the
bytes of each burst; across the paths, event k of public trial i against event k of direct trial i: the
delay the hop adds to each event (p50/p90). What the figures say (docs/probe.md, measured in
tests/test_probe_hops.py on real servers):

- the upstream itself does not stream (direct buffered/coalesced/truncated): the application, not a proxy;
- direct streams, public arrives in one burst at the end: the hop buffers the response;
- public bursts of ~4/8/16 KiB: a proxy buffer of that size fills before it is sent (nginx proxy_buffer_size);
- events merged (1.5x the direct events per read, at least 1.5) and each event up to a steady ~200 ms (or
  ~40 ms) late (p90): a small-write hold in the hop: Nagle's algorithm with delayed ACKs, or MSG_MORE/TCP_CORK (HAProxy without
  `option http-no-delay`: measured ~200 ms);
- every event later by the same amount but not merged: latency of the public path, not a hold;
- the direct path is slow to its first event and the hop adds little: a slow upstream, not a proxy;
- public cut early while direct completes: the hop cuts the stream (a read/idle timeout).

Metric names follow the OpenTelemetry GenAI semantic conventions for a client
(`gen_ai.client.operation.time_to_first_chunk`, `gen_ai.client.operation.time_per_output_chunk`, in seconds;
semantic-conventions v1.41.0 docs/gen-ai/gen-ai-metrics.md): the probe is a client of both hops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from llmdoctor.probe import BUFFERED, COALESCED, STREAMED, TRUNCATED, ProbeResult

TTFC = "gen_ai.client.operation.time_to_first_chunk"
TPOC = "gen_ai.client.operation.time_per_output_chunk"
HOLD_MIN_S = 0.08  # a median added delay per event above this is a hold, not jitter
BUFFER_SIZES = (4096, 8192, 16384, 32768, 65536)
BUFFER_TOLERANCE = 0.03  # a burst within 3% of a buffer size (chunk framing adds a few bytes)
SLOW_FIRST_EVENT_S = 0.5
NAGLE_CLASSES = ((0.15, 0.40, "~200 ms", ("Nagle's algorithm meeting delayed ACKs, or MSG_MORE/TCP_CORK "
                  "corking (HAProxy without `option http-no-delay`: measured ~200 ms per write)")),
                 (0.03, 0.08, "~40 ms", ("Nagle's algorithm meeting Linux's 40 ms minimum delayed ACK "
                  "(a proxy or server without TCP_NODELAY)")))

# kind -> exit code: a problem in the path is 1; a slow upstream or a clean path is 0
PROBLEMS = {"upstream": 1, "buffering": 1, "buffer": 1, "hold": 1, "coalescing": 1, "cut": 1,
            "delay": 0, "slow-upstream": 0, "none": 0, "inconclusive": 2}


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class PathFigures:
    name: str
    result: ProbeResult
    first_event_s: list[float] = field(default_factory=list)
    gaps_s: list[float] = field(default_factory=list)
    bursts: list[int] = field(default_factory=list)  # bytes of each event-carrying read but a trial's last

    @classmethod
    def of(cls, name: str, result: ProbeResult) -> PathFigures:
        figures = cls(name, result)
        for trial in result.trials:
            rec = trial.recording
            if rec.event_times:
                figures.first_event_s.append(rec.event_times[0])
                figures.gaps_s.extend(b - a for a, b in zip(rec.event_times, rec.event_times[1:]))
            carrying = [r for r in rec.reads if r.events]
            figures.bursts.extend(r.size for r in carrying[:-1])
        return figures

    def buffer_size(self) -> int | None:
        """The proxy buffer the bursts fill, when at least two bursts and half of them are that size."""
        for size in BUFFER_SIZES:
            near = [b for b in self.bursts if abs(b - size) <= BUFFER_TOLERANCE * size]
            if len(near) >= 2 and len(near) * 2 >= len(self.bursts):
                return size
        return None

    def to_dict(self) -> dict:
        def stat(values: list[float]) -> dict:
            return {"p50": _round(percentile(values, 50)), "p99": _round(percentile(values, 99)),
                    "count": len(values)}

        return {
            "url": self.result.url,
            "verdict": self.result.verdict,
            "votes": self.result.votes,
            TTFC: stat(self.first_event_s),
            TPOC: stat(self.gaps_s),
            "burst_bytes": {"p50": percentile([float(b) for b in self.bursts], 50), "max": max(self.bursts, default=None),
                            "count": len(self.bursts)},
            "events_per_read": round(_events_per_read(self.result), 2),
        }


@dataclass
class Attribution:
    kind: str  # a key of PROBLEMS
    layer: str
    reason: str
    fixes: list[str] = field(default_factory=list)
    added_first_event_s: float | None = None
    added_delay_s: dict = field(default_factory=dict)  # p50 / p90 of the delay the hop adds per event
    buffer_bytes: int | None = None

    @property
    def exit_code(self) -> int:
        return PROBLEMS[self.kind]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "layer": self.layer, "reason": self.reason, "fixes": self.fixes,
                "added_time_to_first_chunk_s": _round(self.added_first_event_s),
                "added_delay_per_event_s": self.added_delay_s, "buffer_bytes": self.buffer_bytes}


@dataclass
class HopReport:
    direct: PathFigures
    public: PathFigures
    attribution: Attribution

    @property
    def exit_code(self) -> int:
        return self.attribution.exit_code

    def to_dict(self) -> dict:
        return {"direct": self.direct.to_dict(), "public": self.public.to_dict(),
                "attribution": self.attribution.to_dict()}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def added_delays(direct: ProbeResult, public: ProbeResult) -> list[float]:
    """Event k of public trial i minus event k of direct trial i (the trials alternate)."""
    out = []
    for d, p in zip(direct.trials, public.trials):
        out.extend(b - a for a, b in zip(d.recording.event_times, p.recording.event_times))
    return out


def _proxy_name(public: ProbeResult) -> str:
    prints = [p for p in public.trial.diagnosis.fingerprints if not p.startswith("the application server")]
    return f"the hop between the public URL and the upstream ({prints[0]})" if prints else \
        "the hop between the public URL and the upstream"


def attribute(direct: ProbeResult, public: ProbeResult) -> HopReport:
    d, p = PathFigures.of("upstream (direct)", direct), PathFigures.of("public", public)
    delays = added_delays(direct, public)
    hold50, hold90 = percentile(delays, 50), percentile(delays, 90)
    added_first = (percentile(p.first_event_s, 50) - percentile(d.first_event_s, 50)) \
        if p.first_event_s and d.first_event_s else None
    figures = {"added_first_event_s": added_first,
               "added_delay_s": {"p50": _round(hold50), "p90": _round(hold90), "count": len(delays)}}
    hop = _proxy_name(public)

    def result(kind: str, layer: str, reason: str, fixes: list[str] | None = None, **extra) -> HopReport:
        return HopReport(d, p, Attribution(kind, layer, reason, fixes or [], **figures, **extra))

    if direct.verdict not in (STREAMED, BUFFERED, COALESCED, TRUNCATED) or public.verdict not in (
            STREAMED, BUFFERED, COALESCED, TRUNCATED):
        return result("inconclusive", "unknown", f"the direct probe says {direct.verdict} and the public one "
                                                 f"{public.verdict}: too few events to compare")
    if direct.verdict != STREAMED:
        return result("upstream", "the upstream itself", f"the upstream does not stream on its own: the direct probe "
                      f"says {direct.verdict} ({direct.reason}); every hop in front can only pass that on",
                      ["make the application yield each event as it is produced (and flush it)"])
    if public.verdict == TRUNCATED:
        return result("cut", hop, f"the upstream streams to the end directly, but through the public URL the stream "
                      f"was cut: {public.reason}",
                      [("raise the read/idle timeout of each proxy in the path above the longest silence "
                       "(`llmdoctor proxy` lists them)")])
    size = p.buffer_size()
    if public.verdict == BUFFERED:
        return result("buffering", hop, f"the upstream streams directly ({direct.reason}), but the public URL "
                      f"delivers the stream at the end: {public.reason}",
                      _buffer_fixes(public), buffer_bytes=size)
    if size is not None:
        return result("buffer", hop, f"through the public URL events arrive in bursts of ~{size // 1024} KiB "
                      f"({len([b for b in p.bursts if abs(b - size) <= BUFFER_TOLERANCE * size])} of "
                      f"{len(p.bursts)} bursts): a proxy buffer of that size fills before it is sent, so the first "
                      f"tokens wait for {size // 1024} KiB of them (the upstream streams: {direct.reason})",
                      _buffer_fixes(public), buffer_bytes=size)
    per_read_d, per_read_p = _events_per_read(direct), _events_per_read(public)
    merged = per_read_p >= 1.5 and per_read_p >= 1.5 * per_read_d
    if (merged and hold90 is not None and hold50 is not None and added_first is not None
            and added_first >= HOLD_MIN_S / 2 and hold90 >= NAGLE_CLASSES[-1][0]):
        shape = next(((label, cause) for low, high, label, cause in NAGLE_CLASSES if low <= hold90 <= high), None)
        label, cause = shape or (f"~{hold90 * 1000:.0f} ms", "a hop that holds small writes")
        return result("hold", hop, f"the first event arrives {added_first * 1000:.0f} ms later than directly and "
                      f"each event up to {hold90 * 1000:.0f} ms later (p90; p50 {hold50 * 1000:.0f} ms), "
                      f"{per_read_p:.1f} events per read instead of {per_read_d:.1f}: a steady {label} hold per "
                      f"write, the signature of {cause}",
                      [("HAProxy: `option http-no-delay` on the streamed backend; other proxies: TCP_NODELAY "
                       "towards the client (nginx sets it by default: `tcp_nodelay on`)")])
    if public.verdict == COALESCED:
        return result("coalescing", hop, f"the upstream streams directly, but the public URL delivers the events in "
                      f"bursts: {public.reason}", _buffer_fixes(public))
    direct_first = percentile(d.first_event_s, 50) or 0.0
    if hold50 is not None and hold50 >= HOLD_MIN_S:
        return result("delay", hop, f"each event arrives {hold50 * 1000:.0f} ms later than directly (p50), but the "
                      "events are not merged: a constant latency of the public path (distance, TLS, a busy "
                      "proxy), not a buffer or a small-write hold",
                      ["compare with a probe from next to the proxy; check the proxy's CPU"])
    if direct_first >= SLOW_FIRST_EVENT_S:
        return result("slow-upstream", "the upstream itself", f"the first event takes {direct_first:.2f} s on the "
                      f"upstream itself and the hop adds {(added_first or 0) * 1000:.0f} ms: the wait is the "
                      "upstream's (prefill, a queue), not a proxy's",
                      ["look at the upstream: queueing (vllm:num_requests_waiting), prompt length, prefill"])
    return result("none", "no hop", f"both paths stream; the public URL adds {(added_first or 0) * 1000:.0f} ms to "
                  f"the first event and {(hold50 or 0) * 1000:.0f} ms per event (p50)")


def _events_per_read(result: ProbeResult) -> float:
    values = [t.analysis.metrics.events_per_read for t in result.trials if t.analysis.metrics.events_per_read]
    return sum(values) / len(values) if values else 0.0


def _buffer_fixes(public: ProbeResult) -> list[str]:
    return list(public.fixes) or [("turn response buffering off for this route in the proxy in front, or send "
                                  "`X-Accel-Buffering: no` from the application")]


def probe_hops(public_url: str, direct_url: str, *, trials: int = 1, **options) -> HopReport:
    """Probe `direct_url` and `public_url` alternately `trials` times each, then attribute (see the module doc)."""
    from llmdoctor.probe import run_probe, vote

    direct_runs, public_runs = [], []
    for _ in range(trials):
        direct_runs.append(run_probe(direct_url, trials=1, **options))
        public_runs.append(run_probe(public_url, trials=1, **options))
    return attribute(_merge(direct_runs, vote), _merge(public_runs, vote))


def _merge(runs: list[ProbeResult], vote) -> ProbeResult:
    first = runs[0]
    trials = [t for run in runs for t in run.trials]
    verdict, votes = vote([t.verdict for t in trials])
    return ProbeResult(url=first.url, method=first.method, trials=trials, verdict=verdict, votes=votes,
                       request_headers=first.request_headers, body_bytes=first.body_bytes, secrets=first.secrets)


def render_text(report: HopReport, out) -> None:
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped
    from llmdoctor.report.render import make_console

    console = make_console(out)
    for path in (report.direct, report.public):
        data = path.to_dict()
        first, gaps, bursts = data[TTFC], data[TPOC], data["burst_bytes"]
        console.print(f"[bold]{escape(path.name)}[/] {escape(data['url'])}: {data['verdict']}; first event "
                      f"p50 {_ms(first['p50'])}, gaps p50 {_ms(gaps['p50'])} p99 {_ms(gaps['p99'])}, "
                      f"bursts p50 {bursts['p50'] or 0:.0f} B (max {bursts['max'] or 0} B), "
                      f"{data['events_per_read']} events per read, {len(path.result.trials)} trial(s)")
    a = report.attribution
    delay = a.added_delay_s
    console.print(f"added by the public hop: first event {_ms(a.added_first_event_s)}, per event p50 "
                  f"{_ms(delay.get('p50'))} p90 {_ms(delay.get('p90'))}")
    console.print(f"[bold]{escape(a.kind)}[/]: {escape(a.layer)}: {escape(a.reason)}")
    for fix in a.fixes:
        console.print(f"    [dim]fix:[/] {escape(fix)}")


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"
