"""The project model's entry points, one framework family at a time (rules/entrypoints.yaml).

Each fixture under fixtures/python/entrypoints/ is a small program written from its framework's documented
API (cited in its docstring): every kind of handler the framework has calls a helper that builds a client per
call, and the findings must be exactly the lines marked `# hit: LLMxxx`, each in the family's context
(`serving`, or `worker` for task queues) with an entry point of that family. A line marked
`# quiet: LLMxxx (context)` is a near miss: the same kind of helper reached only from a script part; with
`--every-context` it is a candidate in that context, so it is quiet for the reason the fixture says.
`# gap: LLMxxx (context)` marks what the model does not see yet (the comment above it says why): it is
checked like a near miss, so the day the model sees it, this test says so and the marker becomes a hit.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from llmdoctor.scan.runner import ScanOptions, run_scan

ENTRYPOINTS = Path(__file__).resolve().parents[1] / "fixtures" / "python" / "entrypoints"
HIT = re.compile(r"#\s*hit:\s*((?:[A-Z]+[0-9]+)(?:\s*,\s*[A-Z]+[0-9]+)*)")
QUIET = re.compile(r"#\s*(?:quiet|gap):\s*([A-Z]+[0-9]+)\s*\(([\w-]+)\)")

# fixture (a file, or a folder for a framework that splits handlers across modules) -> (framework, context)
FAMILIES = {
    "fastapi_app.py": ("fastapi/starlette", "serving"),
    "starlette_app.py": ("fastapi/starlette", "serving"),
    "flask_app.py": ("flask/quart", "serving"),
    "quart_app.py": ("flask/quart", "serving"),
    "django_app": ("django", "serving"),
    "aiohttp_app.py": ("aiohttp", "serving"),
    "sanic_app.py": ("sanic", "serving"),
    "litestar_app.py": ("litestar", "serving"),
    "falcon_app.py": ("falcon", "serving"),
    "tornado_app.py": ("tornado", "serving"),
    "gradio_app.py": ("gradio", "serving"),
}


def _marks(root: Path) -> tuple[set[tuple[str, int, str]], dict[tuple[str, int, str], str]]:
    hits: set[tuple[str, int, str]] = set()
    quiet: dict[tuple[str, int, str], str] = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = HIT.search(line)
            if found:
                hits |= {(name, number, code.strip()) for code in found.group(1).split(",")}
            found = QUIET.search(line)
            if found:
                quiet[(name, number, found.group(1))] = found.group(2)
    return hits, quiet


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


@pytest.mark.parametrize("fixture", sorted(FAMILIES), ids=lambda name: name.removesuffix(".py"))
def test_each_framework_family_serves_its_handlers(fixture, tmp_path):
    framework, context = FAMILIES[fixture]
    root = _project(fixture, tmp_path)
    hits, quiet = _marks(root)
    assert hits, "a fixture marks the findings it expects"

    report = run_scan(["."], ScanOptions(isolated=True, cwd=str(root)))
    assert report.errors == []
    assert sorted((f.path, f.line, f.rule) for f in report.findings) == sorted(hits)
    for finding in report.findings:
        where = f"{finding.path}:{finding.line} {finding.rule}"
        assert finding.extra["context"] == context, where
        assert finding.extra["entry"]["framework"] == framework, where

    every = run_scan(["."], ScanOptions(isolated=True, cwd=str(root), every_context=True))
    contexts = {(f.path, f.line, f.rule): f.extra["context"] for f in every.findings}
    assert {key: contexts.get(key) for key in quiet} == quiet


def test_every_fixture_is_checked():
    on_disk = {p.name for p in ENTRYPOINTS.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert on_disk == set(FAMILIES)
