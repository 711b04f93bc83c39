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

try:  # typer >= 0.26 vendors click; before, it depends on it
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

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
        False, "--version", "-V", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Find the quiet mistakes that make LLM serving slow, expensive or OOM-killed."""


def _register_commands() -> None:
    from llmdoctor.commands import catalog, gpu, kv, nginx, probe, proxy, scan, tokens

    for module in (scan, catalog, nginx, proxy, probe, kv, gpu, tokens):
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code.

    One error style for everything the user can get wrong: bad input (UserError) and usage errors (an
    unknown option, a bad value, a missing argument) are one `llmdoctor: error: ...` line on stderr and exit
    2; with `--format json` also `{"error": "..."}` on stdout, so a JSON reader always gets JSON.
    """
    args = optional_values(sys.argv[1:] if argv is None else list(argv))
    try:
        code = app(args=list(args), prog_name="llmdoctor", standalone_mode=False)
    except UserError as err:
        return _error(str(err), args, err.exit_code)
    except click_exceptions.NoArgsIsHelpError as err:
        err.show()
        return 2
    except click_exceptions.UsageError as err:
        message = err.format_message().rstrip(".")
        message = message[:1].lower() + message[1:]
        where = err.ctx.command_path if err.ctx is not None else "llmdoctor"
        return _error(f"{message}; see `{where} --help`", args, 2)
    except click_exceptions.ClickException as err:
        return _error(err.format_message(), args, err.exit_code)
    except typer.Abort:
        return _error("aborted", args, 130)
    except SystemExit as done:  # rich on a closed pipe (`llmdoctor rules | head -1`)
        return done.code if isinstance(done.code, int) else 1
    return code if isinstance(code, int) else 0


def _error(message: str, args: list[str], code: int) -> int:
    from llmdoctor.limits import brief_text, json_safe, printable

    message = brief_text(message, 1000)  # a usage error quotes the value: a 5,000-digit one is not repeated
    if _wants_json(args):
        import json

        sys.stdout.write(json.dumps({"error": json_safe(message)}) + "\n")
    typer.echo(f"llmdoctor: error: {printable(message)}", err=True)  # paths and values from outside, escaped
    return code


# options whose value may be left out (`--add-noqa` alone, or `--add-noqa "legacy, see TICKET-12"`): click has
# no such option, so the bare form is rewritten to `--add-noqa=` when no value follows: at the end, before
# another option, or before an existing path (`--add-noqa src/` silences src/; `--add-noqa=src` is a reason)
OPTIONAL_VALUE = ("--add-noqa",)


def optional_values(args: list[str]) -> list[str]:
    import os

    out = []
    for index, arg in enumerate(args):
        if arg == "--":
            return out + args[index:]
        if arg in OPTIONAL_VALUE:
            following = args[index + 1] if index + 1 < len(args) else None
            if following is None or following.startswith("-") or os.path.exists(following):
                arg += "="
        out.append(arg)
    return out


def _wants_json(args: list[str]) -> bool:
    for index, arg in enumerate(args):
        if arg in ("--format=json", "--output-format=json") or (
                arg in ("--format", "--output-format") and args[index + 1:index + 2] == ["json"]):
            return True
    return False


def run() -> None:
    """The console script: `main`, then the end of the process without its teardown (`end_process`)."""
    end_process(main())


def end_process(code: int) -> None:
    """Exit with `code` without freeing, one object at a time, everything the command built: the interpreter's
    own exit tears down the whole heap (a warm scan's project model and cached indexes: ~0.1 s of a pre-commit
    run, docs/performance.md); mypy ends its runs the same way. The output is flushed and the exit handlers
    (atexit) run first; where the output cannot be flushed (a closed pipe), or another thread still runs (the
    interpreter's exit waits for it), the interpreter's exit handles it, as before."""
    import atexit
    import gc
    import os
    import threading

    gc.freeze()  # (for that fallback: its last collection need not walk what the command built)
    if threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    run()
