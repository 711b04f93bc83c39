"""`llmdoctor rules` and `llmdoctor explain`: the catalog of every check of every command (llmdoctor.catalog).

Both read YAML only: no libcst, httpx or tiktoken (tests/test_startup_imports.py).
"""

from __future__ import annotations

import sys

import typer

from llmdoctor.errors import UserError


def implemented_rule_ids() -> set[str]:
    """Ids of the scan rule modules (`llmdoctor/scan/rules/llm002.py` -> LLM002, and the project-model rules of
    `llmdoctor/scan/project/llm004.py`), found without importing them (they import libcst).
    tests/test_startup_imports.py checks this agrees with `implemented_rules()`."""
    import importlib.util
    import pkgutil

    locations: list[str] = []
    for package in ("llmdoctor.scan.rules", "llmdoctor.scan.project"):
        spec = importlib.util.find_spec(package)
        locations.extend(spec.submodule_search_locations or [] if spec else [])
    return {info.name.upper() for info in pkgutil.iter_modules(locations)
            if info.name.startswith("llm") and info.name[3:].isdigit()}


def rules_command(
    prefix: str | None = typer.Argument(None, metavar="[PREFIX]",
                                        help="Only checks whose id starts with this, e.g. NGX or LLM00."),
    command: str | None = typer.Option(None, "--command", metavar="COMMAND",
                                       help="Only the checks of this command: scan, nginx, probe, kv-budget, "
                                            "gpu, tokens."),
    fmt: str = typer.Option("text", "--format", help="Output: text or json."),
    rules_dir: list[str] = typer.Option(None, "--rules-dir", metavar="DIR",
                                        help="Also load (and validate) these scan table files."),
) -> None:
    """List every check of every command: id, name, severity and what it finds."""
    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose text or json")
    from llmdoctor.catalog import load_checks

    catalog = load_checks()
    checks = catalog.select(command=command, prefix=prefix)
    if rules_dir:
        from llmdoctor.scan.catalog import load_catalog

        load_catalog(tuple(rules_dir))
    implemented = implemented_rule_ids()

    def is_implemented(check) -> bool:
        return check.command != "scan" or check.id in implemented

    if fmt == "json":
        import json

        rows = [{"id": c.id, "command": c.command, "name": c.name, "severity": c.severity,
                 "severities": [{"severity": s.severity, "when": s.when} for s in c.severities],
                 "summary": c.summary, "implemented": is_implemented(c)} for c in checks]
        typer.echo(json.dumps({"rules": rows}, indent=2))
        return
    from rich.markup import escape

    from llmdoctor.report.render import make_console

    console = make_console(sys.stdout)
    width = max((len(c.name) for c in checks), default=0)
    shown_prefix = None
    for c in checks:
        if c.prefix != shown_prefix:
            shown_prefix = c.prefix
            console.print(f"[dim]# {escape(catalog.prefixes[c.prefix].title)}[/]")
        severity = c.severity + ("+" if c.severities else "")
        pending = "" if is_implemented(c) else " [dim](not implemented yet)[/]"
        console.print(f"[bold]{c.id:<6}[/]  {escape(c.name):<{width}}  {severity:<8} {escape(c.summary)}{pending}")
    if any(c.severities for c in checks):
        console.print("[dim]+ : more than one severity, by case (`llmdoctor explain ID`)[/]")


def explain_command(
    rule_id: str = typer.Argument(..., metavar="ID", help="A check id, e.g. LLM004 or NGX001."),
    fmt: str = typer.Option("text", "--format", help="Output: text (Markdown, rendered on a terminal) or json."),
) -> None:
    """Explain a check: what it does, why it matters (with the measured cost), example, fix."""
    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose text or json")
    from llmdoctor.catalog import load_checks

    catalog = load_checks()
    check = catalog.check(rule_id)
    if fmt == "json":
        import json

        typer.echo(json.dumps(check.to_dict(), indent=2))
        return
    text = (f"# {check.id} {check.name}\n\n`llmdoctor {check.command}` · severity: {check.severity_text()}\n\n"
            + check.help_markdown())
    if sys.stdout.isatty():
        from rich.markdown import Markdown

        from llmdoctor.report.render import make_console

        make_console(sys.stdout).print(Markdown(text))
    else:
        sys.stdout.write(text)


def register(app: typer.Typer) -> None:
    app.command("rules")(rules_command)
    app.command("explain")(explain_command)
