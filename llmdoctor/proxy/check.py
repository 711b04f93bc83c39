"""`llmdoctor proxy PATH...`: recognise each input, check it with its kind's rules, build one Report + a chain.

An input is a file, a folder, or `-` (stdin, e.g. `helm template ... | llmdoctor proxy -`). Its kind comes
from `--kind`, else its name (haproxy*.cfg, Caddyfile, *.caddyfile, httpd.conf, apache2.conf, nginx.conf,
*.toml), else its content (docs/proxies.md, "Recognising the input"). Inputs are given client-side first;
that order is the order of the timeout chain.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.errors import UserError
from llmdoctor.proxy import apache, caddy, envoy, haproxy, kubernetes, traefik
from llmdoctor.proxy.chain import Chain, build, edge_layer, edges
from llmdoctor.proxy.inputs import InputProblem, read_text
from llmdoctor.proxy.model import IDLE, Hit, Layer, Limit, Options, Route, Where
from llmdoctor.report.model import Finding, InputError, Report, RuleInfo, display_path

STDIN = "-"
KINDS = ("nginx", "haproxy", "caddy", "caddy-json", "apache", "kubernetes", "envoy", "traefik")


@dataclass
class Result:
    report: Report
    chain: Chain
    layers: list[Layer] = field(default_factory=list)


def detect(name: str, text: str) -> str | None:
    """The kind of a config from its file name, else its content; None when it is none of them."""
    base = os.path.basename(name).lower()
    if base.startswith("haproxy") and base.endswith(".cfg"):
        return "haproxy"
    if base.startswith("caddyfile") or base.endswith((".caddyfile", ".caddy")):
        return "caddy"
    if base in ("httpd.conf", "apache2.conf"):
        return "apache"
    if base == "nginx.conf":
        return "nginx"
    stripped = text.lstrip()
    if re.search(r"^# configuration file .+:\s*$", text, re.MULTILINE):
        return "nginx"  # an `nginx -T` dump
    if base.endswith(".toml"):
        return "traefik"
    if stripped.startswith("{") and '"apps"' in text:
        return "caddy-json"
    if kubernetes.looks_like(text):
        return "kubernetes"
    if base.endswith((".yaml", ".yml", ".json")) or stripped.startswith(("{", "---")) or \
            re.match(r"[A-Za-z_]+:\s*(#.*)?$", stripped.split("\n", 1)[0]):
        if envoy.looks_like(text):
            return "envoy"
        if traefik.looks_like(text):
            return "traefik"
        if base.endswith((".yaml", ".yml")) and re.search(r"^kind:", text, re.MULTILINE):
            return "kubernetes"
    if haproxy.looks_like(text) or base.endswith(".cfg"):
        return "haproxy"
    if apache.looks_like(text):
        return "apache"
    if re.search(r"\b(location|server|http|upstream)\b[^;{]*\{", text) or re.search(r";\s*(#.*)?$", text, re.MULTILINE):
        return "nginx"
    if caddy.looks_like(text):
        return "caddy"
    return None


def _folder_kind(path: str) -> str | None:
    names = set(os.listdir(path))
    for candidate, kind in (("nginx.conf", "nginx"), ("apache2.conf", "apache"), ("httpd.conf", "apache"),
                            ("haproxy.cfg", "haproxy"), ("Caddyfile", "caddy")):
        if candidate in names:
            return kind
    if any(n.endswith(".cfg") for n in names):
        return "haproxy"
    return None


def _manifest_files(path: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith((".yaml", ".yml", ".json", ".toml")))
    return out


def _nginx_layer(path: str, shown: str, options: Options, stdin_text: str | None, report: Report,
                 enabled: Callable[[str], bool]) -> Layer:
    """An nginx input: the findings of `llmdoctor nginx` itself, and each proxied location's read timeout."""
    from llmdoctor.nginx.check import check as nginx_check
    from llmdoctor.nginx.check import read_input
    from llmdoctor.nginx.effective import build_levels, parse_time, proxied_units
    from llmdoctor.nginx.rules import Options as NginxOptions

    found = nginx_check([path], options=NginxOptions(options.nginx_version), stdin_text=stdin_text,
                        enabled=enabled)
    report.errors.extend(found.errors)
    layer = Layer("nginx", shown, notices=list(found.notices))
    layer.hits = [Hit(f.rule, f.severity, Where(f.path, f.line, f.column), f.message, f.fix or "",
                      f.extra.get("location", "")) for f in found.findings]
    config = read_input(path, stdin_text)
    layer.files = {display_path(f) for f in config.files}
    for unit in proxied_units(build_levels([stmts for _, stmts in config.roots])):
        name = unit.directive("read_timeout")
        stmt = unit.level.single(name)
        seconds = parse_time(stmt.args[0]) if stmt and stmt.args else 60.0
        where = Where(display_path(stmt.path), stmt.line) if stmt else None
        anchor = unit.anchor
        layer.routes.append(Route("nginx", unit.label(), Where(display_path(anchor.path), anchor.line),
                                  [Limit(IDLE, name, seconds, where, "nginx: 60 s" if stmt is None else "")],
                                  match=unit.label()))
    return layer


def _read(path: str, shown: str, stdin_text: str | None) -> str:
    if path == STDIN:
        text = stdin_text or ""
        if not text.strip():
            raise InputProblem("<stdin>", "nothing on stdin: pipe a config or manifests, e.g. `helm template ... | "
                                          "llmdoctor proxy -`")
        return text
    return read_text(path, shown=shown, named=True)


def _inputs(paths: list[str], kind: str | None, stdin_text: str | None,
            errors: list[InputError]) -> list[tuple[str, str, str, str | None]]:
    """(path, shown, kind, text) for every input; folders of manifests expand to their files."""
    out = []
    for path in paths:
        shown = "<stdin>" if path == STDIN else display_path(path)
        try:
            if path != STDIN and os.path.isdir(path):
                folder = kind or _folder_kind(path)
                if folder is not None:
                    out.append((path, shown, folder, None))
                    continue
                files = _manifest_files(path)
                if not files:
                    raise InputProblem(shown, "no nginx.conf, apache2.conf, httpd.conf, haproxy.cfg, Caddyfile or "
                                              "*.yaml/*.json/*.toml in this folder: say --kind")
                for name in files:
                    text = read_text(name, shown=display_path(name))
                    found = detect(name, text)
                    if found is not None:
                        out.append((name, display_path(name), found, text))
                continue
            if path != STDIN and not os.path.exists(path):
                raise InputProblem(shown, "no such file or directory")
            text = _read(path, shown, stdin_text)
            if not text.strip():
                raise InputProblem(shown, "the file is empty: nothing to check")
            found = kind or detect(path, text)
            if found is None:
                raise InputProblem(shown, "not recognised as nginx, HAProxy, Caddy, Apache, Kubernetes, Envoy or "
                                          "Traefik configuration: say which with --kind")
            out.append((path, shown, found, text))
        except InputProblem as problem:
            errors.append(InputError(problem.path, problem.reason, problem.line))
    return out


def check(paths: list[str], *, options: Options | None = None, kind: str | None = None,
          stdin_text: str | None = None, route: str | None = None, edge_names: tuple[str, ...] = (),
          enabled: Callable[[str], bool] = lambda rule_id: True) -> Result:
    """Check every input; `enabled` filters the checks (--select/--ignore)."""
    options = options or Options()
    if kind is not None and kind not in KINDS:
        raise UserError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    for name in edge_names:
        if name not in edges():
            raise UserError(f"--edge {name!r}: choose one of {', '.join(edges())}")
    try:
        route_re = re.compile(route) if route is not None else None
    except re.error as err:
        raise UserError(f"--route {route!r} is not a valid regular expression: {err}") from None
    report = Report(command="proxy")
    inputs = _inputs(paths, kind, stdin_text, report.errors)
    configmaps = []
    for path, shown, found, text in inputs:
        if found == "kubernetes" and text is not None:
            try:
                configmaps.extend(kubernetes.configmaps_in(text, shown))
            except InputProblem:
                pass  # reported when the file itself is checked
    static_write = (None, None)
    for path, shown, found, text in inputs:
        if found == "traefik" and text is not None:
            try:
                seconds, where = traefik.write_timeout(traefik.documents(text, shown, toml=path.endswith(".toml")),
                                                       shown)
            except InputProblem:
                continue  # reported when the file itself is checked
            if seconds is not None and (static_write[0] is None or seconds < static_write[0]):
                static_write = (seconds, where)
    layers: list[Layer] = []
    for path, shown, found, text in inputs:
        try:
            layer = _check_one(path, shown, found, text, options, stdin_text, report, (configmaps, static_write),
                               enabled)
        except InputProblem as problem:
            report.errors.append(InputError(problem.path, problem.reason, problem.line))
            continue
        layers.append(layer)
    notes: list[str] = []
    edge_layers = []
    for name in edge_names:
        layer, edge_notes = edge_layer(name)
        edge_layers.append(layer)
        notes.extend(f"{layer.name}: {n}" for n in edge_notes)
    kinds = {layer.kind for layer in layers}
    report.rules.extend(i for i in _rule_infos(kinds) if enabled(i.id))
    for layer in layers:
        if route_re is not None:
            layer.routes = [r for r in layer.routes if route_re.search(r.label) or route_re.search(r.match)]
        kept = {r.label for r in layer.routes}
        for hit in layer.hits:
            if route_re is not None and hit.route and hit.route not in kept:
                continue
            if not enabled(hit.rule):
                continue
            report.findings.append(Finding(hit.rule, hit.severity, hit.where.path, hit.where.line,
                                           hit.where.column, hit.message, fix=hit.fix,
                                           extra={"kind": layer.kind, **({"route": hit.route} if hit.route else {})}))
        report.files_checked += len(layer.files) or 1
        report.notices.extend(layer.notices)
    if route_re is not None and not any(layer.routes for layer in layers) and layers:
        raise UserError(f"--route {route!r} matches no streamed route in the inputs")
    _dedupe(report)
    chain = build(edge_layers + layers, options.client_timeout, notes)
    report.summary_extra["routes"] = sum(len(layer.routes) for layer in layers)
    return Result(report.sorted(), chain, layers)


def _check_one(path: str, shown: str, found: str, text: str | None, options: Options, stdin_text: str | None,
               report: Report, shared: tuple, enabled: Callable[[str], bool]) -> Layer:
    """One input of a known kind; `shared`: what other inputs contribute (ConfigMaps, Traefik's static
    writeTimeout)."""
    configmaps, static_write = shared
    if found == "nginx":
        return _nginx_layer(path, shown, options, stdin_text, report, enabled)
    if found == "haproxy":
        return haproxy.check(path, shown, options, text=text if path == STDIN else None)
    if found in ("caddy", "caddy-json"):
        return caddy.check(path, shown, options, json_config=True if found == "caddy-json" else None, text=text)
    if found == "apache":
        return apache.check(path, shown, options, text=text if path == STDIN else None)
    if found == "kubernetes":
        assert text is not None
        layer, problems = kubernetes.check(text, shown, options, configmaps)
        for problem in problems:
            report.errors.append(InputError(problem.path, problem.reason, problem.line))
        return layer
    if found == "envoy":
        return envoy.check(text or "", shown, options)
    if found == "traefik":
        return traefik.check(text or "", shown, options, toml=path.endswith(".toml"), static_write=static_write)
    raise InputProblem(shown, f"unknown kind {found}")


def _rule_infos(kinds: set[str]) -> list[RuleInfo]:
    from llmdoctor.catalog import load_checks
    from llmdoctor.proxy import catalog

    wanted = {"caddy" if k == "caddy-json" else k for k in kinds}
    infos = catalog.infos(wanted)
    if wanted & {"nginx", "kubernetes"}:  # configuration-snippet lines go through the nginx checks too
        infos.extend(c.info() for c in load_checks().for_command("nginx"))
    return infos


def _dedupe(report: Report) -> None:
    seen: set[tuple[str, str, int]] = set()
    kept = []
    for finding in report.findings:
        key = (finding.rule, finding.path, finding.line)
        if key in seen:
            continue
        seen.add(key)
        kept.append(finding)
    report.findings = kept
    report.errors = sorted(set(report.errors), key=InputError.sort_key)


def exit_code(report: Report) -> int:
    """1 when a problem is found; 2 when an input could not be checked (even if others had findings)."""
    if report.errors:
        return 2
    return report.exit_code()


__all__ = ["KINDS", "Path", "Result", "check", "detect", "exit_code"]
