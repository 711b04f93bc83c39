"""The declarative pre-filter spec (a rule's YAML `prefilter:`, catalog.py `Prefilter`): its validation, and
each stage the engine derives from it (prefilter.py `gate`): the text pre-filter, its second stage on what the
code spells out, and which def/class bodies libcst parses (regions.py). That no stage ever changes a finding is
checked on every fixture and YAML example in tests/test_scan_prefilter_code.py."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from pathlib import Path

import pytest
from test_rules_examples import VALID_RULE

from llmdoctor.errors import UserError
from llmdoctor.scan import regions
from llmdoctor.scan.catalog import _prefilter, load_catalog, shipped_rules_dir
from llmdoctor.scan.codefacts import read_code
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.prefilter import OPEN_GATE, code_text, gate
from llmdoctor.scan.project.rules import project_rules
from llmdoctor.scan.rules import rule_classes
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
_ids = itertools.count()

def spec_gate(value: dict):
    """The gate of a rule whose `prefilter:` is `value`, on the shipped catalog's knowledge."""
    spec = dataclasses.replace(CATALOG.rules["LLM006"], id=f"TEST{next(_ids)}",
                               prefilter=_prefilter(Path("t.yaml"), value))
    return gate(spec, CATALOG)


def both_stages(g, source: str) -> tuple[bool, bool]:
    return g.text(source), g.code(code_text(source), source)


def bodies(source: str) -> dict[str, regions.Region]:
    facts = read_code(source)
    context = regions._Context(facts)
    return {unit.node.name: context.region(unit) for unit in facts.every_unit() if hasattr(unit.node, "name")}


# ------------------------------------------------------------------ validation: exit 2, the file and key named

@pytest.mark.parametrize(("block", "key"), [
    ("prefilter: [async]\n", "prefilter"),
    ("prefilter: {colour: red}\n", "prefilter.colour"),
    ("prefilter: {names: []}\n", "prefilter.names"),
    ("prefilter: {names: [sdk.clients]}\n", "prefilter.names[0]"),
    ("prefilter: {names: [Bad-Table]}\n", "prefilter.names[0]"),
    ("prefilter: {names: [no_such_table]}\n", "prefilter"),
    ("prefilter: {names: [sdk.calls], names_are: arguments}\n", "prefilter.names_are"),
    ("prefilter: {all: [async], names_are: receivers}\n", "prefilter.names_are"),
    ("prefilter: {any: [{root: sdk.calls}]}\n", "prefilter.any[0]"),
    ("prefilter: {any: [{roots: sdk.nothing}]}\n", "prefilter.any[0].roots"),
    ("prefilter: {keyword_none: [not-a-keyword]}\n", "prefilter.keyword_none[0]"),
    ("prefilter: {facts: [async_function]}\n", "prefilter.facts[0]"),
    ("prefilter: {facts: [payload]}\n", "prefilter.facts[0]"),  # a body's fact, not a file's
    ("prefilter: {all: [x], region: {facts: [llm_literal]}}\n", "prefilter.region.facts[0]"),
    ("prefilter: {stores: [request]}\n", "prefilter.stores"),  # bodies only
    ("prefilter: {one_of: [{all: [x]}]}\n", "prefilter.one_of"),
    ("prefilter: {one_of: [{all: [x]}, {names: [sdk.nope]}]}\n", "prefilter.one_of[1].names[0]"),
    ("prefilter: {all: [x], region: {}}\n", "prefilter.region"),
    ("prefilter: {all: [x], region: {one_of: [{any: [HTTPAdapter]}, {stores: [1]}]}}\n",
     "prefilter.region.one_of[1].stores"),
])
def test_malformed_prefilter_names_the_file_and_key(tmp_path, block: str, key: str) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "prefixes.yaml").write_bytes((shipped_rules_dir() / "prefixes.yaml").read_bytes())
    (shipped / "bad.yaml").write_text(VALID_RULE + block)
    with pytest.raises(UserError) as err:
        load_catalog(shipped_dir=shipped)
    assert "bad.yaml" in str(err.value) and f"'{key}'" in str(err.value)


def test_a_valid_prefilter_is_loaded(tmp_path) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "prefixes.yaml").write_bytes((shipped_rules_dir() / "prefixes.yaml").read_bytes())
    (shipped / "ok.yaml").write_text(VALID_RULE + "tables: {calls: [a.b]}\nprefilter:\n  names: [calls]\n"
                                     "  region: {one_of: [{names: [calls]}, {stores: [request]}]}\n")
    spec = load_catalog(shipped_dir=shipped).rules["LLM004"]
    assert spec.prefilter.file.names == ("calls",) and spec.prefilter.names_are == "callees"
    assert spec.prefilter.region.one_of[1].stores == ("request",)


def test_a_user_rule_file_cannot_change_a_prefilter(cli, tmp_path) -> None:
    (tmp_path / "app.py").write_text("import time\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "corp.yaml").write_text("id: LLM006\nprefilter: {all: [requests]}\n")
    result = cli("scan", ".", "--no-cache", "--rules-dir", "mine", cwd=tmp_path)
    assert result.returncode == 2 and "corp.yaml: key 'prefilter': unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_libcst_rule_declares_its_prefilter_and_project_rules_none() -> None:
    for code in rule_classes():
        assert CATALOG.rules[code].prefilter is not None, code
    for code in project_rules():  # the project model reads every file: a prefilter would be dead data
        assert CATALOG.rules[code].prefilter is None, code


def test_the_default_region_is_the_files_names() -> None:
    spec = _prefilter(Path("t.yaml"), {"names": ["sdk.calls"], "all": ["x"]})
    assert spec.region.names == ("sdk.calls",) and not spec.region.all


# ------------------------------------------------------------------ the text pre-filter and its second stage

def test_names_need_every_part_and_a_root_word() -> None:
    g = spec_gate({"names": ["tokenizer_constructors"]})
    assert g.text("from transformers import AutoTokenizer\nAutoTokenizer.from_pretrained('m')\n")
    assert not g.text("import transformers\ntransformers.AutoModel.from_pretrained('m')\n")
    assert not g.text("import tiktoken\ntiktoken.get_encoding('x')\n")  # `Encoding` is not a whole word here
    assert g.text("import tiktoken\nenc = tiktoken.Encoding('x')\n")


def test_a_chain_set_is_spelled_whole() -> None:
    g = spec_gate({"names": ["sdk.unknown_chains"]})
    assert g.text("def f(c):\n    return c.chat.completions.create(model='m')\n")
    assert not g.text("chat = completions = create = 1\n")  # the words, not the chain


def test_all_and_any_literals() -> None:
    g = spec_gate({"all": ["async", "sleep"], "any": ["trio", {"roots": "http.module_functions"}]})
    assert g.text("import requests\nasync def f():\n    sleep(1)\n")
    assert not g.text("import requests\nasync def f():\n    pass\n")  # no `sleep`
    assert not g.text("import json\nasync def f():\n    sleep(1)\n")  # no root of a request function
    assert not g.text("import requests\nasync def f():\n    asleep(1)\n")  # whole words only


def test_a_word_only_in_a_comment_or_string_fails_the_code_stage() -> None:
    g = spec_gate({"names": ["http.module_functions"]})
    assert both_stages(g, "import requests\nrequests.get(u)\n") == (True, True)
    assert both_stages(g, "# requests.get(u) is slow\nx = 'requests get'\n") == (True, False)


def test_keyword_none_allows_blanks_and_comments_and_reads_the_code() -> None:
    g = spec_gate({"keyword_none": ["http.timeout_keywords"]})
    assert both_stages(g, "httpx.get(u, timeout = # no limit\n None)\n") == (True, True)
    assert both_stages(g, "httpx.get(u, timeout=30)\n") == (False, False)
    assert both_stages(g, "def f(timeout=None):\n    pass\n") == (True, False)  # a default, not an argument
    assert both_stages(spec_gate({"keyword_none": ["deadline"]}), "f(deadline=None)\n") == (True, True)


def test_async_def_fact_per_stage() -> None:
    g = spec_gate({"facts": ["async_def"]})
    assert both_stages(g, "async def f():\n    pass\n") == (True, True)
    assert both_stages(g, "x = 'async'\n") == (True, False)  # the text: the word; the code: a coroutine
    assert both_stages(g, "import asyncio\n") == (False, False)


def test_llm_literal_reads_string_contents_in_both_stages() -> None:
    g = spec_gate({"facts": ["llm_literal"]})
    source = "import requests\nr = requests.post(BASE + '/v1/chat/completions', json=body)\n"
    assert both_stages(g, source) == (True, True)  # the code text has no strings: the raw source decides
    assert both_stages(g, "d = {'prompt': p}\n") == (True, True)  # a quoted payload key
    assert both_stages(g, "prompt = p\n") == (False, False)


def test_logging_sink_fact() -> None:
    g = spec_gate({"facts": ["logging_sink"]})
    assert g.text("import logging\nlogger = logging.getLogger(__name__)\nlogger.info(x)\n")
    assert g.text("from app.log import logger\nlogger.warning(x)\n")  # a logger-like name
    assert not g.text("import logging\nlogger = logging.getLogger(__name__)\nlogger.debug(x)\n")  # below INFO
    assert not g.text("import logging\nitems.append(x)\n")
    # a call that may reach a logging helper of the program (sdk-logging.yaml `helper_names`)
    assert g.text("from app import log\nlog.color_print(f'<query> {query} </query>')\n")
    assert g.text("self.log(title='SQL Prompt', message=prompt)\n")
    assert not g.text("print(x)\ncatalog(x)\n")


def test_one_of() -> None:
    g = spec_gate({"names": ["http.timeout_clients", "http.module_functions"],
                   "one_of": [{"names": ["http.timeout_required"]}, {"keyword_none": ["http.timeout_keywords"]}]})
    assert g.text("import requests\nrequests.get(u)\n")  # a call that needs the keyword
    assert g.text("import httpx\nhttpx.get(u, timeout=None)\n")  # an explicit None
    assert not g.text("import httpx\nhttpx.get(u)\n")  # httpx has a default timeout


def test_a_catalog_with_its_gates_built_still_pickles() -> None:
    """A process pool ships the catalog to its workers (pickled where processes are spawned)."""
    catalog = load_catalog()
    assert gate(catalog.rules["LLM006"], catalog).text("import requests\nrequests.get(u)\n")
    copy = pickle.loads(pickle.dumps(catalog))
    assert copy.gates == {} and gate(copy.rules["LLM006"], copy).text("import requests\nrequests.get(u)\n")


def test_a_rule_without_a_spec_is_open() -> None:
    spec = dataclasses.replace(CATALOG.rules["LLM006"], id="OPEN", prefilter=None)
    assert gate(spec, CATALOG) is OPEN_GATE and OPEN_GATE.text("") and OPEN_GATE.region(None)


# ------------------------------------------------------------------ bodies (regions.py)

SESSION_MODULE = """\
import requests

session = requests.Session()


def fetch(url):
    return session.get(url)


def mentions():
    kind = requests.Session
    return kind


def other(x):
    return x + 1


def build():
    return requests.Session()


class Adapter(requests.adapters.HTTPAdapter):
    def send(self, *args, **kwargs):
        return super().send(*args, **kwargs)


def patch(s):
    s.request = wrap(s.request)
"""


def test_names_as_callees_need_a_call_that_can_resolve() -> None:
    callees = spec_gate({"names": ["http.pooled_clients"]})
    found = bodies(SESSION_MODULE)
    assert callees.region(found["build"])
    assert not callees.region(found["mentions"])  # `requests.Session` named, never called
    assert not callees.region(found["other"])


def test_names_as_receivers_need_the_words_only() -> None:
    receivers = spec_gate({"names": ["http.timeout_clients"], "names_are": "receivers"})
    found = bodies(SESSION_MODULE)
    assert receivers.region(found["fetch"])  # `session` brings the words of `requests.Session()`
    assert receivers.region(found["mentions"])
    assert not receivers.region(found["other"])


def test_region_literals_and_stored_attributes() -> None:
    g = spec_gate({"all": ["x"], "region": {"one_of": [{"any": ["HTTPAdapter"]}, {"stores": ["request"]}]}})
    found = bodies(SESSION_MODULE)
    assert g.region(found["Adapter"]) and g.region(found["patch"])
    assert not g.region(found["other"]) and not g.region(found["fetch"])


PAYLOAD_MODULE = """\
import logging

logger = logging.getLogger(__name__)


def with_sdk(prompt):
    import openai
    return openai.OpenAI().chat.completions.create(model="m", messages=prompt)


def logs_prompt(prompt):
    logger.info(prompt)


def logs_count(count):
    logger.info(count)


def debug_prompt(prompt):
    logger.debug(prompt)
"""


def test_logging_bodies_need_a_reported_sink_next_to_a_payload() -> None:
    g = spec_gate({"all": ["x"], "region": {"one_of": [{"facts": ["sdk_import_in_body"]},
                                                        {"facts": ["logging_sink", "payload"]}]}})
    found = bodies(PAYLOAD_MODULE)
    assert g.region(found["with_sdk"])  # imports an SDK the module does not
    assert g.region(found["logs_prompt"])
    assert not g.region(found["logs_count"])  # no payload-like name
    assert not g.region(found["debug_prompt"])  # below the reported level


def test_async_def_in_a_body() -> None:
    g = spec_gate({"all": ["x"], "region": {"facts": ["async_def"]}})
    found = bodies("class C:\n    async def a(self):\n        pass\n\n    def b(self):\n        pass\n")
    assert g.region(found["C"]) and g.region(found["a"]) and not g.region(found["b"])


# ------------------------------------------------------------------ the shipped rules

def test_an_http_llm_module_is_checked_for_payload_logging() -> None:
    """LLM005 treats a module calling a model over HTTP as an LLM module: the code stage must not drop it for
    lack of an SDK word (the HTTP path is a string: only the raw text holds it)."""
    source = (b"import logging\nimport requests\n\nlogger = logging.getLogger(__name__)\n\n\ndef ask(prompt):\n"
              b"    logger.info('prompt: %s', prompt)\n"
              b"    return requests.post(URL + '/v1/chat/completions', json={'prompt': prompt}, timeout=30)\n")
    result = analyze_source("app.py", source, CATALOG, ScanConfig())
    assert [(f.rule, f.line) for f in result.findings] == [("LLM005", 8)]
