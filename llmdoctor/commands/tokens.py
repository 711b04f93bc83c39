"""`llmdoctor tokens` command: options and rendering only; the work lives in llmdoctor/tokens/."""

from __future__ import annotations

import sys

import typer

from llmdoctor.errors import UserError

FORMATS = ("text", "json")
MODES = ("auto", "text", "request")


def tokens(
    paths: list[str] | None = typer.Argument(
        None, metavar="PATHS...", help="Files, directories (walked like scan) or - for stdin."
    ),
    encoding: str | None = typer.Option(
        None, "--encoding", help="tiktoken encoding: o200k_base (default), cl100k_base, o200k_harmony..."
    ),
    model: str | None = typer.Option(
        None, "--model", help="Model name: picks the encoding (tiktoken's map) and the context window."
    ),
    encoding_file: str | None = typer.Option(
        None, "--encoding-file", help="A local .tiktoken file (sha256-checked when it is a published one)."
    ),
    context: int | None = typer.Option(
        None, "--context", help="Context window in tokens (default: the model's known window, if any)."
    ),
    reserve: float = typer.Option(
        0.15, "--reserve", help="Fraction of the context kept for the answer (or a request's max_tokens)."
    ),
    glob: str | None = typer.Option(
        None, "--glob", help="Pick files in directories by relative path, e.g. 'prompts/**/*.txt'."
    ),
    mode: str = typer.Option(
        "auto", "--as", help="auto: .json files with \"messages\" are chat requests; text; request."
    ),
    threads: int = typer.Option(0, "--threads", help="Encoder threads (default: CPUs, at most 8)."),
    fmt: str = typer.Option("text", "--format", help="text or json."),
) -> None:
    """Count tokens exactly (tiktoken, offline) and check them against a context budget.

    Exit 0: everything fits (or no budget); 1: something is over budget; 2: an input could not be counted.
    """
    from llmdoctor.tokens.count import Options, count_tokens, default_threads
    from llmdoctor.tokens.render import render_text, to_json

    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if mode not in MODES:
        raise UserError(f"--as must be one of {', '.join(MODES)}, got {mode!r}")
    if not paths:
        if glob is None:
            raise UserError("give files, directories or - (stdin) to count, e.g. llmdoctor tokens prompts/")
        paths = ["."]
    if threads < 0:
        raise UserError(f"--threads must be 0 (automatic) or more, got {threads}")
    options = Options(encoding=encoding, model=model, encoding_file=encoding_file, context=context,
                      reserve=reserve, glob=glob, mode=mode,  # type: ignore[arg-type]
                      threads=threads or default_threads())
    report = count_tokens(list(paths), options)
    if fmt == "json":
        sys.stdout.write(to_json(report) + "\n")
    else:
        render_text(report, sys.stdout)
    raise typer.Exit(report.exit_code())


def register(app: typer.Typer) -> None:
    app.command("tokens")(tokens)
