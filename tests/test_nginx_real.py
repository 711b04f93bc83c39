"""Static findings agree with what a real nginx does (design.md §4).

Each test starts Debian's nginx in front of the paced SSE upstream (tests/support/servers.py: chunked to
HTTP/1.1 requests, close-delimited to HTTP/1.0), runs `llmdoctor.nginx.check` on the very config nginx
runs, and probes the stream with `llmdoctor.probe.run_probe`: once with the directive as found (finding
reported, stream broken) and once with the finding's fix applied (no finding, stream streamed).
Events are a few hundred milliseconds apart, so each probe takes about a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.nginx import nginx_dump, nginx_test, require_nginx, running_nginx, sandboxed_copy
from support.servers import PacedSSEServer

from llmdoctor.nginx.check import check
from llmdoctor.probe import run_probe
from llmdoctor.report.model import display_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nginx"
EVENTS = {"events": 6, "interval": 0.15}


@pytest.fixture(autouse=True)
def _nginx_installed():
    require_nginx()


def probe_via_nginx(tmp_path: Path, location_body: str, *, http_extra: str = "", requests: int = 1,
                    **upstream_options):
    """(static findings on the config nginx ran, probe results, the upstream) for one nginx setup."""
    options = {**EVENTS, **upstream_options}
    with PacedSSEServer(**options) as upstream, \
            running_nginx(tmp_path, location_body, upstream_port=upstream.port, http_extra=http_extra) as proxy:
        results = [run_probe(proxy.url("/v1/chat/completions"), timeout=10) for _ in range(requests)]
        report = check([str(proxy.conf)])
    assert report.errors == []
    return report, results, upstream


def rules(report, severity: str | None = None) -> set[str]:
    return {f.rule for f in report.findings if severity is None or f.severity == severity}


def test_buffering_on_with_http10_holds_headers_and_body_and_off_streams(tmp_path):
    report, [probe], upstream = probe_via_nginx(tmp_path / "found", "proxy_pass http://app;")
    assert upstream.requests[0].version == "HTTP/1.0"
    assert "NGX001" in rules(report, "error")
    assert probe.verdict == "buffered"
    assert probe.metrics.event_reads == 1 and probe.metrics.headers_held

    report, [probe], _ = probe_via_nginx(tmp_path / "fixed", "proxy_buffering off;\nproxy_pass http://app;")
    assert "NGX001" not in rules(report)
    assert probe.verdict == "streamed"
    assert not probe.metrics.headers_held


def test_buffering_on_with_http11_passes_a_chunked_upstream_through(tmp_path):
    body = 'proxy_http_version 1.1;\nproxy_set_header Connection "";\nproxy_pass http://app;'
    report, [probe], upstream = probe_via_nginx(tmp_path / "chunked", body)
    assert upstream.requests[0].version == "HTTP/1.1"
    assert "NGX001" in rules(report, "warning") and "NGX001" not in rules(report, "error")
    assert probe.verdict == "streamed"
    # ... but the same location holds an upstream that frames with Content-Length: the warning's point
    _, [probe], _ = probe_via_nginx(tmp_path / "content-length", body, content_length=True)
    assert probe.verdict == "buffered"


def test_upstream_x_accel_buffering_no_streams_through_default_buffering(tmp_path):
    report, [probe], _ = probe_via_nginx(tmp_path, "proxy_pass http://app;", accel_buffering=True)
    ngx001 = next(f for f in report.findings if f.rule == "NGX001")
    assert "`X-Accel-Buffering: no` header in the upstream's response also turns it off" in ngx001.message
    assert probe.verdict == "streamed"


def test_proxy_ignore_headers_x_accel_buffering_defeats_the_upstream_opt_out(tmp_path):
    body = "proxy_ignore_headers X-Accel-Buffering;\nproxy_pass http://app;"
    report, [probe], _ = probe_via_nginx(tmp_path / "found", body, accel_buffering=True)
    assert "NGX002" in rules(report)
    assert probe.verdict == "buffered"

    report, [probe], _ = probe_via_nginx(tmp_path / "fixed", "proxy_pass http://app;", accel_buffering=True)
    assert "NGX002" not in rules(report)
    assert probe.verdict == "streamed"


@pytest.mark.parametrize("stall", [{"pause": (3, 2.0)}, {"first_delay": 2.0}], ids=["pause", "first-token"])
def test_read_timeout_shorter_than_a_stall_truncates_the_stream(tmp_path, stall):
    found = "proxy_buffering off;\nproxy_read_timeout 1s;\nproxy_pass http://app;"
    report, [probe], _ = probe_via_nginx(tmp_path / "found", found, **stall)
    assert "NGX003" in rules(report)
    assert probe.verdict == "truncated"
    assert probe.recording.status == 200

    fixed = "proxy_buffering off;\nproxy_read_timeout 300s;\nproxy_pass http://app;"
    report, [probe], _ = probe_via_nginx(tmp_path / "fixed", fixed, **stall)
    assert "NGX003" not in rules(report)
    assert probe.verdict == "streamed"


def _cache_zone(tmp_path: Path) -> str:
    return f"proxy_cache_path {tmp_path / 'nginx' / 'cache' / 'llm'} keys_zone=llm:1m;"


CACHED = ('proxy_http_version 1.1;\nproxy_set_header Connection "";\nproxy_cache llm;\n'
          "proxy_cache_valid 200 1m;\nadd_header X-Cache-Status $upstream_cache_status;\nproxy_pass http://app;")


def test_proxy_cache_replays_a_stored_stream_without_the_upstream(tmp_path):
    report, probes, upstream = probe_via_nginx(tmp_path / "found", CACHED, requests=2, cache_control=None,
                                               http_extra=_cache_zone(tmp_path / "found"))
    assert "NGX005" in rules(report, "error")
    first, second = probes
    assert (first.recording.header("x-cache-status"), first.verdict) == ("MISS", "streamed")
    assert second.recording.header("x-cache-status") == "HIT"
    assert len(upstream.requests) == 1  # the second stream was replayed, not generated
    assert second.metrics.event_reads == 1 and second.verdict != "streamed"

    fixed = CACHED.replace("proxy_cache llm;", "proxy_cache off;")
    report, probes, upstream = probe_via_nginx(tmp_path / "fixed", fixed, requests=2, cache_control=None,
                                               http_extra=_cache_zone(tmp_path / "fixed"))
    assert "NGX005" not in rules(report)
    assert [p.verdict for p in probes] == ["streamed", "streamed"]
    assert len(upstream.requests) == 2


def test_proxy_cache_stores_nothing_while_buffering_is_off(tmp_path):
    body = "proxy_buffering off;\n" + CACHED
    report, probes, upstream = probe_via_nginx(tmp_path, body, requests=2, cache_control=None,
                                               http_extra=_cache_zone(tmp_path))
    assert "NGX005" in rules(report, "info") and "NGX005" not in rules(report, "error")
    assert [p.recording.header("x-cache-status") for p in probes] == ["MISS", "MISS"]
    assert [p.verdict for p in probes] == ["streamed", "streamed"]
    assert len(upstream.requests) == 2


CARGO_CULT = ("add_header X-Accel-Buffering no;\nproxy_set_header X-Accel-Buffering no;\n"
              "proxy_max_temp_file_size 0;\nchunked_transfer_encoding off;\nproxy_request_buffering off;\n")


def test_cargo_cult_streaming_lines_do_nothing(tmp_path):
    report, [probe], upstream = probe_via_nginx(tmp_path / "found", CARGO_CULT + "proxy_pass http://app;")
    assert [f.rule for f in report.findings].count("NGX006") == 5
    assert probe.verdict == "buffered"  # exactly as without them
    assert probe.metrics.headers_held
    assert upstream.requests[0].headers.get("x-accel-buffering") == "no"  # sent upstream, ignored by nginx

    report, [probe], _ = probe_via_nginx(tmp_path / "fixed", "proxy_buffering off;\nproxy_pass http://app;")
    assert "NGX006" not in rules(report)
    assert probe.verdict == "streamed"


def test_gzip_on_event_stream_compresses_the_stream(tmp_path):
    found = "proxy_buffering off;\ngzip on;\ngzip_types text/event-stream;\nproxy_pass http://app;"
    report, [probe], _ = probe_via_nginx(tmp_path / "found", found)
    assert "NGX004" in rules(report)
    assert probe.recording.header("content-encoding") == "gzip"
    assert probe.verdict == "streamed"  # nginx itself still flushes each event (design.md §4)

    fixed = found.replace("gzip on;", "gzip off;")
    report, [probe], _ = probe_via_nginx(tmp_path / "fixed", fixed)
    assert "NGX004" not in rules(report)
    assert probe.recording.header("content-encoding") is None


def test_list_directive_in_a_location_drops_the_inherited_ones(tmp_path):
    http = 'proxy_http_version 1.1;\nproxy_set_header Connection "";\nproxy_buffering off;'
    found = "proxy_set_header X-Request-Id $request_id;\nproxy_pass http://app;"
    report, _, upstream = probe_via_nginx(tmp_path / "found", found, http_extra=http)
    assert "NGX007" in rules(report)
    assert upstream.requests[0].headers.get("connection") == "close"  # nginx's default came back

    fixed = 'proxy_set_header X-Request-Id $request_id;\nproxy_set_header Connection "";\nproxy_pass http://app;'
    report, _, upstream = probe_via_nginx(tmp_path / "fixed", fixed, http_extra=http)
    assert "NGX007" not in rules(report)
    assert "connection" not in upstream.requests[0].headers


# ----------------------------------------------------------------------------- nginx -t and nginx -T


def _valid_fixtures() -> list[Path]:
    return [*sorted((FIXTURES / "rules").glob("*.conf")), FIXTURES / "includes" / "nginx.conf"]


@pytest.mark.parametrize("conf", _valid_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_nginx_accepts_the_valid_fixtures(tmp_path, conf):
    proc = nginx_test(require_nginx(), sandboxed_copy(conf, tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["unbalanced.conf", "stray_brace.conf"])
def test_nginx_rejects_the_malformed_fixtures_on_the_line_llmdoctor_reports(tmp_path, name):
    conf = sandboxed_copy(FIXTURES / "malformed" / name, tmp_path)
    proc = nginx_test(require_nginx(), conf, tmp_path)
    assert proc.returncode != 0
    error = check([str(conf)]).errors[0]
    assert f"{error.reason.removeprefix('syntax error: ')} in {conf}:{error.line}" in proc.stderr


def test_a_fresh_nginx_T_dump_gives_the_same_findings_as_the_files(tmp_path, cli):
    main = sandboxed_copy(FIXTURES / "includes" / "nginx.conf", tmp_path)
    dump = nginx_dump(require_nginx(), main, tmp_path)
    assert dump.startswith(f"# configuration file {main}:")
    (tmp_path / "dump.txt").write_text(dump)
    from_dump = check([str(tmp_path / "dump.txt")])
    from_files = check([str(main)])
    assert from_dump.errors == []
    assert [(f.rule, f.path, f.line) for f in from_dump.findings] == \
        [(f.rule, f.path, f.line) for f in from_files.findings]
    piped = cli("nginx", "-", "--format", "json", input=dump)
    assert piped.returncode == 1
    assert display_path(main.parent / "conf.d" / "10-api.conf") in piped.stdout


def test_a_folder_tree_is_read_as_nginx_reads_its_main_config(tmp_path):
    """The files llmdoctor reads for a main config found in a folder tree are the files `nginx -T` dumps."""
    from llmdoctor.nginx.config import load_directory, split_dump

    main = sandboxed_copy(FIXTURES / "includes" / "nginx.conf", tmp_path / "tree" / "site")
    (tmp_path / "tree" / "fragments").mkdir()
    (tmp_path / "tree" / "fragments" / "web.conf").write_text("server {\n  location / {\n"
                                                              "    proxy_pass http://127.0.0.1:9;\n  }\n}\n")
    dumped = set(split_dump(nginx_dump(require_nginx(), main, tmp_path / "tree" / "site")))
    config = load_directory(tmp_path / "tree")
    assert config.errors == []
    assert dumped == {p for p in config.files if p.startswith(str(main.parent))}
    assert str(tmp_path / "tree" / "fragments" / "web.conf") in config.files
    assert [name for name, _ in config.roots] == [str(main), str(tmp_path / "tree" / "fragments" / "web.conf")]
