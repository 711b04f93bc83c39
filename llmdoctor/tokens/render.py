"""Text (a rich table) and JSON output for `llmdoctor tokens`."""

from __future__ import annotations

import json
from typing import TextIO

from llmdoctor.tokens.count import FileCount, TokensReport


def to_json(report: TokensReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


def _fits_cell(item: FileCount) -> str:
    if item.fits is None:
        return "-"
    if item.fits:
        return "[green]yes[/]"
    return f"[bold red]NO[/] (over by {item.over_by:,})"


def _budget_cell(item: FileCount) -> str:
    if item.budget is None:
        return "-"
    return f"{item.budget.prompt_budget:,} ({item.budget.context:,} - {item.budget.reserve:,} reserve)"


def render_text(report: TokensReport, out: TextIO) -> None:
    from rich.markup import escape
    from rich.table import Table

    from llmdoctor.report.render import make_console

    console = make_console(out)
    if report.files:
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column("path", overflow="fold")
        table.add_column("tokens", justify="right")
        table.add_column("budget", justify="right")
        table.add_column("fits")
        for item in report.ordered():
            tokens = f"{item.tokens:,}" + ("~" if item.estimate else "")
            table.add_row(escape(item.path), tokens, _budget_cell(item), _fits_cell(item))
        console.print(table)
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
    encodings = ", ".join(sorted(report.encodings)) or "none"
    parts = [f"Total: {report.total:,} tokens in {files} input{'s' if files != 1 else ''} ({encodings})"]
    if any(item.estimate for item in report.files):
        parts.append("~ = estimate, see notes")
    over = len(report.over_budget)
    if over:
        parts.append(f"{over} over budget")
    if report.errors:
        parts.append(f"{len(report.errors)} could not be counted")
    if report.skipped_binary:
        parts.append(f"{report.skipped_binary} binary file{'s' if report.skipped_binary != 1 else ''} skipped")
    return "; ".join(parts) + "."
