"""The likely layer behind a verdict, from the response's fingerprints, and the fix for it (design.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdoctor.probe.analyze import BUFFERED, COALESCED, TRUNCATED, Analysis
from llmdoctor.probe.record import Recording

# Server-header substrings -> the layer that answered (lower-case match).
_SERVER_FINGERPRINTS = (
    ("openresty", "nginx"),
    ("tengine", "nginx"),
    ("nginx", "nginx"),
    ("cloudflare", "Cloudflare"),
    ("envoy", "Envoy"),
    ("awselb", "AWS load balancer"),
    ("caddy", "Caddy"),
    ("traefik", "Traefik"),
    ("apache", "Apache httpd"),
    ("uvicorn", "the application server (uvicorn)"),
    ("hypercorn", "the application server (hypercorn)"),
    ("gunicorn", "the application server (gunicorn)"),
    ("granian", "the application server (granian)"),
    ("daphne", "the application server (daphne)"),
)
# Headers whose presence names a layer, whatever the Server header says.
_HEADER_FINGERPRINTS = (
    ("cf-ray", "Cloudflare"),
    ("x-amz-cf-id", "CloudFront"),
    ("x-envoy-upstream-service-time", "Envoy"),
    ("fly-request-id", "Fly.io proxy"),
    ("x-vercel-id", "Vercel"),
)
# A gap this long between the last byte and the cut suggests a proxy's read timeout (nginx default 60 s).
READ_TIMEOUT_GAP_S = 55.0


@dataclass
class Diagnosis:
    layer: str | None = None  # the layer most likely responsible, in words
    fingerprints: list[str] = field(default_factory=list)  # what the response says about the path
    why: list[str] = field(default_factory=list)  # what in the measurements points at that layer
    fixes: list[str] = field(default_factory=list)


def fingerprints(rec: Recording) -> list[str]:
    found: list[str] = []
    server = (rec.header("server") or "").lower()
    for needle, layer in _SERVER_FINGERPRINTS:
        if needle in server and layer not in found:
            found.append(layer)
            break
    for header, layer in _HEADER_FINGERPRINTS:
        if rec.header(header) is not None and layer not in found:
            found.append(layer)
    via = rec.header("via")
    if via:
        found.append(f"a proxy (Via: {via})")
    return found


def diagnose(rec: Recording, analysis: Analysis) -> Diagnosis:
    prints = fingerprints(rec)
    diag = Diagnosis(fingerprints=prints)
    nginx = "nginx" in prints
    gzip = (rec.header("content-encoding") or "").lower() not in ("", "identity")
    proxies = [p for p in prints if not p.startswith("the application server")]
    if analysis.verdict in (BUFFERED, COALESCED):
        if nginx:
            diag.layer = "nginx (response buffering)"
            diag.fixes = [
                ("in the nginx location that proxies this URL: `proxy_buffering off;`, or have the upstream "
                "send the response header `X-Accel-Buffering: no` (and keep X-Accel-Buffering out of "
                "`proxy_ignore_headers`)"),
                "`proxy_http_version 1.1;` so the upstream answers chunked and each chunk is passed on",
                "check the config statically: `llmdoctor nginx /etc/nginx/nginx.conf`",
            ]
            if analysis.metrics.headers_held:
                diag.why.append("the headers were held with the body: nginx's signature with `proxy_buffering on` "
                                "and an HTTP/1.0 upstream (the default `proxy_http_version` before nginx 1.29.7)")
        elif gzip:
            diag.layer = "compression (Content-Encoding " + (rec.header("content-encoding") or "") + ")"
            diag.fixes = [("turn compression off for text/event-stream (nginx: keep it out of `gzip_types`), or "
                          "flush the compressor after each event")]
        elif proxies:
            diag.layer = proxies[0]
            diag.fixes = [(f"turn off response buffering for this route in {proxies[0]}, or send "
                          "`X-Accel-Buffering: no` and `Cache-Control: no-cache` from the application")]
        elif prints:
            diag.layer = prints[0]
            diag.fixes = [("the application sends the events together: make sure it yields each event as it is "
                          "produced (and that the request asks for streaming, e.g. \"stream\": true)")]
        else:
            diag.layer = "unknown (no Server header)"
            diag.fixes = [("find the layer that holds the response: probe the application directly (its own "
                          "port), then each proxy in front of it; for nginx set `proxy_buffering off;`")]
    elif analysis.verdict == TRUNCATED:
        gap = _stall_before_end(rec)
        if gap is not None:
            diag.why.append(f"the last bytes came {gap:.1f} s before the stream was cut")
        if gap is not None and gap >= READ_TIMEOUT_GAP_S:
            diag.layer = "nginx (proxy_read_timeout)" if nginx else "a proxy's read timeout"
            diag.why.append("a silence that long before the cut is a proxy's read timeout (nginx: 60 s default)")
            diag.fixes = [("raise the read timeout above the longest first-token delay or pause "
                          "(nginx: `proxy_read_timeout 300s;`)")]
        else:
            diag.layer = proxies[0] if proxies else (prints[0] if prints else None)
            timeouts = ("nginx's `proxy_read_timeout` (a silence longer than it cuts the stream) and "
                        if nginx else "each proxy's read timeout and ")
            diag.fixes = [("something closed the stream before its end: check the application's logs for an "
                           f"error, {timeouts}body-size limits")]
        if gzip and "decoded" in (rec.error or ""):
            diag.fixes.append("the compressed body was corrupt: serve event streams uncompressed")
    return diag


def _stall_before_end(rec: Recording) -> float | None:
    if rec.end_s is None:
        return None
    last = rec.reads[-1].t if rec.reads else rec.headers_s
    return None if last is None else rec.end_s - last
