"""Traefik: a dynamic configuration file (YAML or TOML: `http.routers`, `services`, `middlewares`,
`serversTransports`), optionally with the static configuration (`entryPoints`, `serversTransport`) in the
same or another file given alongside.

No Traefik binary runs here: the defaults are read from Traefik's source (traefik/traefik), cited in
docs/proxies.md:
- `responseForwarding.flushInterval` is 100 ms by default and "ignored when ReverseProxy recognizes a response
  as a streaming response" (pkg/config/dynamic/http_config.go), i.e. text/event-stream or no Content-Length
  (Go's net/http/httputil ReverseProxy.flushInterval): not a finding.
- The `buffering` middleware reads the whole response before sending it unless `disableResponseBuffer`, which
  the file provider cannot set (`yaml:"-"`, pkg/config/dynamic/middlewares.go; pkg/middlewares/buffering).
- `forwardingTimeouts.responseHeaderTimeout`: "If zero, no timeout exists" (http_config.go).
- `entryPoints.*.transport.respondingTimeouts.writeTimeout`: "the maximum duration before timing out writes of
  the response", 0 by default (pkg/config/static/static_config.go): Go's http.Server WriteTimeout, a total.
  `readTimeout` (60 s since v2.11.2/v3.0) bounds reading the request, not the response.
Rules TRF001-TRF003 (rules/proxy/trf*.yaml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import InputProblem, YNode, load_yaml_documents
from llmdoctor.proxy.model import HEADERS, TOTAL, Hit, Layer, Limit, Options, Route, Where


@dataclass
class Router:
    name: str
    where: Where
    rule: str
    middlewares: list[tuple[str, YNode | None]]  # (name, the middleware's definition)
    transport: YNode | None  # forwardingTimeouts source
    transport_name: str
    write_timeout: tuple[float | None, Where | None]


def _toml_nodes(text: str, shown: str) -> YNode:
    """A TOML document as YNodes; lines come from a search for each key (tomllib keeps none)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        match = re.search(r"line (\d+)", str(err))
        raise InputProblem(shown, f"TOML syntax error: {err}", int(match.group(1)) if match else None) from None
    lines = text.splitlines()

    def find(key: str, after: int) -> int:
        pattern = re.compile(rf"^\s*(\[+[^\]]*\b{re.escape(key)}\b[^\]]*\]+|\"?{re.escape(key)}\"?\s*=)")
        for index in range(after, len(lines)):
            if pattern.search(lines[index]):
                return index + 1
        return after + 1 if after < len(lines) else 1

    def convert(value, line: int) -> YNode:
        if isinstance(value, dict):
            out = {}
            for key, child in value.items():
                at = find(str(key), line - 1)
                out[str(key)] = convert(child, at)
                out[str(key)].key_line = at
            return YNode(out, line)
        if isinstance(value, list):
            return YNode([convert(v, line) for v in value], line)
        return YNode(value if isinstance(value, (str, int, float, bool)) else str(value), line)

    return convert(data, 1)


def _get_ci(node: YNode | None, key: str) -> YNode | None:
    """Traefik's file provider matches keys case-insensitively."""
    if node is None or not isinstance(node.value, dict):
        return None
    for name, child in node.items():
        if name.lower() == key.lower():
            return child
    return None


def _path(node: YNode | None, *keys: str) -> YNode | None:
    for key in keys:
        node = _get_ci(node, key)
    return node


def write_timeout(docs: list[YNode], shown: str) -> tuple[float | None, Where | None]:
    """The shortest entry point `respondingTimeouts.writeTimeout` of a static configuration (None: unset)."""
    write: tuple[float | None, Where | None] = (None, None)
    for doc in docs:
        for _, entry in (_get_ci(doc, "entryPoints").items() if _get_ci(doc, "entryPoints") else []):
            node = _path(entry, "transport", "respondingTimeouts", "writeTimeout")
            if node is not None:
                seconds = durations.traefik(node.value)
                if seconds and (write[0] is None or seconds < write[0]):
                    write = (seconds, Where(shown, node.at))
    return write


def documents(text: str, shown: str, *, toml: bool) -> list[YNode]:
    return [_toml_nodes(text, shown)] if toml else load_yaml_documents(text, shown)


def routers_of(docs: list[YNode], shown: str,
               static_write: tuple[float | None, Where | None] = (None, None)) -> list[Router]:
    http = next((h for h in (_get_ci(d, "http") for d in docs) if h is not None), None)
    static_default = next((t for t in (_path(d, "serversTransport", "forwardingTimeouts") for d in docs)
                           if t is not None), None)
    write = write_timeout(docs, shown)
    if write[0] is None or (static_write[0] is not None and static_write[0] < write[0]):
        write = static_write
    if http is None:
        return []
    middlewares = _get_ci(http, "middlewares")
    services = _get_ci(http, "services")
    transports = _get_ci(http, "serversTransports")
    out = []
    for name, router in (_get_ci(http, "routers").items() if _get_ci(http, "routers") else []):
        rule = _get_ci(router, "rule")
        used = []
        for entry in (_get_ci(router, "middlewares").elements() if _get_ci(router, "middlewares") else []):
            mw_name = str(entry.value).split("@", 1)[0]
            used.append((mw_name, _get_ci(middlewares, mw_name)))
        service_name = str(_get_ci(router, "service").value).split("@", 1)[0] if _get_ci(router, "service") else ""
        service = _get_ci(services, service_name)
        transport_ref = _path(service, "loadBalancer", "serversTransport")
        transport_name = str(transport_ref.value).split("@", 1)[0] if transport_ref is not None else ""
        transport = _path(_get_ci(transports, transport_name), "forwardingTimeouts") if transport_name else \
            static_default
        out.append(Router(name, Where(shown, router.at), str(rule.value) if rule else "", used, transport,
                          transport_name or ("serversTransport (static)" if static_default else ""), write))
    return out


def _label(router: Router) -> str:
    return f"router {router.name}" + (f" ({router.rule})" if router.rule else "")


def trf001(router: Router, options: Options) -> list[Hit]:
    hits = []
    for name, definition in router.middlewares:
        buffering = _get_ci(definition, "buffering")
        if buffering is None:
            continue
        hits.append(Hit("TRF001", "error", Where(router.where.path, buffering.at),
                        f"middleware {name} (`buffering`) is used by {_label(router)}: Traefik's buffering "
                        "middleware reads the whole response before sending it (pkg/middlewares/buffering, "
                        "oxy buffer; `disableResponseBuffer` cannot be set from a file), so the stream's "
                        "headers and events arrive together at the end. From source; no Traefik binary here.",
                        f"remove {name} from the streamed router's middlewares (keep it for upload routes only)",
                        _label(router)))
    return hits


def trf002(router: Router, options: Options) -> list[Hit]:
    node = _get_ci(router.transport, "responseHeaderTimeout")
    if node is None:
        return []
    seconds = durations.traefik(node.value)
    if not seconds or seconds > options.short_idle:
        return []
    return [Hit("TRF002", "warning", Where(router.where.path, node.at),
                f"`responseHeaderTimeout: {node.value}` (servers transport {router.transport_name}) applies to "
                f"{_label(router)}: an upstream that sends its headers only with the first token is answered 504 "
                f"after a prefill longer than {durations.shown(seconds)} (the same Go transport setting measured on "
                "Caddy 2.6.2: 504). Upstreams that send headers at once are not affected.",
                "raise it above the slowest time to first token, or remove it (0: no timeout)", _label(router))]


def trf003(router: Router, options: Options) -> list[Hit]:
    seconds, where = router.write_timeout
    if not seconds or where is None or seconds >= options.client_timeout:
        return []
    return [Hit("TRF003", "warning", where,
                f"the entry point's `respondingTimeouts.writeTimeout` is {durations.shown(seconds)}: it is Go's "
                f"http.Server WriteTimeout, a bound on writing the whole response, so every stream through "
                f"{_label(router)} longer than that is cut (the same Go server setting measured on Caddy 2.6.2: "
                "`write 0.5s` cut a 0.9 s stream).",
                "`writeTimeout: 0s` (the default) for the entry point that serves streams", _label(router))]


CHECKS = (trf001, trf002, trf003)


def check(text: str, shown: str, options: Options, *, toml: bool = False,
          static_write: tuple[float | None, Where | None] = (None, None)) -> Layer:
    """One Traefik file; `static_write` is the writeTimeout of a static configuration given alongside."""
    layer = Layer("traefik", shown, files={shown})
    docs = documents(text, shown, toml=toml)
    for router in routers_of(docs, shown, static_write):
        header = _get_ci(router.transport, "responseHeaderTimeout")
        header_seconds = durations.traefik(header.value) if header is not None else None
        layer.routes.append(Route("traefik", _label(router), router.where, [
            Limit(HEADERS, "forwardingTimeouts.responseHeaderTimeout", header_seconds or None,
                  Where(shown, header.at) if header is not None else None, "0: none (http_config.go)"),
            Limit(TOTAL, "respondingTimeouts.writeTimeout", router.write_timeout[0], router.write_timeout[1],
                  "0: none (static_config.go)"),
        ], match=router.rule))
        for rule in CHECKS:
            layer.hits.extend(rule(router, options))
    if not layer.routes and write_timeout(docs, shown)[0] is None:
        layer.notices.append(f"{shown}: no http.routers: nothing proxies")
    return layer


def looks_like(text: str) -> bool:
    return bool(re.search(r"(?im)^\s*(routers|\[http\.routers|entryPoints|\[entryPoints)", text))
