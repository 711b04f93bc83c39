"""`llmdoctor probe` end to end: the installed command against local servers; exit codes, output, secrets."""

from __future__ import annotations

import json

import pytest
from support.servers import (
    BufferedServer,
    ClosesEarlyServer,
    ErrorServer,
    PacedSSEServer,
    SilentServer,
    free_port,
)

from llmdoctor.commands.probe import openai_url

PACE = ("events", 8), ("interval", 0.08)
SECRET = "sk-proj-Zx9876543210secret"


def paced(**options) -> PacedSSEServer:
    return PacedSSEServer(**{**dict(PACE), **options})


def assert_could_not_probe(result, message: str) -> None:
    assert result.returncode == 2, result
    assert message in result.stderr, result.stderr
    assert result.stderr.startswith("llmdoctor: error: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_streamed_exits_0_with_the_report_and_timeline(cli):
    with paced() as upstream:
        result = cli("probe", upstream.url, "--timeout", "10")
    assert result.returncode == 0, result
    assert "verdict: streamed - 9 events arrived in" in result.stdout
    timeline = next(line for line in result.stdout.splitlines() if line.strip().startswith("timeline"))
    cells = timeline.split()[1]
    assert cells.count("|") + sum(int(c) for c in cells if c.isdigit()) == 9
    assert "^ headers" in result.stdout
    assert "fix" not in result.stdout
    lines = result.stdout.splitlines()
    drawing = [line for line in lines if line.strip().startswith(("timeline", "^ headers", "| 1 event"))]
    assert len(drawing) == 3 and all(len(line) <= 80 for line in drawing)  # no wrap on an 80-column terminal


def test_buffered_exits_1_with_a_burst_at_the_end_and_a_fix(cli):
    with BufferedServer(**dict(PACE)) as upstream:
        result = cli("probe", upstream.url, "--timeout", "10")
    assert result.returncode == 1, result
    assert "verdict: buffered - all 9 events arrived in one read" in result.stdout
    assert next(line for line in result.stdout.splitlines() if line.startswith("verdict:")).endswith("(PRB001)")
    timeline = next(line for line in result.stdout.splitlines() if line.strip().startswith("timeline"))
    assert timeline.split()[1] == "." * 49 + "9"
    assert "  fix " in result.stdout


def test_truncated_exits_1(cli):
    with ClosesEarlyServer(**dict(PACE)) as upstream:
        result = cli("probe", upstream.url, "--timeout", "10")
    assert result.returncode == 1, result
    assert "verdict: truncated" in result.stdout
    assert "error       the connection closed in the middle of the chunked body" in result.stdout


def test_inconclusive_prints_the_report_and_exits_2(cli):
    with paced(events=2) as upstream:
        result = cli("probe", upstream.url, "--timeout", "10")
    assert result.returncode == 2, result
    assert "verdict: inconclusive - only 3 event(s) arrived; at least 5 are needed" in result.stdout
    with paced(events=2) as upstream:
        assert cli("probe", upstream.url, "--timeout", "10", "--min-events", "3").returncode == 0


def test_json_output_carries_verdict_measurements_and_trials(cli):
    with paced() as upstream:
        result = cli("probe", upstream.url, "--format", "json", "--trials", "2", "--timeout", "10")
    assert result.returncode == 0, result
    data = json.loads(result.stdout)
    assert set(data) == {"url", "method", "request", "verdict", "rule", "findings", "reason", "layer", "why",
                         "fixes", "notes", "votes", "trials"}
    assert data["verdict"] == "streamed" and data["rule"] is None and data["findings"] == []
    assert data["votes"] == {"streamed": 2}
    assert len(data["trials"]) == 2
    trial = data["trials"][0]
    assert {"status", "headers", "timings", "complete", "timed_out", "error", "event_format", "body_bytes",
            "metrics", "fingerprints", "reads"} <= set(trial)
    assert trial["metrics"]["events"] == 9
    assert trial["status"] == 200 and trial["done_seen"] is True
    assert set(trial["timings"]) == {"connect_s", "tls_s", "headers_s", "first_byte_s", "first_event_s",
                                     "last_event_s", "end_s"}
    assert sum(read["events"] for read in trial["reads"]) == 9
    assert all(read["bytes"] > 0 for read in trial["reads"])


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_never_appear_in_the_output(cli, fmt):
    with paced() as upstream:
        result = cli("probe", f"{upstream.url}?api_key=qk-1234567890", "--format", fmt, "--timeout", "10",
                     "-H", f"Authorization: Bearer {SECRET}", "-H", "x-api-key: xk-abcdef123456",
                     "-H", "Cookie: session=ck-abcdef123456", "-H", "X-Trace: visible-value")
    assert result.returncode == 0, result
    sent = upstream.requests[0].headers
    assert sent["authorization"] == f"Bearer {SECRET}" and sent["x-api-key"] == "xk-abcdef123456"
    for secret in (SECRET, "xk-abcdef123456", "ck-abcdef123456", "qk-1234567890"):
        assert secret not in result.stdout and secret not in result.stderr
    assert "[redacted]" in result.stdout
    assert "visible-value" in result.stdout


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secret_echoed_in_an_error_body_is_scrubbed(cli, fmt):
    with ErrorServer() as upstream:
        result = cli("probe", upstream.url, "-H", f"Authorization: Bearer {SECRET}", "--format", fmt,
                     "--timeout", "10")
    assert result.returncode == 2
    assert "HTTP 401" in result.stdout
    assert "Incorrect API key provided: [redacted]" in result.stdout
    assert SECRET not in result.stdout


def test_openai_mode_posts_a_streaming_chat_completion(cli):
    with paced() as upstream:
        result = cli("probe", upstream.url.rstrip("/"), "--openai", "my-model", "--timeout", "10",
                     "-H", f"Authorization: Bearer {SECRET}")
    assert result.returncode == 0, result
    sent = upstream.requests[0]
    assert (sent.method, sent.target) == ("POST", "/v1/chat/completions")
    body = json.loads(sent.body)
    assert body["model"] == "my-model" and body["stream"] is True and body["messages"]
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "text/event-stream"


def test_openai_mode_calls_a_stream_without_done_truncated(cli):
    with paced(done=False) as upstream:
        result = cli("probe", upstream.url + "v1/chat/completions", "--openai", "m", "--timeout", "10")
    assert result.returncode == 1, result
    assert "verdict: truncated" in result.stdout and "[DONE]" in result.stdout


@pytest.mark.parametrize(("given", "expected"), [
    ("http://h:8000", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/", "http://h:8000/v1/chat/completions"),
    ("http://h/v1", "http://h/v1/chat/completions"),
    ("http://h/api/v1/", "http://h/api/v1/chat/completions"),
    ("http://h/v1/chat/completions", "http://h/v1/chat/completions"),
    ("http://h/custom/path", "http://h/custom/path"),
])
def test_openai_url_completion(given, expected):
    assert openai_url(given) == expected


def test_data_json_and_method_options(cli, tmp_path):
    body = tmp_path / "body.json"
    body.write_text('{"prompt": "hi"}')
    with paced() as upstream:
        assert cli("probe", upstream.url, "--data", f"@{body}", "--timeout", "10").returncode == 0
        assert cli("probe", upstream.url, "--json", '{"a": 1}', "-X", "put", "--timeout", "10").returncode == 0
        assert cli("probe", upstream.url, "--data", "@-", "--timeout", "10", input="from stdin").returncode == 0
    first, second, third = upstream.requests
    assert (first.method, first.body) == ("POST", b'{"prompt": "hi"}')
    assert (second.method, second.headers["content-type"], second.body) == ("PUT", "application/json", b'{"a": 1}')
    assert (third.method, third.body) == ("POST", b"from stdin")


def test_refused_port_exits_2(cli):
    port = free_port()
    assert_could_not_probe(cli("probe", f"http://127.0.0.1:{port}/"),
                           f"connection refused by 127.0.0.1:{port}")


def test_could_not_probe_in_json_prints_the_error_as_json(cli):
    port = free_port()
    result = cli("probe", f"http://u:hunter2-pass@127.0.0.1:{port}/", "--format", "json")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"llmdoctor: error: connection refused by 127.0.0.1:{port}")
    assert json.loads(result.stdout) == {"error": result.stderr.strip().removeprefix("llmdoctor: error: ")}
    assert "hunter2-pass" not in result.stdout


def test_timeout_before_headers_exits_2(cli):
    with SilentServer() as upstream:
        result = cli("probe", upstream.url, "--timeout", "1")
    assert_could_not_probe(result, "no response headers from")
    assert "within 1 s (the --timeout)" in result.stderr


def test_unknown_host_exits_2(cli):
    assert_could_not_probe(cli("probe", "http://no-such-host.invalid/", "--timeout", "10"),
                           "could not resolve the host name 'no-such-host.invalid' (DNS)")


def test_tls_error_exits_2(cli):
    with paced() as upstream:
        result = cli("probe", f"https://{upstream.address}/", "--timeout", "10")
    assert_could_not_probe(result, f"TLS handshake with {upstream.address} failed")


def test_url_password_is_redacted_in_error_messages(cli):
    port = free_port()
    result = cli("probe", f"http://user:hunter2-pass@127.0.0.1:{port}/?token=tk-55555555", "--timeout", "1")
    assert result.returncode == 2
    assert "hunter2-pass" not in result.stderr and "tk-55555555" not in result.stderr


def test_unparsable_url_never_shows_its_password(cli):
    result = cli("probe", "http://admin:hunter2-pass@[::1/?token=tk-55555555&x=1")
    assert_could_not_probe(result, "URL 'http://admin:[redacted]@[::1/?token=[redacted]&x=1' is not valid")
    assert "hunter2-pass" not in result.stderr and "tk-55555555" not in result.stderr


def test_url_without_scheme_never_shows_its_password(cli):
    result = cli("probe", "admin:hunter2-pass@127.0.0.1:8000/?api_key=tk-55555555")
    assert_could_not_probe(result, "did you mean http://admin:[redacted]@127.0.0.1:8000/")
    assert "hunter2-pass" not in result.stderr and "tk-55555555" not in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["localhost:8000"], "is not an http:// or https:// URL: did you mean http://localhost:8000?"),
    (["[::1]:8000/v1"], "did you mean http://[::1]:8000/v1?"),
    (["ftp://x/"], "is not an http:// or https:// URL: give a full http:// or https:// URL"),
    (["http://x/", "-H", "no colon here"], "-H/--header 'no'...: expected 'Name: value'"),
    (["http://x/", "--json", "{not json"], "--json: not valid JSON"),
    (["http://x/", "--data", "@/no/such/file"], "--data @/no/such/file: cannot read /no/such/file"),
    (["http://x/", "--data", "@/"], "--data @/: cannot read /: Is a directory"),
    (["http://x/", "--json", "@/dev/zero"], "--json @/dev/zero: larger than 64 MiB"),
    (["http://x/", "--data", "a", "--json", "{}"], "give one request body: --data and --json"),
    (["http://x/", "--format", "sarif"], "--format 'sarif': choose one of text, json"),
    (["http://x/", "--timeout", "0"], "--timeout must be more than 0 and at most 86,400 seconds"),
    (["http://x/", "-H", "X-Name: caf\u00e9"], "-H/--header 'X-Name': the value is not ASCII"),
    (["http://x/", "-X", "BAD METHOD"], "--method 'BAD METHOD' is not an HTTP method"),
])
def test_bad_arguments_exit_2(cli, args, message):
    assert_could_not_probe(cli("probe", *args), message)


@pytest.mark.parametrize("header", ["Authorization Bearer sk-live-7777777", "Authorization=Bearer sk-live-7777777",
                                    "sk-live-7777777", "Bad Name: sk-live-7777777"])
def test_malformed_header_error_never_echoes_the_value(cli, header):
    result = cli("probe", "http://x/", "-H", header)
    assert_could_not_probe(result, "expected 'Name: value'")
    assert "7777777" not in result.stderr + result.stdout


def test_trials_out_of_range_is_a_usage_error(cli):
    result = cli("probe", "http://x/", "--trials", "0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
