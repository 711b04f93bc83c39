"""`probe URL --direct UPSTREAM_URL` names the hop that holds the stream, on real local servers.

Each case puts a real proxy (Debian's nginx or HAProxy) in front of the paced SSE upstream and probes both,
two trials each, alternating; the cases run at once (~6 s in all).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest
from support.nginx import require_nginx, running_nginx
from support.proxies import free_port, running_haproxy
from support.servers import PacedSSEServer

from llmdoctor.probe.hops import TTFC, TPOC, probe_hops

EVENTS = {"events": 6, "interval": 0.15}
CASES = {
    # name: (proxy, proxy config, upstream options)
    "clean": ("nginx", "proxy_buffering off;\nproxy_pass http://app;", EVENTS),
    "buffering": ("nginx", "proxy_pass http://app;", EVENTS),  # buffering on, HTTP/1.0: held to the end
    "slow_upstream": ("nginx", "proxy_buffering off;\nproxy_pass http://app;", {**EVENTS, "first_delay": 0.7}),
    "buffer_16k": ("nginx", "proxy_buffers 4 16k;\nproxy_buffer_size 16k;\nproxy_busy_buffers_size 16k;\n"
                            "proxy_max_temp_file_size 0;\nproxy_pass http://app;",
                   {"events": 60, "interval": 0.02, "event_bytes": 1000}),
    "nagle_like": ("haproxy", "", EVENTS),  # HAProxy without option http-no-delay
    "upstream_bursts": ("nginx", "proxy_buffering off;\nproxy_pass http://app;", {**EVENTS, "burst": 3}),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    require_nginx()
    with ExitStack() as stack:
        pairs = {}
        for name, (proxy, config, upstream_options) in CASES.items():
            upstream = stack.enter_context(PacedSSEServer(**upstream_options))
            tmp = tmp_path_factory.mktemp(name)
            if proxy == "nginx":
                server = stack.enter_context(running_nginx(tmp, config, upstream_port=upstream.port))
                public = server.url("/v1/chat/completions")
            else:
                port = free_port()
                text = (f"defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n"
                        f"    timeout server 30s\nlisten api\n    bind 127.0.0.1:{port}\n"
                        f"    server app 127.0.0.1:{upstream.port}\n")
                stack.enter_context(running_haproxy(tmp, text, [port]))
                public = f"http://127.0.0.1:{port}/v1/chat/completions"
            pairs[name] = (public, upstream.url + "v1/chat/completions")
        with ThreadPoolExecutor(len(pairs)) as pool:
            futures = {name: pool.submit(probe_hops, public, direct, trials=2, timeout=15)
                       for name, (public, direct) in pairs.items()}
            return {name: future.result() for name, future in futures.items()}


def test_a_clean_path_names_no_hop(reports):
    assert reports["clean"].attribution.kind == "none"
    assert reports["clean"].exit_code == 0


def test_buffering_at_the_proxy(reports):
    report = reports["buffering"]
    assert report.direct.result.verdict == "streamed" and report.public.result.verdict == "buffered"
    assert report.attribution.kind == "buffering" and "nginx" in report.attribution.layer
    assert report.exit_code == 1


def test_a_slow_upstream_behind_a_streaming_proxy_is_the_upstream(reports):
    report = reports["slow_upstream"]
    assert report.attribution.kind == "slow-upstream" and report.attribution.layer == "the upstream itself"
    assert report.direct.to_dict()[TTFC]["p50"] >= 0.7
    assert report.attribution.added_first_event_s < 0.1
    assert report.exit_code == 0


def test_coalescing_at_a_16k_buffer(reports):
    report = reports["buffer_16k"]
    assert report.attribution.kind == "buffer" and report.attribution.buffer_bytes == 16384
    assert "~16 KiB" in report.attribution.reason


def test_nagle_like_stalls_are_a_steady_hold_per_write(reports):
    report = reports["nagle_like"]
    attribution = report.attribution
    assert attribution.kind == "hold", attribution.reason
    assert 0.15 <= attribution.added_delay_s["p90"] <= 0.40 and attribution.added_first_event_s >= 0.1
    assert "~200 ms" in attribution.reason and "http-no-delay" in " ".join(attribution.fixes)


def test_an_upstream_that_bursts_is_the_upstream(reports):
    report = reports["upstream_bursts"]
    assert report.attribution.kind == "upstream" and report.exit_code == 1


def test_the_json_carries_opentelemetry_names_and_both_hops(reports):
    data = reports["nagle_like"].to_dict()
    assert set(data) == {"direct", "public", "attribution"}
    for hop in ("direct", "public"):
        assert {TTFC, TPOC, "burst_bytes", "verdict"} <= set(data[hop])
        assert data[hop][TTFC]["count"] == 2 and data[hop][TPOC]["p99"] is not None
    json.dumps(data)


def test_cli_direct_option(cli):
    with PacedSSEServer(**EVENTS) as upstream:
        result = cli("probe", upstream.url, "--direct", upstream.url, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["attribution"]["kind"] == "none"
