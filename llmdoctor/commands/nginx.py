"""`llmdoctor nginx` command: options and rendering only; the work lives in llmdoctor/nginx/."""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated

import typer

from llmdoctor.commands import options as opt
from llmdoctor.errors import UserError


def _version(value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d+(\.\d+){0,2}", value.strip()):
        raise UserError(f"--nginx-version {value!r} is not a version like 1.22.1 (see `nginx -v`)")
    return tuple(int(p) for p in value.strip().split("."))


def nginx_command(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH",
        help="nginx.conf (includes followed), a folder (each main config in it, as nginx reads it), or an `nginx -T` dump; `-` reads stdin.",
    )],
    location: Annotated[str | None, typer.Option(
        "--location", metavar="REGEX",
        help="Only treat proxied locations whose argument matches REGEX (e.g. '^/v1/') as streaming. "
             "Default: every location that proxies.",
    )] = None,
    nginx_version: Annotated[str | None, typer.Option(
        "--nginx-version", metavar="X.Y.Z",
        help="The nginx version that runs this config (sets the default proxy_http_version: 1.0 before "
             "1.29.7, 1.1 from 1.29.7). Default: assume before 1.29.7.",
    )] = None,
    conf_dir: Annotated[str | None, typer.Option(
        "--conf-dir", metavar="DIR",
        help="Resolve relative include paths against DIR, as nginx does against its conf prefix (e.g. "
             "/etc/nginx when checking a file from sites-enabled/). Default: the main config's folder.",
    )] = None,
    fmt: str = opt.format_option(*opt.REPORT_FORMATS),
    output: str | None = opt.OUTPUT,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    statistics: bool = opt.STATISTICS,
    exit_zero: bool = opt.EXIT_ZERO,
    quiet: bool = opt.QUIET,
) -> None:
    """Check nginx configs for what breaks streamed LLM responses (buffering, timeouts, gzip, cache).

    Exit 0 nothing found; 1 findings; 2 an input could not be read (the others are still checked).
    """
    from llmdoctor.catalog import load_checks
    from llmdoctor.nginx.check import STDIN, check, exit_code
    from llmdoctor.nginx.rules import Options

    report_options = opt.ReportOptions.from_cli(fmt, output, select, ignore, statistics, exit_zero, quiet=quiet)
    report_options.check_ids(load_checks().ids_for("nginx"), "nginx")

    if conf_dir is not None and not os.path.isdir(conf_dir):
        raise UserError(f"--conf-dir {conf_dir!r} is not a directory")
    # bytes, decoded as files are (nginx itself does not care about the encoding of comments or strings)
    stdin_text = sys.stdin.buffer.read().decode("utf-8", errors="replace") if STDIN in paths else None
    report = check(paths, location=location, options=Options(_version(nginx_version)), stdin_text=stdin_text,
                   conf_dir=os.path.abspath(conf_dir) if conf_dir else None, enabled=report_options.enabled)
    raise typer.Exit(report_options.emit(report, exit_code(report)))


def register(app: typer.Typer) -> None:
    app.command("nginx")(nginx_command)
