"""The name pre-filter skips files no table entry can match in, and never changes what is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdoctor.scan import prefilter
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

REPO = Path(__file__).resolve().parents[1]
CATALOG = load_catalog()


def analyse(source: str, catalog=CATALOG):
    return analyze_source("mod.py", source.encode(), catalog, ScanConfig())


def test_index_needs_every_component() -> None:
    index = prefilter.NameIndex(["time.sleep", "builtins.open", "transformers.*Tokenizer*.from_pretrained"])
    assert not index.may_match("import time\nasync def f():\n    time.time()\n")
    assert index.may_match("import time as t\nasync def f():\n    t.sleep(1)\n")
    assert index.may_match("from time import sleep as nap\n")
    assert index.may_match("with open('x') as f: pass\n")
    assert not index.may_match("reopen = 1\nopened = 2\n")
    assert index.may_match("from transformers import AutoTokenizer\nAutoTokenizer.from_pretrained('m')\n")
    assert not index.may_match("import transformers\ntransformers.AutoModel.from_pretrained('m')\n")
    assert prefilter.NameIndex([]).may_match("anything")
    assert prefilter.NameIndex(["*"]).may_match("anything")


def test_blocking_module_without_the_blocking_function_is_not_parsed() -> None:
    result = analyse("import time\nimport os\n\nasync def f():\n    return time.time(), os.getpid()\n")
    assert result.prefiltered and not result.parsed
    # LLM004 asks the project model (CPython's ast index): libcst never parses for it
    blocking = analyse("import time\n\nasync def f():\n    time.sleep(1)\n")
    assert not blocking.parsed and [f.rule for f in blocking.findings] == ["LLM004"]


SOURCES = sorted((REPO / "fixtures" / "python").rglob("*.py"))
EXAMPLES = [code for spec in CATALOG.rules.values() for code in (*spec.hits, *spec.near_misses)]


@pytest.mark.parametrize("source", [p.read_text(encoding="utf-8") for p in SOURCES] + EXAMPLES)
def test_same_findings_with_and_without_the_name_filter(source: str, monkeypatch) -> None:
    filtered = analyse(source)
    monkeypatch.setattr(prefilter.NameIndex, "may_match", lambda self, text: True)
    unfiltered = analyse(source, load_catalog())
    assert [(f.rule, f.line, f.column, f.message) for f in filtered.findings] == \
        [(f.rule, f.line, f.column, f.message) for f in unfiltered.findings]
