"""The sharpened pre-filters (LLM004 `async def`, LLM006 timeout gate) and the second stage that asks them
again about the code only (`prefilter.code_text`): files are skipped, findings never change."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from llmdoctor.scan import codefacts, engine, prefilter
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

REPO = Path(__file__).resolve().parents[1]
CATALOG = load_catalog()


def analyse(source: str, catalog=CATALOG):
    return analyze_source("mod.py", source.encode(), catalog, ScanConfig())


def test_code_text_keeps_code_and_drops_comments_and_strings() -> None:
    text = prefilter.code_text(
        "import a.b as c\n"
        "# requests in a comment\n"
        "async def f(x, timeout=None):\n"
        "    '''requests in a docstring'''\n"
        "    s = f'{g(y)} requests'\n"
        "    return c().chat.completions.create(request_timeout = None, **k)\n"
    )
    words = set(text.split())
    assert "requests" not in words and "docstring" not in words and "comment" not in words
    assert {"a", "b", "c", "f", "x", "timeout", "g", "y", "s", "k", "create"} <= words
    assert "chat.completions.create" in text  # chains, for literals such as LLM001's unknown chains
    assert "async def" in text and "request_timeout=None" in text
    assert "timeout=None" not in words  # a parameter default is not a keyword argument of a call
    assert {"async", "await", "def", "lambda", "match"} <= words  # keywords never fail a literal


def test_code_text_of_unparsable_source_is_none() -> None:
    assert prefilter.code_text("print 'python 2'\n") is None
    assert prefilter.code_text("def f(:\n") is None


def test_identifier_fields_cover_the_grammar() -> None:
    fields = codefacts.IDENTIFIER_FIELDS
    assert fields[ast.Name] == ("id",) and fields[ast.Attribute] == ("attr",)
    assert set(fields[ast.alias]) == {"name", "asname"} and fields[ast.ImportFrom] == ("module",)
    for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg, ast.keyword, ast.Global,
                 ast.Nonlocal, ast.ExceptHandler):
        assert kind in fields


@pytest.mark.parametrize("source", [
    '"""Uses requests.get and time.sleep in async def handlers."""\nimport os\n\nasync def f():\n    return os.getpid()\n',
    "import time\n\ndef f():\n    time.sleep(1)  # blocking, but not in an async def\n",
    "import json\n\nasync def f(u):\n    return json.dumps(u)  # not requests.get(u)\n",
    "import logging\nimport openai\n\nlogger = logging.getLogger(__name__)\n\ndef f(prompt):\n"
    "    logger.debug(prompt)  # below INFO: never reported\n",
])
def test_files_where_no_rule_can_fire_are_not_parsed(source: str) -> None:
    result = analyse(source)
    assert result.prefiltered and not result.parsed and not result.findings


@pytest.mark.parametrize(("source", "rule"), [
    ("import requests\n\ndef f(u):\n    return requests.get(u)\n", "LLM006"),
    ("import httpx\n\ndef f(u):\n    return httpx.get(u, timeout = # none\n None)\n", "LLM006"),
    # a logger imported under a logger-like name, no `logging` word anywhere (the old pre-filter skipped it)
    ("from app.log import logger\nfrom openai import OpenAI\n\nclient = OpenAI()\n\ndef answer(question):\n"
     "    response = client.chat.completions.create(model='m', messages=[{'role': 'user', 'content': question}],"
     " stream=False)\n    text = response.choices[0].message.content\n    logger.info(text)\n    return text\n",
     "LLM005"),
])
def test_files_where_a_rule_fires_are_parsed(source: str, rule: str) -> None:
    result = analyse(source)
    assert result.parsed and rule in {f.rule for f in result.findings}


SOURCES = sorted((REPO / "fixtures" / "python").rglob("*.py"))
EXAMPLES = [code for spec in CATALOG.rules.values() for code in (*spec.hits, *spec.near_misses)]


@pytest.mark.parametrize("source", [p.read_text(encoding="utf-8") for p in SOURCES] + EXAMPLES)
def test_same_findings_with_and_without_every_prefilter(source: str, monkeypatch) -> None:
    filtered = analyse(source)
    monkeypatch.setattr(prefilter.Gate, "text", lambda self, source: True)
    monkeypatch.setattr(prefilter.Gate, "code", lambda self, code, source: True)
    monkeypatch.setattr(engine, "read_code", lambda text, tree=None: None)  # no second stage, no pruning
    unfiltered = analyse(source, load_catalog())
    assert unfiltered.parsed or not source.strip() or unfiltered.errors
    assert [(f.rule, f.line, f.column, f.message) for f in filtered.findings] == \
        [(f.rule, f.line, f.column, f.message) for f in unfiltered.findings]


def _reference_words(source: str) -> set[str]:
    """Every str field of every node but string constants, through ast.walk (slow, obviously complete)."""
    words: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant):
            continue
        for _, value in ast.iter_fields(node):
            for item in (value if isinstance(value, list) else [value]):
                if isinstance(item, str):
                    words.update(item.split("."))
    return words


@pytest.mark.parametrize("path", SOURCES + sorted((REPO / "llmdoctor").rglob("*.py")), ids=str)
def test_code_text_walk_reaches_every_identifier(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    words = set(prefilter.code_text(source).split())
    assert _reference_words(source) <= words
