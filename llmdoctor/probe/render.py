"""The probe's text report (with the arrival timeline) and its JSON; secrets are scrubbed from both."""

from __future__ import annotations

import json
from typing import TextIO

from llmdoctor.probe import INCONCLUSIVE, STREAMED, ProbeResult, Trial
from llmdoctor.probe.redact import scrub

TIMELINE_WIDTH = 50  # with its 14-column label and the "0 -> 12.34 s" scale, the line fits 80 columns
_VERDICT_STYLE = {STREAMED: "bold green", INCONCLUSIVE: "bold yellow"}
LEGEND = "| 1 event  2-9 events  # 10 or more  : bytes, no event  . nothing"  # events completed per cell


def to_json(result: ProbeResult) -> str:
    return scrub(json.dumps(result.to_dict(), indent=2), result.secrets)


def timeline(trial: Trial, width: int = TIMELINE_WIDTH) -> tuple[str, int | None, float]:
    """`width` cells from 0 s to the end of the body, each showing the events that completed in it.

    Returns the cells, the cell where the headers arrived (or None) and the time the last cell ends at.
    """
    rec = trial.recording
    end = max([r.t for r in rec.reads] + [rec.headers_s or 0.0, rec.end_s or 0.0])
    if end <= 0:
        end = 1e-6

    def cell(t: float) -> int:  # 0 s is the first cell, the end the last one
        return min(width - 1, int(t / end * (width - 1) + 0.5))

    events = [0] * width
    reads = [0] * width
    for read in rec.reads:
        reads[cell(read.t)] += 1
        events[cell(read.t)] += read.events
    glyphs = []
    for n_reads, n_events in zip(reads, events):
        if n_events >= 10:
            glyphs.append("#")
        elif n_events >= 2:
            glyphs.append(str(n_events))
        elif n_events == 1:
            glyphs.append("|")
        else:
            glyphs.append(":" if n_reads else ".")
    headers_cell = cell(rec.headers_s) if rec.headers_s is not None else None
    return "".join(glyphs), headers_cell, end


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def text_lines(result: ProbeResult) -> list[tuple[str, str]]:
    """(style, text) lines of the report."""
    trial = result.trial
    rec = trial.recording
    m = trial.analysis.metrics
    lines: list[tuple[str, str]] = []
    lines.append(("bold", f"probe {result.method} {result.url}"))
    request_headers = ", ".join(f"{name}: {value}" for name, value in result.request_headers)
    if request_headers:
        lines.append(("dim", f"  request     {request_headers}"
                             + (f"; body {result.body_bytes} bytes" if result.body_bytes else "")))
    style = _VERDICT_STYLE.get(result.verdict, "bold red")
    rule = f" ({result.rule})" if result.rule else ""
    lines.append((style, f"verdict: {result.verdict} - {result.reason}{rule}"))
    server = rec.header("server")
    status = f"{rec.status} {rec.reason}".strip() + f"  {rec.http_version}"
    framing = ("chunked" if (rec.header("transfer-encoding") or "").lower().endswith("chunked")
               else f"content-length {rec.header('content-length')}" if rec.header("content-length")
               else "close-delimited")
    lines.append(("", f"  response    {status}  {framing}" + (f"  server: {server}" if server else "")
                  + f"  content-type: {rec.header('content-type') or '-'}"))
    lines.append(("", (f"  times       headers {_seconds(rec.headers_s)}   first event {_seconds(m.first_event_s)}   "
                      f"last event {_seconds(m.last_event_s)}   end {_seconds(rec.end_s)}")))
    lines.append(("", (f"  body        {rec.body_bytes} bytes in {m.reads} read(s); {m.events} event(s) "
                      f"({rec.event_format or 'unknown format'}), {m.events_per_read:.1f} per read, "
                      f"largest burst {m.largest_burst}")))
    cells, headers_cell, end = timeline(trial)
    lines.append(("", f"  timeline    {cells}  0 -> {end:.2f} s"))
    if headers_cell is not None:
        lines.append(("dim", "              " + " " * headers_cell + "^ headers"))
    lines.append(("dim", f"              {LEGEND}"))
    if rec.error:
        lines.append(("", f"  error       {rec.error}"))
    if trial.diagnosis.fingerprints:
        lines.append(("", f"  path        {', '.join(trial.diagnosis.fingerprints)}"))
    if result.layer:
        lines.append(("bold", f"  layer       {result.layer}"))
    for why in trial.diagnosis.why:
        lines.append(("", f"  why         {why}"))
    for fix in result.fixes:
        lines.append(("", f"  fix         {fix}"))
    for note in result.notes:
        lines.append(("yellow", f"  note        {note}"))
    if not 200 <= rec.status < 300 and rec.snippet:
        lines.append(("dim", "  body start  " + rec.snippet.decode("utf-8", "replace").replace("\n", " ")[:200]))
    if len(result.trials) > 1:
        votes = ", ".join(f"{verdict} {count}" for verdict, count in result.votes.items())
        lines.append(("", f"  trials      {len(result.trials)}: {votes}"))
    return [(style, scrub(text, result.secrets)) for style, text in lines]


def render_text(result: ProbeResult, out: TextIO) -> None:
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped
    from llmdoctor.report.render import make_console

    console = make_console(out)
    for style, text in text_lines(result):
        console.print(f"[{style}]{escape(text)}[/]" if style else escape(text))
