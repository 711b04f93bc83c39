"""The fixers and the fix loop, in-process (the command line is in test_scan_fix_cli.py).

Every case runs `fix_source` (scan -> fix -> compile check -> rescan, to a fixed point) and checks the exact
text, that the fixed text compiles, that the fixed findings are gone, and that fixing again changes nothing.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from llmdoctor.report.model import Finding
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import FileResult
from llmdoctor.scan.fix import apply
from llmdoctor.scan.fix.apply import SourceText, compile_problem, fix_source
from llmdoctor.scan.fix.base import FixPolicy, FixRequest
from llmdoctor.scan.fix.registry import FIXERS
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
ALL = FixPolicy(unsafe=True, timeout=30)
SAFE = FixPolicy()


def fix(code: str, policy: FixPolicy = ALL, path: str = "/project/app.py"):
    text = textwrap.dedent(code)
    outcome = fix_source(path, SourceText(text, "utf-8"), CATALOG, ScanConfig(root="/project"), policy)
    assert compile_problem(path, outcome.fixed) is None, outcome.fixed
    again = fix_source(path, SourceText(outcome.fixed, "utf-8"), CATALOG, ScanConfig(root="/project"), policy)
    assert again.fixed == outcome.fixed and not again.applied  # idempotent
    return outcome


def remaining(outcome) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in outcome.result.findings]


# ----------------------------------------------------------------------------- catalog <-> fixers


def test_every_yaml_fix_has_a_fixer_and_every_fixer_a_yaml_fix():
    declared = {fix.kind for spec in CATALOG.rules.values() for fix in spec.fixes}
    assert declared == set(FIXERS)
    safeties = {(spec.id, fix.kind): fix.safety for spec in CATALOG.rules.values() for fix in spec.fixes}
    assert safeties == {("LLM004", "asyncio_sleep"): "safe", ("LLM004", "to_thread"): "unsafe",
                        ("LLM006", "timeout"): "unsafe", ("LLM002", "cache_tokenizer"): "unsafe"}


@pytest.mark.parametrize("rule_id", ["LLM001", "LLM003", "LLM005"])
def test_rules_without_a_mechanical_fix_say_so_with_the_manual_fix(rule_id):
    spec = CATALOG.rules[rule_id]
    assert not spec.fixes
    assert spec.fix_safety.startswith("No automatic fix") and "Fix by hand:" in spec.fix_safety


# ----------------------------------------------------------------------------- LLM004 asyncio.sleep (safe)


def test_time_sleep_becomes_asyncio_sleep_with_the_import_added_and_comments_kept():
    outcome = fix('''\
        """Doc."""
        import time


        async def handler():
            time.sleep(0.5)  # back off
            return 1
    ''', SAFE)
    assert outcome.fixed == textwrap.dedent('''\
        """Doc."""
        import time
        import asyncio


        async def handler():
            await asyncio.sleep(0.5)  # back off
            return 1
    ''')
    assert [(a.rule, a.kind) for a in outcome.applied] == [("LLM004", "asyncio_sleep")]
    assert remaining(outcome) == []


def test_aliases_are_kept_and_an_existing_asyncio_alias_is_used():
    outcome = fix('''\
        import asyncio as aio
        import time as t
        from time import sleep


        async def handler(items):
            t.sleep(1)
            sleep(
                2,  # two seconds
            )
            return [t.sleep(i) for i in items]
    ''', SAFE)
    assert outcome.fixed == textwrap.dedent('''\
        import asyncio as aio
        import time as t
        from time import sleep


        async def handler(items):
            await aio.sleep(1)
            await aio.sleep(
                2,  # two seconds
            )
            return [await aio.sleep(i) for i in items]
    ''')


def test_await_is_parenthesized_where_it_binds_looser():
    outcome = fix('''\
        import time
        async def f():
            return time.sleep(1).__class__, (time.sleep(2))
    ''', SAFE)
    assert "(await asyncio.sleep(1)).__class__, (await asyncio.sleep(2))" in outcome.fixed


def test_not_fixed_where_await_cannot_go():
    outcome = fix('''\
        import asyncio, time
        async def f(items):
            return sum(1 for i in items if time.sleep(i) is None)
    ''', SAFE)
    assert outcome.fixed.count("time.sleep") == 1 and not outcome.applied
    assert [s.reason for s in outcome.skipped] == [
        "inside a generator expression: `await` would turn it into an async generator"]
    assert remaining(outcome) == [("LLM004", 3)]


def test_a_rebound_asyncio_name_is_not_used():
    outcome = fix('''\
        import asyncio, time
        async def f(asyncio):
            time.sleep(1)
    ''', SAFE)
    assert not outcome.applied and "means something else here" in outcome.skipped[0].reason


def test_suppressed_findings_are_not_fixed():
    outcome = fix('''\
        import time
        async def f():
            time.sleep(1)  # noqa: LLM004
            time.sleep(2)
    ''', SAFE)
    assert "time.sleep(1)  # noqa: LLM004\n    await asyncio.sleep(2)" in outcome.fixed


def test_unsafe_fixes_need_the_policy():
    code = '''\
        import requests
        async def f(url):
            return requests.get(url, timeout=5).json()
    '''
    assert not fix(code, SAFE).changed
    assert "(await asyncio.to_thread(requests.get, url, timeout=5)).json()" in fix(code).fixed


def test_a_missing_timeout_stays_reported_after_to_thread_moves_the_call():
    """LLM006 reads `asyncio.to_thread(requests.get, url)` as the call it makes: without a `fix-timeout` the
    moved call is still reported (at the to_thread call), and a later run with one adds it there."""
    code = '''\
        import requests
        async def f(url):
            return requests.get(url).json()
    '''
    outcome = fix(code, FixPolicy(unsafe=True))
    assert "(await asyncio.to_thread(requests.get, url)).json()" in outcome.fixed
    assert remaining(outcome) == [("LLM006", 5)]  # after the `import asyncio` added
    assert [(s.rule, s.kind) for s in outcome.skipped] == [("LLM006", "timeout")]
    later = fix(outcome.fixed, ALL)
    assert "(await asyncio.to_thread(requests.get, url, timeout=30)).json()" in later.fixed
    assert remaining(later) == []


# ----------------------------------------------------------------------------- LLM004 to_thread (unsafe)


def test_to_thread_keeps_the_arguments_and_their_layout():
    outcome = fix('''\
        import subprocess
        async def build():
            subprocess.run(
                ["make"], check=True,
            )
    ''')
    assert outcome.fixed.endswith('''\
    await asyncio.to_thread(
        subprocess.run,
        ["make"], check=True,
    )
''')


def test_to_thread_for_a_sync_sdk_client_but_not_for_a_stream():
    outcome = fix('''\
        from openai import OpenAI
        import anthropic
        client = OpenAI()
        claude = anthropic.Anthropic()
        async def chat(q):
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
            with claude.messages.stream(model="m", max_tokens=512, messages=[]) as stream:
                return reply, "".join(stream.text_stream)
    ''')
    assert ('reply = await asyncio.to_thread(client.chat.completions.create, model="m", messages=[{"role": '
            '"user", "content": q}])') in outcome.fixed
    assert "with claude.messages.stream(" in outcome.fixed  # no automatic fix for a stream
    assert ("LLM004", 9) in remaining(outcome)  # line 8 before `import asyncio` was added


@pytest.mark.parametrize("code, reason", [
    ("import requests\nasync def f(u):\n    with requests.get(u, timeout=5) as r:\n        return r.text\n",
     "a `with` item"),
    ("import requests\nasync def f(u):\n    return requests.get(u, stream=True, timeout=5).raw\n", "`stream=True`"),
])
def test_to_thread_is_not_applied_where_the_work_continues_after_the_call(code, reason):
    outcome = fix(code)
    assert not outcome.applied and outcome.skipped[0].reason.startswith(reason)


def test_calls_whose_work_continues_later_offer_no_fix():
    outcome = fix('''\
        import subprocess
        async def f(path):
            with open(path) as handle:
                data = handle.read()
            return subprocess.Popen(["ls"]), data
    ''')
    assert not outcome.applied and not outcome.skipped and len(remaining(outcome)) == 2


def test_to_thread_at_the_call_site_of_a_sync_project_helper():
    """The transitive LLM004 (issue 11) reports `await`-less calls of a sync project function that blocks at
    the async call site, with the `to_thread` descriptor: the fixer works from the span alone."""
    text = textwrap.dedent('''\
        import requests


        def fetch_user(uid):
            return requests.get(f"https://api/{uid}", timeout=5).json()


        async def get_user(uid):
            user = fetch_user(uid)
            return user["name"]
    ''')
    finding = Finding(rule="LLM004", severity="warning", path="/project/app.py", line=9, column=12, end_line=9,
                      end_column=27, message="`fetch_user()` blocks the event loop ...",
                      extra={"autofix": {"kind": "to_thread"}, "call": "app.fetch_user"})
    first = FileResult("/project/app.py", findings=[finding], parsed=True)
    outcome = fix_source("/project/app.py", SourceText(text, "utf-8"), CATALOG, ScanConfig(root="/project"), ALL,
                         first=first)
    assert "    user = await asyncio.to_thread(fetch_user, uid)\n" in outcome.fixed
    assert outcome.fixed.startswith("import requests\nimport asyncio\n")


# ----------------------------------------------------------------------------- LLM006 timeout (unsafe)


def test_timeout_is_added_in_the_arguments_layout_or_replaces_none():
    outcome = fix('''\
        import requests, httpx
        session = requests.Session()
        def fetch(url):
            a = requests.get(url)
            b = session.post(
                url,
                json={},
            )
            c = httpx.Client(timeout=None)
            return a, b, c
    ''', FixPolicy(unsafe=True, timeout=12.5))
    assert "a = requests.get(url, timeout=12.5)" in outcome.fixed
    assert "        url,\n        json={},\n        timeout=12.5,\n    )" in outcome.fixed
    assert "httpx.Client(timeout=12.5)" in outcome.fixed
    assert remaining(outcome) == []


def test_timeout_in_milliseconds_where_the_sdk_counts_them():
    outcome = fix('''\
        from mistralai import Mistral
        client = Mistral(api_key="k")
        def ask(q):
            return client.chat.complete(model="m", messages=[], timeout_ms=None, stream=False)
    ''')
    assert "timeout_ms=30000" in outcome.fixed


def test_timeout_needs_a_value_from_the_user():
    outcome = fix("import requests\ndef f(u):\n    return requests.get(u)\n", FixPolicy(unsafe=True))
    assert not outcome.applied and "fix-timeout" in outcome.skipped[0].reason


def test_timeout_before_to_thread_on_the_same_call():
    outcome = fix("import requests\nasync def f(u):\n    return requests.get(u).text\n")
    assert "(await asyncio.to_thread(requests.get, u, timeout=30)).text" in outcome.fixed
    assert [a.kind for a in outcome.applied] == ["timeout", "to_thread"]


# ----------------------------------------------------------------------------- LLM002 cached tokenizer (unsafe)


def test_a_literal_tokenizer_constructor_becomes_one_cached_instance():
    outcome = fix('''\
        from transformers import AutoTokenizer


        # counts tokens
        def count_tokens(text):
            tok = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B")
            return len(tok.encode(text))


        class Splitter:
            def split(self, text):
                return AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B").tokenize(text)
    ''')
    assert outcome.fixed == textwrap.dedent('''\
        from transformers import AutoTokenizer
        import functools


        @functools.lru_cache(maxsize=None)
        def _tokenizer_meta_llama_llama_3_1_8b():
            return AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B")


        # counts tokens
        def count_tokens(text):
            tok = _tokenizer_meta_llama_llama_3_1_8b()
            return len(tok.encode(text))


        class Splitter:
            def split(self, text):
                return _tokenizer_meta_llama_llama_3_1_8b().tokenize(text)
    ''')
    assert remaining(outcome) == []


def test_no_cached_tokenizer_for_arguments_that_vary_or_a_local_import():
    outcome = fix('''\
        def count(text, name):
            from transformers import AutoTokenizer
            return len(AutoTokenizer.from_pretrained("gpt2").encode(text))
    ''')
    assert not outcome.applied and "not a module-level name" in outcome.skipped[0].reason
    varying = fix("from transformers import AutoTokenizer\ndef count(t, name):\n"
                  "    return len(AutoTokenizer.from_pretrained(name).encode(t))\n")
    assert not varying.applied and not varying.skipped  # no fix offered: the finding has no descriptor
    assert remaining(varying) == [("LLM002", 3)]


# ----------------------------------------------------------------------------- the loop


def test_a_fix_that_would_break_the_file_is_skipped_and_the_others_applied(monkeypatch):
    text = "import time, requests\nasync def f(u):\n    time.sleep(1)\n    return requests.get(u, timeout=3)\n"

    def check(new_text: str):
        return "line 4: pretend" if "to_thread" in new_text else None

    monkeypatch.setattr(apply, "_checker", lambda path, original: check)
    outcome = fix_source("/project/app.py", SourceText(text, "utf-8"), CATALOG, ScanConfig(root="/project"), ALL)
    assert "await asyncio.sleep(1)" in outcome.fixed and "requests.get(u, timeout=3)" in outcome.fixed
    assert [s.kind for s in outcome.skipped] == ["to_thread"]
    assert "would not compile (line 4: pretend)" in outcome.skipped[0].reason


def test_a_file_with_a_syntax_error_is_left_alone():
    outcome = fix_source("/p/a.py", SourceText("import time\nasync def f(:\n    time.sleep(1)\n", "utf-8"),
                         CATALOG, ScanConfig(root="/p"), ALL)
    assert not outcome.changed and outcome.result.errors


def test_encoding_and_line_endings_are_kept():
    data = "# -*- coding: latin-1 -*-\r\nimport time\r\nasync def f():\r\n    time.sleep(1)  # é\r\n".encode("latin-1")
    source = SourceText.from_bytes(data)
    outcome = fix_source("/p/a.py", source, CATALOG, ScanConfig(root="/p"), SAFE)
    assert source.encode(outcome.fixed) == (
        "# -*- coding: latin-1 -*-\r\nimport time\r\nimport asyncio\r\n\r\nasync def f():\r\n"
        "    await asyncio.sleep(1)  # é\r\n").encode("latin-1")


def test_requests_locate_the_call_by_its_exact_span():
    module = cst.parse_module("x = f(g(1))\n")
    from llmdoctor.scan.fix.base import FixContext

    context = FixContext.build(module, ALL)
    inner = FixRequest(rule="LLM004", kind="to_thread", safety="unsafe", line=1, column=7, end_line=1,
                       end_column=11)
    node = context.node_at(inner)
    assert isinstance(node, cst.Call) and module.code_for_node(node) == "g(1)"
    outer = FixRequest(rule="LLM004", kind="to_thread", safety="unsafe", line=1, column=5, end_line=1,
                       end_column=12)
    assert outer.overlaps(inner) and outer.contains(inner)


# ----------------------------------------------------------------------------- the rest, in-process


def test_fix_timeout_in_the_config_must_be_seconds(tmp_path):
    from llmdoctor.errors import UserError
    from llmdoctor.scan.config import load_config

    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.llmdoctor]\nfix = true\nunsafe-fixes = true\nfix-timeout = 7.5\n")
    settings = load_config(config)
    assert (settings.fix, settings.unsafe_fixes, settings.fix_timeout) == (True, True, 7.5)
    same_without = ScanConfig(root=settings.root, source=settings.source)
    assert settings.fingerprint() == same_without.fingerprint()  # what is done with findings: not a cache key
    for bad in ("'long'", "0", "-1", "true"):
        config.write_text(f"[tool.llmdoctor]\nfix-timeout = {bad}\n")
        with pytest.raises(UserError, match="key 'tool.llmdoctor.fix-timeout': must be a number of seconds"):
            load_config(config)


def test_stdin_plan_applies_excludes_only_with_force_exclude(tmp_path):
    from llmdoctor.scan.runner import ScanOptions, prepare_stdin

    (tmp_path / "pyproject.toml").write_text('[tool.llmdoctor]\nexclude = ["gen/*"]\n')
    forced = prepare_stdin("gen/x.py", ScanOptions(cwd=str(tmp_path), force_exclude=True))
    assert forced.files == []
    plain = prepare_stdin("gen/x.py", ScanOptions(cwd=str(tmp_path)))
    assert plain.files == [str(tmp_path / "gen" / "x.py")] and plain.config.source.endswith("pyproject.toml")


def _finding(path: str, line: int) -> Finding:
    return Finding(rule="LLM004", severity="warning", path=path, line=line, column=5, end_line=line,
                   end_column=18, message="`time.sleep()` blocks the event loop inside `async def h`",
                   extra={"autofix": {"kind": "asyncio_sleep", "safety": "safe", "title": "t"}})


def test_gitlab_fingerprints_stay_when_code_moves_and_differ_for_twins(tmp_path):
    from llmdoctor.report.formats import statistics_rows, to_gitlab
    from llmdoctor.report.model import Report

    app = tmp_path / "app.py"
    app.write_text("import time\nasync def h():\n    time.sleep(1)\n    time.sleep(1)\n")
    before = to_gitlab(Report("scan", findings=[_finding(str(app), 3), _finding(str(app), 4)]), tmp_path)
    app.write_text("# moved\n" + app.read_text())
    after = to_gitlab(Report("scan", findings=[_finding(str(app), 4), _finding(str(app), 5)]), tmp_path)
    assert [i["fingerprint"] for i in after] == [i["fingerprint"] for i in before]
    assert before[0]["fingerprint"] != before[1]["fingerprint"]
    report = Report("scan", findings=[_finding(str(app), 4), _finding(str(app), 5)])
    assert statistics_rows(report) == [{"code": "LLM004", "name": "", "count": 2, "fixable": 2}]


def test_explain_json_carries_the_fixes():
    from llmdoctor.catalog import load_checks

    checks = load_checks()
    assert [f["kind"] for f in checks.check("LLM002").to_dict()["fixes"]] == ["cache_tokenizer"]
    assert checks.check("LLM005").to_dict()["fixes"] == []
    assert "Fix by hand:" in checks.check("LLM005").help_markdown()


def test_a_fix_round_relinks_the_whole_project_even_when_the_link_cache_answered_the_scan(tmp_path):
    """The link cache answers an unchanged project without analysing its files (`plan.results` empty); the
    fix round still links the fixed file with the rest of its project, so the finding that exists only
    through the other module is still reported after the safe fix."""
    from llmdoctor.scan.fix.run import fix_report
    from llmdoctor.scan.runner import ScanOptions, collect, prepare_scan

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'svc'\n")
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc/__init__.py").write_text("")
    (tmp_path / "svc/clients.py").write_text(
        "import requests\n\n\ndef fetch_user(uid):\n"
        "    return requests.get(f'https://users.internal/{uid}', timeout=5).json()\n")
    app = tmp_path / "svc/app.py"
    app.write_text(textwrap.dedent('''\
        import time

        from fastapi import FastAPI

        from svc.clients import fetch_user

        app = FastAPI()


        @app.get("/users/{uid}")
        async def get_user(uid: str):
            time.sleep(1)
            return fetch_user(uid)
    '''))
    options = ScanOptions(cwd=str(tmp_path), isolated=True)
    plan = prepare_scan(["svc/app.py"], options)
    report = collect(plan, options)
    assert [f.rule for f in report.findings] == ["LLM004", "LLM004"]
    plan.results.clear()  # as when the link cache answered the project
    fix_report(plan, report, FixPolicy(), write=True, cwd=str(tmp_path))
    assert "await asyncio.sleep(1)" in app.read_text()
    assert [(f.rule, f.line) for f in report.findings] == [("LLM004", 14)]
