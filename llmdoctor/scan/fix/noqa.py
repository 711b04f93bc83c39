"""`scan --add-noqa [REASON]`: silence every current finding with a `# noqa: CODE` comment, so a codebase
adopts llmdoctor with a clean run and only new code is held to the rules.

Where the comment goes: on the first line of the statement holding the finding (a suppression there covers
the whole statement), else on the finding's own line; never on a line that ends inside a string or with a
`\\` continuation (the tokenizer says which lines can take a comment). When neither can (the statement's
first line ends inside a triple-quoted string), a `# llmdoctor: ignore[CODE] REASON` line goes right above
the statement. Codes join an existing
`# noqa: E501` as `# noqa: E501, LLM004`; a line with another comment gets `  # noqa: ...` after it. The
reason goes after the codes (`# noqa: LLM004 legacy, see TICKET-12`), which ruff's RUF100 accepts with
`lint.external = ["LLM"]`. Each changed file is scanned again; a finding still reported is listed.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.report.model import Finding, InputError, Report, display_path
from llmdoctor.scan.decoding import SourceError
from llmdoctor.scan.fix.apply import SourceText, compile_problem
from llmdoctor.scan.fix.run import relink, write_atomically
from llmdoctor.scan.runner import ScanPlan
from llmdoctor.scan.suppressions import NOQA


@dataclass
class NoqaRun:
    added: int = 0  # lines that got a new directive or new codes in one
    files: list[str] = field(default_factory=list)
    unsilenced: list[Finding] = field(default_factory=list)  # still reported after the edit


def check_reason(reason: str) -> str:
    """The reason as written after the codes; raises ValueError with what is wrong."""
    reason = reason.strip()
    if "\n" in reason or "\r" in reason:
        raise ValueError("the reason must fit on one line")
    return reason


def add_noqa(plan: ScanPlan, report: Report, cwd: str, reason: str | None = None) -> NoqaRun:
    run = NoqaRun()
    by_path: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_path.setdefault(finding.path, []).append(finding)
    written: dict[str, bytes] = {}
    for shown, findings in sorted(by_path.items()):
        absolute = os.path.normpath(os.path.join(cwd, shown))
        try:
            source = SourceText.from_bytes(Path(absolute).read_bytes())
        except (OSError, SourceError) as err:
            reason_text = getattr(err, "reason", None) or getattr(err, "strerror", None) or str(err)
            report.errors.append(InputError(shown, f"cannot add noqa comments: {reason_text}"))
            continue
        text, added, left = _silence(source.text, findings, reason)
        if added and compile_problem(absolute, source.text) is None and compile_problem(absolute, text):
            report.errors.append(InputError(shown, "cannot add noqa comments: the file would not compile"))
            continue
        if not added:
            run.unsilenced.extend(left)
            continue
        try:
            write_atomically(absolute, source.encode(text))
        except OSError as err:
            report.errors.append(InputError(shown, f"cannot write: {err.strerror or err}"))
            continue
        run.added += added
        run.files.append(shown)
        written[absolute] = source.encode(text)
    if written:  # scanned again as the project they belong to: what is still reported there
        for absolute, result in sorted(relink(plan, written, cwd).items()):
            if absolute in written:
                shown = display_path(absolute, Path(cwd))
                run.unsilenced.extend(dataclasses.replace(f, path=shown) for f in result.findings)
    return run


def _silence(text: str, findings: list[Finding], reason: str | None) -> tuple[str, int, list[Finding]]:
    """(the text with the directives, how many lines changed, the findings no line could take)."""
    lines = io.StringIO(text).readlines()
    ends, comments = _line_ends(text)
    spans = _statement_spans(text)
    wanted: dict[int, set[str]] = {}
    above: dict[int, set[str]] = {}  # statements no line of which can take a comment: an ignore line above
    left = []
    for finding in findings:
        start = statement_start(spans, finding.line, finding.column)
        target = next((line for line in (start, finding.line) if line is not None and line in ends), None)
        if target is not None:
            wanted.setdefault(target, set()).add(finding.rule)
        elif start is not None:
            above.setdefault(start, set()).add(finding.rule)
        else:
            left.append(finding)
    changed = 0
    for number, codes in sorted(wanted.items()):
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        newline = line[len(body):]
        updated = _with_codes(body, comments.get(number), sorted(codes), reason)
        if updated != body:
            lines[number - 1] = updated + newline
            changed += 1
    for number, codes in sorted(above.items(), reverse=True):
        line = lines[number - 1]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        newline = line[len(line.rstrip("\r\n")):] or "\n"
        lines.insert(number - 1, f"{indent}# llmdoctor: ignore[{', '.join(sorted(codes))}]"
                                 + (f" {reason}" if reason else "") + newline)
        changed += 1
    return "".join(lines), changed, left


def _with_codes(body: str, comment_at: int | None, codes: list[str], reason: str | None) -> str:
    if comment_at is not None:
        comment = body[comment_at:]
        match = NOQA.search(comment)
        if match and match.group("codes"):
            have = {c.upper() for c in re.split(r"[\s,]+", match.group("codes")) if c}
            new = [c for c in codes if c not in have]
            if not new:
                return body
            at = comment_at + match.end("codes")
            return body[:at] + ", " + ", ".join(new) + body[at:]
    directive = "# noqa: " + ", ".join(codes) + (f" {reason}" if reason else "")
    return body.rstrip(" \t") + "  " + directive


_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12 tokenizes inside f-strings
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def _line_ends(text: str) -> tuple[set[int], dict[int, int]]:
    """(lines that end outside any string or continuation: a comment can go there, the column where each
    line's comment starts). Inside a multi-line f-string's replacement field Python 3.12 would accept a
    comment, older versions would not: such lines do not count."""
    ends: set[int] = set()
    comments: dict[int, int] = {}
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == _FSTRING_START:
                depth += 1
            elif token.type == _FSTRING_END:
                depth -= 1
            elif depth:
                continue
            elif token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.start[1]
                ends.add(token.start[0])
            elif token.type in (tokenize.NEWLINE, tokenize.NL):
                ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return set(), {}
    return ends, comments


def _statement_spans(text: str) -> list[tuple[tuple[int, int], tuple[int, int], int]]:
    """(start, end, first line) of every statement: start/end as (line, 0-based column); a decorated def or
    class starts at its first decorator."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and getattr(node, "end_lineno", None) is not None:
            decorators = [d.lineno for d in getattr(node, "decorator_list", ())]
            start = (min(decorators), 0) if decorators else (node.lineno, node.col_offset)
            spans.append((start, (node.end_lineno, node.end_col_offset), start[0]))
    return spans


def statement_start(spans, line: int, column: int) -> int | None:
    """The first line of the innermost statement holding the 1-based (line, column)."""
    here = (line, column - 1)
    holding = [(start, first) for start, end, first in spans if start <= here < end]
    return max(holding)[1] if holding else None
