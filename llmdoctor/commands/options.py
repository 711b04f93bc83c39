"""The option vocabulary every command shares, declared once: `--format`, `--jobs/-j`, and the reporting
options of the commands that report findings (scan, nginx, ...) rendered by the one report layer.

README "Options every command shares" lists them; tests/test_shared_options.py checks it against each
command's `--help`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum

import typer

from llmdoctor.errors import UserError
from llmdoctor.machine import available_cpus  # noqa: F401 - re-exported for the commands


class Format(str, Enum):
    text = "text"
    concise = "concise"
    grouped = "grouped"
    json = "json"
    sarif = "sarif"
    github = "github"
    gitlab = "gitlab"


# commands that report findings (the report layer renders every one of these for any Report)
REPORT_FORMATS = (Format.text, Format.concise, Format.grouped, Format.json, Format.sarif, Format.github,
                  Format.gitlab)
PLAIN_FORMATS = (Format.text, Format.json)  # commands with their own report shape


def format_option(*allowed: Format) -> typer.models.OptionInfo:
    """`--format` limited to `allowed`; a value outside them is exit 2 naming the choices."""
    names = [f.value for f in allowed]

    def check(value: str) -> str:
        if value not in names:
            raise UserError(f"--format {value!r}: choose one of {', '.join(names)}")
        return value

    reporting = set(allowed) == set(REPORT_FORMATS)  # commands that report findings take ruff's name too
    spellings = ("--format", "--output-format") if reporting else ("--format",)
    return typer.Option("text", *spellings, metavar="|".join(names), callback=check,
                        help=f"Output: {', '.join(names[:-1])} or {names[-1]}.")


def jobs_option(what: str, default_rule: str, default: int) -> typer.models.OptionInfo:
    """`--jobs/-j N`; --help shows the rule and what it gives on this machine."""
    return typer.Option(None, "--jobs", "-j", metavar="N", show_default=False,
                        help=f"{what} (default: {default_rule}, {default} here; 1 = no parallelism).")


def check_jobs(jobs: int | None) -> None:
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: give a number of workers, 1 or more")


def note(message: str) -> None:
    """One line on stderr, e.g. for an old option spelling that still works."""
    sys.stderr.write(f"llmdoctor: note: {message}\n")


# ----------------------------------------------------------------------------- reporting options

OUTPUT = typer.Option(None, "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout.")
SELECT = typer.Option(None, "--select", metavar="IDS",
                      help="Only these checks (ids or prefixes, comma-separated or repeated).")
IGNORE = typer.Option(None, "--ignore", metavar="IDS", help="Skip these checks (ids or prefixes).")
STATISTICS = typer.Option(False, "--statistics", help="Print only the number of findings per check.")
EXIT_ZERO = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings.")
QUIET = typer.Option(False, "--quiet", "-q", help="Print only the findings (no summary, no notes).")


def split_ids(values: list[str] | None) -> tuple[str, ...]:
    out = []
    for value in values or []:
        out.extend(v.strip().upper() for v in value.split(",") if v.strip())
    return tuple(out)


@dataclass(frozen=True)
class ReportOptions:
    """What the reporting options ask of the report layer (same names, same meaning, every command)."""

    fmt: str = "text"
    output: str | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    statistics: bool = False
    exit_zero: bool = False
    quiet: bool = False

    @classmethod
    def from_cli(cls, fmt, output, select, ignore, statistics, exit_zero, *, quiet: bool = False) -> ReportOptions:
        return cls(fmt=fmt, output=output, select=split_ids(select), ignore=split_ids(ignore),
                   statistics=statistics, exit_zero=exit_zero, quiet=quiet)

    def enabled(self, rule_id: str) -> bool:
        if self.select and not any(rule_id.startswith(s) for s in self.select):
            return False
        return not any(rule_id.startswith(i) for i in self.ignore)

    def check_ids(self, known: set[str], command: str) -> None:
        """Unknown ids are exit 2 with a suggestion; a selection that leaves nothing to check is too."""
        from llmdoctor.catalog import did_you_mean

        for option, ids in (("--select", self.select), ("--ignore", self.ignore)):
            for rule_id in ids:
                if not any(k.startswith(rule_id) for k in known):
                    raise UserError(f"{option}: unknown rule {rule_id!r}{did_you_mean(rule_id, known)}; "
                                    f"known rules of `{command}`: {', '.join(sorted(known))}")
        if not any(self.enabled(k) for k in known):
            raise UserError(nothing_selected(self.select, self.ignore))

    def emit(self, report, exit_code: int, *, stream=None, show_fixes: bool = False) -> int:
        """Render `report` where asked (--output, else `stream`, else stdout) and return the exit code,
        --exit-zero applied. `show_fixes`: also list the fixes applied (`scan --fix --show-fixes`)."""
        from llmdoctor.report.render import render

        flags = {"statistics": self.statistics, "quiet": self.quiet, "show_fixes": show_fixes}
        if self.output:
            try:
                with open(self.output, "w", encoding="utf-8") as handle:
                    render(report, self.fmt, handle, **flags)
            except OSError as err:
                raise UserError(f"--output {self.output}: cannot write: {err.strerror or err}") from None
        else:
            render(report, self.fmt, stream or sys.stdout, **flags)
        return 0 if self.exit_zero and exit_code == 1 else exit_code


def nothing_selected(select: tuple[str, ...], ignore: tuple[str, ...]) -> str:
    chosen = f"--select {','.join(select)}" if select else "every check"
    return (f"{chosen} with --ignore {','.join(ignore)} leaves no check to run: nothing would be checked "
            "(drop one of them)")

