"""`llmdoctor probe`: does a live endpoint stream, or does something on the path hold the response?

Library API::

    from llmdoctor.probe import run_probe
    result = run_probe("http://127.0.0.1:8080/v1/chat/completions", method="POST", headers={...},
                       content=b'{"stream": true, ...}', timeout=30.0, trials=1)
    result.verdict        # "streamed" | "buffered" | "coalesced" | "truncated" | "inconclusive"
    result.reason         # one sentence with the numbers behind the verdict
    result.metrics        # events, reads, events_per_read, largest_burst, spread_s, headers_held, ...
    result.recording      # headers_s, reads [(t, size, events)], event_times, status, headers, error, ...
    result.layer, result.fixes, result.notes
    result.to_dict()      # what `--format json` prints (secrets redacted)

Errors that mean "could not probe" (bad URL, connection refused, DNS, TLS, no headers before the timeout, not
HTTP) raise `llmdoctor.errors.UserError`. With trials > 1 the probe repeats and the verdict is the vote of the
conclusive trials (ties go to the more serious verdict); `result.trials` holds each one.
Runs its own asyncio loop: call it from synchronous code (not from inside a running event loop).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from llmdoctor import __version__
from llmdoctor.errors import UserError
from llmdoctor.probe.analyze import (
    BUFFERED,
    COALESCED,
    DEFAULT_MIN_EVENTS,
    INCONCLUSIVE,
    STREAMED,
    TRUNCATED,
    VERDICT_RULES,
    VERDICTS,
    Analysis,
    Metrics,
    analyze,
)
from llmdoctor.probe.diagnose import Diagnosis, diagnose
from llmdoctor.probe.record import ProbeRequest, Recording, record_trial
from llmdoctor.probe.redact import redact_headers, redact_url, scrub, secret_values

__all__ = [
    "BUFFERED", "COALESCED", "INCONCLUSIVE", "STREAMED", "TRUNCATED", "VERDICTS",
    "ProbeResult", "Trial", "exit_code_for", "rule_for", "run_probe",
]

# Ties in a vote go to the more serious verdict.
_SERIOUSNESS = (TRUNCATED, BUFFERED, COALESCED, STREAMED)
EXIT_CODES = {STREAMED: 0, BUFFERED: 1, COALESCED: 1, TRUNCATED: 1, INCONCLUSIVE: 2}


def rule_for(verdict: str) -> str | None:
    """The catalog id of a verdict (`buffered` -> PRB001); None for `streamed`."""
    found = VERDICT_RULES.get(verdict)
    return found[0] if found else None


def exit_code_for(verdict: str) -> int:
    """0 streamed; 1 buffered, coalesced or truncated; 2 inconclusive (the stream could not be judged)."""
    return EXIT_CODES[verdict]


@dataclass
class Trial:
    recording: Recording
    analysis: Analysis
    diagnosis: Diagnosis
    secrets: list[str] = field(default_factory=list, repr=False)

    @property
    def verdict(self) -> str:
        return self.analysis.verdict

    def to_dict(self) -> dict:
        rec = self.recording
        data = {
            "verdict": self.verdict,
            "rule": rule_for(self.verdict),
            "reason": scrub(self.analysis.reason, self.secrets),
            "status": rec.status,
            "http_version": rec.http_version,
            "headers": {name.lower(): scrub(value, self.secrets) for name, value in redact_headers(rec.headers)},
            "timings": {
                "connect_s": _round(rec.connect_s),
                "tls_s": _round(rec.tls_s),
                "headers_s": _round(rec.headers_s),
                "first_byte_s": _round(rec.reads[0].t if rec.reads else None),
                "first_event_s": _round(self.analysis.metrics.first_event_s),
                "last_event_s": _round(self.analysis.metrics.last_event_s),
                "end_s": _round(rec.end_s),
            },
            "complete": rec.complete,
            "timed_out": rec.timed_out,
            "error": scrub(rec.error, self.secrets) if rec.error else None,
            "content_type": rec.header("content-type"),
            "content_encoding": rec.header("content-encoding"),
            "content_length": _int(rec.header("content-length")),
            "event_format": rec.event_format,
            "body_bytes": rec.body_bytes,
            "decoded_bytes": rec.decoded_bytes,
            "unfinished_event_bytes": rec.pending_bytes,
            "done_seen": rec.done_seen,
            "metrics": self.analysis.metrics.to_dict(),
            "layer": self.diagnosis.layer,
            "fingerprints": self.diagnosis.fingerprints,
            "why": self.diagnosis.why,
            "fixes": self.diagnosis.fixes,
            "notes": self.analysis.notes,
            "reads": [r.to_dict() for r in rec.reads],
        }
        if not 200 <= rec.status < 300:
            data["body_start"] = scrub(rec.snippet.decode("utf-8", "replace"), self.secrets)
        return data


@dataclass
class ProbeResult:
    url: str  # secrets redacted
    method: str
    trials: list[Trial]
    verdict: str
    votes: dict[str, int]
    request_headers: list[tuple[str, str]] = field(default_factory=list)  # as sent, secrets redacted
    body_bytes: int = 0  # the request body's size (the body itself is never shown)
    secrets: list[str] = field(default_factory=list, repr=False)

    @property
    def trial(self) -> Trial:
        """The trial that speaks for the verdict: the first one that reached it."""
        return next((t for t in self.trials if t.verdict == self.verdict), self.trials[0])

    @property
    def recording(self) -> Recording:
        return self.trial.recording

    @property
    def metrics(self) -> Metrics:
        return self.trial.analysis.metrics

    @property
    def reason(self) -> str:
        return scrub(self.trial.analysis.reason, self.secrets)

    @property
    def notes(self) -> list[str]:
        return self.trial.analysis.notes

    @property
    def layer(self) -> str | None:
        return self.trial.diagnosis.layer

    @property
    def why(self) -> list[str]:
        return self.trial.diagnosis.why

    @property
    def fixes(self) -> list[str]:
        return self.trial.diagnosis.fixes

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.verdict)

    @property
    def rule(self) -> str | None:
        return rule_for(self.verdict)

    def findings(self) -> list[dict]:
        """The verdict as a finding (`{"rule", "severity", "message"}`), as every command's JSON carries them."""
        if self.verdict not in VERDICT_RULES:
            return []
        rule, severity = VERDICT_RULES[self.verdict]
        return [{"rule": rule, "severity": severity, "message": f"{self.verdict}: {self.reason}",
                 "fix": "; ".join(self.fixes) or None}]

    def to_dict(self) -> dict:
        trial = self.trial.to_dict()
        return {
            "url": self.url,
            "method": self.method,
            "request": {
                "headers": {name: scrub(value, self.secrets) for name, value in self.request_headers},
                "body_bytes": self.body_bytes,
            },
            "verdict": self.verdict,
            "rule": self.rule,
            "findings": self.findings(),
            "reason": trial["reason"],
            "layer": trial["layer"],
            "why": trial["why"],
            "fixes": trial["fixes"],
            "notes": trial["notes"],
            "votes": self.votes,
            "trials": [t.to_dict() for t in self.trials],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def vote(verdicts: list[str]) -> tuple[str, dict[str, int]]:
    counts = Counter(verdicts)
    votes = {v: counts[v] for v in VERDICTS if counts[v]}
    conclusive = {v: n for v, n in counts.items() if v != INCONCLUSIVE}
    if not conclusive:
        return INCONCLUSIVE, votes
    best = max(conclusive.values())
    winner = next(v for v in _SERIOUSNESS if conclusive.get(v) == best)
    return winner, votes


def check_url(url: str) -> None:
    import httpx

    hint = "give a full http:// or https:// URL, e.g. http://localhost:8000/v1/chat/completions"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as err:
        raise UserError(f"URL {redact_url(url)!r} is not valid ({err}): {hint}") from None
    if parsed.scheme not in ("http", "https"):
        shown = redact_url(url)
        if "://" not in url and url.strip():  # `localhost:8000/v1`, `[::1]:8000`: the scheme was left out
            suggestion = redact_url("http://" + url.strip())  # redacts user:password@ only with a scheme
            shown = suggestion.removeprefix("http://")
            hint = f"did you mean {suggestion}?"
        raise UserError(f"URL {shown!r} is not an http:// or https:// URL: {hint}")
    if not parsed.host:
        raise UserError(f"URL {redact_url(url)!r} has no host: {hint}")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise UserError(f"URL {redact_url(url)!r}: port {parsed.port} is not in 1-65535")


HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110): methods, header names


def check_request(method: str, headers: list[tuple[str, str]]) -> None:
    """Reject what HTTP cannot carry, naming the option (values of headers are never echoed: secrets)."""
    if not HEADER_NAME.fullmatch(method):
        raise UserError(f"--method {method!r} is not an HTTP method (e.g. GET, POST)")
    for name, value in headers:
        if not HEADER_NAME.fullmatch(name):
            raise UserError(f"-H/--header {name!r}: not a valid header name")
        if any(ch in value for ch in "\r\n\0"):
            raise UserError(f"-H/--header {name!r}: the value contains a line break")
        if not value.isascii():
            raise UserError(f"-H/--header {name!r}: the value is not ASCII (HTTP header values are; "
                            "percent-encode or base64 it)")


def run_probe(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | list[tuple[str, str]] | None = None,
    content: bytes | str | None = None,
    timeout: float = 30.0,
    min_events: int = DEFAULT_MIN_EVENTS,
    trials: int = 1,
    expect_done: bool = False,
) -> ProbeResult:
    """Probe `url` `trials` times; each trial is bounded by `timeout` seconds. See the module docstring.

    `expect_done`: the endpoint is OpenAI-compatible, so a body that ends without `data: [DONE]` is truncated.
    """
    check_url(url)
    from llmdoctor.limits import check_seconds

    check_seconds(timeout)  # also nan; inf (or 1e400) would never time out against a silent server
    if trials < 1:
        raise UserError(f"--trials must be at least 1 (got {trials})")
    if min_events < 2:
        raise UserError(f"min_events must be at least 2 (got {min_events})")
    header_list = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
    check_request(method, header_list)
    given = {name.lower() for name, _ in header_list}
    if "accept-encoding" not in given:  # only codings the probe can decode to count events
        header_list.append(("Accept-Encoding", "gzip, deflate"))
    if "user-agent" not in given:
        header_list.append(("User-Agent", f"llmdoctor-probe/{__version__}"))
    body = content.encode("utf-8") if isinstance(content, str) else content
    shown = redact_url(url)
    secrets = secret_values(header_list, url)
    request = ProbeRequest(url=url, method=method.upper(), headers=header_list, content=body,
                           timeout=float(timeout), shown_url=shown)
    done: list[Trial] = []
    for _ in range(trials):
        rec = record_trial(request)
        analysis = analyze(rec, min_events=min_events, expect_done=expect_done)
        done.append(Trial(rec, analysis, diagnose(rec, analysis), secrets))
    verdict, votes = vote([t.verdict for t in done])
    return ProbeResult(url=shown, method=request.method, trials=done, verdict=verdict, votes=votes,
                       request_headers=redact_headers(header_list), body_bytes=len(body or b""),
                       secrets=secrets)
