"""`llmdoctor proxy PATH...`: options and rendering only; the work lives in llmdoctor/proxy/."""

from __future__ import annotations

import re
import sys
from typing import Annotated

import typer

from llmdoctor.commands import options as opt
from llmdoctor.errors import UserError


def _version(value: str | None, option: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not re.fullmatch(r"v?\d+(\.\d+){0,2}", value.strip()):
        raise UserError(f"{option} {value!r} is not a version like 2.6.2")
    return tuple(int(p) for p in value.strip().lstrip("v").split("."))


def proxy_command(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH",
        help="Proxy configs, client side first: haproxy.cfg, a Caddyfile or Caddy JSON, httpd.conf / a vhost, "
             "nginx.conf, Kubernetes manifests (Ingress, ingress-nginx ConfigMap, HTTPRoute), Envoy or "
             "Traefik YAML; a folder; `-` reads stdin (helm template ... | llmdoctor proxy -).",
    )],
    kind: Annotated[str | None, typer.Option(
        "--kind", metavar="KIND",
        help="Read every input as KIND (nginx, haproxy, caddy, caddy-json, apache, kubernetes, envoy, "
             "traefik) instead of recognising it.",
    )] = None,
    route: Annotated[str | None, typer.Option(
        "--route", metavar="REGEX",
        help="Only the routes whose name or host/path matches REGEX are streamed (e.g. '/v1'). Default: all.",
    )] = None,
    client_timeout: Annotated[float | None, typer.Option(
        "--client-timeout", metavar="SECONDS",
        help="The client's read timeout, the end of the timeout chain (default 600: the openai and anthropic "
             "SDKs). Giving it prints the chain even for one input.",
    )] = None,
    edge: Annotated[list[str] | None, typer.Option(
        "--edge", metavar="NAME",
        help="A managed edge in front, with its documented limits: cloudflare, aws-apigw-rest, "
             "aws-apigw-rest-stream, aws-apigw-rest-stream-edge (repeatable).",
    )] = None,
    caddy_version: Annotated[str | None, typer.Option(
        "--caddy-version", metavar="X.Y.Z",
        help="The Caddy that runs the Caddyfile (`encode` holds event streams before 2.9.0). Default: unknown.",
    )] = None,
    nginx_version: Annotated[str | None, typer.Option(
        "--nginx-version", metavar="X.Y.Z",
        help="The nginx that runs nginx configs (default proxy_http_version: 1.0 before 1.29.7).",
    )] = None,
    fmt: str = opt.format_option(*opt.REPORT_FORMATS),
    output: str | None = opt.OUTPUT,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    statistics: bool = opt.STATISTICS,
    exit_zero: bool = opt.EXIT_ZERO,
    quiet: bool = opt.QUIET,
) -> None:
    """Check proxy configs for what holds or cuts a streamed LLM response, and the timeout chain across them.

    Exit 0 nothing found; 1 findings; 2 an input could not be checked (the others are still checked).
    """
    from llmdoctor.catalog import load_checks
    from llmdoctor.proxy.check import STDIN, check, exit_code
    from llmdoctor.proxy.model import Options

    report_options = opt.ReportOptions.from_cli(fmt, output, select, ignore, statistics, exit_zero, quiet=quiet)
    catalog = load_checks()
    report_options.check_ids(catalog.ids_for("proxy") | catalog.ids_for("nginx"), "proxy")
    if client_timeout is not None and not client_timeout > 0:
        raise UserError(f"--client-timeout must be more than 0 seconds (got {client_timeout:g})")
    options = Options(client_timeout=client_timeout or 600.0,
                      caddy_version=_version(caddy_version, "--caddy-version"),
                      nginx_version=_version(nginx_version, "--nginx-version"))
    stdin_text = sys.stdin.buffer.read().decode("utf-8", errors="replace") if STDIN in paths else None
    result = check(paths, options=options, kind=kind, stdin_text=stdin_text, route=route,
                   edge_names=tuple(edge or ()), enabled=report_options.enabled)
    show_chain = len(result.layers) > 1 or client_timeout is not None or bool(edge)
    raise typer.Exit(_emit(result, report_options, show_chain, exit_code(result.report)))


def _emit(result, report_options: opt.ReportOptions, show_chain: bool, code: int) -> int:
    """The shared report, plus the routes and the timeout chain (JSON: `routes`, `chain`; text: after it)."""
    import io
    import json

    from llmdoctor.report.render import render, to_json

    if report_options.fmt in ("sarif", "github", "gitlab"):
        return report_options.emit(result.report, code)
    if report_options.fmt == "json":
        data = json.loads(to_json(result.report))
        data["routes"] = [r.to_dict() | {"input": layer.name} for layer in result.layers for r in layer.routes]
        data["chain"] = result.chain.to_dict()
        text = json.dumps(data, indent=2) + "\n"
    else:
        buffer = io.StringIO()
        render(result.report, report_options.fmt, buffer, statistics=report_options.statistics,
               quiet=report_options.quiet)
        text = buffer.getvalue() + ("\n".join(result.chain.lines()) + "\n" if show_chain else "")
    if report_options.output:
        try:
            with open(report_options.output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as err:
            raise UserError(f"--output {report_options.output}: cannot write: {err.strerror or err}") from None
    else:
        sys.stdout.write(text)
    return 0 if report_options.exit_zero and code == 1 else code


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy_command)
