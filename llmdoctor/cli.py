"""The `llmdoctor` command line: a thin typer app.

Each command lives in `llmdoctor/commands/<name>.py` with a `register(app)` function. Command modules
import only typer at module level; libcst, httpx, tiktoken and pynvml are imported inside the command
bodies so that `llmdoctor --version` or `kv-budget` start fast (design.md §1).
"""

from __future__ import annotations

import sys

import typer

from llmdoctor import __version__
from llmdoctor.errors import UserError

app = typer.Typer(
    name="llmdoctor",
    help="Find the quiet mistakes that make LLM serving slow, expensive or OOM-killed.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"llmdoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Find the quiet mistakes that make LLM serving slow, expensive or OOM-killed."""


def _register_commands() -> None:
    from llmdoctor.commands import gpu, kv, nginx, probe, scan, tokens

    for module in (scan, nginx, probe, kv, gpu, tokens):
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code. Bad input (UserError) is one line on stderr and exit 2; with
    `--format json` also `{"error": "..."}` on stdout, so a JSON reader always gets JSON.

    Usage errors (unknown option, bad choice) are reported by typer itself with exit code 2.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        app(args=argv, prog_name="llmdoctor", standalone_mode=True)
    except UserError as err:
        if _wants_json(args):
            import json

            sys.stdout.write(json.dumps({"error": str(err)}) + "\n")
        typer.echo(f"llmdoctor: error: {err}", err=True)
        return err.exit_code
    except SystemExit as done:
        code = done.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 0


def _wants_json(args: list[str]) -> bool:
    for index, arg in enumerate(args):
        if arg == "--format=json" or (arg == "--format" and args[index + 1:index + 2] == ["json"]):
            return True
    return False


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
