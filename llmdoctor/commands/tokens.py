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
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="An open model's tokenizer: org/name from the local Hugging Face cache, a "
        "folder or a tokenizer.json; chat requests are rendered with its chat template."
    ),
    revision: str | None = typer.Option(None, "--revision", help="With --tokenizer org/name: the cached revision."),
    url: str | None = typer.Option(
        None, "--url", help="A running vLLM/SGLang/TGI server: its max_model_len is the budget, and its model "
        "the tokenizer when --tokenizer is not given."
    ),
    api_key: str | None = typer.Option(None, "--api-key", envvar=["LLMDOCTOR_API_KEY", "VLLM_API_KEY",
                                       "OPENAI_API_KEY"], show_envvar=False, help="Bearer key for --url."),
    timeout: float = typer.Option(2.0, "--timeout", help="Seconds to wait for the server (--url)."),
    fmt: str = opt.format_option(*opt.PLAIN_FORMATS),
) -> None:
    """Count tokens exactly (tiktoken, or an open model's own tokenizer; offline) and check them against a budget.

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
    context_source = "--context"
    if url:
        served, length = _served(url, api_key, timeout)
        tokenizer = tokenizer or served
        if context is None and length:
            context, context_source = length, f"max_model_len of {served} at {url}"
    options = Options(encoding=encoding, model=model, encoding_file=encoding_file, context=context,
                      reserve=reserve, glob=glob, mode=mode,  # type: ignore[arg-type]
                      threads=jobs or default_threads(), tokenizer=tokenizer, revision=revision,
                      context_source=context_source)
    from llmdoctor.report.progress import Progress

    with Progress.for_report("counting", fmt) as progress:
        report = count_tokens(list(paths), options, stdin=_stdin_reader(implicit=implicit_stdin),
                              progress=progress.update)
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


def _served(url: str, api_key: str | None, timeout: float) -> tuple[str, int | None]:
    """(model id, max_model_len) the server at `url` lists in /v1/models."""
    from llmdoctor.kv import live
    from llmdoctor.limits import check_seconds

    check_seconds(timeout)  # inf or 1e400 would never time out against a silent server
    client = live.Client(url, api_key, timeout)
    notes: list[str] = []
    try:
        model, length, _, status = live.models(client, notes)
    except live.Unreachable as err:
        raise UserError(f"--url: nothing answers at {err}") from None
    if model is None:
        hint = ": it needs an API key (--api-key)" if status == 401 else ""
        raise UserError(f"--url {url}: /v1/models answered {status} without a model{hint}")
    return model, length


def register(app: typer.Typer) -> None:
    app.command("tokens")(tokens)
