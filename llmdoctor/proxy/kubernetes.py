"""Kubernetes manifests: ingress-nginx `Ingress` objects and the controller's ConfigMap, Gateway API `HTTPRoute`.

Multi-document YAML (`helm template ... | llmdoctor proxy -`, `kubectl get ingress -A -o yaml`, a `List`).
Each Ingress path is rendered to the nginx location the controller's template writes (rules/proxy/
ingress-nginx.yaml cites the template lines): `proxy_read_timeout`, `proxy_buffering`, `proxy_http_version`
... from the annotation, else the ConfigMap, else the controller default, each statement keeping the YAML
line it comes from. `configuration-snippet` statements are parsed as nginx and go through the nginx checks
(NGX001-NGX007) at their own YAML lines. Rules ING001-GWA001 (rules/proxy/k8s*.yaml).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

from llmdoctor.proxy import durations
from llmdoctor.proxy.inputs import InputProblem, YNode, load_yaml_documents
from llmdoctor.proxy.model import IDLE, TOTAL, Hit, Layer, Limit, Options, Route, Where


@lru_cache(maxsize=1)
def knowledge() -> dict:
    import yaml

    from llmdoctor.proxy.catalog import rules_dir

    return yaml.safe_load((rules_dir() / "ingress-nginx.yaml").read_text(encoding="utf-8"))


@dataclass
class Value:
    """One effective setting of a rendered location, and where it came from."""

    text: str
    where: Where | None  # None: the controller's default
    origin: str  # "annotation", "ConfigMap", "default"
    key: str = ""  # the annotation or ConfigMap key as written


@dataclass
class ControllerConfig:
    data: dict[str, tuple[str, Where]] = field(default_factory=dict)
    name: str = ""
    given: bool = False

    def get(self, key: str) -> tuple[str, Where] | None:
        return self.data.get(key)

    def flag(self, key: str) -> tuple[bool, Where | None]:
        found = self.data.get(key)
        default = knowledge()["configmap"][key]["default"]
        if found is None:
            return bool(default), None
        parsed = _parse_bool(found[0])
        return (bool(default) if parsed is None else parsed), found[1]


def _parse_bool(text: str) -> bool | None:
    """Go's strconv.ParseBool (what mapstructure's weak decoding uses)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


@dataclass
class Location:
    ingress: str  # namespace/name
    host: str
    path: str
    where: Where
    values: dict[str, Value] = field(default_factory=dict)  # annotation name -> effective value
    snippet: YNode | None = None
    snippet_where: Where | None = None

    def label(self) -> str:
        return f"Ingress {self.ingress} {self.host or '*'}{self.path}"

    def directive_lines(self) -> list[str]:
        """The nginx directives the controller writes for this location (what the tests run in nginx)."""
        spec = knowledge()["annotations"]
        lines = []
        for name, info in spec.items():
            value = self.values[name].text
            lines.append(f"{info['directive']} {value}{info.get('suffix', '')};")
        return lines


def _is_ingress_nginx_configmap(doc: YNode) -> bool:
    name = doc.get("metadata", "name")
    data = doc.get("data")
    if data is None:
        return False
    names = knowledge()["configmap_names"]
    if name is not None and any(str(name.value).endswith(n) for n in names):
        return True
    keys = {k for k, _ in data.items()}
    return bool(keys & {"allow-snippet-annotations", "annotations-risk-level", "use-gzip", "proxy-buffering",
                        "proxy-read-timeout", "location-snippet", "enable-brotli"})


def _objects(docs: list[YNode]) -> list[YNode]:
    out = []
    for doc in docs:
        if not isinstance(doc.value, dict):
            continue
        kind = doc.get("kind")
        if kind is not None and kind.value == "List":
            out.extend(i for i in (doc.get("items").elements() if doc.get("items") else []) if isinstance(i.value, dict))
        else:
            out.append(doc)
    return out


def _kind(obj: YNode) -> str:
    kind = obj.get("kind")
    return str(kind.value) if kind is not None else ""


def _name(obj: YNode) -> str:
    ns = obj.get("metadata", "namespace")
    name = obj.get("metadata", "name")
    return f"{ns.value if ns else 'default'}/{name.value if name else '?'}"


def looks_like(text: str) -> bool:
    import re

    return bool(re.search(r"^kind:\s*(Ingress|HTTPRoute|ConfigMap|List)\s*$", text, re.MULTILINE)
                and re.search(r"^apiVersion:", text, re.MULTILINE))


# ----------------------------------------------------------------------------- reading the objects


def _controller_config(objects: list[tuple[str, YNode]], layer: Layer) -> ControllerConfig:
    """The ingress-nginx ConfigMap among (file, object) pairs: the first one found, by name."""
    config = ControllerConfig()
    maps: list[tuple[str, YNode]] = []
    for shown, obj in objects:
        if _kind(obj) == "ConfigMap" and _is_ingress_nginx_configmap(obj) and \
                all(_name(obj) != _name(m) for _, m in maps):
            maps.append((shown, obj))
    if len(maps) > 1:
        layer.notices.append(f"{len(maps)} ingress-nginx ConfigMaps given; using {_name(maps[0][1])} "
                             f"({maps[0][0]})")
    if maps:
        shown, found = maps[0]
        config.given = True
        config.name = _name(found)
        for key, node in found.get("data").items():
            config.data[key] = (str(node.value) if node.value is not None else "", Where(shown, node.at))
    return config


def _effective(name: str, annotations: dict[str, YNode], config: ControllerConfig, shown: str,
               hits: list[Hit], label: str) -> Value:
    spec = knowledge()["annotations"][name]
    prefix = knowledge()["prefix"]
    validator = spec["validator"]
    node = annotations.get(f"{prefix}/{name}")
    if node is not None:
        text = str(node.value).strip() if node.value is not None else ""
        if _valid(text, validator):
            return Value(text, Where(shown, node.at), "annotation", f"{prefix}/{name}")
        fallback = _from_configmap(name, config, shown, hits)
        hits.append(Hit("ING003", "warning", Where(shown, node.at),
                        f"`{prefix}/{name}: {node.value!r}` is not a value ingress-nginx accepts "
                        f"({_expects(validator)}): the controller logs a validation warning and uses "
                        f"{fallback.text}{spec.get('suffix', '')} ({fallback.origin}) for {label} "
                        "(internal/ingress/annotations/parser/validators.go).",
                        f'`{prefix}/{name}: "{_example(name)}"`', label))
        return fallback
    return _from_configmap(name, config, shown, hits)


def _from_configmap(name: str, config: ControllerConfig, shown: str, hits: list[Hit]) -> Value:
    spec = knowledge()["annotations"][name]
    found = config.get(name)
    if found is not None:
        text, where = found
        if _valid(text.strip(), spec["validator"]) or (spec["validator"] != "int" and text.strip()):
            return Value(text.strip(), where, "ConfigMap", name)
    return Value(spec["default"], None, "default")


def _valid(text: str, validator) -> bool:
    if validator == "int":
        try:
            int(text, 10)
        except ValueError:
            return False
        return True
    return text in validator


def _expects(validator) -> str:
    return "a whole number of seconds" if validator == "int" else "one of " + ", ".join(validator)


def _example(name: str) -> str:
    return {"proxy-read-timeout": "300", "proxy-send-timeout": "300", "proxy-connect-timeout": "5",
            "proxy-buffering": "off", "proxy-request-buffering": "off", "proxy-http-version": "1.1"}.get(name, "")


def _configmap_problems(config: ControllerConfig, hits: list[Hit]) -> None:
    spec = knowledge()["annotations"]
    for name in spec:
        found = config.get(name)
        if found is None:
            continue
        text, where = found
        if spec[name]["validator"] == "int" and not _valid(text.strip(), "int"):
            hits.append(Hit("ING003", "warning", where,
                            f"ConfigMap {config.name} `{name}: {text!r}` does not decode as a whole number: the "
                            f"controller keeps the default {spec[name]['default']}{spec[name].get('suffix', '')} "
                            "(mapstructure, WeaklyTypedInput; it logs `unexpected error merging defaults`).",
                            f'`{name}: "{_example(name)}"`'))
        elif spec[name]["validator"] != "int" and text.strip() not in spec[name]["validator"]:
            hits.append(Hit("ING003", "error", where,
                            f"ConfigMap {config.name} `{name}: {text!r}`: the controller writes "
                            f"`{spec[name]['directive']} {text.strip()};` and nginx rejects it ({_expects(spec[name]['validator'])}), "
                            "so the new configuration is not loaded.",
                            f'`{name}: "{_example(name)}"`'))
    for key in ("use-gzip", "enable-brotli", "allow-snippet-annotations"):
        found = config.get(key)
        if found is not None and _parse_bool(found[0]) is None:
            hits.append(Hit("ING003", "warning", found[1],
                            f"ConfigMap {config.name} `{key}: {found[0]!r}` is not a boolean Go can parse "
                            "(true/false/1/0): the controller keeps the default "
                            f"{knowledge()['configmap'][key]['default']}.", f'`{key}: "true"` or `"false"`'))


def _unknown_annotations(annotations: dict[str, YNode], shown: str, label: str, hits: list[Hit]) -> None:
    prefix = knowledge()["prefix"] + "/"
    known = set(knowledge()["known_timeout_and_buffer_annotations"])
    for key, node in annotations.items():
        if not key.startswith(prefix):
            continue
        suffix = key[len(prefix):]
        if ("timeout" in suffix or "buffer" in suffix) and suffix not in known:
            near = min(known, key=lambda k: _distance(k, suffix))
            hits.append(Hit("ING003", "warning", Where(shown, node.at),
                            f"`{key}` is not an annotation ingress-nginx reads: it is silently ignored for {label} "
                            f"(did you mean `{prefix}{near}`?).", f"`{prefix}{near}`", label))


def _distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _ingress_class(obj: YNode) -> str | None:
    spec_class = obj.get("spec", "ingressClassName")
    if spec_class is not None and spec_class.value:
        return str(spec_class.value)
    annotation = obj.get("metadata", "annotations", "kubernetes.io/ingress.class")
    return str(annotation.value) if annotation is not None and annotation.value else None


def _locations(obj: YNode, shown: str, config: ControllerConfig, hits: list[Hit]) -> list[Location]:
    name = _name(obj)
    annotations = dict(obj.get("metadata", "annotations").items()) if obj.get("metadata", "annotations") else {}
    out = []
    paths: list[tuple[str, str, Where]] = []
    for rule in obj.get("spec", "rules").elements() if obj.get("spec", "rules") else []:
        host = str(rule.get("host").value) if rule.get("host") else ""
        for path in rule.get("http", "paths").elements() if rule.get("http", "paths") else []:
            value = path.get("path")
            paths.append((host, str(value.value) if value else "/", Where(shown, path.line)))
    if not paths and obj.get("spec", "defaultBackend") is not None:
        paths.append(("", "/", Where(shown, obj.get("spec", "defaultBackend").at)))
    prefix = knowledge()["prefix"]
    for host, path, where in paths:
        location = Location(name, host, path, where)
        for annotation in knowledge()["annotations"]:
            location.values[annotation] = _effective(annotation, annotations, config, shown, hits, location.label())
        snippet = annotations.get(f"{prefix}/configuration-snippet")
        if snippet is not None and isinstance(snippet.value, str):
            location.snippet = snippet
            location.snippet_where = Where(shown, snippet.at)
        out.append(location)
    _unknown_annotations(annotations, shown, f"Ingress {name}", hits)
    return out


# ----------------------------------------------------------------------------- rules on the rendered locations


def _said(value: Value, directive: str) -> str:
    if value.origin == "annotation":
        return f"`{value.key}: \"{value.text}\"` ({value.where}) renders `{directive}`"
    if value.origin == "ConfigMap":
        return f"the ConfigMap's `{value.key}: \"{value.text}\"` ({value.where}) renders `{directive}`"
    return f"the controller's default renders `{directive}`"


def k8s001(location: Location, options: Options) -> list[Hit]:
    buffering = location.values["proxy-buffering"]
    if buffering.text != "on":
        return []
    version = location.values["proxy-http-version"]
    prefix = knowledge()["prefix"]
    where = buffering.where or location.where
    said = _said(buffering, "proxy_buffering on;")
    if version.text == "1.0":
        return [Hit("ING001", "error", where,
                    f"{said} for {location.label()}, and {_said(version, 'proxy_http_version 1.0;')}: nginx then "
                    "holds the headers and the whole stream until the upstream closes (measured on nginx 1.22 with "
                    "the rendered directives: one read at the end, headers held; longer streams come in 4 KB "
                    "bursts).",
                    f'`{prefix}/proxy-buffering: "off"` on this Ingress (the controller default), or send '
                    "`X-Accel-Buffering: no` from the app", location.label())]
    return [Hit("ING001", "warning", where,
                f"{said} for {location.label()}, with HTTP/1.1 to the upstream: a chunked stream passes chunk by "
                "chunk, but a close-delimited or Content-Length framed one is held to the end (measured on nginx "
                "1.22 with the rendered directives).",
                f'`{prefix}/proxy-buffering: "off"` on this Ingress (the controller default)', location.label())]


def k8s002(location: Location, options: Options) -> list[Hit]:
    read = location.values["proxy-read-timeout"]
    seconds = float(read.text)
    if seconds > options.short_idle:
        return []
    send = location.values["proxy-send-timeout"]
    prefix = knowledge()["prefix"]
    send_note = ""
    if send.origin != "default" and float(send.text) > seconds:
        send_note = (f" `{send.key}` ({send.where}) does not help: proxy_send_timeout bounds the writes of the "
                     "request to the upstream, not the wait for the response.")
    return [Hit("ING002", "warning", read.where or location.where,
                f"{_said(read, f'proxy_read_timeout {read.text}s;')} for {location.label()}: nginx closes the "
                f"stream when the upstream stays silent longer than {seconds:g} s, so a slow first token or a pause "
                "cuts it (status 200, truncated body; measured on nginx 1.22 with the rendered directives)."
                + send_note,
                f'`{prefix}/proxy-read-timeout: "300"` (seconds, a plain number) on this Ingress, or '
                '`proxy-read-timeout: "300"` in the controller ConfigMap', location.label())]


def k8s004(location: Location, config: ControllerConfig) -> list[Hit]:
    if location.snippet is None:
        return []
    prefix = knowledge()["prefix"]
    allowed, allowed_where = config.flag("allow-snippet-annotations")
    risk = config.get("annotations-risk-level")
    risk_ok = risk is not None and risk[0].strip().lower() == "critical"
    if config.given and allowed and risk_ok:
        return []
    if config.given:
        reasons = []
        if not allowed:
            reasons.append("`allow-snippet-annotations` is " + (f"false ({allowed_where})" if allowed_where
                                                                 else "false by default since controller v1.9.0"))
        if not risk_ok:
            reasons.append("`annotations-risk-level` is " + (f"{risk[0]!r} ({risk[1]})" if risk
                                                             else "High by default since v1.12.0")
                           + " and configuration-snippet is a Critical-risk annotation")
        return [Hit("ING004", "warning", location.snippet_where or location.where,
                    f"`{prefix}/configuration-snippet` on {location.label()} is not applied: in ConfigMap "
                    f"{config.name}, {'; '.join(reasons)}. The controller drops snippet directives (or its "
                    "admission webhook rejects the Ingress), so none of these lines take effect "
                    "(internal/ingress/controller/controller.go: dropSnippetDirectives).",
                    "use the dedicated annotations instead (proxy-buffering, proxy-read-timeout, ...), or allow "
                    "snippets in the ConfigMap (allow-snippet-annotations: \"true\", annotations-risk-level: "
                    "Critical) knowing they allow arbitrary nginx configuration", location.label())]
    return [Hit("ING004", "info", location.snippet_where or location.where,
                f"`{prefix}/configuration-snippet` on {location.label()} applies only if the controller's ConfigMap "
                "sets `allow-snippet-annotations: \"true\"` (false by default since v1.9.0) and "
                "`annotations-risk-level: Critical` (High by default since v1.12.0); otherwise it is dropped. Give "
                "the ConfigMap too (`kubectl get cm -n ingress-nginx ingress-nginx-controller -o yaml`) to know.",
                "prefer the dedicated annotations; or pass the ConfigMap to check", location.label())]


def _snippet_statements(location: Location, shown: str) -> tuple[list, list[Hit], list[InputProblem]]:
    """The snippet as nginx statements at their YAML lines (and the syntax problems, at their YAML line)."""
    from llmdoctor.nginx.config import load_dump

    node = location.snippet
    assert node is not None
    fake = os.path.join(os.getcwd(), f"<{shown}:{node.line} configuration-snippet>")
    config = load_dump({fake: node.value})
    problems = [InputProblem(shown, f"configuration-snippet: {e.reason}", node.text_line((e.line or 1) - 1))
                for e in config.errors]
    stmts = config.roots[0][1] if config.roots else []

    def remap(items):
        for stmt in items:
            stmt.path = shown
            stmt.line = node.text_line(stmt.line - 1)
            if stmt.block:
                remap(stmt.block)
    remap(stmts)
    return stmts, [], problems


def k8s005(location: Location, stmts: list) -> list[Hit]:
    written = set(knowledge()["template_location_directives"])
    hits = []
    for stmt in stmts:
        if stmt.directive in written:
            hits.append(Hit("ING005", "error", Where(stmt.path, stmt.line),
                            f"`{stmt.text()}` in the configuration-snippet of {location.label()} repeats a directive "
                            "the controller already writes in every location (nginx.tmpl lines 1333-1358): nginx "
                            f"rejects the whole configuration (`\"{stmt.directive}\" directive is duplicate`, "
                            "measured with nginx -t), so the controller keeps the old one.",
                            "set it with its annotation instead (e.g. "
                            f"`{knowledge()['prefix']}/{stmt.directive.replace('_', '-')}`)", location.label()))
    return hits


def nginx_checks(location: Location, stmts: list, config_stmts: list, options: Options) -> list[Hit]:
    """NGX001-NGX007 on the rendered location, keeping the findings that sit on snippet lines."""
    from llmdoctor.nginx.config import Stmt
    from llmdoctor.nginx.effective import build_levels, proxied_units
    from llmdoctor.nginx.rules import CHECKS
    from llmdoctor.nginx.rules import Options as NginxOptions

    rendered = []
    for name, info in knowledge()["annotations"].items():
        value = location.values[name]
        where = value.where or location.where
        rendered.append(Stmt(info["directive"], [f"{value.text}{info.get('suffix', '')}"], where.path, where.line))
    duplicated = {s.directive for s in stmts} & set(knowledge()["template_location_directives"])
    rendered = [s for s in rendered if s.directive not in duplicated]
    body = [*rendered, Stmt("proxy_pass", ["http://upstream_balancer"], location.where.path, location.where.line),
            *stmts]
    loc = Stmt("location", [location.path], location.where.path, location.where.line, body)
    server = Stmt("server", [], location.where.path, location.where.line, [loc])
    http = Stmt("http", [], location.where.path, location.where.line, [*config_stmts, server])
    snippet_lines = {(s.path, s.line) for s in _walk(stmts)}
    hits = []
    for unit in proxied_units(build_levels([[http]])):
        for rule_id, rule in CHECKS.items():
            for hit in rule(unit, NginxOptions(options.nginx_version)):
                if (hit.stmt.path, hit.stmt.line) in snippet_lines:
                    hits.append(Hit(rule_id, hit.severity, Where(hit.stmt.path, hit.stmt.line),
                                    hit.message.replace(unit.label(), location.label()), hit.fix, location.label()))
    return hits


def _walk(stmts):
    for s in stmts:
        yield s
        if s.block:
            yield from _walk(s.block)


def compression_stmts(config: ControllerConfig, shown: str) -> tuple[list, list[Hit]]:
    """http-level gzip lines the template writes from the ConfigMap, and ING006 for event streams."""
    from llmdoctor.nginx.config import Stmt

    stmts, hits = [], []
    cm = knowledge()["configmap"]
    for flag, types_key, directive, lines in (("use-gzip", "gzip-types", "gzip", cm["use-gzip"]["lines"]),
                                              ("enable-brotli", "brotli-types", "brotli",
                                               cm["enable-brotli"]["lines"])):
        enabled, where = config.flag(flag)
        if not enabled:
            continue
        found = config.get(types_key)
        types = (found[0] if found else cm[types_key]["default"]).split()
        types_where = found[1] if found else where
        if directive == "gzip":
            stmts += [Stmt("gzip", ["on"], where.path, where.line),
                      Stmt("gzip_types", types, types_where.path, types_where.line)]
        matched = [t for t in types if t in ("text/event-stream", "*")]
        if matched:
            hits.append(Hit("ING006", "warning", types_where,
                            f"ConfigMap {config.name} turns on {directive} (`{flag}`, {where}) for `{matched[0]}` "
                            f"(`{types_key}`): every Ingress's text/event-stream responses are "
                            f"{'gzip' if directive == 'gzip' else 'brotli'}-compressed (nginx.tmpl lines {lines}). "
                            + ("Measured on nginx 1.22 with buffering off: each event is still flushed, but the "
                               "stream is gzip-encoded, which breaks clients and proxies that read it line by line."
                               if directive == "gzip" else
                               "Not measured (Debian's nginx has no brotli module): from the template only."),
                            f"remove {matched[0]} from `{types_key}` (its default does not list it)"))
    return stmts, hits


def gateway_routes(obj: YNode, shown: str, options: Options) -> tuple[list[Route], list[Hit]]:
    name = _name(obj)
    routes, hits = [], []
    hostnames = [str(h.value) for h in obj.get("spec", "hostnames").elements()] if obj.get("spec", "hostnames") else []
    for index, rule in enumerate(obj.get("spec", "rules").elements() if obj.get("spec", "rules") else []):
        paths = []
        for match in rule.get("matches").elements() if rule.get("matches") else []:
            value = match.get("path", "value")
            if value is not None:
                paths.append(str(value.value))
        label = f"HTTPRoute {name} rule {index + 1} ({' '.join(hostnames) or '*'}{' ' + ' '.join(paths) if paths else ''})"
        limits = []
        for key in ("request", "backendRequest"):
            node = rule.get("timeouts", key)
            if node is None:
                continue
            seconds = durations.gateway(node.value)
            where = Where(shown, node.at)
            if seconds is None:
                hits.append(Hit("GWA001", "warning", where,
                                f"`timeouts.{key}: {node.value!r}` on {label} is not a Gateway API duration "
                                "(GEP-2257: e.g. 10s, 1h, 500ms; at most 5 digits per unit): the API server rejects "
                                "the HTTPRoute.", f"`timeouts.{key}: 1h`", label))
                continue
            limits.append(Limit(TOTAL, f"timeouts.{key}", seconds if seconds > 0 else None, where))
            if 0 < seconds < options.client_timeout:
                hits.append(Hit("GWA001", "warning", where,
                                f"`timeouts.{key}: {node.value}` on {label}: the Gateway API defines it as covering "
                                "the whole request-response transaction (apis/v1/httproute_types.go: "
                                "HTTPRouteTimeouts), so every generation that streams longer than "
                                f"{durations.shown(seconds)} is cut, however steadily tokens arrive (the client "
                                f"waits {options.client_timeout:g} s).",
                                f'`timeouts.{key}: "0s"` (disables it) or a value above the longest generation',
                                label))
        if not limits:
            limits.append(Limit(TOTAL, "timeouts.request", None, None,
                                "unset: implementation-specific (GEP-1742); Envoy-based gateways apply Envoy's 15 s "
                                "route timeout unless told otherwise"))
        where = Where(shown, rule.line)
        routes.append(Route("gateway-api", label, where, limits, match=" ".join(hostnames + paths)))
    return routes, hits


# ----------------------------------------------------------------------------- entry point


def configmaps_in(text: str, shown: str) -> list[tuple[str, YNode]]:
    """The ingress-nginx ConfigMaps of one input, for the other inputs given with it."""
    return [(shown, o) for o in _objects(load_yaml_documents(text, shown))
            if _kind(o) == "ConfigMap" and _is_ingress_nginx_configmap(o)]


def check(text: str, shown: str, options: Options,
          configmaps: list[tuple[str, YNode]] | None = None) -> tuple[Layer, list[InputProblem]]:
    layer = Layer("kubernetes", shown, files={shown})
    problems: list[InputProblem] = []
    objects = _objects(load_yaml_documents(text, shown))
    own = [(shown, o) for o in objects]
    config = _controller_config(own + [(f, o) for f, o in configmaps or [] if f != shown], layer)
    if config.given:
        _configmap_problems(config, layer.hits)
    http_stmts, compression_hits = compression_stmts(config, shown) if config.given else ([], [])
    layer.hits.extend(compression_hits)
    others = set(knowledge()["other_ingress_classes"])
    ingresses = [o for o in objects if _kind(o) == "Ingress"]
    for obj in ingresses:
        klass = _ingress_class(obj)
        if klass is not None and klass in others:
            layer.notices.append(f"{shown}: Ingress {_name(obj)} has class {klass!r}: not ingress-nginx, skipped")
            continue
        for location in _locations(obj, shown, config, layer.hits):
            read = float(location.values["proxy-read-timeout"].text)
            read_value = location.values["proxy-read-timeout"]
            layer.routes.append(Route("ingress-nginx", location.label(), location.where,
                                      [Limit(IDLE, "proxy-read-timeout", read, read_value.where,
                                             "ingress-nginx: 60 (config.go)" if read_value.where is None else "")],
                                      match=f"{location.host}{location.path}"))
            layer.hits.extend(k8s001(location, options))
            layer.hits.extend(k8s002(location, options))
            layer.hits.extend(k8s004(location, config))
            if location.snippet is not None:
                stmts, _, snippet_problems = _snippet_statements(location, shown)
                problems.extend(snippet_problems)
                layer.hits.extend(k8s005(location, stmts))
                layer.hits.extend(nginx_checks(location, stmts, http_stmts, options))
    for obj in (o for o in objects if _kind(o) == "HTTPRoute"):
        routes, hits = gateway_routes(obj, shown, options)
        layer.routes.extend(routes)
        layer.hits.extend(hits)
    if not layer.routes and not layer.hits:
        layer.notices.append(f"{shown}: no Ingress or HTTPRoute: nothing to check")
    return layer, problems


@dataclass
class Rendered:
    """What the controller writes for one Ingress path: the location's directives and the http-level ones."""

    label: str
    location_lines: list[str]
    http_lines: list[str]
    snippet_lines: list[str]


def render(text: str, shown: str = "<manifests>") -> list[Rendered]:
    """The nginx directives ingress-nginx renders for every Ingress path in `text` (rules/proxy/ingress-nginx.yaml
    cites the template lines); configuration-snippet lines are appended as the template does (line 1365)."""
    layer = Layer("kubernetes", shown)
    objects = _objects(load_yaml_documents(text, shown))
    config = _controller_config([(shown, o) for o in objects], layer)
    http_stmts, _ = compression_stmts(config, shown) if config.given else ([], [])
    http_lines = [s.text() for s in http_stmts]
    out = []
    for obj in (o for o in objects if _kind(o) == "Ingress"):
        for location in _locations(obj, shown, config, []):
            snippet = [line for line in (location.snippet.value.splitlines() if location.snippet else []) if line.strip()]
            out.append(Rendered(location.label(), location.directive_lines(), http_lines, snippet))
    return out
