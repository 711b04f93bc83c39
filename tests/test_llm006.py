"""LLM006 (HTTP call without a timeout): missing `timeout=` only where the library has no default (requests),
a literal `timeout=None` only where the tables say None disables the timeout; every exemption as a near-miss."""

from __future__ import annotations

import copy
import json
import re
import textwrap
from pathlib import Path

import yaml

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
ROOT = Path(__file__).resolve().parents[1]


def findings(source: str, catalog=CATALOG):
    """LLM006 in every execution context: what the rule decides about a call (contexts are
    tests/test_project_links.py's)."""
    result = analyze_source("t.py", textwrap.dedent(source).encode(), catalog, ScanConfig(every_context=True))
    assert result.errors == []
    return [f for f in result.findings if f.rule == "LLM006"]


def lines(source: str, catalog=CATALOG) -> list[int]:
    return [f.line for f in findings(source, catalog)]


def test_requests_without_timeout_module_and_session():
    found = findings("""
        import requests
        from requests import post
        session = requests.Session()
        a = requests.get("http://x")
        b = post("http://x", json={})
        def f(url):
            return session.get(url).json()
        def g():
            with requests.Session() as s:
                s.request("GET", "http://x")
        """)
    assert [f.line for f in found] == [5, 6, 8, 11]
    assert "no default timeout" in found[0].message and "timeout=(3.05, 30)" in found[0].fix


def test_requests_with_a_timeout_or_kwargs_is_quiet():
    assert lines("""
        import requests
        session = requests.Session()
        T = 10
        def f(url, *args, **kw):
            requests.get(url, timeout=T)
            requests.get(url, **kw)
            requests.request(*args)
            session.get(url, timeout=(3.05, 27))
            session.mount("https://", None)
            session.close()
        """) == []


def test_httpx_missing_timeout_is_never_reported():
    assert lines("""
        import httpx
        client = httpx.Client()
        def f(url, c: httpx.Client):
            httpx.get(url)
            client.get(url)
            c.post(url)
        """) == []


def test_timeout_none_where_it_disables_the_timeout():
    found = findings("""
        import httpx
        import aiohttp
        import requests
        import urllib3
        from openai import OpenAI
        from anthropic import AsyncAnthropic
        from mistralai import Mistral
        c = httpx.Client(timeout=None)
        o = OpenAI(timeout=None)
        a = AsyncAnthropic(timeout=None)
        m = Mistral(timeout_ms=None)
        pm = urllib3.PoolManager(timeout=None)
        def f(url):
            requests.get(url, timeout=None)
            c.get(url, timeout=None)
            o.with_options(timeout=None).chat.completions.create(model="m", messages=[])
            o.chat.completions.create(model="m", messages=[], timeout=None)
        async def g(url):
            async with aiohttp.ClientSession() as s:
                async with s.get(url, timeout=None) as r:
                    return await r.text()
        """)
    assert [f.line for f in found] == [9, 10, 11, 12, 13, 15, 16, 17, 18, 21]
    assert "600 s read" in found[1].message
    assert "5 s" in found[0].message


def test_timeout_none_that_means_the_library_default_is_quiet():
    assert lines("""
        import aiohttp
        import cohere
        import litellm
        from litellm import Router
        session = aiohttp.ClientSession(timeout=None)
        co = cohere.Client(timeout=None)
        r = Router(model_list=[], timeout=None)
        x = litellm.completion(model="m", messages=[], timeout=None)
        s = requests_session = None
        """) == []


def test_unknown_receivers_are_not_guessed():
    assert lines("""
        def f(session, url):
            session.get(url)
            session.get(url, timeout=None)
        """) == []


def test_sessions_with_a_default_timeout_adapter_are_trusted():
    assert lines("""
        import requests
        from requests.adapters import HTTPAdapter
        class TimeoutAdapter(HTTPAdapter):
            def send(self, request, **kwargs):
                kwargs.setdefault("timeout", 10)
                return super().send(request, **kwargs)
        session = requests.Session()
        session.mount("https://", TimeoutAdapter())
        def f(url):
            return session.get(url)
        """) == []
    assert lines("""
        import functools
        import requests
        session = requests.Session()
        session.request = functools.partial(session.request, timeout=10)
        def f(url):
            return session.get(url)
        """) == []


def test_test_modules_are_not_checked():
    source = b"import pytest\nimport requests\nfrom openai import OpenAI\ndef test_x():\n" \
             b"    requests.get('http://x')\n    OpenAI(timeout=None)\n"
    assert analyze_source("t.py", source, CATALOG, ScanConfig()).findings == []


def test_in_house_timeout_keyword_from_a_user_table():
    catalog = copy.deepcopy(CATALOG)
    table = ROOT / "fixtures" / "python" / "sdk" / "inhouse" / "rules" / "sdk-mycorp.yaml"
    catalog.knowledge["user:sdk-mycorp"] = yaml.safe_load(table.read_text())
    catalog.memo.clear()
    source = (ROOT / "fixtures" / "python" / "sdk" / "inhouse" / "app.py").read_text()
    assert lines(source, catalog) == [13]
    assert lines(source) == []


def test_scan_json_end_to_end(cli):
    fixture = ROOT / "fixtures" / "python" / "sdk" / "http_clients.py"
    result = cli("scan", "--select", "LLM006", "--format", "json", str(fixture))
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    source = fixture.read_text().splitlines()
    assert sorted(f["line"] for f in data["findings"]) == [n for n, text in enumerate(source, 1)
                                                          if re.search(r"hit: .*LLM006", text)]
    assert "Traceback" not in result.stderr


def test_explain_states_defaults_and_limits(cli):
    result = cli("explain", "LLM006")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "httpx/httpx2 5 s" in text and "requests none" in text and "**kwargs" in text
