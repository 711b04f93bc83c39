"""Text (a rich table) and JSON output for `llmdoctor tokens`."""

from __future__ import annotations

import json
from typing import TextIO

from llmdoctor.tokens.count import FileCount, TokensReport


def to_json(report: TokensReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


def _fits_cell(item: FileCount) -> tuple[str, str]:
    """(plain text, rich markup) of the fits column."""
    if item.fits is None:
        return "-", "-"
    if item.fits:
        return "yes", "[green]yes[/]"
    plain = f"NO, over by {item.over_by:,} ({item.finding()['rule']})"
    return plain, f"[bold red]{plain}[/]"


def _budget_lines(report: TokensReport) -> list[str]:
    """How each budget figure was made: context − reserve, and where the context came from."""
    seen: dict[tuple[int, int, str], None] = {}
    for item in report.files:
        if item.budget is not None:
            seen[(item.budget.context, item.budget.reserve, item.budget.context_source)] = None
    return [f"budget {context - reserve:,} = context {context:,} ({source}) - reserve {reserve:,}"
            for context, reserve, source in seen]


def render_text(report: TokensReport, out: TextIO) -> None:
    """A plain aligned table (whole paths, never wrapped), notes, errors and a summary line."""
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped
    from llmdoctor.report.render import make_console

    console = make_console(out)
    rows = []
    for item in report.ordered():
        tokens = f"{item.tokens:,}" + ("~" if item.estimate else "")
        budget = f"{item.budget.prompt_budget:,}" if item.budget is not None else "-"
        rows.append((item.path, tokens, budget, *_fits_cell(item)))
    if rows:
        widths = [max(len(header), *(len(row[i]) for row in rows))
                  for i, header in enumerate(("path", "tokens", "budget"))]
        header = f"{'path':<{widths[0]}}  {'tokens':>{widths[1]}}  {'budget':>{widths[2]}}  fits"
        console.print(f"[bold]{header}[/]")
        for path, tokens, budget, _plain, fits in rows:
            console.print(f"{escape(path):<{widths[0] + len(escape(path)) - len(path)}}  "
                          f"{tokens:>{widths[1]}}  {budget:>{widths[2]}}  {fits}")
    for line in _budget_lines(report):
        console.print(f"[dim]{escape(line)}[/]")
    for item in report.ordered():
        for note in item.notes:
            console.print(f"[dim]note: {escape(item.path)}: {escape(note)}[/]")
    for error in report.errors:
        where = f"{error.path}:{error.line}" if error.line else error.path
        console.print(f"[bold]{escape(where)}[/]: [bold red]error:[/] {escape(error.reason)}")
    for note in report.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    console.print(summary_line(report))


def summary_line(report: TokensReport) -> str:
    files = len(report.files)
    encodings = f" ({', '.join(sorted(report.encodings))})" if report.encodings else ""
    parts = [f"Total: {report.total:,} tokens in {files} input{'s' if files != 1 else ''}{encodings}"]
    if any(item.estimate for item in report.files):
        parts.append("~ = estimate, see notes")
    over = len(report.over_budget)
    if over:
        parts.append(f"{over} over budget (TOK001)")
    if report.errors:
        parts.append(f"{len(report.errors)} could not be counted")
    if report.skipped_binary:
        skipped = report.skipped_binary
        parts.append(f"{skipped} binary file{'s' if skipped != 1 else ''} skipped")
    return "; ".join(parts) + "."
