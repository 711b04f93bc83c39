"""Envoy static configuration (a bootstrap YAML/JSON with `static_resources`, or a bare `RouteConfiguration`).

No Envoy binary runs here: every default below is read from Envoy's own API definitions and docs
(envoyproxy/envoy), cited in docs/proxies.md:
- `RouteAction.timeout` (api/envoy/config/route/v3/route_components.proto): "If not specified, the default is
  15s. This spans between the point at which the entire downstream request (i.e. end-of-stream) has been
  processed and when the upstream response has been completely processed. A value of 0 will disable the
  route's timeout." A total: every stream longer than it is cut.
- `RouteAction.idle_timeout` overrides the connection manager's `stream_idle_timeout`
  (api/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto), 5 minutes
  by default (docs/root/faq/configuration/timeouts.rst); 0 disables it.
- `max_stream_duration` (route `max_stream_duration.max_stream_duration`, or the connection manager's
  `common_http_protocol_options.max_stream_duration`): a total, unset by default.
Rules ENV001-ENV003 (rules/proxy/env*.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import YNode, load_yaml_documents
from llmdoctor.proxy.model import IDLE, TOTAL, Hit, Layer, Limit, Options, Route, Where

ROUTE_TIMEOUT_DEFAULT_S = 15.0
STREAM_IDLE_DEFAULT_S = 300.0
HCM = "envoy.filters.network.http_connection_manager"


@dataclass
class EnvoyRoute:
    label: str
    where: Where
    route: YNode  # the RouteAction
    hcm: YNode


def _duration(node: YNode | None) -> float | None:
    return None if node is None else durations.envoy(node.value if not isinstance(node.value, dict) else node.plain())


def _hcms(doc: YNode) -> list[YNode]:
    out = []
    for listener in doc.get("static_resources", "listeners").elements() if doc.get("static_resources", "listeners") else []:
        for chain in listener.get("filter_chains").elements() if listener.get("filter_chains") else []:
            for flt in chain.get("filters").elements() if chain.get("filters") else []:
                name = flt.get("name")
                config = flt.get("typed_config")
                type_url = config.get("@type") if config else None
                is_hcm = (name is not None and name.value == HCM) or (
                    type_url is not None and str(type_url.value).endswith("HttpConnectionManager"))
                if is_hcm and config is not None:
                    out.append(config)
    return out


def routes_of(doc: YNode, shown: str) -> list[EnvoyRoute]:
    out = []
    hcms = _hcms(doc)
    if not hcms and doc.get("virtual_hosts") is not None:  # a bare RouteConfiguration (RDS file)
        hcms = [YNode({"route_config": doc}, doc.line)]
    for hcm in hcms:
        config = hcm.get("route_config")
        for vhost in config.get("virtual_hosts").elements() if config and config.get("virtual_hosts") else []:
            vname = vhost.get("name")
            for route in vhost.get("routes").elements() if vhost.get("routes") else []:
                action = route.get("route")
                if action is None:
                    continue
                match = route.get("match")
                shown_match = ""
                for key in ("prefix", "path", "safe_regex", "path_separated_prefix"):
                    node = match.get(key) if match else None
                    if node is not None:
                        value = node.get("regex").value if isinstance(node.value, dict) and node.get("regex") else node.value
                        shown_match = f"{key} {value}"
                        break
                label = f"route {shown_match or '(any)'} in virtual host {vname.value if vname else '?'}"
                out.append(EnvoyRoute(label, Where(shown, route.line), action, hcm))
    return out


def _limit_parts(route: EnvoyRoute) -> dict[str, tuple[float | None, Where | None, str]]:
    shown = route.where.path
    timeout = route.route.get("timeout")
    idle = route.route.get("idle_timeout")
    stream_idle = route.hcm.get("stream_idle_timeout")
    route_max = route.route.get("max_stream_duration", "max_stream_duration")
    hcm_max = route.hcm.get("common_http_protocol_options", "max_stream_duration")
    parts: dict[str, tuple[float | None, Where | None, str]] = {}
    if timeout is not None:
        parts["route.timeout"] = (_duration(timeout), Where(shown, timeout.at), "")
    else:
        parts["route.timeout"] = (ROUTE_TIMEOUT_DEFAULT_S, None, "route_components.proto: RouteAction.timeout")
    if idle is not None:
        parts["idle"] = (_duration(idle), Where(shown, idle.at), "route.idle_timeout")
    elif stream_idle is not None:
        parts["idle"] = (_duration(stream_idle), Where(shown, stream_idle.at), "stream_idle_timeout")
    else:
        parts["idle"] = (STREAM_IDLE_DEFAULT_S, None, "stream_idle_timeout")
    node = route_max if route_max is not None else hcm_max
    if node is not None:
        parts["max_stream_duration"] = (_duration(node), Where(shown, node.at), "")
    return parts


def limits(route: EnvoyRoute) -> list[Limit]:
    parts = _limit_parts(route)
    seconds, where, source = parts["route.timeout"]
    out = [Limit(TOTAL, "route.timeout", seconds or None, where, source)]
    seconds, where, name = parts["idle"]
    out.append(Limit(IDLE, name, seconds or None, where,
                     "http_connection_manager.proto: 5 min" if where is None else ""))
    if "max_stream_duration" in parts:
        seconds, where, _ = parts["max_stream_duration"]
        out.append(Limit(TOTAL, "max_stream_duration", seconds or None, where))
    return out


def env001(route: EnvoyRoute, options: Options) -> list[Hit]:
    seconds, where, _ = _limit_parts(route)["route.timeout"]
    if seconds is None or seconds == 0 or seconds >= options.client_timeout:
        return []
    if where is None:
        return [Hit("ENV001", "error", route.where,
                    f"{route.label} sets no `timeout`, so Envoy's default of 15 s applies: it spans from the end of "
                    "the request until the upstream response is complete, so every stream longer than 15 s is cut "
                    "(api/envoy/config/route/v3/route_components.proto, RouteAction.timeout).",
                    "`timeout: 0s` on the route (disables the total; keep `idle_timeout` for stalls), or a value "
                    "above the longest generation", route.label)]
    return [Hit("ENV001", "warning", where,
                f"`timeout: {durations.shown(seconds)}` on {route.label} bounds the whole response (from the end of the "
                "request until the upstream response is complete), so every generation longer than that is cut "
                f"however steadily it streams; the client waits {options.client_timeout:g} s.",
                "`timeout: 0s` (and an `idle_timeout` for stalls), or a value above the longest generation",
                route.label)]


def env002(route: EnvoyRoute, options: Options) -> list[Hit]:
    seconds, where, name = _limit_parts(route)["idle"]
    if where is None or seconds is None or seconds == 0 or seconds > options.short_idle:
        return []
    return [Hit("ENV002", "warning", where,
                f"`{name}: {durations.shown(seconds)}` applies to {route.label}: Envoy resets a stream with no "
                "activity for that long, so a slow first token or a pause longer than that cuts it "
                "(docs/root/faq/configuration/timeouts.rst; default 5 min).",
                f"raise `{name}` above the slowest first token and longest pause (e.g. 300s)", route.label)]


def env003(route: EnvoyRoute, options: Options) -> list[Hit]:
    parts = _limit_parts(route)
    if "max_stream_duration" not in parts:
        return []
    seconds, where, _ = parts["max_stream_duration"]
    if seconds is None or seconds == 0 or seconds >= options.client_timeout or where is None:
        return []
    return [Hit("ENV003", "warning", where,
                f"`max_stream_duration: {durations.shown(seconds)}` applies to {route.label}: Envoy resets any stream "
                "older than that, so every generation longer than it is cut (http_protocol_options: "
                "max_stream_duration).",
                "remove it for streamed routes, or raise it above the longest generation", route.label)]


CHECKS = (env001, env002, env003)


def check(text: str, shown: str, options: Options) -> Layer:
    layer = Layer("envoy", shown, files={shown})
    for doc in load_yaml_documents(text, shown):
        for route in routes_of(doc, shown):
            layer.routes.append(Route("envoy", route.label, route.where, limits(route), match=route.label))
            for rule in CHECKS:
                layer.hits.extend(rule(route, options))
    if not layer.routes:
        layer.notices.append(f"{shown}: no route with a `route:` action in any virtual host: nothing proxies")
    return layer


def looks_like(text: str) -> bool:
    return ("static_resources" in text or "virtual_hosts" in text) and ("route" in text)
