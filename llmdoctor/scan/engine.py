"""Analyse one file: read once, decode (PEP 263), index with CPython's `ast` for the project model, pre-filter,
parse once with libcst, one batched visit for all rules.

`analyze_module` is a pure function of its arguments (no global state, no cwd lookups) and returns a picklable
`FileResult` (the module's index and the rules' candidate findings), so a process pool or an on-disk cache
can wrap it unchanged. Whether a candidate is reported depends on the rest of the program: the project model
(llmdoctor/scan/project/) links every module's index and decides (`link_results`). `analyze_source` runs
both for one file alone (a program of one module).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from llmdoctor.report.model import Finding, InputError
from llmdoctor.scan.catalog import Catalog
from llmdoctor.scan.codefacts import parse_python, read_code
from llmdoctor.scan.decoding import SourceError, decode_source
from llmdoctor.scan.parseguard import refusal
from llmdoctor.scan.prefilter import gate, python_parse_problem
from llmdoctor.scan.regions import pruned
from llmdoctor.scan.settings import ScanConfig
from llmdoctor.scan.suppressions import ALL, file_ignores, parse_suppressions

# method names whose second positional argument is a callable run in a worker thread
OFFLOAD_METHODS = frozenset({"run_in_executor"})
FUNCTION_KEY = "_function"  # a candidate's extra: the project model's key of the function holding it


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)  # candidates until linked, then what is reported
    errors: list[InputError] = field(default_factory=list)
    parsed: bool = False  # False when the pre-filter (or an ignore-file comment) made parsing unnecessary
    prefiltered: bool = False  # True when no enabled rule could fire on this text: not parsed
    suppressed: int = 0  # findings silenced by noqa / ignore comments
    index: object | None = None  # the module's ModuleIndex (None: CPython's `ast` cannot read it)
    checked: bool = True  # False: indexed only (a project file outside the scanned paths)


def analyze_file(path: str, catalog: Catalog, config: ScanConfig) -> FileResult:
    """One file on disk as a whole program (see `analyze_source`)."""
    from llmdoctor.scan.project.link import link_results

    return link_results([analyze_path(path, catalog, config)], catalog, config, root=None)[0]


def analyze_path(path: str, catalog: Catalog, config: ScanConfig, *, rules: bool = True) -> FileResult:
    """`analyze_module` of the file at `path`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        return FileResult(path, errors=[InputError(path, f"cannot read: {err.strerror or err}")] if rules else [],
                          checked=rules)
    return analyze_module(path, data, catalog, config, rules=rules)


def analyze_source(path: str, data: bytes, catalog: Catalog, config: ScanConfig) -> FileResult:
    """One file as a whole program: its candidates decided by a project model of this module alone."""
    from llmdoctor.scan.project.link import link_results

    result = analyze_module(path, data, catalog, config)
    return link_results([result], catalog, config, root=None)[0]


def analyze_module(path: str, data: bytes, catalog: Catalog, config: ScanConfig, *, rules: bool = True,
                   isolate: Callable[[], FileResult] | None = None) -> FileResult:
    """The module's index and, with `rules`, the candidate findings of every enabled rule. `isolate`: run
    the libcst part in a process of its own, for a file CPython rejects (no tree tells parseguard what
    libcst would make of it: a crash there must not end the caller's process)."""
    with collector_paused():
        facts_read: list = []  # the CodeFacts read on the way, released at the end (see collector_paused)
        try:
            return _analyze_module(path, data, catalog, config, rules=rules, isolate=isolate, facts_read=facts_read)
        finally:
            for facts in facts_read:
                facts.release()
            facts_read.clear()  # (before the collector is back: it would walk the tree the facts point into)


@contextmanager
def collector_paused(keep: bool = False):
    """No cyclic garbage collection while one file is analysed: its trees (CPython's, libcst's) are millions
    of objects that live until the end, and every collection walks them all again (half of `ast.parse`'s
    time on 100,000 small functions). They must form no cycles, so that they are freed as soon as the file is
    done, by reference counting: a cycle that reaches a tree (a rule object holding its own bound method, a
    unit and its parent class) would keep the whole tree for the collector to walk and free
    (docs/performance.md). `CodeFacts.release` and `run_rules` break theirs.

    With `keep` (the cache's entries read, a program linked: what they build lives until the scan ends), what
    was built is then moved out of the collector's sight (`gc.freeze`) instead of being walked by the next
    collection, when a scan's `heap_kept` scope is open to give it back at its end (a caller of
    `analyze_source` outside a scan freezes nothing)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep and _kept_scopes[0]:
            gc.freeze()
        if was_enabled:
            gc.enable()


_kept_scopes = [0]  # open `heap_kept` scopes


@contextmanager
def heap_kept():
    """The scope of one scan (runner.fewer_collections): what `collector_paused(keep=True)` froze in it is
    given back to the collector when the outermost scope ends, unless the heap was frozen before it began."""
    frozen = gc.get_freeze_count()
    _kept_scopes[0] += 1
    try:
        yield
    finally:
        _kept_scopes[0] -= 1
        if not _kept_scopes[0] and not frozen:
            gc.unfreeze()


def _analyze_module(path: str, data: bytes, catalog: Catalog, config: ScanConfig, *, rules: bool,
                    isolate: Callable[[], FileResult] | None, facts_read: list) -> FileResult:
    result = FileResult(path, checked=rules)
    try:
        source = decode_source(data)
    except SourceError as err:
        if rules:
            result.errors.append(InputError(path, err.reason, err.line))
        return result
    tree = parse_python(source)
    if tree is not None:
        from llmdoctor.scan.project.index import index_module
        from llmdoctor.scan.project.knowledge import index_interest

        try:
            result.index = index_module(source, tree, index_interest(catalog), config.python_platform)
        except RecursionError:
            result.index = None  # a pathological nesting: the module stays out of the project model
    if not rules:
        return result

    from llmdoctor.scan.rules import rule_ids

    implemented = rule_ids()  # (the rule classes import libcst: only once a rule is left to run)
    silenced_file = file_ignores(source) if "llmdoctor:" in source else set()
    if ALL in silenced_file:
        return result
    active = []
    for rule_id, spec in sorted(catalog.rules.items()):
        if rule_id not in implemented or rule_id in silenced_file or not config.rule_enabled(rule_id, path):
            continue
        if gate(spec, catalog).text(source):
            active.append(spec)
    python_problem = facts = None
    if tree is None:  # CPython cannot read it: say why, in its words (libcst is never handed such a file)
        python_problem = python_parse_problem(source)
        if isinstance(python_problem, SyntaxError) and not _too_deep(python_problem):
            result.errors.append(InputError(path, _syntax_error(python_problem, source), python_problem.lineno))
            return result
    elif active:  # second stage: the same pre-filters on what the code spells out (no comments or strings)
        facts = read_code(source, tree)
        if facts is not None:
            facts_read.append(facts)
            code = facts.code_text()
            active = [spec for spec in active if gate(spec, catalog).code(code, source)]
    if not active and not _too_deep(python_problem):
        result.prefiltered = True
        return result
    if _too_deep(python_problem):
        # libcst's native parser crashes the whole process (segfault) on such input: never hand it over
        result.errors.append(InputError(
            path, "nested too deeply for Python's own parser (thousands of nested brackets or a huge "
                  f"expression: {_describe(python_problem)}); the file was not checked",
            getattr(python_problem, "lineno", None)))
        return result

    if facts is None and isolate is not None:
        return isolate()
    parsed, may_report = (source, True) if facts is None else pruned(source, facts, active, catalog)
    if not may_report:
        result.prefiltered = True
        return result
    from llmdoctor.scan.rules import rule_classes

    classes = rule_classes()
    active = [(classes[spec.id], spec) for spec in active]
    refused = refusal(facts.tree, source, parsed) if facts is not None and facts.tree is not None else None
    if refused is not None:  # valid Python that would crash libcst's parser or take it minutes
        result.errors.append(InputError(path, refused.reason, refused.line))
        return result

    import libcst as cst

    try:
        try:
            module = _parse(parsed)
        except cst.ParserSyntaxError:
            if parsed is source:
                raise
            parsed = source  # never expected: the pruning kept the text valid everywhere it was tested
            module = _parse(parsed)
    except cst.ParserSyntaxError as err:
        if isinstance(python_problem, SyntaxError) and python_problem.lineno:  # CPython's words and line
            result.errors.append(InputError(path, f"syntax error: {python_problem.msg}", python_problem.lineno))
        elif facts is not None:  # Python accepts it: a limit of libcst's, not the user's mistake
            line = err.raw_line if 0 < (err.raw_line or 0) <= source.count("\n") + 1 else None
            result.errors.append(InputError(
                path, "libcst, the parser the rules run on, cannot parse this file, which Python accepts "
                      f"({err.message.splitlines()[0][:200]}); the file was not checked", line))
        else:
            result.errors.append(InputError(path, f"syntax error: {err.message}", err.raw_line or None))
        return result
    except (RecursionError, MemoryError, ValueError) as err:
        result.errors.append(InputError(path, f"cannot parse: {type(err).__name__}: {err}"))
        return result
    result.parsed = True

    from llmdoctor.scan.visitor import run_rules

    try:
        with _deep_recursion():
            pending = run_rules(module, active, catalog, OFFLOAD_METHODS, source)
            if pending:
                tree = facts.tree if facts is not None and parsed is source else None  # else: of the pruned text
                result.findings, result.suppressed = _positioned(path, module, parsed, source, pending, config,
                                                                 catalog, tree)
    except RecursionError:
        result.errors.append(InputError(
            path, f"expressions nested too deeply to analyse (over {DEEP_RECURSION_LIMIT} levels of "
                  "recursion, e.g. a very long `a + b + c ...` chain); the file was not checked"))
    except Exception as err:  # noqa: BLE001 - a bug in a rule must not stop the scan of the other files
        result.findings = []
        result.errors.append(InputError(
            path, f"internal error while analysing this file ({type(err).__name__}: {err}); "
                  "please report it with the file's relevant lines"))
    return result


def _parse(source: str):
    """`libcst.parse_module`, without validating each node the parser builds: libcst runs
    `CSTNode._validate` in every node's `__post_init__`, for trees its own parser produced too (valid by
    construction; libcst's base.py notes it could skip it "when parsing a file"). 5-18% of the parse
    (bench/scan_phases.py)."""
    import libcst as cst

    validating = cst.CSTNode.__dict__.get("__post_init__")
    if validating is None:  # another libcst layout: parse as it wants
        return cst.parse_module(source)
    cst.CSTNode.__post_init__ = _no_validation
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = validating


def _no_validation(self) -> None:
    return None


def _syntax_error(problem: SyntaxError, source: str) -> str:
    """CPython's words; and where a Python older than 3.12 runs the scan and libcst's parser (which reads the
    newer grammar) accepts the file, that it is newer Python, not a mistake: PEP 701 f-strings (`f"{", ".join(x)}"`),
    `type` aliases and type parameters (`def first[T](items: list[T]) -> T`) are valid from 3.12 on."""
    message = f"syntax error: {problem.msg}"
    if sys.version_info >= (3, 12):
        return message
    import libcst as cst

    try:
        cst.parse_module(source)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 (a pyo3 parser panic is a BaseException): the user's mistake, in CPython's words
        return message
    running = ".".join(map(str, sys.version_info[:2]))
    return (f"{message}; the file is newer Python than {running}, which runs llmdoctor, can read (3.12's f-strings, "
            "`type` aliases or type parameters): run llmdoctor under the Python the project targets; the file was "
            "not checked")


def _too_deep(problem: BaseException | None) -> bool:
    if isinstance(problem, (RecursionError, MemoryError)):
        return True
    return isinstance(problem, SyntaxError) and (problem.msg or "").startswith("too many")  # nested parens/blocks


def _describe(problem: BaseException) -> str:
    text = problem.msg if isinstance(problem, SyntaxError) else str(problem)
    return f"{type(problem).__name__}: {text}" if text else type(problem).__name__


# libcst visits recursively (several Python frames per nesting level): a generated 500-term string
# concatenation exceeds Python's default limit of 1000. Raised only for the visit, then restored.
# From 3.11 Python-to-Python calls do not consume the C stack; 3.10 gets a limit its C stack can hold.
DEEP_RECURSION_LIMIT = 20_000 if sys.version_info >= (3, 11) else 5_000


@contextmanager
def _deep_recursion():
    previous = sys.getrecursionlimit()
    if previous < DEEP_RECURSION_LIMIT:
        sys.setrecursionlimit(DEEP_RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _positioned(path, module, parsed, source, pending, config: ScanConfig, catalog: Catalog,
                tree=None) -> tuple[list[Finding], int]:
    """Findings with their positions (in `parsed`, the text libcst parsed: the same lines as `source`;
    `tree`: CPython's tree of `parsed`, when there is one already); those a suppression comment names (or names
    by a peer linter's code for the same check, `catalog`'s rule `peer_codes`) are counted, not kept."""
    from llmdoctor.scan.positions import positions_for

    spans = positions_for(module, parsed, [(item.node, item.statement) for item in pending], tree=tree)
    suppressions = parse_suppressions(source)
    findings, suppressed, seen = [], 0, set()
    for item in pending:
        where = spans[id(item.node)]
        lines = [where.start_line]
        if item.statement is not None and id(item.statement) in spans:
            lines.append(spans[id(item.statement)].start_line)
        spec = catalog.rules.get(item.rule)
        if suppressions.silences(item.rule, tuple(lines), spec.peer_codes if spec is not None else frozenset()):
            suppressed += 1
            continue
        finding = Finding(
            rule=item.rule, severity=config.severity_for(item.rule, item.severity), path=path,
            line=where.start_line, column=where.start_column + 1,
            end_line=where.end_line, end_column=where.end_column + 1,
            message=item.message, fix=item.fix, extra={**item.extra, FUNCTION_KEY: item.function},
        )
        key = (finding.rule, finding.line, finding.column, finding.message)
        if key not in seen:
            seen.add(key)
            findings.append(finding)
    findings.sort(key=Finding.sort_key)
    return findings, suppressed
