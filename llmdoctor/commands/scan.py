"""`llmdoctor scan`, `llmdoctor rules`, `llmdoctor explain`: options and rendering only.

The work lives in llmdoctor/scan/ (imported inside the commands: libcst and yaml load only when needed).
"""

from __future__ import annotations

import re
import sys

import typer

from llmdoctor.errors import UserError

FORMATS = ("text", "json", "sarif", "github")
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B)?\s*$", re.IGNORECASE)
_UNITS = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _size(value: str | None) -> int | None:
    if value is None:
        return None
    match = _SIZE.match(value)
    if not match or int(match.group(1)) <= 0:
        raise UserError(f"--max-file-size {value!r}: give a size like 2000000, 2MB or 2MiB")
    return int(match.group(1)) * _UNITS.get((match.group(2) or "").lower(), 1)


def _split_ids(values: list[str] | None) -> tuple[str, ...]:
    out = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(out)


def scan_command(
    paths: list[str] = typer.Argument(None, metavar="[PATH]...",
                                      help="Files or folders to scan (default: .)."),
    fmt: str = typer.Option("text", "--format", help="Output: text, json, sarif or github."),
    output: str | None = typer.Option(None, "--output", "-o", metavar="FILE",
                                      help="Write the report to FILE instead of stdout."),
    select: list[str] = typer.Option(None, "--select", metavar="IDS",
                                     help="Only these rules (ids or prefixes, comma-separated or repeated)."),
    ignore: list[str] = typer.Option(None, "--ignore", metavar="IDS", help="Skip these rules."),
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
                                             help="Skip larger files with a notice (default 2000000 bytes)."),
    statistics: bool = typer.Option(False, "--statistics",
                                    help="Also print the number of findings per rule."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", metavar="N",
                                    help="Worker processes (default: the available CPUs; 1 = no pool)."),
    cache_dir: str | None = typer.Option(None, "--cache-dir", metavar="DIR", envvar="LLMDOCTOR_CACHE_DIR",
                                         help="Result cache folder (default: .llmdoctor_cache in the "
                                              "project root)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
) -> None:
    """Scan Python code for LLM-serving anti-patterns (exit 1 on findings, 2 when nothing was checked)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    from llmdoctor.report.render import render
    from llmdoctor.scan.runner import ScanOptions, run_scan

    options = ScanOptions(
        select=_split_ids(select), ignore=_split_ids(ignore), exclude=tuple(exclude or ()),
        force_exclude=force_exclude, rules_dirs=tuple(rules_dir or ()), config_path=config, isolated=isolated,
        respect_gitignore=False if no_gitignore else None, max_file_size=_size(max_file_size),
    )
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: give a number of worker processes, 1 or more")
    from llmdoctor.scan.parallel import ScanExecutor

    executor = ScanExecutor(jobs=jobs, cache_dir=cache_dir, use_cache=not no_cache)
    report = run_scan(list(paths or ["."]), options, analyze=executor)
    report.notices.extend(executor.notices)
    if output:
        try:
            with open(output, "w", encoding="utf-8") as handle:
                render(report, fmt, handle, statistics=statistics)
        except OSError as err:
            raise UserError(f"--output {output}: cannot write: {err.strerror or err}") from None
    else:
        render(report, fmt, statistics=statistics)
    code = report.exit_code()
    if exit_zero and code == 1:
        code = 0
    raise typer.Exit(code)


def implemented_rule_ids() -> set[str]:
    """Ids of the rule modules (`llmdoctor/scan/rules/llm004.py` -> LLM004), found without importing them
    (they import libcst, which `llmdoctor rules` does not need). tests/test_startup_imports.py checks this
    agrees with `rule_classes()`."""
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec("llmdoctor.scan.rules")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return {info.name.upper() for info in pkgutil.iter_modules(locations)
            if info.name.startswith("llm") and info.name[3:].isdigit()}


def rules_command(
    fmt: str = typer.Option("text", "--format", help="Output: text or json."),
    rules_dir: list[str] = typer.Option(None, "--rules-dir", metavar="DIR",
                                        help="Also load these table files."),
) -> None:
    """List the scan rules: id, name, severity and what each one finds."""
    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose text or json")
    from llmdoctor.scan.catalog import load_catalog
    catalog = load_catalog(tuple(rules_dir or ()))
    implemented = implemented_rule_ids()
    specs = [catalog.rules[r] for r in sorted(catalog.rules)]
    if fmt == "json":
        import json

        rows = [{"id": s.id, "name": s.name, "severity": s.severity, "summary": s.summary,
                 "implemented": s.id in implemented} for s in specs]
        typer.echo(json.dumps({"rules": rows}, indent=2))
        return
    from rich.markup import escape

    from llmdoctor.report.render import make_console

    console = make_console(sys.stdout)
    for s in specs:
        pending = "" if s.id in implemented else " [dim](not implemented yet)[/]"
        console.print(f"[bold]{s.id}[/]  {escape(s.name):<28} {s.severity:<8} {escape(s.summary)}{pending}")


def explain_command(
    rule_id: str = typer.Argument(..., metavar="ID", help="A rule id, e.g. LLM004."),
    fmt: str = typer.Option("text", "--format", help="Output: text (markdown) or json."),
) -> None:
    """Explain a rule: what it does, why it matters (with the measured cost), example, fix."""
    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose text or json")
    from llmdoctor.scan.catalog import load_catalog

    spec = load_catalog().rule(rule_id.strip().upper())
    if fmt == "json":
        import json

        keys = ("id", "name", "severity", "summary", "why", "example", "use_instead", "fix_safety")
        typer.echo(json.dumps({k: getattr(spec, k) for k in keys}, indent=2))
        return
    typer.echo(f"# {spec.id} {spec.name} ({spec.severity})\n")
    typer.echo(spec.help_markdown())


def register(app: typer.Typer) -> None:
    app.command("scan")(scan_command)
    app.command("rules")(rules_command)
    app.command("explain")(explain_command)
