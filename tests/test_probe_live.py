"""`run_probe` against real local servers: the paced upstream and each misbehaving one.

Every probe here ends with a verdict or a UserError; none may hang (each is bounded by its timeout).
"""

from __future__ import annotations

import json
import socket
import threading

import pytest
from support.servers import (
    BufferedServer,
    ClosesEarlyServer,
    CoalescedServer,
    ContentLengthServer,
    GarbageServer,
    GzipSSEServer,
    HugeLineServer,
    PacedSSEServer,
    SilentServer,
    free_port,
)

from llmdoctor.errors import UserError
from llmdoctor.probe import run_probe

# Paced well apart, so that a busy test machine does not merge two events into one read.
PACE = {"events": 8, "interval": 0.08}


def test_paced_stream_is_streamed_with_one_read_per_event():
    with PacedSSEServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "streamed", result.reason
    assert result.metrics.events == upstream.total_events == 9
    assert result.metrics.largest_burst <= 2
    assert result.recording.done_seen
    assert result.recording.header("transfer-encoding") == "chunked"
    assert upstream.requests[0].version == "HTTP/1.1"
    assert result.layer is None and result.fixes == []


def test_ndjson_stream_is_streamed():
    with PacedSSEServer(event_format="ndjson", **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "streamed", result.reason
    assert result.recording.event_format == "lines"
    assert result.metrics.events == 8


def test_slow_first_token_and_a_pause_still_stream():
    with PacedSSEServer(first_delay=0.3, pause=(3, 0.3), **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "streamed", result.reason
    assert result.metrics.first_event_s >= 0.3


def test_headers_and_body_held_to_the_end_is_buffered_with_headers_held():
    with BufferedServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "buffered", result.reason
    assert result.metrics.event_reads == 1
    assert result.metrics.headers_held
    assert "headers were held" in result.reason


def test_body_held_after_early_headers_is_buffered_without_headers_held():
    with PacedSSEServer(hold="body", **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "buffered", result.reason
    assert not result.metrics.headers_held


def test_bursts_are_coalesced():
    with CoalescedServer(events=20, interval=0.05) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "coalesced", result.reason
    assert result.metrics.largest_burst >= 5


def test_closing_in_the_middle_of_the_chunked_body_is_truncated():
    with ClosesEarlyServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "truncated"
    assert result.metrics.events == 3
    assert "terminating chunk" in result.recording.error


def test_content_length_larger_than_the_body_is_truncated():
    with ContentLengthServer(content_length_extra=50, **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "truncated", result.reason
    assert "expected" in result.recording.error


def test_content_length_on_a_paced_stream_streams_with_a_note():
    with ContentLengthServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "streamed", result.reason
    assert any(note.startswith("Content-Length") for note in result.notes)


def test_gzip_flushed_per_event_is_decoded_and_streamed_with_a_note():
    with GzipSSEServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "streamed", result.reason
    assert result.metrics.events == 9
    assert result.recording.decoded_bytes > 0
    assert any("Content-Encoding gzip" in note for note in result.notes)


def test_gzip_without_flush_is_buffered_by_the_compressor():
    with GzipSSEServer(gzip_flush=False, **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "buffered", result.reason
    assert result.layer.startswith("compression")


def test_one_huge_line_is_inconclusive_and_memory_stays_bounded():
    with HugeLineServer(size=3 * 1024 * 1024) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "inconclusive"
    assert result.recording.oversized_event
    assert result.recording.body_bytes > 3 * 1024 * 1024


def test_one_huge_unterminated_line_is_truncated():
    with HugeLineServer(size=2 * 1024 * 1024, terminate=False) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "truncated"
    assert "middle of an event" in result.reason


def test_server_that_never_answers_is_a_timeout_error():
    with SilentServer() as upstream, pytest.raises(UserError, match=r"no response headers .* within 1 s"):
        run_probe(upstream.url, timeout=1)


def test_server_that_closes_without_answering_is_an_error():
    with SilentServer(close_after=0.05) as upstream, \
            pytest.raises(UserError, match="closed the connection without sending an HTTP response"):
        run_probe(upstream.url, timeout=5)


def test_non_http_bytes_are_an_error():
    with GarbageServer() as upstream, pytest.raises(UserError, match="did not answer with valid HTTP"):
        run_probe(upstream.url, timeout=5)


def test_https_to_a_plain_http_port_is_a_tls_error():
    with PacedSSEServer() as upstream, pytest.raises(UserError, match="TLS handshake .* failed"):
        run_probe(f"https://{upstream.address}/", timeout=5)


def test_refused_port_is_an_error():
    with pytest.raises(UserError, match="connection refused by 127.0.0.1"):
        run_probe(f"http://127.0.0.1:{free_port()}/", timeout=5)


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://host/x", "http://", "not a url", "http://[::1"])
def test_bad_urls_are_errors(url):
    with pytest.raises(UserError, match="http:// or https:// URL"):
        run_probe(url)


@pytest.mark.parametrize("port", [0, 99999])
def test_ports_out_of_range_are_errors(port):
    with pytest.raises(UserError, match=f"port {port} is not in 1-65535"):
        run_probe(f"http://127.0.0.1:{port}/")


def test_timeout_mid_stream_stops_the_recording_and_judges_what_arrived():
    with PacedSSEServer(events=40, interval=0.1) as upstream:
        result = run_probe(upstream.url, timeout=1.0)
    assert result.recording.timed_out
    assert not result.recording.complete
    assert result.recording.end_s == 1.0
    assert result.verdict == "streamed", result.reason
    assert any("had not ended" in note for note in result.notes)


def test_error_status_is_inconclusive():
    with PacedSSEServer(status="503 Service Unavailable", events=2) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "inconclusive"
    assert "HTTP 503" in result.reason
    assert "data:" in result.to_dict()["trials"][0]["body_start"]


def test_json_response_is_inconclusive():
    with PacedSSEServer(content_type="application/json", **PACE) as upstream:
        result = run_probe(upstream.url, timeout=10)
    assert result.verdict == "inconclusive"
    assert "not an event stream" in result.reason


def test_trials_repeat_and_vote():
    with PacedSSEServer(**PACE) as upstream:
        result = run_probe(upstream.url, timeout=10, trials=3)
    assert len(result.trials) == 3 == len(upstream.requests)
    assert result.votes == {"streamed": 3}


def test_request_method_headers_and_body_are_sent_and_secrets_stay_out_of_the_result():
    secret = "sk-live-0123456789abcdef"
    with PacedSSEServer(**PACE) as upstream:
        result = run_probe(upstream.url + "v1/chat/completions?api_key=qk-987654321", method="POST",
                           headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
                           content='{"stream": true}', timeout=10, expect_done=True)
    sent = upstream.requests[0]
    assert (sent.method, sent.target) == ("POST", "/v1/chat/completions?api_key=qk-987654321")
    assert sent.headers["authorization"] == f"Bearer {secret}"
    assert json.loads(sent.body) == {"stream": True}
    dumped = json.dumps(result.to_dict())
    assert secret not in dumped and "qk-987654321" not in dumped
    assert result.to_dict()["request"]["headers"]["Authorization"] == "[redacted]"
    assert result.verdict == "streamed"


def test_openai_stream_without_done_is_truncated_when_done_is_expected():
    with PacedSSEServer(done=False, **PACE) as upstream:
        assert run_probe(upstream.url, timeout=10).verdict == "streamed"
        result = run_probe(upstream.url, timeout=10, expect_done=True)
    assert result.verdict == "truncated"
    assert "[DONE]" in result.reason


def http10_exchange(address: str) -> bytes:
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def test_paced_server_answers_http10_close_delimited():
    with PacedSSEServer(events=3, interval=0.01) as upstream:
        data = http10_exchange(upstream.address)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK")
    assert b"transfer-encoding" not in head.lower() and b"content-length" not in head.lower()
    assert body.count(b"data: ") == 4 and body.endswith(b"data: [DONE]\n\n")
    assert upstream.requests[0].version == "HTTP/1.0"


def test_paced_server_sends_x_accel_buffering_and_cache_control_when_asked():
    with PacedSSEServer(events=3, interval=0.01, accel_buffering=True, cache_control=None) as upstream:
        head = http10_exchange(upstream.address).partition(b"\r\n\r\n")[0].lower()
    assert b"x-accel-buffering: no" in head
    assert b"cache-control" not in head


def test_a_hung_dns_lookup_does_not_hold_the_probe_past_its_timeout(monkeypatch):
    release = threading.Event()
    still_blocked = []

    def hung_getaddrinfo(*args, **kwargs):
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hung_getaddrinfo)
    try:
        with pytest.raises(UserError, match=r"could not connect to slow-dns\.test:80 within 0\.5 s"):
            run_probe("http://slow-dns.test/", timeout=0.5)
        still_blocked.append(not release.is_set())
    finally:
        release.set()
    assert still_blocked == [True]  # run_probe returned while the lookup was still stuck


def test_run_probe_works_from_inside_a_running_event_loop():
    import asyncio

    async def caller():
        with PacedSSEServer(**PACE) as upstream:
            return run_probe(upstream.url, timeout=10)

    assert asyncio.run(caller()).verdict == "streamed"
