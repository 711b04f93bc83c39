"""The project model's entry points, one framework family at a time (rules/entrypoints.yaml).

Each fixture under fixtures/python/entrypoints/ is a small program written from its framework's documented
API (cited in its docstring): every kind of handler the framework has calls a helper that builds a client per
call, and the findings must be exactly the lines marked `# hit: LLMxxx`, each in the family's context
(`serving`, or `worker` for task queues) with an entry point of that family; `# hit: LLMxxx (context)` is
reported in that other context (`scheduled`: a health probe's route, which still stalls the loop it waits on).

`# quiet: LLMxxx (context)` is a near miss: the same kind of helper reached only from a script part, a startup
hook, a cached function. It must not be reported, and with `--every-context` it is a candidate in that context,
so it is quiet for the reason the fixture gives.

`# gap: LLMxxx (context)` marks what the model does not get right yet (the comment above it says why). It is
left out of the exact comparison and its context is pinned as it is today (`none`: no candidate at all), so
the day the model sees it, this test says so and the marker becomes a hit.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from llmdoctor.scan.runner import ScanOptions, analyze_serial, run_scan

ENTRYPOINTS = Path(__file__).resolve().parents[1] / "fixtures" / "python" / "entrypoints"
MARK = re.compile(r"#\s*(hit|quiet|gap):\s*((?:[A-Z]+[0-9]+)(?:\s*,\s*[A-Z]+[0-9]+)*)(?:\s*\(([\w-]+)\))?")

# fixture (a file, or a folder for a framework that splits handlers across modules) ->
# (the frameworks its entry points belong to, the context of every finding)
FAMILIES = {
    "fastapi_app.py": (("fastapi/starlette",), "serving"),
    "starlette_app.py": (("fastapi/starlette",), "serving"),
    "flask_app.py": (("flask/quart",), "serving"),
    "quart_app.py": (("flask/quart",), "serving"),
    "django_app": (("django",), "serving"),
    "aiohttp_app.py": (("aiohttp",), "serving"),
    "sanic_app.py": (("sanic",), "serving"),
    "litestar_app.py": (("litestar",), "serving"),
    "falcon_app.py": (("falcon",), "serving"),
    "tornado_app.py": (("tornado",), "serving"),
    "gradio_app.py": (("gradio",), "serving"),
    "chainlit_app.py": (("chainlit",), "serving"),
    "grpc_app": (("grpc",), "serving"),
    "graphql_app.py": (("graphql", "graphql-subscriptions"), "serving"),
    "mcp_fastmcp.py": (("mcp",), "serving"),
    "mcp_lowlevel.py": (("mcp",), "serving"),
    "websockets_server.py": (("websockets",), "serving"),
    "asyncio_streams_server.py": (("asyncio",), "serving"),
    "socketio_server.py": (("socketio",), "serving"),
    "streamlit_app.py": (("streamlit",), "serving"),
    "slack_bolt_app.py": (("slack/discord",), "serving"),
    "discord_bot.py": (("slack/discord",), "serving"),
    "pycord_bot.py": (("slack/discord",), "serving"),
    "telegram_bot.py": (("telegram",), "serving"),
    # the FastAPI app a Modal `asgi_app` serves keeps its own family
    "modal_endpoints.py": (("ray-serve/bentoml/modal", "fastapi/starlette"), "serving"),
    "modal_jobs.py": (("celery/rq/dramatiq/huey/modal",), "worker"),
    # a deployment with a FastAPI ingress: its routes are FastAPI's
    "ray_serve_app.py": (("ray-serve/bentoml/modal", "fastapi/starlette"), "serving"),
    "bentoml_service.py": (("ray-serve/bentoml/modal",), "serving"),
    "celery_tasks.py": (("celery/rq/dramatiq/huey/modal",), "worker"),
    "rq_app": (("celery/rq/dramatiq/huey/modal",), "worker"),
    "dramatiq_actors.py": (("celery/rq/dramatiq/huey/modal",), "worker"),
    "huey_tasks.py": (("celery/rq/dramatiq/huey/modal",), "worker"),
    "temporal_activities.py": (("temporal",), "worker"),
}


def _marks(root: Path) -> dict[str, dict]:
    """{"hit": {(path, line, rule)}, "quiet": {(path, line, rule): context}, "gap": {...: context}}."""
    found: dict[str, dict] = {"hit": {}, "quiet": {}, "gap": {}}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            mark = MARK.search(line)
            if mark:
                kind, codes, context = mark.groups()
                assert kind == "hit" or context is not None, f"{name}:{number}: `# {kind}:` needs a context"
                for code in codes.split(","):
                    found[kind][(name, number, code.strip())] = context
    return found


def _project(fixture: str, tmp_path: Path) -> Path:
    """The fixture as a project of its own (its pyproject.toml marks the root the scan indexes)."""
    source = ENTRYPOINTS / fixture
    root = tmp_path / "project"
    if source.is_dir():
        shutil.copytree(source, root)
    else:
        root.mkdir()
        shutil.copy(source, root / source.name)
    (root / "pyproject.toml").write_text('[project]\nname = "fixture"\nversion = "0"\n', encoding="utf-8")
    return root


class _AnalyzeOnce:
    """run_scan's `analyze` hook (the contract a cached runner follows): the per-file results of the first scan
    serve the second, which differs only in how the project model decides them (`--every-context`)."""

    def __init__(self) -> None:
        self.results: list | None = None

    def __call__(self, files, catalog, config, checked=None):
        if self.results is None:
            self.results = list(analyze_serial(files, catalog, config, checked))
        return self.results


@pytest.mark.parametrize("fixture", sorted(FAMILIES), ids=lambda name: name.removesuffix(".py"))
def test_each_framework_family_serves_its_handlers(fixture, tmp_path):
    frameworks, context = FAMILIES[fixture]
    root = _project(fixture, tmp_path)
    marks = _marks(root)
    assert marks["hit"], "a fixture marks the findings it expects"

    analyze = _AnalyzeOnce()
    report = run_scan(["."], ScanOptions(isolated=True, cwd=str(root)), analyze=analyze)
    assert report.errors == []
    findings = [f for f in report.findings if (f.path, f.line, f.rule) not in marks["gap"]]
    assert sorted((f.path, f.line, f.rule) for f in findings) == sorted(marks["hit"])
    seen = set()
    for finding in findings:
        where = f"{finding.path}:{finding.line} {finding.rule}"
        assert finding.extra["context"] == (marks["hit"][(finding.path, finding.line, finding.rule)] or context), where
        assert finding.extra["entry"]["framework"] in frameworks, where
        seen.add(finding.extra["entry"]["framework"])
    assert seen == set(frameworks)

    every = run_scan(["."], ScanOptions(isolated=True, cwd=str(root), every_context=True), analyze=analyze)
    contexts = {(f.path, f.line, f.rule): f.extra["context"] for f in every.findings}
    pinned = {**marks["quiet"], **marks["gap"]}
    assert {key: contexts.get(key, "none") for key in pinned} == pinned


def test_every_fixture_is_checked():
    on_disk = {p.name for p in ENTRYPOINTS.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert on_disk == set(FAMILIES)
