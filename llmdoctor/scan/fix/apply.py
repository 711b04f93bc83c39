"""Fix one file to a fixed point, as ruff does: scan, apply every allowed fix that does not touch another,
re-parse and re-check the result, scan again, until no allowed fix is left.

- A pass applies the fixes whose spans do not overlap (the others wait for the next pass, found again by
  the next scan at their new positions), lowest `priority` first (LLM006's timeout before LLM004's
  to_thread moves the same call into an argument list).
- The fixed text must compile as the original did (`compile()`, which also rejects an `await` outside
  `async def`); when a pass's text does not, its fixes are tried one at a time and the ones that break the
  file are skipped and reported with the compiler's message. A file is never left broken.
- Suppressed findings are not in the scan's results, so they are never fixed; a second run finds nothing
  to do (each fix removes its finding, and the loop stops when a pass changes nothing).
"""

from __future__ import annotations

import io
import tokenize
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from llmdoctor.report.model import Finding
from llmdoctor.scan.catalog import Catalog
from llmdoctor.scan.decoding import decode_source
from llmdoctor.scan.engine import FileResult, analyze_source
from llmdoctor.scan.fix.base import FixContext, FixPolicy, FixRequest, Skip
from llmdoctor.scan.fix.registry import FIXERS
from llmdoctor.scan.settings import ScanConfig

MAX_PASSES = 25


@dataclass(frozen=True)
class SourceText:
    """A file's text and how to write it back byte for byte (its PEP 263 encoding, a BOM)."""

    text: str
    encoding: str

    @classmethod
    def from_bytes(cls, data: bytes) -> SourceText:
        text = decode_source(data)  # raises SourceError, as the scan does
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return cls(text, encoding)

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)  # utf-8-sig writes the BOM back


@dataclass(frozen=True)
class AppliedFix:
    rule: str
    kind: str
    line: int  # in the text of the pass that applied it


@dataclass(frozen=True)
class SkippedFix:
    rule: str
    kind: str
    line: int  # in the final text
    column: int
    reason: str


@dataclass
class FixOutcome:
    path: str
    original: str
    fixed: str
    result: FileResult  # the scan of the fixed text: what remains
    applied: list[AppliedFix] = field(default_factory=list)
    skipped: list[SkippedFix] = field(default_factory=list)
    converged: bool = True

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def fix_requests(findings: list[Finding], catalog: Catalog, policy: FixPolicy) -> list[FixRequest]:
    """The fixes the findings offer that the policy allows (and that a fixer exists for)."""
    requests = []
    for finding in findings:
        descriptor = finding.extra.get("autofix")
        spec = catalog.rules.get(finding.rule)
        if not isinstance(descriptor, dict) or spec is None:
            continue
        fix = spec.fix(str(descriptor.get("kind")))
        if fix is None or fix.kind not in FIXERS or not policy.allows(fix.safety):
            continue
        request = FixRequest.from_finding(finding, fix.safety)
        if request is not None:
            requests.append(request)
    return requests


Scanner = Callable[[bytes], FileResult]  # the file's bytes -> its findings as reported (linked)


@dataclass
class FileFix:
    """One file on its way to a fixed point: its text as the passes change it, and what they did."""

    path: str
    source: SourceText
    text: str
    check: Callable[[str], str | None]
    applied: list[AppliedFix] = field(default_factory=list)
    skipped: list[SkippedFix] = field(default_factory=list)  # from the last pass: what stays unfixed
    seen: set[str] = field(default_factory=set)
    settled: bool = False  # a pass changed nothing: no allowed fix is left (or none applies)

    @classmethod
    def start(cls, path: str, source: SourceText) -> FileFix:
        return cls(path, source, source.text, _checker(path, source.text), seen={source.text})

    def step(self, findings: list[Finding], catalog: Catalog, policy: FixPolicy) -> bool:
        """One pass over the file's current findings; True when it changed the text."""
        requests = fix_requests(findings, catalog, policy)
        if not requests:
            self.skipped, self.settled = [], True
            return False
        new_text, applied, self.skipped = _apply_pass(self.text, requests, policy, self.check)
        if not applied or new_text in self.seen:
            self.settled = True
            return False
        self.seen.add(new_text)
        self.applied.extend(applied)
        self.text = new_text
        return True


def fix_source(path: str, source: SourceText, catalog: Catalog, config: ScanConfig, policy: FixPolicy,
               first: FileResult | None = None, scanner: Scanner | None = None) -> FixOutcome:
    """Fix one file to a fixed point. `first`: the scan of the original text, when the caller has it;
    `scanner`: how to scan a version of the file (default: as a program of its own). The command line
    fixes a whole scan in rounds instead (run.py: one re-link of the project per round)."""
    if scanner is None:
        def scanner(data: bytes) -> FileResult:
            return analyze_source(path, data, catalog, config)

    state = FileFix.start(path, source)
    result = first or scanner(source.encode(source.text))
    outcome = FixOutcome(path=path, original=source.text, fixed=source.text, result=result)
    if result.errors:
        return outcome
    converged = False
    for _ in range(MAX_PASSES):
        if not state.step(result.findings, catalog, policy):
            converged = True
            break
        result = scanner(source.encode(state.text))
        if result.errors:  # never expected: the text compiled; keep the last text the scan could read
            break
    outcome.fixed, outcome.result = state.text, result
    outcome.applied, outcome.skipped, outcome.converged = state.applied, state.skipped, converged
    return outcome


def _apply_pass(text: str, requests: list[FixRequest], policy: FixPolicy, check: Callable[[str], str | None]):
    """(new text, applied, skipped) for one pass over `text`."""
    skipped: list[SkippedFix] = []
    remaining = list(requests)
    while remaining:
        new_text, chosen, refused = _rewrite(text, remaining, policy)
        skipped.extend(refused)
        if not chosen:
            break
        if check(new_text) is None:
            return new_text, _applied(chosen), skipped
        # some fix breaks the file: apply the first one that does not, skip those that do on their own
        for request in chosen:
            alone, done, _ = _rewrite(text, [request], policy)
            problem = check(alone) if done else "it could not be applied on its own"
            if problem is None:
                return alone, _applied(done), skipped
            skipped.append(_skipped(request, f"the fixed file would not compile ({problem})"))
        settled = {*chosen, *(r for r in remaining if any(_same(r, s) for s in refused))}
        remaining = [r for r in remaining if r not in settled]  # those that waited for a chosen one
    return text, [], skipped


def _same(request: FixRequest, skipped: SkippedFix) -> bool:
    return (request.rule, request.kind, request.line, request.column) == (
        skipped.rule, skipped.kind, skipped.line, skipped.column)


def _applied(requests: list[FixRequest]) -> list[AppliedFix]:
    return [AppliedFix(r.rule, r.kind, r.line) for r in requests]


def _rewrite(text: str, requests: list[FixRequest], policy: FixPolicy):
    """(text, the requests applied, the skipped) for the fixes of `requests` that do not overlap."""
    module = cst.parse_module(text)
    context = FixContext.build(module, policy)
    chosen: dict[int, tuple] = {}
    taken: list[FixRequest] = []
    skipped: list[SkippedFix] = []
    for request in sorted(requests, key=lambda r: (FIXERS[r.kind].priority, r.line, r.column)):
        if any(request.overlaps(other) for other in taken):
            continue  # next pass
        node = context.node_at(request)
        if node is None:
            skipped.append(_skipped(request, "no call at the finding's position"))
            continue
        try:
            rewrite = FIXERS[request.kind].plan(node, request, context)
        except Skip as why:
            skipped.append(_skipped(request, str(why)))
            continue
        chosen[id(node)] = (node, rewrite, request)
        taken.append(request)
    if not chosen:
        return text, [], skipped
    rewritten = context.finish(module.visit(_Rewriter(chosen)))
    return rewritten.code, taken, skipped


class _Rewriter(cst.CSTTransformer):
    def __init__(self, chosen: dict[int, tuple]) -> None:
        super().__init__()
        self._chosen = chosen

    def on_leave(self, original_node, updated_node):
        entry = self._chosen.get(id(original_node))
        if entry is not None and entry[0] is original_node:
            return entry[1](updated_node)
        return updated_node


def _skipped(request: FixRequest, reason: str) -> SkippedFix:
    return SkippedFix(request.rule, request.kind, request.line, request.column, reason)


def _checker(path: str, original: str) -> Callable[[str], str | None]:
    """What a fixed text must pass: CPython's compiler when the original compiles with this interpreter (it
    also rejects `await` outside `async def`), else libcst's parser."""
    if compile_problem(path, original) is None:
        return lambda text: compile_problem(path, text)
    return _parse_problem


def compile_problem(path: str, text: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: the file's own business
            compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"
    except (ValueError, RecursionError, MemoryError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _parse_problem(text: str) -> str | None:
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as err:
        return f"line {err.raw_line}: {err.message}"
    return None


def single_fix(text: str, request: FixRequest, policy: FixPolicy | None = None) -> str | None:
    """`text` with only this fix applied (None when it does not apply there)."""
    new_text, done, _ = _rewrite(text, [request], policy or FixPolicy(unsafe=True))
    return new_text if done else None
