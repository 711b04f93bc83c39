"""`run_scan`: settings -> catalog -> discovery -> analyze every file -> link the project -> one sorted Report.

The project is every Python file under the root of the scanned paths (the nearest folder holding
pyproject.toml, setup.cfg, setup.py or .git), also when pre-commit passes three files: the files outside
the scanned paths are only indexed, so the model knows who calls what; only the scanned files are reported.

The analysis step is a plain function of (files, catalog, config, checked) yielding FileResults; the default
is serial. A parallel or cached runner passes its own `analyze` (same contract) without touching the rest.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llmdoctor.errors import UserError
from llmdoctor.report.model import Finding, Report, display_path
from llmdoctor.scan.catalog import Catalog, did_you_mean, load_catalog
from llmdoctor.scan.config import control_plane_pattern, find_config, load_config
from llmdoctor.scan.discovery import discover, is_excluded
from llmdoctor.scan.engine import FileResult, analyze_path, heap_kept
from llmdoctor.scan.settings import ScanConfig

Analyze = Callable[[list[str], Catalog, ScanConfig, "set[str] | None"], Iterable[FileResult]]
MAX_PROJECT_FILES = 20_000  # beyond this many files under the root, the model holds the scanned files only
GC_YOUNG_THRESHOLD = 100_000  # allocations between collections of the youngest generation (CPython: 700)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage less often while scanning (as mypy does): a scan allocates millions of small,
    acyclic objects (the cached indexes, the trees), and at CPython's default every 700 allocations start a
    collection, the older ones walking everything loaded so far. Reference counting still frees them. What
    the scan freezes to keep out of the collector's sight (`engine.collector_paused(keep=True)`) is given
    back at the end (`engine.heap_kept`)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    try:
        with heap_kept():
            yield
    finally:
        gc.set_threshold(*before)


@dataclass
class ScanOptions:
    """What the command line adds to (or overrides in) the project configuration."""

    select: tuple[str, ...] = ()  # replaces the config's select when given
    ignore: tuple[str, ...] = ()  # added to the config's ignore
    exclude: tuple[str, ...] = ()  # added to the config's exclude (relative to the cwd)
    force_exclude: bool = False
    rules_dirs: tuple[str, ...] = ()  # added to the config's rules-dir
    config_path: str | None = None  # explicit config file; None = find the nearest
    isolated: bool = False  # ignore every config file
    respect_gitignore: bool | None = None
    max_file_size: int | None = None
    every_context: bool = False
    control_plane: tuple[str, ...] = ()  # added to the config's control-plane (relative to the cwd)
    cwd: str | None = None


def analyze_serial(files: list[str], catalog: Catalog, config: ScanConfig,
                   checked: set[str] | None = None) -> Iterable[FileResult]:
    for path in files:
        yield analyze_path(path, catalog, config, rules=checked is None or path in checked)


@dataclass
class ScanPlan:
    config: ScanConfig
    catalog: Catalog
    files: list[str]
    report: Report  # holds discovery errors and notices; results are added to it
    projects: list[tuple[str | None, list[str]]] = dataclasses.field(default_factory=list)  # (root, files)
    results: dict[str, FileResult] = dataclasses.field(default_factory=dict)  # every file's, once collected

    def project_of(self, path: str) -> tuple[str | None, list[str]]:
        """(root, files) of the project `path` belongs to, for re-linking one changed file (--fix)."""
        return next(((root, files) for root, files in self.projects if path in files), (None, [path]))


def prepare_scan(paths: list[str], options: ScanOptions, analyze: Analyze | None = None) -> ScanPlan:
    """`analyze`: the analysis step `collect` will be given (a cached one also keeps the parsed rule files)."""
    cwd = options.cwd or os.getcwd()
    paths = [os.path.join(cwd, p) for p in (paths or ["."])]
    config = _settings(paths, options, cwd)
    catalog = _catalog(config, analyze)
    _check_rule_ids(config, catalog, options)
    found = discover(paths, root=config.root, exclude=config.exclude, force_exclude=options.force_exclude,
                     respect_gitignore=config.respect_gitignore, max_file_size=config.max_file_size)
    report = Report(command="scan")
    for error in found.errors:
        report.errors.append(dataclasses.replace(error, path=display_path(error.path, Path(cwd))))
    report.notices.extend(found.notices)
    if not (found.files or found.errors or found.notices):  # "All checks passed" must not hide a wrong path
        named = ", ".join(display_path(p, Path(cwd)) for p in paths)
        report.notices.append(f"no Python files to check in {named}: none found, or all excluded "
                              "(exclude, .gitignore, skipped folders such as build/ or .venv/)")
    report.rules = [spec.info() for rule_id, spec in sorted(catalog.rules.items())
                    if config.rule_enabled(rule_id, "")]
    plan = ScanPlan(config=config, catalog=catalog, files=found.files, report=report)
    plan.projects = _projects(found.files, config, report)
    return plan


def _projects(files: list[str], config: ScanConfig, report: Report) -> list[tuple[str | None, list[str]]]:
    """The projects the scanned files belong to: (root, every Python file of it), or (None, the scanned
    files) for files outside any project."""
    from llmdoctor.scan.project.layout import project_root

    roots: dict[str | None, list[str]] = {}
    memo: dict[str, str | None] = {}
    for path in files:
        roots.setdefault(project_root(path, memo), []).append(path)
    out = []
    for root, scanned in roots.items():
        if root is None:
            out.append((None, scanned))
            continue
        found = discover([root], root=config.root or root, exclude=config.exclude,
                         respect_gitignore=config.respect_gitignore, max_file_size=config.max_file_size)
        # a folder below with its own pyproject.toml (or .git) is a project of its own: its files are not this one's
        every = sorted({path for path in found.files if project_root(path, memo) == root} | set(scanned))
        if len(every) > MAX_PROJECT_FILES:
            report.notices.append(f"{root}: {len(found.files)} Python files under the project root; the project "
                                  f"model holds only the {len(scanned)} scanned ones (over {MAX_PROJECT_FILES})")
            every = scanned
        out.append((root, every))
    return out


def _catalog(config: ScanConfig, analyze: Analyze | None) -> Catalog:
    cache_dir = analyze.catalog_dir(config) if hasattr(analyze, "catalog_dir") else None
    return load_catalog(config.rules_dirs, cache_dir=cache_dir)


def prepare_stdin(filename: str | None, options: ScanOptions, analyze: Analyze | None = None) -> ScanPlan:
    """The plan for `scan -`: one file, read from stdin, that is checked as if it were `filename` (config
    found from there, per-file ignores and, with --force-exclude, excludes applied to it; messages name it)."""
    cwd = options.cwd or os.getcwd()
    path = os.path.normpath(os.path.join(cwd, filename or "-"))
    config = _settings([os.path.dirname(path) if not filename else path], options, cwd)
    catalog = _catalog(config, analyze)
    _check_rule_ids(config, catalog, options)
    report = Report(command="scan")
    report.rules = [spec.info() for rule_id, spec in sorted(catalog.rules.items())
                    if config.rule_enabled(rule_id, "")]
    skip = options.force_exclude and filename is not None and is_excluded(
        path, root=config.root, exclude=config.exclude, respect_gitignore=config.respect_gitignore)
    plan = ScanPlan(config=config, catalog=catalog, files=[] if skip else [path], report=report)
    if not skip:  # the project around `filename` is indexed from disk, the code itself comes from stdin
        plan.projects = _projects([path], config, report) if filename else [(None, [path])]
    return plan


def run_scan(paths: list[str], options: ScanOptions | None = None, analyze: Analyze | None = None,
             progress: Callable[[int, int], None] | None = None) -> Report:
    """`progress(done, total)` is called after each file (the CLI's progress bar); the engine never sees it."""
    options = options or ScanOptions()
    with fewer_collections():
        return collect(prepare_scan(paths, options, analyze), options, analyze, progress)


def collect(plan: ScanPlan, options: ScanOptions, analyze: Analyze | None = None,
            progress: Callable[[int, int], None] | None = None) -> Report:
    """Analyse the plan's files (and the rest of their projects), link each project, and put the scanned
    files' findings into the plan's report: display paths, counters, sorted. The per-file results stay in
    `plan.results` (what `--fix` re-links a changed file with)."""
    with fewer_collections():
        return _collect(plan, options, analyze, progress)


def _collect(plan: ScanPlan, options: ScanOptions, analyze: Analyze | None,
             progress: Callable[[int, int], None] | None) -> Report:
    cwd = Path(options.cwd or os.getcwd())
    report = plan.report
    parsed = prefiltered = suppressed = 0
    checked = set(plan.files)
    analyze = analyze or analyze_serial
    linked: dict[str | None, tuple[list[FileResult] | None, str | None]] = {}
    remembers = hasattr(analyze, "linked")
    for root, files in plan.projects:  # a project where nothing changed: its last reports, as they were
        # (the reports print paths relative to the working directory: it is part of the state)
        linked[root] = (analyze.linked(files, checked, f"{root}\0{cwd}", plan.catalog, plan.config) if remembers
                        else (None, None))
    every = sorted({path for root, files in plan.projects if linked[root][0] is None for path in files})
    results: dict[str, FileResult] = {}
    for done, result in enumerate(analyze(every, plan.catalog, plan.config, checked) if every else (), 1):
        results[result.path] = result
        if progress is not None:
            progress(done, len(every))
    plan.results = results

    def show(path: str) -> str:
        return display_path(path, cwd)

    from llmdoctor.scan.project.link import link_results

    for root, files in plan.projects:
        final, state = linked[root]
        if final is None:
            program = analyze.program(root, plan.catalog, plan.config) if hasattr(analyze, "program") else None
            final = link_results([results[p] for p in files if p in results], plan.catalog, plan.config, root,
                                 show=show, program=program)
            if remembers:
                analyze.remember(state, final, plan.catalog, plan.config)
        for result in final:
            shown = show(result.path)
            report.findings.extend(describe_fix(dataclasses.replace(f, path=shown), plan.catalog)
                                   for f in result.findings)
            report.errors.extend(dataclasses.replace(e, path=shown) for e in result.errors)
            parsed += result.parsed
            prefiltered += result.prefiltered
            suppressed += result.suppressed
    report.files_checked = len(plan.files)
    report.summary_extra = {"parsed": parsed, "prefiltered": prefiltered, "suppressed": suppressed}
    return report.sorted()


def describe_fix(finding: Finding, catalog: Catalog) -> Finding:
    """The finding with its `autofix` descriptor completed from the rule's YAML (`safety`, `title`), or
    without one when the rule does not declare that fix."""
    autofix = finding.extra.get("autofix")
    if autofix is None:
        return finding
    spec = catalog.rules.get(finding.rule)
    fix = spec.fix(str(autofix.get("kind"))) if spec and isinstance(autofix, dict) else None
    extra = dict(finding.extra)
    if fix is None:
        del extra["autofix"]
    else:
        extra["autofix"] = {**autofix, "safety": fix.safety, "title": fix.title}
    return dataclasses.replace(finding, extra=extra)


def _settings(paths: list[str], options: ScanOptions, cwd: str) -> ScanConfig:
    if options.isolated:
        config = ScanConfig(root=cwd)
    else:
        source = options.config_path and os.path.join(cwd, options.config_path)
        config = load_config(Path(source) if source else find_config(paths[0]))
        if not config.root:
            config = dataclasses.replace(config, root=cwd)
    changes: dict = {}
    if options.select:
        changes["select"] = tuple(s.upper() for s in options.select)
    if options.ignore:
        changes["ignore"] = config.ignore + tuple(i.upper() for i in options.ignore)
    if options.exclude:
        changes["exclude"] = config.exclude + tuple(_anchored(glob, cwd, config) for glob in options.exclude)
    if options.control_plane:
        declared = []
        for pattern in options.control_plane:
            try:
                glob, function = control_plane_pattern(pattern)
            except ValueError as problem:
                raise UserError(f"--control-plane {problem}") from None
            declared.append((_anchored(glob, cwd, config), function))
        changes["control_plane"] = config.control_plane + tuple(declared)
    if options.rules_dirs:
        changes["rules_dirs"] = config.rules_dirs + tuple(os.path.join(cwd, d) for d in options.rules_dirs)
    if options.respect_gitignore is not None:
        changes["respect_gitignore"] = options.respect_gitignore
    if options.max_file_size is not None:
        changes["max_file_size"] = options.max_file_size
    if options.every_context:
        changes["every_context"] = True
    return dataclasses.replace(config, **changes) if changes else config


def _anchored(glob: str, cwd: str, config: ScanConfig) -> str:
    """A command-line glob is relative to the cwd: anchored there when the config root differs."""
    if "/" in glob.strip("/") and os.path.abspath(cwd) != config.root:
        return os.path.relpath(os.path.join(cwd, glob), config.root)
    return glob


def _check_rule_ids(config: ScanConfig, catalog: Catalog, options: ScanOptions) -> None:
    where = f" in {config.source}" if config.source else ""
    checks = [
        ("--select" if options.select else f"select{where}", config.select),
        ("ignore" + (where or " (--ignore)"), config.ignore),
        (f"per-file-ignores{where}", tuple(i for _, ids in config.per_file_ignores for i in ids)),
        (f"severity{where}", tuple(rid for rid, _ in config.severity)),
    ]
    known = sorted(catalog.rules)
    for label, ids in checks:
        for rule_id in ids:
            if not any(k.startswith(rule_id) for k in known):
                raise UserError(f"{label}: unknown rule {rule_id!r}{did_you_mean(rule_id, known)}; "
                                f"known rules: {', '.join(known)}")
    if not any(config.rule_enabled(rule_id, "") for rule_id in known):  # "All checks passed" would be a lie
        chosen = f"{checks[0][0]} {','.join(config.select)}" if config.select else "every rule"
        ignored = "--ignore" if options.ignore else f"ignore{where}"
        raise UserError(f"{chosen} with {ignored} {','.join(config.ignore)} leaves no rule to check: "
                        "nothing would be checked (drop one of them)")
