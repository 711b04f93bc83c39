"""Every rule's YAML examples (Fixit's VALID/INVALID): hits fire, near-misses stay quiet; catalog checks."""

from __future__ import annotations

import pickle
import re

import pytest

from llmdoctor.errors import UserError
from llmdoctor.scan.catalog import load_catalog, shipped_rules_dir
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.rules import implemented_rules
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
IMPLEMENTED = implemented_rules()


def _examples(kind: str):
    for rule_id, spec in sorted(CATALOG.rules.items()):
        if rule_id not in IMPLEMENTED:
            continue
        for index, code in enumerate(spec.hits if kind == "hit" else spec.near_misses):
            yield pytest.param(rule_id, code, id=f"{rule_id}-{kind}-{index}")


@pytest.mark.parametrize(("rule_id", "code"), list(_examples("hit")))
def test_hit_example_fires(rule_id, code):
    result = analyze_source("example.py", code.encode(), CATALOG, ScanConfig())
    assert not result.errors
    lines = sorted({f.line for f in result.findings if f.rule == rule_id})
    marked = [n for n, text in enumerate(code.splitlines(), 1) if re.search(r"#\s*hit\b", text)]
    assert lines, f"{rule_id} did not fire on its own hit example"
    if marked:
        assert lines == marked


@pytest.mark.parametrize(("rule_id", "code"), list(_examples("near_miss")))
def test_near_miss_example_is_quiet(rule_id, code):
    result = analyze_source("example.py", code.encode(), CATALOG, ScanConfig())
    assert not result.errors
    assert [f for f in result.findings if f.rule == rule_id] == []


def test_every_rule_yaml_has_documentation_and_an_implementation():
    assert {"LLM002", "LLM004"} <= set(CATALOG.rules)
    for rule_id in ("LLM002", "LLM004"):
        spec = CATALOG.rules[rule_id]
        assert rule_id in IMPLEMENTED
        for key in ("summary", "why", "example", "use_instead", "fix_safety"):
            assert getattr(spec, key).strip()


def test_catalog_pickles_and_has_a_fingerprint():
    clone = pickle.loads(pickle.dumps(CATALOG))
    assert clone.fingerprint == CATALOG.fingerprint and len(CATALOG.fingerprint) == 64
    assert clone.table("blocking_calls").match("time.sleep") is not None


def test_table_matching_exact_and_wildcards():
    constructors = CATALOG.table("tokenizer_constructors")
    assert constructors.match("transformers.AutoTokenizer.from_pretrained")
    assert constructors.match("transformers.models.llama.LlamaTokenizerFast.from_pretrained")
    assert constructors.match("tiktoken_ext.openai_public.o200k_base")
    assert constructors.match("transformers.AutoModel.from_pretrained") is None
    assert "time.sleep" in CATALOG.table("blocking_calls")
    assert "time.monotonic" not in CATALOG.table("blocking_calls")
    assert CATALOG.table("no_such_table").entries == []


# ----------------------------------------------------------------------------- malformed rule files

VALID_RULE = """\
id: LLM004
command: scan
name: x
severity: warning
summary: s
why: w
example: e
use_instead: u
fix_safety: f
examples: {hit: ["a"], near_miss: ["b"]}
"""


def _shipped_copy(tmp_path, name: str, text: str):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "prefixes.yaml").write_bytes((shipped_rules_dir() / "prefixes.yaml").read_bytes())
    (shipped / name).write_text(text)
    return shipped


@pytest.mark.parametrize(("text", "key"), [
    (VALID_RULE.replace("severity: warning", "severity: high"), "severity"),
    (VALID_RULE.replace("id: LLM004", "id: four"), "id"),
    (VALID_RULE.replace("summary: s\n", ""), "summary"),
    (VALID_RULE.replace('examples: {hit: ["a"], near_miss: ["b"]}', "examples: {hit: []}"), "examples.hit"),
    (VALID_RULE + "colour: red\n", "colour"),
    (VALID_RULE + "tables: {blocking: [\"not a name!\"]}\n", "tables.blocking[0]"),
    (VALID_RULE + "tables: [a, b]\n", "tables"),
    (VALID_RULE + "tables: {Bad-Name: [a]}\n", "tables.Bad-Name"),
    (VALID_RULE.replace("command: scan", "command: nginx"), "command"),
])
def test_malformed_rule_file_names_file_and_key(tmp_path, text, key):
    shipped = _shipped_copy(tmp_path, "bad.yaml", text)
    with pytest.raises(UserError) as err:
        load_catalog(shipped_dir=shipped)
    assert "bad.yaml" in str(err.value) and f"'{key}'" in str(err.value)


def test_rule_file_with_yaml_syntax_error_names_line(tmp_path):
    shipped = _shipped_copy(tmp_path, "broken.yaml", "id: LLM004\nname: [unclosed\nseverity: x\n")
    with pytest.raises(UserError, match=r"broken.yaml:\d+: invalid YAML"):
        load_catalog(shipped_dir=shipped)


def test_shipped_rules_dir_is_the_repository_rules_in_a_checkout():
    assert (shipped_rules_dir() / "llm004.yaml").is_file()


# ----------------------------------------------------------------------------- user tables

def test_user_rules_dir_adds_a_blocking_call(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "corp.yaml").write_text("id: LLM004\ntables:\n  blocking_calls:\n"
                                    "    - {name: mycorp.http.fetch, use_instead: mycorp.http.afetch}\n")
    catalog = load_catalog([user])
    code = b"from mycorp.http import fetch\nasync def h():\n    fetch('x')\n"
    result = analyze_source("a.py", code, catalog, ScanConfig())
    assert [(f.rule, f.line) for f in result.findings] == [("LLM004", 3)]
    assert "mycorp.http.afetch" in result.findings[0].fix
    assert catalog.fingerprint != CATALOG.fingerprint


def test_user_tables_file_kind(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "t.yaml").write_text("kind: tables\ntables:\n  blocking_calls: [mycorp.db.query]\n")
    catalog = load_catalog([user])
    assert catalog.table("blocking_calls").match("mycorp.db.query")


@pytest.mark.parametrize(("text", "key"), [
    ("id: LLM999\ntables: {blocking_calls: [a.b]}\n", "id"),
    ("kind: tables\ntables: {blocking_callz: [a.b]}\n", "tables.blocking_callz"),
    ("id: LLM004\nseverity: error\n", "severity"),
])
def test_user_file_may_only_extend_existing_tables(tmp_path, text, key):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "x.yaml").write_text(text)
    with pytest.raises(UserError) as err:
        load_catalog([user])
    assert "x.yaml" in str(err.value) and f"'{key}'" in str(err.value)


def test_missing_user_rules_dir(tmp_path):
    with pytest.raises(UserError, match="not a directory"):
        load_catalog([tmp_path / "nope"])
