"""Bodies left out of libcst's parse (llmdoctor/scan/regions.py): the text keeps every kept line where it was,
and no finding changes, including the ones that depend on another body (each dependency has a case here,
checked with and without the pruning; every fixture and YAML example is compared in
tests/test_scan_prefilter_code.py, real corpora with bench/prune_check.py)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan import engine
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.codefacts import read_code
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.regions import pruned_source
from llmdoctor.scan.rules import rule_classes
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()


def prune(source: str, *codes: str) -> str:
    facts = read_code(source)
    return pruned_source(source, facts, [CATALOG.rules[code] for code in codes], CATALOG)


def lines(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


# ------------------------------------------------------------------ the text

IRRELEVANT = """\
import json
from openai import OpenAI

client = OpenAI()


def load(path):
    with open(path) as handle:
        data = json.load(handle)
    return data


class Cache:
    def __init__(self):
        self.items = {}
        self.hits = 0

    def get(self, key):
        self.hits += 1
        return self.items.get(key)


def answer(question):
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content
"""


def test_unneeded_bodies_become_a_string_over_the_same_lines() -> None:
    source = IRRELEVANT + "\nCACHE = Cache()\nDATA = load('data.json')\n"  # the kept code spells both names
    pruned = prune(source, "LLM001")
    before, after = lines(source), lines(pruned)
    assert len(before) == len(after)
    assert '    """' in after and "json.load" not in pruned and "self.hits" not in pruned
    kept = [n for n, line in enumerate(after) if line == before[n]]
    assert before[6] == after[6] == "def load(path):" and after[12] == "class Cache:"
    assert after[-6:] == before[-6:]  # `answer` is kept whole
    assert len(kept) >= len(before) - 12
    assert pruned.count('"""') == 4  # load, Cache


def test_a_run_of_defs_and_classes_nothing_needs_goes_headers_too() -> None:
    pruned = prune(IRRELEVANT, "LLM001")
    before, after = lines(IRRELEVANT), lines(pruned)
    assert len(before) == len(after)
    assert [n for n, line in enumerate(after) if line != before[n]] == [6, 7, 8, 9, 12, 13, 14, 15, 17, 18, 19]
    assert after[7:19] == [""] * 12  # from `def load` to the end of Cache
    assert after[6] == after[19] == '"""' and pruned.count('"""') == 2  # one literal for the two
    assert after[-3:] == before[-3:]


def test_one_literal_per_run_of_siblings_decorators_and_one_liners_included() -> None:
    source = ("import requests\n\nclass Api:\n    def used(self, url):\n        return requests.get(url)\n\n"
              "    @property\n    def a(self): return 1\n    def b(self):\n        return 2\n"
              "    x = 3\n    def c(self): return 3\n")
    pruned = prune(source, "LLM006")
    assert lines(pruned)[6:] == ['    """', "", "", '"""', "    x = 3", '    ""', ""]
    assert lines(pruned)[:6] == lines(source)[:6]


@pytest.mark.parametrize("source", [
    ("import os\n\ndef getcwd():\n    a = 1\n    b = a\n    return b\n\ndef getcwd():\n    c = 2\n    d = c\n"
     "    return d\n"),  # defined twice: the project model's key of the second is `getcwd#2`
    "from time import sleep\n\ndef sleep(seconds):\n    a = seconds\n    b = a\n    return b\n",  # rebinds
    "handler = None\n\ndef handler(request):\n    a = request\n    b = a\n    return b\n",  # rebinds
    "def open(path):\n    a = path\n    b = a\n    return b\n",  # shadows a builtin
])
def test_a_header_whose_name_is_bound_otherwise_stays(source: str) -> None:
    pruned = prune(source, "LLM001")
    assert pruned != source
    assert [line for line in lines(pruned) if line.startswith("def ")] == \
        [line for line in lines(source) if line.startswith("def ")]


def test_a_needed_body_and_the_module_level_code_are_kept() -> None:
    assert prune(IRRELEVANT, "LLM001").splitlines()[:4] == IRRELEVANT.splitlines()[:4]
    source = IRRELEVANT.replace("json.load(handle)", "client.chat.completions.create(model='m', messages=[])")
    assert "client.chat.completions.create(model='m'" in prune(source, "LLM001")


@pytest.mark.parametrize("source", [
    "def f(): x = 1; y = 2; return \\\n  x + y\n\n\n",  # the body starts on the header's line
    "def f():\n    a = 1\n    b = 2\n",  # fewer than 3 lines
    "import os\n\ndef f():\n    return os.getcwd()\n\n\n",  # a one-line body
])
def test_bodies_that_cannot_or_need_not_be_replaced_stay(source: str) -> None:
    source += "f()\n"  # the kept code spells `f`: its header stays
    assert prune(source, "LLM001") == source


def test_decorated_first_statement_tabs_crlf_and_a_lone_cr() -> None:
    source = "import os\r\nclass A:\r\n\t@property\r\n\tdef x(self):\r\n\t\treturn os.sep\r\n\r\n\tdef y(self):\r\n\t\treturn 2\r\nA()\r\n"
    pruned = prune(source, "LLM001")
    assert pruned == 'import os\r\nclass A:\r\n\t"""\r\n\r\n\r\n\r\n\r\n"""\r\nA()\r\n'
    assert prune(source.replace("A()", "B()"), "LLM001") == 'import os\r\n"""\r\n' + "\r\n" * 5 + '"""\r\nB()\r\n'
    assert len(lines(pruned)) == len(lines(source))
    lone_cr = source.replace("\r\n", "\r")
    assert prune(lone_cr, "LLM001") == lone_cr  # line numbering we do not second-guess: nothing pruned


def test_a_body_continuing_the_line_above_stays() -> None:
    source = "def f(): \\\n    return (1,\n        2,\n        3)\nf()\n"
    assert prune(source, "LLM001") == source


# ------------------------------------------------------------------ findings never change

def findings(source: str, *codes: str, pruning: bool = True, monkeypatch=None, every_context: bool = True):
    """`every_context`: the rules' own decisions (pruning must not move them), wherever the code runs."""
    if not pruning:
        monkeypatch.setattr(engine, "pruned", lambda text, facts, rules, catalog: (text, True))
    config = ScanConfig(select=codes, every_context=every_context)
    result = analyze_source("app.py", textwrap.dedent(source).encode(), CATALOG, config)
    assert result.errors == []
    return [(f.rule, f.line, f.column, f.message) for f in result.findings]


UNRELATED = """
    def unrelated(a, b):
        total = a + b
        total *= 2
        return total
"""  # a body no rule needs: every case below has something to leave out


def same_with_and_without(source: str, *codes: str, monkeypatch, every_context: bool = True) -> list:
    source = textwrap.dedent(source)
    assert prune(source, *codes) != source, "the case must have something to leave out"
    pruned = findings(source, *codes, every_context=every_context)
    whole = findings(source, *codes, pruning=False, monkeypatch=monkeypatch, every_context=every_context)
    assert pruned == whole
    return pruned


def test_an_attribute_typed_in_another_method(monkeypatch) -> None:
    source = """
    from openai import OpenAI

    class Bot:
        def __init__(self):
            self.client = OpenAI()
            self.history = []
            self.name = "bot"

        def ask(self, question):
            return self.client.chat.completions.create(model="m", messages=[question])

        def describe(self):
            text = self.name.upper()
            text += "!" * 3
            return text
    """
    assert same_with_and_without(source, "LLM001", monkeypatch=monkeypatch)  # __init__ kept: one finding


def test_a_method_that_makes_the_attribute_unknown_is_kept(monkeypatch) -> None:
    source = """
    from openai import OpenAI

    class Bot:
        def __init__(self):
            self.client = OpenAI()

        def reset(self):
            self.client = None
            self.history = []
            self.count = 0

        async def ask(self, question):
            return self.client.messages.create(model="m", max_tokens=512, messages=[question])

        def describe(self):
            text = self.name.upper()
            text += "!" * 3
            return text
    """
    # LLM001 reports `.messages.create` only when the receiver is known: `reset` makes it unknown
    source = source.replace("from openai import OpenAI", "from anthropic import Anthropic as OpenAI")
    assert same_with_and_without(source, "LLM001", monkeypatch=monkeypatch) == []
    assert findings(textwrap.dedent(source).replace("self.client = None", "self.other = None"), "LLM001")


def test_a_module_level_alias(monkeypatch) -> None:
    source = """
    from litellm import completion as complete_fn

    def ask(question):
        messages = [{"role": "user", "content": question}]
        reply = complete_fn(model="gpt-4o", messages=messages)
        return reply

    """ + UNRELATED
    assert same_with_and_without(source, "LLM001", monkeypatch=monkeypatch)


def test_a_def_shadowing_a_builtin_the_kept_code_calls(monkeypatch) -> None:
    # `print` needs no rule, but without its header `print(prompt)` would be builtins.print: a false LLM005
    source = """
    from fastapi import FastAPI
    from openai import OpenAI
    app = FastAPI()
    client = OpenAI()

    def print(*args):
        parts = args
        joined = parts
        return joined

    @app.post("/chat")
    def chat(prompt: str):
        print(prompt)
        return client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
    """
    assert "def print(*args):" in prune(textwrap.dedent(source), "LLM005")
    assert same_with_and_without(source, "LLM005", monkeypatch=monkeypatch) == []


def test_the_keys_of_a_name_defined_twice(monkeypatch) -> None:
    source = textwrap.dedent("""
    import requests

    def fetch(url):
        address = url
        chosen = address
        return chosen

    def fetch(url):
        return requests.get(url)
    """ + UNRELATED)

    def keys(pruning: bool) -> list:
        if not pruning:
            monkeypatch.setattr(engine, "pruned", lambda text, facts, rules, catalog: (text, True))
        result = engine.analyze_module("app.py", source.encode(), CATALOG, ScanConfig(select=("LLM006",)))
        return [(f.line, f.extra[engine.FUNCTION_KEY]) for f in result.findings]

    assert "def unrelated" not in prune(source, "LLM006") and "def fetch(url):" in prune(source, "LLM006")
    assert keys(True) == keys(False) == [(10, "fetch#2")]


def test_the_project_model_sees_every_body_whatever_libcst_parses(monkeypatch) -> None:
    # who calls whom comes from CPython's ast index of the whole file, not from the pruned text: `serve` is
    # left out of libcst's parse and still makes `answer` serving
    source = """
    from fastapi import FastAPI
    from openai import OpenAI
    app = FastAPI()

    def answer(question):
        client = OpenAI()
        return client.chat.completions.create(model="m", messages=[question], stream=True)

    @app.post("/serve")
    def serve(questions: list[str]):
        results = []
        for question in questions:
            results.append(answer(question))
        return results

    def unrelated(a, b):
        total = a + b
        total *= 2
        return total

    answer("warm-up")
    """
    assert "results.append" not in prune(textwrap.dedent(source), "LLM003")
    assert '@app.post("/serve")' not in prune(textwrap.dedent(source), "LLM003")  # the header went too
    result = analyze_source("app.py", textwrap.dedent(source).encode(), CATALOG, ScanConfig(select=("LLM003",)))
    assert [(f.line, f.extra["context"]) for f in result.findings] == [(7, "serving")]


def test_a_startup_hook_registered_in_another_function(monkeypatch) -> None:
    source = """
    from fastapi import FastAPI
    from openai import OpenAI

    def init_clients():
        client = OpenAI()
        client.models.list()

    def configure(application):
        application.add_event_handler("startup", init_clients)
        application.title = "demo"
        return application

    """ + UNRELATED
    assert same_with_and_without(source, "LLM003", monkeypatch=monkeypatch, every_context=False) == []


@pytest.mark.parametrize("defaults", [
    """
    def install_default_timeout(http):
        class TimeoutAdapter(HTTPAdapter):
            def send(self, *args, **kwargs):
                kwargs.setdefault("timeout", 10)
                return super().send(*args, **kwargs)
        http.mount("https://", TimeoutAdapter())
    """,
    """
    def install_default_timeout(http):
        http.request = functools.partial(http.request, timeout=10)
        http.headers["x-client"] = "demo"
        return http
    """,
])
def test_a_default_timeout_set_in_another_function(defaults: str, monkeypatch) -> None:
    source = """
    import functools
    import requests
    from requests.adapters import HTTPAdapter
    """ + defaults + """
    def fetch(session: requests.Session, url):
        return session.get(url)

    """ + UNRELATED
    assert same_with_and_without(source, "LLM006", monkeypatch=monkeypatch) == []


def test_an_sdk_imported_inside_another_function(monkeypatch) -> None:
    source = """
    import logging

    logger = logging.getLogger(__name__)

    def setup():
        import openai
        openai.api_key = "k"
        return openai

    def show(prompt):
        logger.info("prompt: %s", prompt)

    """ + UNRELATED
    assert same_with_and_without(source, "LLM005", monkeypatch=monkeypatch)


REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "fixtures" / "python").rglob("*.py")) + sorted((REPO / "llmdoctor").rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_kept_line_is_unchanged_and_the_text_still_parses(path: Path) -> None:
    import ast

    import libcst as cst

    source = path.read_text(encoding="utf-8")
    pruned = prune(source, *sorted(rule_classes()))
    before, after = lines(source), lines(pruned)
    assert len(before) == len(after)
    for old, new in zip(before, after):
        assert new == old or new.strip() in ("", '"""')
    ast.parse(pruned)
    assert cst.parse_module(pruned).code == pruned


# ------------------------------------------------------------------ nothing left to report: no libcst parse

TYPES_ONLY = """\
from dataclasses import field
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import httpx
    from openai import OpenAI

    ProviderClient: TypeAlias = (OpenAI | httpx.Client)

OWNED = frozenset({"client", "model"})


class Params:
    client: "ProviderClient | None" = None
    model: str = "chat.completions"
    tags: list = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.model}"
"""


def test_a_file_where_no_rule_can_report_is_not_parsed(monkeypatch) -> None:
    """The names pass the file's pre-filters (a client type, a generation word), but every unit is left out and
    what stays (imports, a `TYPE_CHECKING` block, a constant) passes no rule's body test: libcst is not asked."""
    assert prune(TYPES_ONLY, "LLM001", "LLM003") != TYPES_ONLY
    result = analyze_source("params.py", TYPES_ONLY.encode(), CATALOG, ScanConfig())
    assert result.errors == [] and result.findings == []
    assert result.prefiltered and not result.parsed
    monkeypatch.setattr(engine, "pruned", lambda text, facts, rules, catalog: (text, True))
    assert analyze_source("params.py", TYPES_ONLY.encode(), CATALOG, ScanConfig()).parsed  # it does pass them


def test_a_call_left_at_module_level_is_still_parsed_and_reported() -> None:
    source = TYPES_ONLY + "\nif True:\n    import requests\n    requests.get('http://x')\n"
    result = analyze_source("params.py", source.encode(), CATALOG, ScanConfig(select=("LLM006",),
                                                                            every_context=True))
    line = source.splitlines().index("    requests.get('http://x')") + 1
    assert result.parsed and [(f.rule, f.line) for f in result.findings] == [("LLM006", line)]
