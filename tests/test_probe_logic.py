"""The probe's logic without a network: event splitting, decoding, verdict rules, voting, redaction, timeline."""

from __future__ import annotations

import zlib

import pytest

from llmdoctor.probe import Trial, exit_code_for, vote
from llmdoctor.probe.analyze import analyze, measure
from llmdoctor.probe.diagnose import diagnose
from llmdoctor.probe.events import (
    LINES,
    MAX_PENDING,
    NOT_A_STREAM,
    SSE,
    Decoder,
    EventCounter,
    event_format_for,
)
from llmdoctor.probe.record import Read, Recording
from llmdoctor.probe.redact import REDACTED, redact_headers, redact_url, scrub, secret_values
from llmdoctor.probe.render import timeline

# ----------------------------------------------------------------------------- events


def test_sse_events_split_on_blank_lines_across_pieces():
    counter = EventCounter(SSE)
    assert counter.feed(b"data: a\n") == 0
    assert counter.feed(b"\ndata: b\n\nda") == 2
    assert counter.feed(b"ta: c\n\n") == 1
    assert counter.pending_bytes == 0


def test_sse_crlf_split_between_pieces_and_comments_are_not_events():
    counter = EventCounter(SSE)
    assert counter.feed(b": keep-alive\r\n\r") == 0
    assert counter.feed(b"\ndata: x\r\n\r\n") == 1  # the comment block is a keep-alive, not an event


def test_sse_done_and_unfinished_event():
    counter = EventCounter(SSE)
    counter.feed(b"data: {}\n\ndata: [DONE]\n\ndata: {\"partial")
    assert counter.done_seen
    assert counter.pending_bytes == len(b"data: {\"partial")


def test_lines_count_each_non_empty_line_and_a_last_line_without_newline():
    counter = EventCounter(LINES)
    assert counter.feed(b'{"a":1}\n\n{"a":2}\n{"a"') == 2
    assert counter.finish() == 1


def test_format_from_content_type_and_sniffing():
    assert event_format_for("text/event-stream; charset=utf-8") == SSE
    assert event_format_for("application/x-ndjson") == LINES
    assert event_format_for("application/json") == NOT_A_STREAM
    assert event_format_for("application/octet-stream") is None
    sniffing = EventCounter(None)
    assert sniffing.feed(b"data: 1\n\ndata: 2\n\n") == 2
    assert sniffing.format == SSE


def test_one_endless_line_keeps_memory_bounded():
    counter = EventCounter(SSE)
    piece = b"x" * 65536
    counter.feed(b"data: ")
    for _ in range(40):  # 2.5 MiB without a delimiter
        counter.feed(piece)
    assert len(counter._pending) <= MAX_PENDING
    assert counter.oversized
    assert counter.feed(b"\n\n") == 1
    assert counter.largest_event == 6 + 40 * 65536


def test_gzip_decoder_decodes_flushed_pieces_incrementally():
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = compressor.compress(b"data: 1\n\n") + compressor.flush(zlib.Z_SYNC_FLUSH)
    second = compressor.compress(b"data: 2\n\n") + compressor.flush(zlib.Z_FINISH)
    decoder = Decoder("gzip")
    assert decoder.supported
    assert decoder.decode(first) == b"data: 1\n\n"
    assert decoder.decode(second) == b"data: 2\n\n"
    assert not Decoder("br").supported
    assert Decoder("identity").supported


def test_raw_deflate_is_accepted():
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = compressor.compress(b"data: 1\n\n") + compressor.flush()
    assert Decoder("deflate").decode(data) == b"data: 1\n\n"


# ----------------------------------------------------------------------------- verdicts


def recording(reads: list[tuple[float, int]], *, headers_s: float = 0.01, status: int = 200,
              content_type: str = "text/event-stream", **fields) -> Recording:
    """A finished recording whose reads are (time, events completed)."""
    rec = Recording(status=status, reason="OK", http_version="HTTP/1.1",
                    headers=[("content-type", content_type), ("cache-control", "no-cache")],
                    headers_s=headers_s, complete=True, event_format=SSE)
    for t, events in reads:
        rec.reads.append(Read(t, 100 * max(events, 1), events))
        rec.event_times.extend([t] * events)
    rec.end_s = reads[-1][0] if reads else headers_s
    for name, value in fields.items():
        setattr(rec, name, value)
    return rec


def paced(n: int, interval: float, start: float = 0.02) -> list[tuple[float, int]]:
    return [(start + i * interval, 1) for i in range(n)]


def test_one_read_per_event_spread_over_time_is_streamed():
    result = analyze(recording(paced(11, 0.05)))
    assert result.verdict == "streamed"
    assert result.metrics.events == 11
    assert result.metrics.events_per_read == 1.0
    assert result.metrics.spread_s == pytest.approx(0.5)
    assert "11 events arrived in 11 reads spread over 0.50 s" in result.reason


def test_everything_in_one_read_at_the_end_with_headers_is_buffered_and_headers_held():
    result = analyze(recording([(0.55, 11)], headers_s=0.549))
    assert result.verdict == "buffered"
    assert result.metrics.headers_held
    assert "headers were held" in result.reason


def test_most_events_in_the_final_read_is_buffered():
    result = analyze(recording([(0.05, 1), (0.9, 9)]))
    assert result.verdict == "buffered"
    assert "9 of 10 events arrived in one read at the end" in result.reason


def test_a_few_bursts_are_coalesced():
    result = analyze(recording([(0.25, 5), (0.5, 5), (0.75, 5), (1.0, 5)]))
    assert result.verdict == "coalesced"
    assert result.metrics.events_per_read == 5.0


def test_pairs_of_events_per_read_still_count_as_streamed():
    result = analyze(recording([(0.1 * i, 2) for i in range(1, 11)]))
    assert result.verdict == "streamed"


def test_one_large_burst_in_the_middle_is_coalesced():
    reads = paced(5, 0.1) + [(0.7, 12)] + [(0.8 + 0.1 * i, 1) for i in range(5)]
    assert analyze(recording(reads)).verdict == "coalesced"


def test_too_few_events_or_too_fast_is_inconclusive():
    assert analyze(recording(paced(3, 0.1))).verdict == "inconclusive"
    assert analyze(recording(paced(3, 0.1)), min_events=3).verdict == "streamed"
    fast = analyze(recording([(0.02, 10)], headers_s=0.019))
    assert fast.verdict == "inconclusive"
    assert "too fast" in fast.reason


def test_error_status_is_inconclusive_with_a_hint():
    result = analyze(recording(paced(10, 0.05), status=401))
    assert result.verdict == "inconclusive"
    assert "HTTP 401" in result.reason and "Authorization" in result.reason


def test_json_response_is_not_a_stream():
    rec = recording([(0.3, 0)], content_type="application/json", event_format=NOT_A_STREAM)
    result = analyze(rec)
    assert result.verdict == "inconclusive"
    assert '"stream": true' in result.reason


def test_protocol_error_or_unfinished_event_or_missing_done_is_truncated():
    broken = recording(paced(3, 0.05), error="the connection closed in the middle of the chunked body",
                       complete=False)
    assert analyze(broken).verdict == "truncated"
    cut = recording(paced(8, 0.05), pending_bytes=12)
    assert analyze(cut).verdict == "truncated"
    assert "middle of an event" in analyze(cut).reason
    no_done = recording(paced(8, 0.05))
    assert analyze(no_done).verdict == "streamed"
    assert analyze(no_done, expect_done=True).verdict == "truncated"
    with_done = recording(paced(8, 0.05), done_seen=True)
    assert analyze(with_done, expect_done=True).verdict == "streamed"


def test_timed_out_recording_is_judged_on_what_arrived():
    rec = recording(paced(10, 0.1), complete=False, timed_out=True)
    result = analyze(rec)
    assert result.verdict == "streamed"
    assert "before the --timeout" in result.reason
    assert any("had not ended" in note for note in result.notes)


def test_notes_for_content_length_gzip_and_cache_control_on_a_stream():
    rec = recording(paced(6, 0.05))
    rec.headers = [("content-type", "text/event-stream"), ("content-length", "900"),
                   ("content-encoding", "gzip")]
    notes = " ".join(analyze(rec).notes)
    assert "Content-Length 900" in notes
    assert "Content-Encoding gzip" in notes
    assert "Cache-Control" in notes


def test_headers_held_needs_the_whole_body_with_the_headers():
    assert not measure(recording(paced(10, 0.05), headers_s=0.01)).headers_held
    assert not measure(recording([(0.5, 10)], headers_s=0.01)).headers_held


# ----------------------------------------------------------------------------- diagnosis


def with_server(rec: Recording, server: str) -> Recording:
    rec.headers.append(("server", server))
    return rec


def test_nginx_fingerprint_and_buffered_points_at_proxy_buffering():
    rec = with_server(recording([(0.55, 11)], headers_s=0.549), "nginx/1.22.1")
    diag = diagnose(rec, analyze(rec))
    assert diag.layer == "nginx (response buffering)"
    fixes = " ".join(diag.fixes)
    assert "proxy_buffering off;" in fixes and "X-Accel-Buffering: no" in fixes
    assert "HTTP/1.0 upstream" in diag.why[0]  # the headers were held: nginx's HTTP/1.0 signature


def test_streamed_has_no_fix_and_truncated_after_a_long_stall_blames_a_read_timeout():
    rec = with_server(recording(paced(10, 0.05)), "nginx")
    assert diagnose(rec, analyze(rec)).fixes == []
    cut = with_server(recording(paced(3, 0.05), error="closed", complete=False), "nginx")
    cut.end_s = 60.2
    diag = diagnose(cut, analyze(cut))
    assert diag.layer == "nginx (proxy_read_timeout)"
    assert "proxy_read_timeout" in diag.fixes[0]
    assert diag.why[0] == "the last bytes came 60.1 s before the stream was cut"


def test_a_quick_cut_behind_nginx_names_the_stall_and_the_read_timeout_as_a_suspect():
    cut = with_server(recording(paced(3, 0.05), error="closed", complete=False), "nginx")
    cut.end_s = 1.12
    diag = diagnose(cut, analyze(cut))
    assert diag.layer == "nginx"
    assert diag.why == ["the last bytes came 1.0 s before the stream was cut"]
    assert "proxy_read_timeout" in diag.fixes[0]


def test_other_fingerprints():
    rec = recording([(0.5, 10)])
    rec.headers += [("cf-ray", "abc"), ("via", "1.1 varnish")]
    diag = diagnose(rec, analyze(rec))
    assert diag.fingerprints == ["Cloudflare", "a proxy (Via: 1.1 varnish)"]
    assert diag.layer == "Cloudflare"


# ----------------------------------------------------------------------------- voting and exit codes


def test_vote_majority_ties_to_the_more_serious_and_ignores_inconclusive():
    assert vote(["streamed", "streamed", "buffered"])[0] == "streamed"
    assert vote(["streamed", "buffered"])[0] == "buffered"
    assert vote(["inconclusive", "inconclusive", "streamed"]) == (
        "streamed", {"streamed": 1, "inconclusive": 2})
    assert vote(["inconclusive"])[0] == "inconclusive"


def test_exit_codes():
    assert exit_code_for("streamed") == 0
    assert {exit_code_for(v) for v in ("buffered", "coalesced", "truncated")} == {1}
    assert exit_code_for("inconclusive") == 2


# ----------------------------------------------------------------------------- redaction


def test_sensitive_headers_are_redacted_and_others_kept():
    headers = [("Authorization", "Bearer sk-abc123456"), ("api-key", "k1234567"), ("X-Api-Key", "z"),
               ("Cookie", "session=s3cr3tvalue"), ("X-Auth-Token", "t"), ("Content-Type", "application/json"),
               ("Accept", "text/event-stream")]
    shown = dict(redact_headers(headers))
    for name in ("Authorization", "api-key", "X-Api-Key", "Cookie", "X-Auth-Token"):
        assert shown[name] == REDACTED
    assert shown["Content-Type"] == "application/json"


def test_url_credentials_and_token_query_values_are_redacted():
    assert redact_url("https://user:pw@host/x?api_key=abc&model=m") == \
        f"https://user:{REDACTED}@host/x?api_key={REDACTED}&model=m"
    assert redact_url("http://host/x?q=1") == "http://host/x?q=1"


def test_secret_values_are_scrubbed_from_free_text_but_scheme_words_are_not():
    secrets = secret_values([("Authorization", "Bearer sk-abc123456")], "http://h/?token=tok987654")
    assert "sk-abc123456" in secrets and "tok987654" in secrets
    assert "Bearer" not in secrets
    text = scrub("Incorrect API key provided: sk-abc123456 (Bearer auth)", secrets)
    assert "sk-abc123456" not in text and "Bearer auth" in text


# ----------------------------------------------------------------------------- timeline


def make_trial(rec: Recording) -> Trial:
    analysis = analyze(rec)
    return Trial(rec, analysis, diagnose(rec, analysis))


def test_timeline_shows_a_burst_at_the_end():
    cells, headers_cell, end = timeline(make_trial(recording([(1.0, 11)], headers_s=1.0)), width=20)
    assert cells == "." * 19 + "#"
    assert headers_cell == 19
    assert end == 1.0


def test_timeline_shows_one_mark_per_event_read_and_counts_for_bursts():
    cells, headers_cell, _ = timeline(make_trial(recording(paced(4, 0.25, start=0.25), headers_s=0.0)),
                                      width=9)
    assert cells == "..|.|.|.|"
    assert headers_cell == 0
    cells, _, _ = timeline(make_trial(recording([(0.5, 3), (1.0, 3)])), width=5)
    assert cells == "..3.3"


# ----------------------------------------------------------------------------- read grouping


def test_pieces_of_one_socket_read_are_one_read_and_a_new_socket_read_after_a_gap_is_a_new_one():
    from llmdoctor.probe.record import READ_GAP_S, _add_piece

    rec = Recording(status=200)
    counter = EventCounter(SSE)
    event = b"data: x\n\n"
    _add_piece(rec, 0.100, event, Decoder(""), counter, 1)
    _add_piece(rec, 0.100 + 5 * READ_GAP_S, event, Decoder(""), counter, 1)  # same socket read, late piece
    _add_piece(rec, 0.200, event, Decoder(""), counter, 2)  # a later socket read
    _add_piece(rec, 0.200 + READ_GAP_S / 2, event, Decoder(""), counter, 3)  # was already waiting: continues
    assert [(r.t, r.events) for r in rec.reads] == [(0.100, 2), (0.200, 2)]
    assert rec.event_times == [0.100, 0.100, 0.200, 0.200]
    assert rec.body_bytes == 4 * len(event)


def test_without_socket_read_counts_the_time_gap_decides():
    from llmdoctor.probe.record import READ_GAP_S, _add_piece

    rec = Recording(status=200)
    counter = EventCounter(SSE)
    for t in (0.1, 0.1 + READ_GAP_S / 2, 0.3):
        _add_piece(rec, t, b"data: x\n\n", Decoder(""), counter, None)
    assert [r.events for r in rec.reads] == [2, 1]
