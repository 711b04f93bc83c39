"""Every verdict a proxy rule claims, observed on the real server (docs/proxies.md has the figures).

One server per kind (Debian's HAProxy 2.6, Caddy 2.6, Apache 2.4; nginx 1.22 for ingress-nginx's rendered
locations), one listener per scenario, each in front of its own paced SSE upstream (tests/support/servers.py);
all scenarios of a kind are probed at once, so each module pays for its slowest probe (~1-2 s). For every
scenario the static check runs on the very config the server runs: the rule fires where the stream is held or
cut, and stays quiet on the fix.
"""

from __future__ import annotations

import pytest
from support.proxies import (
    caddy_global,
    free_ports,
    probe_all,
    running_apache,
    running_caddy,
    running_haproxy,
)
from support.servers import PacedSSEServer

from llmdoctor.proxy.check import check

EVENTS = {"events": 5, "interval": 0.15}
PAUSE = {**EVENTS, "pause": (2, 0.8)}  # a 0.8 s silence after the 2nd event
PAUSE_FIRST = {**EVENTS, "first_delay": 0.8}


def scaled(stall: float = 0.8, **options):
    """The static checks on the lab's time scale: stalls of `stall` s, streams of about 1 s."""
    from llmdoctor.proxy.model import Options

    return Options(short_idle=stall, client_timeout=2.0, **options)


class Lab:
    """Upstreams, one proxy config, its findings per route and the probe results per scenario."""

    def __init__(self, scenarios: dict[str, dict]) -> None:
        self.scenarios = scenarios
        self.upstreams = {name: PacedSSEServer(**spec["upstream"]) for name, spec in scenarios.items()}
        self.ports = dict(zip(scenarios, free_ports(len(scenarios))))
        self.results: dict = {}
        self.findings: list = []

    def __enter__(self):
        for server in self.upstreams.values():
            server.start()
        return self

    def __exit__(self, *exc):
        for server in self.upstreams.values():
            server.stop()

    def probe(self, url_of, names_twice: tuple[str, ...] = ()) -> None:
        """Probe every scenario at once; OpenAI-style streams must end with `data: [DONE]`."""
        urls = {name: url_of(name) for name in self.scenarios}
        sse = {n: u for n, u in urls.items() if self.upstreams[n].event_format == "sse"}
        self.results = probe_all(sse, expect_done=True)
        self.results.update(probe_all({n: u for n, u in urls.items() if n not in sse}))
        if names_twice:  # a second request, after the first finished (caches)
            again = probe_all({name: urls[name] for name in names_twice}, expect_done=True)
            self.results.update({f"{name}#2": result for name, result in again.items()})

    def rules(self, route_part: str) -> set[str]:
        return {f.rule for f in self.findings if route_part in f.extra.get("route", "")}


# ----------------------------------------------------------------------------- HAProxy


HAPROXY = {
    "nodelay_off": {"upstream": EVENTS, "body": ""},
    "nodelay_on": {"upstream": EVENTS, "body": "option http-no-delay"},
    "server_cut": {"upstream": PAUSE, "body": "option http-no-delay\ntimeout server 300ms"},
    "server_fixed": {"upstream": PAUSE, "body": "option http-no-delay\ntimeout server 3s"},
    "first_token_cut": {"upstream": PAUSE_FIRST, "body": "option http-no-delay\ntimeout server 300ms"},
    "client_short": {"upstream": PAUSE, "body": "option http-no-delay\ntimeout client 300ms"},
    "tunnel": {"upstream": PAUSE, "body": "option http-no-delay\ntimeout server 300ms\ntimeout tunnel 1h"},
    "wait_body": {"upstream": EVENTS, "body": "option http-no-delay\nhttp-response wait-for-body time 5s"},
    "wait_body_least": {"upstream": EVENTS,
                        "body": "option http-no-delay\nhttp-response wait-for-body time 5s at-least 100"},
    "cache": {"upstream": {**EVENTS, "cache_control": "max-age=60", "date": None},
              "body": "option http-no-delay\nhttp-request cache-use c\nhttp-response cache-store c"},
    "compression": {"upstream": EVENTS,
                    "body": "option http-no-delay\ncompression algo gzip\ncompression type text/event-stream"},
    "buffer_request": {"upstream": EVENTS, "body": "option http-no-delay\noption http-buffer-request"},
}


@pytest.fixture(scope="module")
def haproxy_lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("haproxy")
    with Lab(HAPROXY) as lab:
        sections = []
        for name, spec in HAPROXY.items():
            body = "\n    ".join(spec["body"].splitlines())
            sections.append(f"listen {name}\n    bind 127.0.0.1:{lab.ports[name]}\n    {body}\n"
                            f"    server app 127.0.0.1:{lab.upstreams[name].port}\n")
        config = ("global\n    maxconn 200\ncache c\n    total-max-size 4\n    max-age 60\n"
                  "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n"
                  + "".join(sections))
        with running_haproxy(tmp, config, list(lab.ports.values())) as proxy:
            lab.probe(lambda n: f"http://127.0.0.1:{lab.ports[n]}/v1/chat/completions", names_twice=("cache",))
            lab.findings = check([str(proxy.config)], options=scaled()).report.findings
        yield lab


def test_haproxy_without_http_no_delay_holds_each_write_about_200ms(haproxy_lab):
    held, immediate = haproxy_lab.results["nodelay_off"], haproxy_lab.results["nodelay_on"]
    assert "HAP001" in haproxy_lab.rules("listen nodelay_off")
    assert "HAP001" not in haproxy_lab.rules("listen nodelay_on")
    # the upstream sends the first event with its headers; HAProxy holds both (load-independent: measured
    # from this trial's own connection, not from an absolute clock)
    assert held.metrics.first_event_s - held.recording.connect_s >= 0.12
    assert held.metrics.largest_burst >= 2 and held.metrics.events_per_read >= 1.5  # 150 ms apart, arrive paired
    assert immediate.metrics.largest_burst == 1 and immediate.metrics.events_per_read == 1.0


def test_haproxy_timeout_server_cuts_a_pause_and_a_slow_first_token(haproxy_lab):
    for name in ("server_cut", "first_token_cut"):
        assert haproxy_lab.results[name].verdict == "truncated", name
        assert haproxy_lab.results[name].recording.status == 200
        assert "HAP002" in haproxy_lab.rules(f"listen {name}")
    assert haproxy_lab.results["server_fixed"].verdict == "streamed"
    assert "HAP002" not in haproxy_lab.rules("listen server_fixed")


def test_haproxy_timeout_client_does_not_cut_a_paused_stream(haproxy_lab):
    assert haproxy_lab.results["client_short"].verdict == "streamed"
    assert not haproxy_lab.rules("listen client_short") & {"HAP002", "HAP003"}


def test_haproxy_timeout_tunnel_does_not_cover_an_http_stream(haproxy_lab):
    assert haproxy_lab.results["tunnel"].verdict == "truncated"
    assert {"HAP002", "HAP003"} <= haproxy_lab.rules("listen tunnel")


def test_haproxy_wait_for_body_holds_the_stream_and_at_least_releases_it(haproxy_lab):
    held = haproxy_lab.results["wait_body"]
    assert held.verdict == "buffered" and held.metrics.headers_held
    assert haproxy_lab.results["wait_body_least"].verdict == "streamed"
    severities = {f.severity for f in haproxy_lab.findings if f.rule == "HAP004"
                  and f.extra["route"] in ("listen wait_body", "listen wait_body_least")}
    assert severities == {"error", "warning"}


def test_haproxy_cache_replays_a_cacheable_stream(haproxy_lab):
    first, second = haproxy_lab.results["cache"], haproxy_lab.results["cache#2"]
    assert first.verdict == "streamed"
    assert second.metrics.event_reads == 1 and second.verdict != "streamed"
    assert len(haproxy_lab.upstreams["cache"].requests) == 1
    assert "HAP005" in haproxy_lab.rules("listen cache")


def test_haproxy_compression_and_buffer_request_keep_streaming(haproxy_lab):
    """Not findings: measured harmless (docs/proxies.md)."""
    compressed = haproxy_lab.results["compression"]
    assert compressed.recording.header("content-encoding") == "gzip" and compressed.verdict == "streamed"
    assert haproxy_lab.results["buffer_request"].verdict == "streamed"
    assert haproxy_lab.rules("listen compression") == set()
    assert haproxy_lab.rules("listen buffer_request") == set()


# ----------------------------------------------------------------------------- Caddy


BIG = {**EVENTS, "event_bytes": 600}
CADDY = {
    "plain": {"upstream": EVENTS, "body": "reverse_proxy UP"},
    "encode_big": {"upstream": BIG, "body": "encode gzip\nreverse_proxy UP"},
    "encode_small": {"upstream": EVENTS, "body": "encode gzip\nreverse_proxy UP"},
    "encode_excluded": {"upstream": BIG,
                        "body": "encode gzip {\n\tmatch {\n\t\theader Content-Type text/html*\n\t}\n}\nreverse_proxy UP"},
    "buffered": {"upstream": EVENTS, "body": "reverse_proxy UP {\n\tbuffer_responses\n}"},
    "ndjson_length": {"upstream": {**EVENTS, "event_format": "ndjson", "content_length": True},
                      "body": "reverse_proxy UP"},
    "ndjson_length_flush": {"upstream": {**EVENTS, "event_format": "ndjson", "content_length": True},
                            "body": "reverse_proxy UP {\n\tflush_interval -1\n}"},
    "read_cut": {"upstream": PAUSE,
                 "body": "reverse_proxy UP {\n\ttransport http {\n\t\tread_timeout 300ms\n\t}\n}"},
    "read_fixed": {"upstream": PAUSE,
                   "body": "reverse_proxy UP {\n\ttransport http {\n\t\tread_timeout 3s\n\t}\n}"},
    "header_held": {"upstream": {**EVENTS, "hold": "all"},
                    "body": "reverse_proxy UP {\n\ttransport http {\n\t\tresponse_header_timeout 300ms\n\t}\n}"},
    "header_at_once": {"upstream": PAUSE_FIRST,
                       "body": "reverse_proxy UP {\n\ttransport http {\n\t\tresponse_header_timeout 300ms\n\t}\n}"},
    "write_cut": {"upstream": EVENTS, "body": "reverse_proxy UP", "server": "write 300ms"},
    "read_body_idle": {"upstream": PAUSE, "body": "reverse_proxy UP", "server": "read_body 300ms\n\t\t\tidle 300ms"},
}


@pytest.fixture(scope="module")
def caddy_lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("caddy")
    with Lab(CADDY) as lab:
        servers, sites = [], []
        for name, spec in CADDY.items():
            if "server" in spec:
                servers.append(f"\tservers 127.0.0.1:{lab.ports[name]} {{\n\t\ttimeouts {{\n\t\t\t{spec['server']}\n"
                               "\t\t}\n\t}\n")
            body = spec["body"].replace("UP", f"127.0.0.1:{lab.upstreams[name].port}")
            body = "\n\t".join(body.splitlines())
            sites.append(f"http://127.0.0.1:{lab.ports[name]} {{\n\tbind 127.0.0.1\n\t{body}\n}}\n")
        caddyfile = caddy_global("".join(servers)) + "".join(sites)
        with running_caddy(tmp, caddyfile, list(lab.ports.values())) as proxy:
            lab.probe(lambda n: f"http://127.0.0.1:{lab.ports[n]}/v1/chat/completions")
            lab.findings = check([str(proxy.config)], options=scaled(caddy_version=(2, 6, 2))).report.findings
        yield lab


def test_caddy_streams_sse_and_chunked_by_default(caddy_lab):
    assert caddy_lab.results["plain"].verdict == "streamed"
    assert caddy_lab.rules(f"127.0.0.1:{caddy_lab.ports['plain']}") == set()


def test_caddy_262_encode_holds_events_above_minimum_length(caddy_lab):
    held = caddy_lab.results["encode_big"]
    assert held.recording.header("content-encoding") == "gzip"
    assert held.verdict == "buffered" and held.metrics.event_reads == 1
    small = caddy_lab.results["encode_small"]
    assert small.recording.header("content-encoding") is None and small.verdict == "streamed"
    excluded = caddy_lab.results["encode_excluded"]
    assert excluded.recording.header("content-encoding") is None and excluded.verdict == "streamed"
    assert "CDY001" in caddy_lab.rules(f"{caddy_lab.ports['encode_big']}")
    assert "CDY001" not in caddy_lab.rules(f"{caddy_lab.ports['encode_excluded']}")


def test_caddy_buffer_responses_holds_the_stream(caddy_lab):
    held = caddy_lab.results["buffered"]
    assert held.verdict == "buffered" and held.metrics.headers_held
    assert "CDY002" in caddy_lab.rules(f"{caddy_lab.ports['buffered']}")


def test_caddy_flush_interval_matters_only_for_content_length_framed_non_sse(caddy_lab):
    """Documented, not a finding: streaming.go flushes SSE and length-less bodies at once."""
    assert caddy_lab.results["ndjson_length"].verdict == "buffered"
    assert caddy_lab.results["ndjson_length_flush"].verdict == "streamed"


def test_caddy_read_timeout_ends_the_stream_cleanly(caddy_lab):
    cut = caddy_lab.results["read_cut"]
    assert cut.verdict == "truncated" and cut.recording.complete  # a terminating chunk: only [DONE] is missing
    assert caddy_lab.results["read_fixed"].verdict == "streamed"
    assert "CDY003" in caddy_lab.rules(f"{caddy_lab.ports['read_cut']}")
    assert "CDY003" not in caddy_lab.rules(f"{caddy_lab.ports['read_fixed']}")


def test_caddy_response_header_timeout_cuts_only_held_headers(caddy_lab):
    assert caddy_lab.results["header_held"].recording.status == 504
    assert caddy_lab.results["header_at_once"].verdict == "streamed"
    assert "CDY004" in caddy_lab.rules(f"{caddy_lab.ports['header_held']}")


def test_caddy_server_write_timeout_is_a_total_and_read_body_idle_are_not(caddy_lab):
    cut = caddy_lab.results["write_cut"]
    assert cut.verdict == "truncated" and not cut.recording.complete
    assert caddy_lab.results["read_body_idle"].verdict == "streamed"
    assert any(f.rule == "CDY005" for f in caddy_lab.findings)


# ----------------------------------------------------------------------------- Apache httpd


APACHE_PAUSE = {**EVENTS, "pause": (2, 1.5)}  # Apache's timeouts are whole seconds
APACHE = {
    "plain": {"upstream": EVENTS, "vhost": "ProxyPass / http://UP/"},
    "content_length": {"upstream": {**EVENTS, "content_length": True}, "vhost": "ProxyPass / http://UP/"},
    "http10": {"upstream": EVENTS, "vhost": "SetEnv force-proxy-request-1.0 1\nProxyPass / http://UP/"},
    "proxytimeout": {"upstream": APACHE_PAUSE, "vhost": "ProxyTimeout 1\nProxyPass / http://UP/"},
    "worker_timeout": {"upstream": APACHE_PAUSE, "vhost": "ProxyPass / http://UP/ timeout=1"},
    "core_timeout": {"upstream": APACHE_PAUSE, "vhost": "Timeout 1\nProxyPass / http://UP/"},
    "worker_wins": {"upstream": APACHE_PAUSE, "vhost": "ProxyTimeout 1\nProxyPass / http://UP/ timeout=5"},
    "proxytimeout_wins": {"upstream": APACHE_PAUSE, "vhost": "Timeout 1\nProxyTimeout 5\nProxyPass / http://UP/"},
    "deflate": {"upstream": EVENTS, "vhost": "SetOutputFilter DEFLATE\nProxyPass / http://UP/"},
    "noop_lines": {"upstream": EVENTS,
                   "vhost": "SetEnv proxy-sendchunked 1\nSetOutputFilter BUFFER\nProxyPass / http://UP/ flushpackets=on"},
    "cache": {"upstream": {**EVENTS, "cache_control": "public, max-age=60", "date": None},
              "vhost": "CacheRoot CACHEROOT\nCacheEnable disk /\nProxyPass / http://UP/"},
    "cache_no_cache": {"upstream": {**EVENTS, "date": None},
                       "vhost": "CacheRoot CACHEROOT/b\nCacheEnable disk /\nProxyPass / http://UP/"},
}


@pytest.fixture(scope="module")
def apache_lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("apache")
    with Lab(APACHE) as lab:
        body = []
        for name, spec in APACHE.items():
            vhost = spec["vhost"].replace("UP", f"127.0.0.1:{lab.upstreams[name].port}")
            body.append(f"Listen 127.0.0.1:{lab.ports[name]}\n<VirtualHost 127.0.0.1:{lab.ports[name]}>\n"
                        f"ServerName {name}\n{vhost}\n</VirtualHost>\n")
        with running_apache(tmp, "".join(body), list(lab.ports.values())) as proxy:
            lab.probe(lambda n: f"http://127.0.0.1:{lab.ports[n]}/v1/chat/completions",
                      names_twice=("cache", "cache_no_cache"))
            lab.findings = check([str(proxy.config)], options=scaled(stall=1.5)).report.findings
            lab.error_log = proxy.log_text()
        yield lab


def test_apache_streams_every_framing_by_default(apache_lab):
    for name in ("plain", "content_length", "http10"):
        assert apache_lab.results[name].verdict == "streamed", name
    assert apache_lab.upstreams["http10"].requests[0].version == "HTTP/1.0"


def test_apache_timeouts_cut_a_pause_with_the_measured_precedence(apache_lab):
    for name in ("proxytimeout", "worker_timeout", "core_timeout"):
        assert apache_lab.results[name].verdict == "truncated", name
        assert "APA001" in apache_lab.rules(f"virtual host {name})")
    for name in ("worker_wins", "proxytimeout_wins"):
        assert apache_lab.results[name].verdict == "streamed", name
        assert "APA001" not in apache_lab.rules(f"virtual host {name})")
    assert "AH01110" in apache_lab.error_log


def test_apache_deflate_and_no_op_lines_keep_streaming(apache_lab):
    """Not findings: measured harmless (docs/proxies.md)."""
    deflated = apache_lab.results["deflate"]
    assert deflated.recording.header("content-encoding") == "gzip" and deflated.verdict == "streamed"
    assert apache_lab.results["noop_lines"].verdict == "streamed"


def test_apache_mod_cache_replays_a_cacheable_stream(apache_lab):
    assert apache_lab.results["cache"].verdict == "streamed"
    replay = apache_lab.results["cache#2"]
    assert replay.metrics.event_reads == 1 and replay.recording.header("content-length")
    assert len(apache_lab.upstreams["cache"].requests) == 1
    assert apache_lab.results["cache_no_cache#2"].verdict == "streamed"
    assert len(apache_lab.upstreams["cache_no_cache"].requests) == 2
    assert "APA002" in apache_lab.rules("virtual host cache)")
