"""`llmdoctor scan`: options and rendering only (`rules` and `explain` are in commands/catalog.py).

The work lives in llmdoctor/scan/ (imported inside the commands: libcst and yaml load only when needed);
fixing, `--add-noqa` and `--since` in llmdoctor/scan/fix/ and llmdoctor/scan/since.py.
"""

from __future__ import annotations

import os
import sys

import typer

from llmdoctor.commands import options as opt
from llmdoctor.errors import UserError


def _size(value: str | None) -> int | None:
    if value is None:
        return None
    from llmdoctor.errors import UserError
    from llmdoctor.scan.settings import MAX_FILE_SIZE_LIMIT
    from llmdoctor.sizes import parse_size

    size = parse_size(value, "--max-file-size")
    if size > MAX_FILE_SIZE_LIMIT:
        raise UserError(f"--max-file-size {value.strip()[:40]}: at most {MAX_FILE_SIZE_LIMIT:,} bytes (1 GiB)")
    return size


def scan_command(
    paths: list[str] = typer.Argument(None, metavar="[PATH]...",
                                      help="Files or folders to scan (default: .); `-` reads stdin."),
    fmt: str = opt.format_option(*opt.REPORT_FORMATS),
    output: str | None = opt.OUTPUT,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    statistics: bool = opt.STATISTICS,
    exit_zero: bool = opt.EXIT_ZERO,
    quiet: bool = opt.QUIET,
    exclude: list[str] = typer.Option(None, "--exclude", metavar="GLOB",
                                      help="Skip matching files and folders (repeatable)."),
    force_exclude: bool = typer.Option(False, "--force-exclude",
                                       help="Apply excludes and .gitignore to files named on the command "
                                            "line too."),
    rules_dir: list[str] = typer.Option(None, "--rules-dir", metavar="DIR",
                                        help="Folder of YAML files adding entries to rule tables "
                                             "(repeatable)."),
    config: str | None = typer.Option(None, "--config", metavar="FILE",
                                      help="Use this pyproject.toml or .llmdoctor.yaml instead of the "
                                           "nearest one."),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore every configuration file."),
    no_gitignore: bool = typer.Option(False, "--no-gitignore", help="Scan files that .gitignore ignores."),
    max_file_size: str | None = typer.Option(None, "--max-file-size", metavar="SIZE",
                                             help="Skip larger files with a notice (default 2000000 bytes; "
                                                  "2MB, 2MiB...)."),
    every_context: bool = typer.Option(False, "--every-context",
                                       help="Report in every execution context (scripts, tests, library code "
                                            "nobody calls), not only where each rule's cost is paid per request."),
    control_plane: list[str] = typer.Option(None, "--control-plane", metavar="GLOB[::FUNCTION]",
                                            help="Entry points in these files (and functions) serve an admin "
                                                 "console or settings, not the traffic: what only they reach is "
                                                 "not reported per request (repeatable; config: control-plane)."),
    fix: bool | None = typer.Option(None, "--fix/--no-fix",
                                    help="Apply the safe fixes to the files (config: fix = true)."),
    unsafe_fixes: bool | None = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes",
                                             help="Also apply (and mark) the unsafe fixes (config: "
                                                  "unsafe-fixes = true)."),
    fix_timeout: float | None = typer.Option(None, "--fix-timeout", metavar="SECONDS",
                                             help="The timeout LLM006's fix writes (config: fix-timeout)."),
    diff: bool = typer.Option(False, "--diff", help="Print the fixes as a unified diff, change nothing "
                                                    "(exit 1 when something would change)."),
    show_fixes: bool = typer.Option(False, "--show-fixes", help="List the fixes applied."),
    exit_non_zero_on_fix: bool = typer.Option(False, "--exit-non-zero-on-fix",
                                              help="Exit 1 when a fix was applied, even if nothing remains."),
    add_noqa: str | None = typer.Option(None, "--add-noqa", metavar="[REASON]",
                                        help="Add `# noqa: CODE [REASON]` to every line with a finding (the "
                                             "reason is optional: `--add-noqa` alone writes the codes)."),
    since: str | None = typer.Option(None, "--since", metavar="REF",
                                     help="Only findings on lines added or changed since the merge base with "
                                          "the git REF."),
    stdin_filename: str | None = typer.Option(None, "--stdin-filename", metavar="PATH",
                                              help="The file name of the code read from stdin (`scan -`): "
                                                   "config, ignores and messages as if it were there."),
    jobs: int | None = opt.jobs_option("Worker processes", "the available CPUs", opt.available_cpus()),
    cache_dir: str | None = typer.Option(None, "--cache-dir", metavar="DIR", envvar="LLMDOCTOR_CACHE_DIR",
                                         help="Result cache folder (default: .llmdoctor_cache in the "
                                              "project root)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
) -> None:
    """Scan Python code for LLM-serving anti-patterns (exit 1 on findings, 2 when nothing was checked)."""
    from llmdoctor.scan.runner import ScanOptions, collect, prepare_scan, prepare_stdin

    report_options = opt.ReportOptions.from_cli(fmt, output, select, ignore, statistics, exit_zero, quiet=quiet)
    opt.check_jobs(jobs)
    if fix_timeout is not None and not 0 < fix_timeout < 10**6:
        raise UserError(f"--fix-timeout {fix_timeout:g}: give a number of seconds above 0, e.g. 30")
    paths = list(paths or [])
    from_stdin = paths == ["-"] or (stdin_filename is not None and not paths)
    if "-" in paths and not from_stdin:
        raise UserError("`-` (stdin) cannot be mixed with other paths")
    if stdin_filename is not None and not from_stdin:
        raise UserError("--stdin-filename names the code read from stdin: pass `-` as the only path")
    _check_modes(fix, diff, add_noqa, since, from_stdin, statistics)
    options = ScanOptions(
        select=report_options.select, ignore=report_options.ignore, exclude=tuple(exclude or ()),
        force_exclude=force_exclude, rules_dirs=tuple(rules_dir or ()), config_path=config, isolated=isolated,
        respect_gitignore=False if no_gitignore else None, max_file_size=_size(max_file_size),
        every_context=every_context, control_plane=tuple(control_plane or ()),
    )
    cwd = os.getcwd()
    data = None
    from llmdoctor.scan.parallel import ScanExecutor

    executor = ScanExecutor(jobs=jobs, cache_dir=cache_dir, use_cache=not no_cache)
    if from_stdin:
        data = _read_stdin()
        plan = prepare_stdin(stdin_filename, options, executor)
        report = collect(plan, options, analyze=_stdin_analyzer(data, executor))
        report.notices.extend(executor.notices)
    else:
        from llmdoctor.report.progress import Progress

        plan = prepare_scan(paths or ["."], options, executor)
        with Progress.for_report("scanning", fmt) as progress:
            report = collect(plan, options, analyze=executor, progress=progress.update)
        report.notices.extend(executor.notices)
    settings = plan.config
    explicit_mode = diff or add_noqa is not None or since is not None
    fixing = diff or (fix if fix is not None else (settings.fix and not explicit_mode))
    report.unsafe_fixes = unsafe_fixes if unsafe_fixes is not None else settings.unsafe_fixes
    timeout = fix_timeout if fix_timeout is not None else settings.fix_timeout
    report.fix_timeout = timeout is not None

    if add_noqa is not None:
        raise typer.Exit(_add_noqa(plan, report, cwd, add_noqa, fmt, output, exit_zero))
    stream = None
    if fixing:
        from llmdoctor.scan.fix.base import FixPolicy
        from llmdoctor.scan.fix.run import fix_report

        policy = FixPolicy(unsafe=report.unsafe_fixes, timeout=timeout)
        sources = {plan.files[0]: data} if from_stdin and plan.files else None
        run = fix_report(plan, report, policy, write=not diff, cwd=cwd, sources=sources)
        if diff:
            raise typer.Exit(_print_diff(run, report, exit_zero))
        if from_stdin:  # ruff's way: the fixed code on stdout, what remains on stderr
            outcome = run.outcomes[0] if run.outcomes else None
            sys.stdout.write(outcome.fixed if outcome else (data or b"").decode("utf-8", "surrogateescape"))
            sys.stdout.flush()
            stream = sys.stderr
    if since is not None:
        _keep_new(report, since, cwd)
    if fmt == "sarif" and not fixing:
        from llmdoctor.scan.fix.run import attach_sarif_fixes

        attach_sarif_fixes(plan, report, cwd)
    code = report.exit_code()
    if exit_non_zero_on_fix and report.fixes is not None and report.fixes.applied:
        code = max(code, 1)
    raise typer.Exit(report_options.emit(report, code, stream=stream, show_fixes=show_fixes))


def _check_modes(fix, diff, add_noqa, since, from_stdin, statistics) -> None:
    if add_noqa is not None and (fix or diff):
        raise UserError("--add-noqa silences the findings, --fix/--diff change the code: use one at a time")
    if since is not None and (fix or add_noqa is not None or diff):
        raise UserError("--since selects the findings to report; it cannot be combined with --fix, --diff or "
                        "--add-noqa (fix or silence whole files instead)")
    if add_noqa is not None and from_stdin:
        raise UserError("--add-noqa edits files in place: it cannot work on stdin")
    if statistics and (diff or add_noqa is not None):
        raise UserError("--statistics prints counts of findings; it does not combine with --diff or --add-noqa")


def _read_stdin() -> bytes:
    if sys.stdin is None or sys.stdin.isatty():
        raise UserError("`scan -` reads the code from stdin, but stdin is a terminal: pipe the code in "
                        "(`llmdoctor scan - --stdin-filename app.py < app.py`)")
    return sys.stdin.buffer.read()


def _stdin_analyzer(data: bytes, executor):
    """The stdin code is the one checked file; the rest of its project is indexed from disk (cached)."""
    def analyze(files, catalog, config, checked=None):
        from llmdoctor.scan.engine import analyze_module

        on_disk = [path for path in files if path not in (checked or ())]
        if on_disk:
            yield from executor(on_disk, catalog, config, set())
        for path in files:
            if path in (checked or ()):
                yield analyze_module(path, data, catalog, config)

    return analyze


def _print_diff(run, report, exit_zero: bool) -> int:
    """`--diff`: the diffs on stdout, what they would fix on stderr (as ruff); exit 1 when one is not empty."""
    sys.stdout.writelines(run.diffs)
    sys.stdout.flush()
    fixes = report.fixes
    remaining = len(report.findings)
    for skipped in fixes.skipped:
        typer.echo(f"{skipped['path']}:{skipped['line']}:{skipped['column']}: {skipped['rule']} fix not applied: "
                   f"{skipped['reason']}", err=True)
    n = len(fixes.applied)
    typer.echo(f"Would fix {n} finding{'s' if n != 1 else ''} ({remaining} remaining)." if n else
               f"No fixes to apply ({remaining} finding{'s' if remaining != 1 else ''} remaining).", err=True)
    for error in report.errors:
        typer.echo(f"{error}", err=True)
    if run.diffs:
        return 0 if exit_zero else 1
    return 2 if report.errors and not report.findings else 0


def _add_noqa(plan, report, cwd: str, reason: str, fmt: str, output: str | None, exit_zero: bool) -> int:
    from llmdoctor.scan.fix.noqa import add_noqa, check_reason

    try:
        text = check_reason(reason) or None
    except ValueError as err:
        raise UserError(f"--add-noqa: {err}") from None
    run = add_noqa(plan, report, cwd, text)
    lines = [f"{f.path}:{f.line}:{f.column}: {f.rule} still reported: no line of its statement could take the "
             "comment (each ends inside a string or with a `\\` continuation); silence it by hand"
             for f in run.unsilenced]
    lines += [str(e) for e in report.errors]
    lines.append(f"Added {run.added} noqa directive{'s' if run.added != 1 else ''}"
                 f" in {len(run.files)} file{'s' if len(run.files) != 1 else ''}.")
    if fmt == "json":
        import json

        body = json.dumps({"added": run.added, "files": run.files,
                           "unsilenced": [f.to_dict() for f in run.unsilenced],
                           "errors": [e.to_dict() for e in report.errors]}, indent=2) + "\n"
    else:
        body = "".join(line + "\n" for line in lines)
    if output:
        try:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(body)
        except OSError as err:
            raise UserError(f"--output {output}: cannot write: {err.strerror or err}") from None
    else:
        sys.stdout.write(body)
    code = 1 if run.unsilenced else (2 if report.errors else 0)
    return 0 if exit_zero and code == 1 else code


def _keep_new(report, ref: str, cwd: str) -> None:
    from llmdoctor.scan.since import changed_lines

    changed = changed_lines(ref, cwd)
    kept = [f for f in report.findings if changed.covers(f, cwd)]
    hidden = len(report.findings) - len(kept)
    report.findings = kept
    report.summary_extra["since"] = {"ref": ref, "merge_base": changed.base, "not_shown": hidden}
    if hidden:
        report.notices.append(f"{hidden} finding{'s' if hidden != 1 else ''} on lines unchanged since {ref} "
                              f"(merge base {changed.base[:12]}) not shown")


def register(app: typer.Typer) -> None:
    app.command("scan")(scan_command)
