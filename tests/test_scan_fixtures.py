"""Every fixture under fixtures/python: the findings must be exactly the lines marked `# hit: LLMxxx`.

Only implemented rules are compared, so fixtures may be written before their rule exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_file
from llmdoctor.scan.rules import implemented_rules
from llmdoctor.scan.settings import ScanConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"
MARK = re.compile(r"#\s*hit:\s*((?:[A-Z]+[0-9]+)(?:\s*,\s*[A-Z]+[0-9]+)*)")
CATALOG = load_catalog()
IMPLEMENTED = set(implemented_rules())


def _expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = MARK.search(line)
        if match:
            out |= {(number, code.strip()) for code in match.group(1).split(",")}
    return out


# entrypoints/ holds whole programs (some of several modules) with near-miss and gap markers besides the hits:
# tests/test_project_model.py scans each one as a project
FILES = sorted(p for p in FIXTURES.rglob("*.py") if p.relative_to(FIXTURES).parts[0] != "entrypoints")


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture_findings_match_markers(path):
    result = analyze_file(str(path), CATALOG, ScanConfig())
    assert result.errors == []
    found = {(f.line, f.rule) for f in result.findings if f.rule in IMPLEMENTED}
    expected = {(line, rule) for line, rule in _expected(path) if rule in IMPLEMENTED}
    assert sorted(found) == sorted(expected)


def test_fixtures_cover_both_rules_with_hits_and_near_misses():
    names = {p.name for p in FILES}
    assert {"handlers_hit.py", "handlers_near_miss.py", "tokenizers_hit.py",
            "tokenizers_near_miss.py"} <= names
    hits = set().union(*(_expected(p) for p in FILES))
    assert {rule for _, rule in hits} >= {"LLM002", "LLM004"}
