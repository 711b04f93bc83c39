"""A user's own SDK table (an in-house LLM wrapper) through `--rules-dir` / config `rules-dir`: loaded into the
catalog's knowledge like the shipped `rules/sdk-*.yaml`, validated at load (exit 2 naming file and key), part
of the catalog fingerprint (cache key), and read by every SDK rule — tested through the installed command."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from llmdoctor.errors import UserError
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.rules import implemented_rules
from llmdoctor.scan.settings import ScanConfig

ROOT = Path(__file__).resolve().parents[1]
INHOUSE = ROOT / "fixtures" / "python" / "sdk" / "inhouse"
MARK = re.compile(r"#\s*hit-with-rules-dir:\s*([A-Z0-9, ]+)")
IMPLEMENTED = set(implemented_rules())


def doc_wrapper_table() -> str:
    """The table docs/sdk-knowledge.md shows under "Adding an in-house wrapper" (the doc's promise is tested)."""
    text = (ROOT / "docs" / "sdk-knowledge.md").read_text()
    section = text.split("## Adding an in-house wrapper", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def write(base: Path, name: str, text: str) -> Path:
    path = base / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def scan_json(cli, cwd: Path, *args: str):
    result = cli("scan", "--format", "json", "--no-cache", *args, cwd=cwd)
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    return result.returncode, sorted((f["path"], f["line"], f["rule"]) for f in data["findings"])


def marked(path: Path, name: str) -> list[tuple[str, int, str]]:
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = MARK.search(line)
        if match:
            found += [(name, number, code.strip()) for code in match.group(1).split(",")
                      if code.strip() in IMPLEMENTED]
    return sorted(found)


def test_inhouse_fixture_through_the_installed_command(cli, tmp_path):
    shutil.copytree(INHOUSE, tmp_path / "inhouse")
    project = tmp_path / "inhouse"
    expected = marked(project / "app.py", "app.py")
    assert ("app.py", 18, "LLM001") in expected and ("app.py", 18, "LLM004") in expected
    assert scan_json(cli, project, "--rules-dir", "rules", "app.py") == (1, expected)
    assert scan_json(cli, project, "app.py") == (0, [])  # without the table nothing is known


def test_the_documented_wrapper_table_reports_what_the_doc_promises(cli, tmp_path):
    write(tmp_path, "corp-rules/mycorp.yaml", doc_wrapper_table())
    write(tmp_path, "service.py", """\
        import logging
        from fastapi import FastAPI
        from mycorp.llm import AsyncClient, Client
        from sse_starlette.sse import EventSourceResponse

        logger = logging.getLogger(__name__)
        app = FastAPI()
        client = Client()
        aclient = AsyncClient()


        @app.post("/ask")
        def handler(q):
            return EventSourceResponse(iter([client.ask(q)]))


        @app.post("/fresh")
        def per_request(q):
            fresh = Client()
            return "".join(fresh.ask_stream(q))


        @app.post("/async")
        async def async_handler(q):
            answer = client.ask(q)
            return answer, [p async for p in aclient.ask_stream(q)], client.embed(q)


        @app.post("/noisy")
        def noisy(q):
            logger.info(client.ask(q))
        """)
    code, found = scan_json(cli, tmp_path, "--rules-dir", "corp-rules", "service.py")
    promised = {("service.py", 14, "LLM001"), ("service.py", 19, "LLM003"),  # LLM001: only where it streams
                ("service.py", 25, "LLM004"), ("service.py", 26, "LLM004"), ("service.py", 31, "LLM005")}
    assert code == 1
    assert set(found) == {f for f in promised if f[2] in IMPLEMENTED}
    fix = cli("scan", "--no-cache", "--select", "LLM004", "--rules-dir", "corp-rules", "service.py",
              cwd=tmp_path).stdout
    assert "sync `mycorp.llm.Client` client" in fix and "`await mycorp.llm.AsyncClient().ask(...)`" in fix


def test_rules_dir_from_the_config_file(cli, tmp_path):
    write(tmp_path, ".llmdoctor.yaml", "rules-dir: [corp-rules]\nselect: [LLM004]\n")
    write(tmp_path, "corp-rules/mycorp.yaml", doc_wrapper_table())
    write(tmp_path, "app.py", "from mycorp.llm import Client\nllm = Client()\nasync def f(q):\n    return llm.ask(q)\n")
    assert scan_json(cli, tmp_path) == (1, [("app.py", 4, "LLM004")])


def test_a_changed_user_table_changes_the_result_despite_the_cache(cli, tmp_path):
    table = write(tmp_path, "corp-rules/mycorp.yaml", doc_wrapper_table())
    write(tmp_path, "app.py", "from mycorp.llm import Client\nllm = Client()\nasync def f(q):\n    return llm.ask(q)\n")
    args = ("scan", "--select", "LLM004", "--rules-dir", "corp-rules", "--cache-dir", str(tmp_path / "cache"), ".")
    assert cli(*args, cwd=tmp_path).returncode == 1
    assert cli(*args, cwd=tmp_path).returncode == 1  # served from the cache
    table.write_text(table.read_text().replace("async: false", "async: true"))
    assert cli(*args, cwd=tmp_path).returncode == 0


def test_user_tables_are_kept_in_the_knowledge_and_the_fingerprint(tmp_path):
    write(tmp_path, "a/sdk-mycorp.yaml", doc_wrapper_table())
    second = yaml.safe_load(doc_wrapper_table())
    second["name"] = "mycorp-llm-2"
    write(tmp_path, "b/sdk-mycorp.yaml", yaml.safe_dump(second))
    shipped = load_catalog()
    one = load_catalog([tmp_path / "a"])
    both = load_catalog([tmp_path / "a", tmp_path / "b"])
    assert one.knowledge["user:sdk-mycorp"]["name"] == "mycorp-llm"
    assert len([k for k in both.knowledge if k.startswith("user:")]) == 2  # same file name, two dirs
    assert len({shipped.fingerprint, one.fingerprint, both.fingerprint}) == 3
    edited = (tmp_path / "a" / "sdk-mycorp.yaml")
    edited.write_text(edited.read_text() + "\n# a comment changes the bytes\n")
    assert load_catalog([tmp_path / "a"]).fingerprint != one.fingerprint


def test_plain_table_additions_still_work_alongside(tmp_path):
    text = doc_wrapper_table() + "description: wrapper\ntables:\n  blocking_calls: [mycorp.llm.sleep]\n"
    write(tmp_path, "r/x.yml", text)
    catalog = load_catalog([tmp_path / "r"])
    assert catalog.table("blocking_calls").match("mycorp.llm.sleep") is not None
    assert "user:x" in catalog.knowledge


@pytest.mark.parametrize("entry, key", [
    ("{name: mycorp.Path.child}", "tables.library_results[0]"),
    ("{name: mycorp.Path.child, type: 'not a name'}", "tables.library_results[0].type"),
    ("{name: mycorp.Path.children, items: [mycorp.Path]}", "tables.library_results[0].items"),
    ("{name: mycorp.Path.child, type: mycorp.Path, attribute: sometimes}", "tables.library_results[0].attribute"),
])
def test_malformed_library_result_exits_2_naming_file_and_key(cli, tmp_path, entry, key):
    write(tmp_path, "app.py", "x = 1\n")
    write(tmp_path, "corp-rules/paths.yaml", f"kind: tables\ntables:\n  library_results:\n    - {entry}\n")
    result = cli("scan", "--no-cache", "--rules-dir", "corp-rules", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert "paths.yaml" in result.stderr and f"'{key}'" in result.stderr, result.stderr


def test_a_user_library_result_types_the_value(tmp_path):
    write(tmp_path, "r/paths.yaml", "kind: tables\ntables:\n  library_results:\n"
                                    "    - {name: mycorp.fs.Root.child, type: pathlib.Path}\n")
    source = textwrap.dedent("""
        from mycorp.fs import Root
        async def save(data):
            Root().child("x").write_bytes(data)
        """)
    result = analyze_source("t.py", source.encode(), load_catalog([tmp_path / "r"]), ScanConfig(select=("LLM004",)))
    assert [(f.line, f.extra["call"]) for f in result.findings] == [(4, "pathlib.Path.write_bytes")]


def test_a_user_library_result_types_the_elements(tmp_path):
    write(tmp_path, "r/paths.yaml", "kind: tables\ntables:\n  library_results:\n"
                                    "    - {name: mycorp.fs.Root.children, items: pathlib.Path}\n")
    source = textwrap.dedent("""
        from mycorp.fs import Root
        async def save(data):
            for child in Root().children():
                child.write_bytes(data)
        """)
    result = analyze_source("t.py", source.encode(), load_catalog([tmp_path / "r"]), ScanConfig(select=("LLM004",)))
    assert [(f.line, f.extra["call"]) for f in result.findings] == [(5, "pathlib.Path.write_bytes")]


def _mutated(change) -> str:
    doc = yaml.safe_load(doc_wrapper_table())
    change(doc)
    return yaml.safe_dump(doc)


@pytest.mark.parametrize("text, key", [
    (_mutated(lambda d: d["clients"][0].pop("async")), "clients[0].async"),
    (_mutated(lambda d: d["clients"][0].update({"async": "no"})), "clients[0].async"),
    (_mutated(lambda d: d["clients"][0].update(methods=["mycrop"])), "clients[0].methods"),
    (_mutated(lambda d: d["clients"][0].update(constructors="mycorp.llm.Client")), "clients[0].constructors"),
    (_mutated(lambda d: d["clients"][0].update(colour="red")), "clients[0].colour"),
    (_mutated(lambda d: d["clients"][0].update(local_kwargs="path")), "clients[0].local_kwargs"),
    (_mutated(lambda d: d["clients"][0].update(local_kwargs=["not a name"])), "clients[0].local_kwargs"),
    (_mutated(lambda d: d["clients"][0].update(holds=["a pool"])), "clients[0].holds"),
    (_mutated(lambda d: d["clients"][0].update(holds=" ")), "clients[0].holds"),
    (_mutated(lambda d: d["method_sets"]["mycorp"]["generation"]["ask"].update(strem_twin="x")),
     "method_sets.mycorp.generation.ask.strem_twin"),
    (_mutated(lambda d: d["method_sets"]["mycorp"].update(streaming="ask_stream")), "method_sets.mycorp.streaming"),
    (_mutated(lambda d: d["method_sets"]["mycorp"].update(exempt_when={"kwarg": ["x"]})),
     "method_sets.mycorp.exempt_when.kwarg"),
    (_mutated(lambda d: d.update(modules=[{"module": "mycorp.llm", "methods": ["mycorp"]}])), "modules[0].async"),
    (_mutated(lambda d: d.update(name="openai")), "name"),
    (_mutated(lambda d: d.update(imports="mycorp.llm")), "imports"),
    (_mutated(lambda d: d.update(libraries={"library": "x"})), "libraries"),
    (_mutated(lambda d: d.update(libraries=[{"module_functions": ["x.get"]}])), "libraries[0].library"),
    (_mutated(lambda d: d.update(clientz=[])), "clientz"),
])
def test_malformed_user_sdk_table_exits_2_naming_file_and_key(cli, tmp_path, text, key):
    write(tmp_path, "app.py", "x = 1\n")
    write(tmp_path, "corp-rules/mycorp.yaml", text)
    result = cli("scan", "--no-cache", "--rules-dir", "corp-rules", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert "mycorp.yaml" in result.stderr and f"'{key}'" in result.stderr, result.stderr
    with pytest.raises(UserError):  # at load time, before any file is scanned
        load_catalog([tmp_path / "corp-rules"])
