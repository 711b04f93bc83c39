"""`llmdoctor scan`: options and rendering only (`rules` and `explain` are in commands/catalog.py).

The work lives in llmdoctor/scan/ (imported inside the commands: libcst and yaml load only when needed).
"""

from __future__ import annotations

import typer

from llmdoctor.commands import options as opt


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
                                      help="Files or folders to scan (default: .)."),
    fmt: str = opt.format_option(*opt.REPORT_FORMATS),
    output: str | None = opt.OUTPUT,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    statistics: bool = opt.STATISTICS,
    exit_zero: bool = opt.EXIT_ZERO,
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
    jobs: int | None = opt.jobs_option("Worker processes", "the available CPUs", opt.available_cpus()),
    cache_dir: str | None = typer.Option(None, "--cache-dir", metavar="DIR", envvar="LLMDOCTOR_CACHE_DIR",
                                         help="Result cache folder (default: .llmdoctor_cache in the "
                                              "project root)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
) -> None:
    """Scan Python code for LLM-serving anti-patterns (exit 1 on findings, 2 when nothing was checked)."""
    from llmdoctor.scan.runner import ScanOptions, run_scan

    report_options = opt.ReportOptions.from_cli(fmt, output, select, ignore, statistics, exit_zero)
    options = ScanOptions(
        select=report_options.select, ignore=report_options.ignore, exclude=tuple(exclude or ()),
        force_exclude=force_exclude, rules_dirs=tuple(rules_dir or ()), config_path=config, isolated=isolated,
        respect_gitignore=False if no_gitignore else None, max_file_size=_size(max_file_size),
        every_context=every_context,
    )
    opt.check_jobs(jobs)
    from llmdoctor.report.progress import Progress
    from llmdoctor.scan.parallel import ScanExecutor

    executor = ScanExecutor(jobs=jobs, cache_dir=cache_dir, use_cache=not no_cache)
    with Progress.for_report("scanning", fmt) as progress:
        report = run_scan(list(paths or ["."]), options, analyze=executor, progress=progress.update)
    report.notices.extend(executor.notices)
    raise typer.Exit(report_options.emit(report, report.exit_code()))


def register(app: typer.Typer) -> None:
    app.command("scan")(scan_command)
