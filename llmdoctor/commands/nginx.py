"""`llmdoctor nginx` command: options and rendering only; the work lives in llmdoctor/nginx/."""

from __future__ import annotations

import re
import sys

import typer

from llmdoctor.errors import UserError

FORMATS = ("text", "json", "sarif", "github")


def _version(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d+(\.\d+){0,2}", value.strip()):
        raise UserError(f"--nginx-version {value!r} is not a version like 1.22.1 (see `nginx -v`)")
    return tuple(int(p) for p in value.strip().split("."))


def nginx_command(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH...",
        help="nginx.conf (includes followed), a directory of configs, or an `nginx -T` dump; `-` reads stdin.",
    ),
    location: str | None = typer.Option(
        None, "--location", metavar="REGEX",
        help="Only treat proxied locations whose argument matches REGEX (e.g. '^/v1/') as streaming. "
             "Default: every location that proxies.",
    ),
    nginx_version: str | None = typer.Option(
        None, "--nginx-version", metavar="X.Y.Z",
        help="The nginx version that runs this config (sets the default proxy_http_version: 1.0 before "
             "1.29.7, 1.1 from 1.29.7). Default: assume before 1.29.7.",
    ),
    fmt: str = typer.Option("text", "--format", help="Output: text, json, sarif or github."),
) -> None:
    """Check nginx configs for what breaks streamed LLM responses (buffering, timeouts, gzip, cache)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    from llmdoctor.nginx.check import STDIN, check, exit_code
    from llmdoctor.nginx.rules import Options
    from llmdoctor.report.render import render

    stdin_text = sys.stdin.read() if STDIN in paths else None
    report = check(paths, location=location, options=Options(_version(nginx_version)), stdin_text=stdin_text)
    render(report, fmt)
    raise typer.Exit(exit_code(report))


def register(app: typer.Typer) -> None:
    app.command("nginx")(nginx_command)
