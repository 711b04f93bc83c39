"""ingress-nginx annotations, rendered to the directives the controller's template writes, run on real nginx.

`llmdoctor.proxy.kubernetes.render` turns an Ingress (and the controller ConfigMap) into the location the
template renders (rules/proxy/ingress-nginx.yaml cites rootfs/etc/nginx/template/nginx.tmpl at
controller-v1.15.1); each scenario runs it in Debian's nginx in front of the paced SSE upstream, all at once,
and the static check on the same manifest names the rule.
"""

from __future__ import annotations

import subprocess
from contextlib import ExitStack

import pytest
from support.nginx import nginx_conf, require_nginx, running_nginx
from support.proxies import probe_all
from support.servers import PacedSSEServer

from llmdoctor.proxy.check import check
from llmdoctor.proxy.kubernetes import render
from llmdoctor.proxy.model import Options

P = "nginx.ingress.kubernetes.io"
EVENTS = {"events": 5, "interval": 0.15}


def ingress(annotations: dict[str, str], snippet: str | None = None) -> str:
    lines = [f'    {key}: "{value}"' for key, value in annotations.items()]
    if snippet is not None:
        lines.append(f"    {P}/configuration-snippet: |")
        lines.extend(f"      {line}" for line in snippet.splitlines())
    return ("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: llm\n  namespace: ai\n"
            "  annotations:\n" + "\n".join(lines) + "\nspec:\n  ingressClassName: nginx\n  rules:\n"
            "    - host: llm.example.com\n      http:\n        paths:\n          - path: /\n            pathType: Prefix\n"
            "            backend:\n              service: {name: vllm, port: {number: 8000}}\n")


CONFIGMAP = ("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n"
             "  namespace: ingress-nginx\ndata:\n  use-gzip: \"true\"\n  gzip-types: \"text/event-stream\"\n")
LONG = {f"{P}/proxy-read-timeout": "600"}
SCENARIOS = {
    "default": (ingress(LONG), EVENTS),
    "buffering_on_chunked": (ingress({**LONG, f"{P}/proxy-buffering": "on"}), EVENTS),
    "buffering_on_length": (ingress({**LONG, f"{P}/proxy-buffering": "on"}), {**EVENTS, "content_length": True}),
    "buffering_on_http10": (ingress({**LONG, f"{P}/proxy-buffering": "on", f"{P}/proxy-http-version": "1.0"}),
                            EVENTS),
    "read_timeout_cut": (ingress({f"{P}/proxy-read-timeout": "1"}), {**EVENTS, "pause": (2, 1.5)}),
    "read_timeout_ok": (ingress({f"{P}/proxy-read-timeout": "5"}), {**EVENTS, "pause": (2, 1.5)}),
    "send_timeout_only": (ingress({f"{P}/proxy-read-timeout": "1", f"{P}/proxy-send-timeout": "3600"}),
                          {**EVENTS, "pause": (2, 1.5)}),
    "gzip_configmap": (ingress(LONG) + CONFIGMAP, EVENTS),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_nginx()
    results, reports, rendered = {}, {}, {}
    with ExitStack() as stack:
        urls = {}
        for name, (manifest, upstream_options) in SCENARIOS.items():
            [location] = render(manifest)
            rendered[name] = location
            upstream = stack.enter_context(PacedSSEServer(**upstream_options))
            body = "\n".join([*location.location_lines, "proxy_pass http://app;"])
            proxy = stack.enter_context(running_nginx(tmp_path_factory.mktemp(name), body, upstream_port=upstream.port,
                                                      http_extra="\n".join(location.http_lines)))
            urls[name] = proxy.url("/v1/chat/completions")
            path = tmp_path_factory.mktemp(f"{name}-manifest") / "ingress.yaml"
            path.write_text(manifest)
            reports[name] = check([str(path)], options=Options(short_idle=1.5, client_timeout=2.0)).report
        results = probe_all(urls, expect_done=True)
    return results, reports, rendered


def rules(report) -> set[str]:
    return {f.rule for f in report.findings}


def test_the_controller_default_streams(lab):
    results, reports, rendered = lab
    assert "proxy_buffering off;" in rendered["default"].location_lines
    assert "proxy_http_version 1.1;" in rendered["default"].location_lines
    assert results["default"].verdict == "streamed"
    assert rules(reports["default"]) == set()


def test_buffering_on_streams_chunked_but_holds_content_length_and_http10(lab):
    results, reports, _ = lab
    assert results["buffering_on_chunked"].verdict == "streamed"
    assert results["buffering_on_length"].verdict == "buffered"
    held = results["buffering_on_http10"]
    assert held.verdict == "buffered" and held.metrics.headers_held
    severities = {n: {f.severity for f in reports[n].findings if f.rule == "ING001"}
                  for n in ("buffering_on_chunked", "buffering_on_http10")}
    assert severities == {"buffering_on_chunked": {"warning"}, "buffering_on_http10": {"error"}}


def test_read_timeout_cuts_and_send_timeout_does_not_help(lab):
    results, reports, rendered = lab
    assert "proxy_read_timeout 1s;" in rendered["read_timeout_cut"].location_lines
    for name in ("read_timeout_cut", "send_timeout_only"):
        assert results[name].verdict == "truncated", name
        assert "ING002" in rules(reports[name])
    assert results["read_timeout_ok"].verdict == "streamed"
    assert "ING002" not in rules(reports["read_timeout_ok"])
    message = next(f.message for f in reports["send_timeout_only"].findings if f.rule == "ING002")
    assert "proxy-send-timeout" in message and "does not help" in message


def test_configmap_gzip_for_event_streams_compresses_them(lab):
    results, reports, rendered = lab
    assert "gzip on;" in rendered["gzip_configmap"].http_lines
    assert results["gzip_configmap"].recording.header("content-encoding") == "gzip"
    assert "ING006" in rules(reports["gzip_configmap"])


def test_an_invalid_annotation_renders_the_default(tmp_path):
    [location] = render(ingress({f"{P}/proxy-read-timeout": "300s", f"{P}/proxy-buffering": "On"}))
    assert "proxy_read_timeout 60s;" in location.location_lines
    assert "proxy_buffering off;" in location.location_lines
    path = tmp_path / "ingress.yaml"
    path.write_text(ingress({f"{P}/proxy-read-timeout": "300s", f"{P}/proxy-buffering": "On"}))
    found = [f for f in check([str(path)]).report.findings if f.rule == "ING003"]
    assert len(found) == 2


def test_a_snippet_repeating_a_template_directive_makes_nginx_refuse_the_config(tmp_path):
    manifest = ingress(LONG, snippet="proxy_buffering off;")
    [location] = render(manifest)
    body = "\n".join([*location.location_lines, "proxy_pass http://127.0.0.1:9;", *location.snippet_lines])
    conf = tmp_path / "nginx.conf"
    conf.write_text(nginx_conf(tmp_path, 8, 9, body))
    proc = subprocess.run([require_nginx(), "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True,
                          text=True, timeout=30, check=False)
    assert proc.returncode != 0 and '"proxy_buffering" directive is duplicate' in proc.stderr
    path = tmp_path / "ingress.yaml"
    path.write_text(manifest)
    report = check([str(path)]).report
    k8s005 = next(f for f in report.findings if f.rule == "ING005")
    assert k8s005.line == manifest.splitlines().index("      proxy_buffering off;") + 1
