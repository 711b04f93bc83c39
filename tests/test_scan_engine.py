"""The engine on single sources: decoding, pre-filter, resolution, scopes, suppressions, errors."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_file, analyze_source
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()


def scan(code: str, config: ScanConfig | None = None, path: str = "mod.py"):
    return analyze_source(path, textwrap.dedent(code).encode(), CATALOG, config or ScanConfig())


def lines(code: str, rule: str = "LLM004", **kw) -> list[int]:
    return [f.line for f in scan(code, **kw).findings if f.rule == rule]


# ----------------------------------------------------------------------------- resolution

@pytest.mark.parametrize("code", [
    "import time\nasync def f():\n    time.sleep(1)\n",
    "import time as t\nasync def f():\n    t.sleep(1)\n",
    "from time import sleep\nasync def f():\n    sleep(1)\n",
    "from time import sleep as nap\nasync def f():\n    nap(1)\n",
    "import urllib.request\nasync def f():\n    urllib.request.urlopen('u')\n",
    "import urllib.request as ur\nasync def f():\n    ur.urlopen('u')\n",
    "async def f():\n    import subprocess\n    subprocess.check_output(['ls'])\n",
    "async def f():\n    time.sleep(1)\nimport time\n",  # module-level import below the use
    "try:\n    import requests\nexcept ImportError:\n    requests = None\n"
    "async def f():\n    requests.get('u')\n",
    "import httpx\nasync def f():\n    httpx.Client().get('u')\n",
    "import io\nasync def f():\n    io.open('p')\n",
])
def test_resolved_blocking_calls(code):
    assert len(lines(code)) == 1


@pytest.mark.parametrize("code", [
    "import time\nasync def f(time):\n    time.sleep(1)\n",  # parameter shadows the module
    "import time\nasync def f():\n    time = Fake()\n    time.sleep(1)\n",
    "def open(p):\n    return p\nasync def f():\n    open('x')\n",  # module-level def shadows builtin
    "from .time import sleep\nasync def f():\n    sleep(1)\n",  # relative import: the project's own
    "from time import *\nasync def f():\n    sleep(1)\n",  # star imports are not followed
    "import asyncio, time\nasync def f():\n    await asyncio.to_thread(time.sleep, 1)\n",
    "import time\nasync def f():\n    g = lambda: time.sleep(1)\n",
    "import time\nasync def f():\n    def g():\n        time.sleep(1)\n",
    "import time\nclass A:\n    time.sleep(1)\n",
    "import time\nasync def f():\n    class B:\n        def m(self):\n            time.sleep(1)\n",
    "import httpx\nasync def f():\n    c = httpx.AsyncClient()\n    await c.get('u')\n",
    "import requests\nasync def f(s: requests.Response):\n    s.json()\n",
    "import time\nasync def f():\n    await time.sleep(1)\n",  # awaited: not a blocking call here
])
def test_not_reported(code):
    assert lines(code) == []


def test_offloaded_marks_only_the_callable_argument():
    code = """\
    import asyncio, requests
    async def f(loop, url):
        await loop.run_in_executor(None, requests.get, url)
        await loop.run_in_executor(None, requests.get(url).json)
    """
    assert lines(code) == [4]  # requests.get(url) itself runs on the loop


def test_self_attribute_types_follow_the_class():
    code = """\
    import httpx
    class A:
        client: httpx.Client
        async def m(self):
            self.client.get('u')
    class B:
        def __init__(self):
            self.client = httpx.AsyncClient()
        async def m(self):
            await self.client.get('u')
    """
    assert lines(code) == [5]


def test_decorated_async_and_nested_async_in_sync():
    code = """\
    import time
    def outer():
        @decorator
        async def inner():
            time.sleep(1)
        return inner
    """
    assert lines(code) == [5]


# ----------------------------------------------------------------------------- pre-filter

def test_prefilter_skips_files_without_the_literals():
    result = scan("def f():\n    return 1\n")
    assert result.prefiltered and not result.parsed and result.findings == []


def test_an_unparsable_file_is_reported_even_when_no_rule_would_parse_it():
    # CPython's ast reads every file for the project model: a syntax error is always known, and said
    result = scan("import time\ndef f(:\n")
    assert not result.parsed and result.errors[0].reason.startswith("syntax error") and result.errors[0].line == 2


def test_parsed_when_a_rule_may_fire():
    result = scan("import requests\ndef f(u):\n    return requests.get(u)\n")
    assert result.parsed and not result.prefiltered


# ----------------------------------------------------------------------------- decoding and errors

def test_declared_latin1_file_decodes():
    code = "# -*- coding: latin-1 -*-\nimport time\nasync def f():\n    time.sleep(1)  # caf\xe9\n"
    result = analyze_source("l.py", code.encode("latin-1"), CATALOG, ScanConfig())
    assert result.errors == [] and [f.line for f in result.findings] == [4]


def test_utf8_bom_decodes():
    data = b"\xef\xbb\xbfimport time\nasync def f():\n    time.sleep(1)\n"
    result = analyze_source("b.py", data, CATALOG, ScanConfig())
    assert [f.line for f in result.findings] == [3]


def test_undecodable_bytes_are_an_error_with_line():
    data = b"import time\nx = '\xff\xfe'\n"
    result = analyze_source("u.py", data, CATALOG, ScanConfig())
    assert len(result.errors) == 1
    assert result.errors[0].line == 2 and "cannot decode as utf-8" in result.errors[0].reason


def test_unknown_coding_cookie_is_an_error():
    result = analyze_source("c.py", b"#!/usr/bin/env python\n# coding: klingon\nx = 1\n", CATALOG, ScanConfig())
    assert result.errors and "encoding" in result.errors[0].reason and result.errors[0].line == 2


def test_binary_data_is_an_error():
    result = analyze_source("bin.py", b"\x7fELF\x02\x01\x00\x00async", CATALOG, ScanConfig())
    assert result.errors and "binary" in result.errors[0].reason


def test_empty_file_is_clean():
    result = analyze_source("e.py", b"", CATALOG, ScanConfig())
    assert result.errors == [] and result.findings == []


def test_syntax_error_is_an_error_with_line():
    result = scan("import time\nasync def f(:\n    time.sleep(1)\n")
    assert len(result.errors) == 1
    assert result.errors[0].reason.startswith("syntax error") and result.errors[0].line


def test_unreadable_file_is_an_error(tmp_path):
    missing = tmp_path / "gone.py"
    result = analyze_file(str(missing), CATALOG, ScanConfig())
    assert result.errors and "cannot read" in result.errors[0].reason


def test_file_result_pickles():
    result = scan("import time\nasync def f():\n    time.sleep(1)\n")
    clone = pickle.loads(pickle.dumps(result))
    assert clone == result and clone.findings[0].extra == {"call": "time.sleep", "context": "unknown",
                                                           "autofix": {"kind": "asyncio_sleep"}}


def test_positions_are_one_based_and_cover_the_call():
    finding = scan("import time\nasync def f():\n    x = time.sleep(1)\n").findings[0]
    assert (finding.line, finding.column, finding.end_line, finding.end_column) == (3, 9, 3, 22)


# ----------------------------------------------------------------------------- suppressions

BASE = "import time, subprocess\nasync def f():\n"


@pytest.mark.parametrize(("body", "expected"), [
    ("    time.sleep(1)  # noqa: LLM004\n", []),
    ("    time.sleep(1)  # noqa\n", []),
    ("    time.sleep(1)  # noqa: E501, LLM004\n", []),
    ("    time.sleep(1)  # noqa:LLM004\n", []),
    ("    time.sleep(1)  # noqa: LLM002\n", [3]),  # names another code: not silenced
    ("    time.sleep(1)  # llmdoctor: ignore[LLM004]\n", []),
    ("    time.sleep(1)  # llmdoctor: ignore[LLM002]\n", [3]),
    ("    time.sleep(1)  # llmdoctor: ignore\n", []),
    ("    time.sleep(1)  # llmdoctor: ignore[LLM002, LLM004]\n", []),
    ("    # llmdoctor: ignore[LLM004]\n    time.sleep(1)\n", []),
    ("    # llmdoctor: ignore[LLM004]\n    # why: one-off admin endpoint\n    time.sleep(1)\n", []),
    ("    # noqa: LLM004\n    time.sleep(1)\n", [4]),
    ("    subprocess.run(  # noqa: LLM004\n        ['ls'],\n    )\n", []),
    ("    x = [\n        time.sleep(1),\n    ]  # noqa: LLM004\n", [4]),
    ("    x = foo(  # llmdoctor: ignore[LLM004]\n        time.sleep(1),\n    )\n", []),
    ("    s = '# noqa: LLM004'; time.sleep(1)\n", [3]),  # inside a string: not a comment
])
def test_suppressions(body, expected):
    assert lines(BASE + body) == expected


def test_ignore_file():
    assert lines("# llmdoctor: ignore-file\n" + BASE + "    time.sleep(1)\n") == []
    assert lines("# llmdoctor: ignore-file[LLM004]\n" + BASE + "    time.sleep(1)\n") == []
    assert lines("# llmdoctor: ignore-file[LLM002]\n" + BASE + "    time.sleep(1)\n") == [4]


def test_suppressed_count():
    assert scan(BASE + "    time.sleep(1)  # noqa: LLM004\n").suppressed == 1


# ----------------------------------------------------------------------------- config in the engine

def test_select_ignore_per_file_and_severity(tmp_path):
    code = BASE + "    time.sleep(1)\n"
    assert lines(code, config=ScanConfig(ignore=("LLM004",))) == []
    assert lines(code, config=ScanConfig(select=("LLM002",))) == []
    assert lines(code, config=ScanConfig(select=("LLM",))) == [3]
    per_file = ScanConfig(root=str(tmp_path), per_file_ignores=(("tests/*", ("LLM004",)),))
    assert lines(code, config=per_file, path=str(tmp_path / "tests" / "t.py")) == []
    assert lines(code, config=per_file, path=str(tmp_path / "src" / "t.py")) == [3]
    finding = scan(code, config=ScanConfig(severity=(("LLM004", "error"),))).findings[0]
    assert finding.severity == "error"


def test_llm002_cached_lookups_are_not_findings():
    code = """\
    import tiktoken
    from transformers import AutoTokenizer
    def f(t):
        a = tiktoken.get_encoding("cl100k_base").encode(t)
        b = AutoTokenizer.from_pretrained("gpt2").encode(t)
        return a, b
    """
    assert {f.line: f.severity for f in scan(code).findings} == {5: "warning"}


def test_deeply_nested_expression_is_analysed_or_reported_never_a_crash():
    chain = " + ".join(f"'s{i}'" for i in range(1500))
    result = scan(f"import time, requests\nx = {chain}\nasync def f():\n    time.sleep(1)\n"
                  "def g(u):\n    return requests.get(u)\n")
    reported = bool(result.errors) and "nested too deeply" in result.errors[0].reason
    assert [(f.rule, f.line) for f in result.findings] == [("LLM004", 4), ("LLM006", 6)] or reported
    assert result.parsed


def test_a_crashing_rule_becomes_an_input_error(monkeypatch):
    from llmdoctor.scan.rules.llm006 import HttpCallWithoutTimeout

    def boom(self, node):
        raise KeyError("bug")

    monkeypatch.setattr(HttpCallWithoutTimeout, "visit_Call", boom)
    result = scan("import requests\ndef f(u):\n    return requests.get(u)\n")
    assert result.findings == [] and "internal error" in result.errors[0].reason


@pytest.mark.parametrize(("code", "expected"), [
    ("import time\nasync def f(x=time.sleep(1)):\n    pass\n", []),  # default: evaluated at import
    ("import time\n@deco(time.sleep(1))\nasync def f():\n    pass\n", []),
    ("import time\nasync def f():\n    def g(x=time.sleep(1)):\n        pass\n", [3]),  # evaluated in f
    ("import time\nasync def f():\n    g = lambda x=time.sleep(1): x\n", [3]),
    ("import time\nasync def f():\n    def g(x=lambda: time.sleep(1)):\n        pass\n", []),
])
def test_function_headers_run_in_the_enclosing_scope(code, expected):
    assert lines(code) == expected


def test_llm002_default_values_are_built_once():
    code = """\
    from transformers import AutoTokenizer
    def encode(text, tok=AutoTokenizer.from_pretrained("gpt2")):
        return tok.encode(text)
    """
    assert lines(code, rule="LLM002") == []


@pytest.mark.parametrize("code", [
    "import pytest\nfrom transformers import AutoTokenizer\n@pytest.fixture(scope='session')\n"
    "def tok():\n    t = AutoTokenizer.from_pretrained('gpt2')\n    yield t\n",
    "from transformers import AutoTokenizer\ndef test_roundtrip():\n"
    "    t = AutoTokenizer.from_pretrained('gpt2')\n    assert t.decode(t.encode('a')) == 'a'\n",
    "import typer\nfrom transformers import AutoTokenizer\napp = typer.Typer()\n@app.command()\n"
    "def count(path: str):\n    t = AutoTokenizer.from_pretrained('gpt2')\n    print(len(t.encode(path)))\n",
    "from transformers import AutoTokenizer\nclass A:\n    def load(self, name):\n"
    "        t = AutoTokenizer.from_pretrained(name)\n        setattr(self, 'tok', t)\n",
])
def test_llm002_run_once_contexts(code):
    assert lines(code, rule="LLM002") == []


def test_module_level_def_replaces_an_imported_name():
    code = "from time import sleep\ndef sleep(seconds):\n    return None\nasync def f():\n    sleep(1)\n"
    assert lines(code) == []


def test_parse_without_validation_builds_the_same_tree_and_restores_validation() -> None:
    import libcst as cst

    from llmdoctor.scan import engine

    validating = cst.CSTNode.__post_init__
    for path in sorted((Path(__file__).resolve().parents[1] / "fixtures" / "python").rglob("*.py"))[:20]:
        source = path.read_text(encoding="utf-8")
        assert engine._parse(source).deep_equals(cst.parse_module(source))
        assert engine._parse(source).code == source
    assert cst.CSTNode.__post_init__ is validating
    with pytest.raises(cst.ParserSyntaxError):
        engine._parse("def f(:\n")
    assert cst.CSTNode.__post_init__ is validating
    with pytest.raises(cst.CSTValidationError):  # hand-built nodes are still validated
        cst.Name("not a name")


# ----------------------------------------------------------------------------- memory


def test_an_analysed_file_leaves_no_cycle_that_holds_its_trees() -> None:
    """Its trees are freed by reference counting when the file is done (engine.collector_paused): no cycle
    keeps a CPython or libcst node, or a code unit, for the cyclic collector to walk and free."""
    import ast
    import gc

    import libcst as cst

    from llmdoctor.scan.codefacts import Unit
    from llmdoctor.scan.engine import analyze_module

    code = textwrap.dedent("""\
        import logging
        from openai import OpenAI
        log = logging.getLogger(__name__)
        client = OpenAI()
        class Service:
            def answer(self, messages):
                reply = client.chat.completions.create(model="m", messages=messages, stream=True)
                log.info("messages: %s", messages)
                return reply
            class Inner:
                def other(self):
                    return 1
        def answer(messages):
            reply = client.chat.completions.create(model="m", messages=messages, stream=True)
            log.info("messages: %s", messages)
        """).encode()
    analyze_module("warm.py", code, CATALOG, ScanConfig())  # the catalog's memos, built once
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = analyze_module("mod.py", code, CATALOG, ScanConfig())
        gc.collect()
        held = [type(o).__name__ for o in gc.garbage if isinstance(o, (ast.AST, cst.CSTNode, Unit))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert result.parsed and result.findings  # the rules ran on libcst's tree
    assert held == []
