"""`llmdoctor tokens` command: options and rendering only; the work lives in llmdoctor/tokens/."""

from __future__ import annotations

import sys

import typer

from llmdoctor.commands import options as opt
from llmdoctor.errors import UserError


def _default_jobs() -> int:
    from llmdoctor.machine import available_cpus

    return min(8, available_cpus())


MODES = ("auto", "text", "request")


def tokens(
    paths: list[str] | None = typer.Argument(
        None, metavar="PATHS...", help="Files, directories (walked like scan) or - for stdin."
    ),
    encoding: str | None = typer.Option(
        None, "--encoding", help="tiktoken encoding: o200k_base (default), cl100k_base, o200k_harmony..."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Model name: picks the encoding (tiktoken's map) and the context window."
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
    jobs: int | None = opt.jobs_option("Encoder threads", "the available CPUs, at most 8", _default_jobs()),
    threads: int | None = typer.Option(None, "--threads", hidden=True),  # the old name of --jobs
    fmt: str = opt.format_option(*opt.PLAIN_FORMATS),
) -> None:
    """Count tokens exactly (tiktoken, offline) and check them against a context budget.

    Exit 0: everything fits (or no budget); 1: something is over budget; 2: an input could not be counted.
    """
    from llmdoctor.tokens.count import Options, count_tokens, default_threads
    from llmdoctor.tokens.render import render_text, to_json

    if mode not in MODES:
        raise UserError(f"--as must be one of {', '.join(MODES)}, got {mode!r}")
    implicit_stdin = False
    if not paths:
        if glob is not None:
            paths = ["."]
        elif not sys.stdin.isatty():  # `echo hi | llmdoctor tokens`: the pipe is the input
            paths, implicit_stdin = ["-"], True
        else:
            raise UserError("give files, directories or - (stdin) to count, e.g. llmdoctor tokens prompts/")
    if threads is not None:
        if jobs is not None:
            raise UserError("give --jobs once (--threads is its old name)")
        opt.note("--threads is now --jobs/-j; --threads still works")
        jobs = threads or None  # --threads 0 meant automatic
    opt.check_jobs(jobs)
    options = Options(encoding=encoding, model=model, encoding_file=encoding_file, context=context,
                      reserve=reserve, glob=glob, mode=mode,  # type: ignore[arg-type]
                      threads=jobs or default_threads())
    report = count_tokens(list(paths), options, stdin=_stdin_reader(implicit=implicit_stdin))
    if fmt == "json":
        sys.stdout.write(to_json(report) + "\n")
    else:
        render_text(report, sys.stdout)
    raise typer.Exit(report.exit_code())


def _stdin_reader(*, implicit: bool):
    def read() -> bytes:
        data = sys.stdin.buffer.read()
        if implicit and not data:
            raise UserError("nothing to count: no files given and nothing on stdin; give files, directories or "
                            "- (stdin), e.g. llmdoctor tokens prompts/")
        return data
    return read


def register(app: typer.Typer) -> None:
    app.command("tokens")(tokens)
