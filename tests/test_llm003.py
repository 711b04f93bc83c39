"""LLM003 (client or connection pool built per call): hits, every exemption, and each false positive found on
real code (openai/anthropic examples and tests, the litellm package, the SDK wheels, site-packages) as a
near-miss. The fixtures under fixtures/python are compared with their `# hit:` markers by test_scan_fixtures."""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path

import yaml

from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.engine import analyze_source
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
ROOT = Path(__file__).resolve().parents[1]


def findings(source: str, catalog=CATALOG, every_context: bool = False):
    config = ScanConfig(every_context=every_context)
    result = analyze_source("t.py", textwrap.dedent(source).encode(), catalog, config)
    assert result.errors == []
    return [f for f in result.findings if f.rule == "LLM003"]


def lines(source: str, catalog=CATALOG, every_context: bool = False) -> list[int]:
    """LLM003's lines; `every_context`: the rule's own decision, wherever the function runs."""
    return [f.line for f in findings(source, catalog, every_context)]


# ---------------------------------------------------------------- what is reported


def test_sdk_client_per_call_message_carries_cost_and_fixes():
    [finding] = findings("""
        from fastapi import FastAPI
        from openai import OpenAI
        app = FastAPI()
        @app.post("/answer")
        def answer(q):
            client = OpenAI()
            return client.chat.completions.create(model="m", messages=[], stream=True)
        """)
    assert finding.line == 7 and finding.extra["context"] == "serving"
    assert "`OpenAI()`" in finding.message and "`answer`" in finding.message
    assert "43 ms" in finding.message
    assert "module level" in finding.fix and "with_options(api_key=...)" in finding.fix
    assert finding.extra["call"] == "openai.OpenAI"


def test_a_connection_per_call_is_called_one_connection_not_a_pool():
    [finding] = findings("""
        import http.client
        from fastapi import FastAPI
        app = FastAPI()
        @app.get("/search")
        def search(q: str):
            connection = http.client.HTTPSConnection("search.example.com", timeout=10)
            connection.request("GET", f"/q?{q}")
            return connection.getresponse().read()
        """)
    assert finding.line == 7 and finding.extra["call"] == "http.client.HTTPSConnection"
    assert "builds a new client (one connection) on every call of `search`" in finding.message
    assert "TLS handshake" in finding.message and "connection pool" not in finding.message


def test_module_request_functions_in_a_server_module_carry_the_measured_cost():
    found = findings("""
        import httpx
        import requests
        import httpx2
        from flask import Flask
        app = Flask(__name__)
        @app.get("/a")
        def a():
            return requests.post("http://x", json={}, timeout=5).json()
        @app.get("/b")
        def b():
            return httpx.get("http://x").text
        @app.get("/c")
        def c():
            return httpx2.stream("GET", "http://x")
        def d():
            return httpx.get("http://x").text  # nobody calls it: whether it runs per request is unknown
        """)
    assert [f.line for f in found] == [9, 12, 15]
    assert "3.4 ms vs Session.get 1.1 ms" in found[0].message and "requests.Session()" in found[0].fix
    assert "34 ms vs 1.7 ms" in found[1].message


def test_async_with_client_inside_a_handler_is_per_call():
    assert lines("""
        import httpx
        import aiohttp
        from aiohttp import web
        async def proxy(request):
            async with httpx.AsyncClient() as client:
                return (await client.get("http://x")).json()
        async def other(request):
            async with aiohttp.ClientSession() as s, s.get("http://x") as r:
                return await r.text()
        routes = [web.get("/proxy", proxy), web.get("/other", other)]
        """) == [6, 9]


def test_a_loop_shows_repetition_in_library_code_an_async_def_alone_does_not():
    assert lines("""
        import requests
        import aiohttp
        def crawl(urls):
            out = []
            for url in urls:
                out.append(requests.get(url, timeout=5).text)
            return out
        async def fetch(url):
            async with aiohttp.request("GET", url) as r:
                return await r.text()
        """) == [7]


def test_client_built_inside_a_lambda_and_used_there():
    assert lines("""
        from anthropic import Anthropic
        ask = lambda q: Anthropic().messages.create(model="m", max_tokens=9, messages=[]).content
        """, every_context=True) == [3]


def test_nested_constructors_give_one_finding():
    assert lines("""
        import httpx
        from openai import OpenAI
        def answer(q):
            client = OpenAI(http_client=httpx.Client(timeout=30) if q else None)
            return client.models.list()
        """, every_context=True) == [5]


def test_in_house_client_from_a_user_table():
    catalog = copy.deepcopy(CATALOG)
    table = ROOT / "fixtures" / "python" / "sdk" / "inhouse" / "rules" / "sdk-mycorp.yaml"
    catalog.knowledge["user:sdk-mycorp"] = yaml.safe_load(table.read_text())
    catalog.memo.clear()
    source = (ROOT / "fixtures" / "python" / "sdk" / "inhouse" / "app.py").read_text()
    assert lines(source, catalog) == [35]
    assert lines(source) == []


# ---------------------------------------------------------------- the object escapes


def test_escaping_objects_are_not_per_call():
    assert lines("""
        import httpx
        import requests
        from openai import OpenAI
        from fastapi import FastAPI
        app = FastAPI()
        REGISTRY = []
        _shared = None
        class Agent:
            def __init__(self, client):
                self.client = client
        def returned():
            return OpenAI()
        def returned_by_name():
            client = OpenAI()
            client.max_retries = 5
            return client
        def yielded():
            with httpx.Client() as c:
                yield c
        def stored_on_app():
            app.state.http = httpx.AsyncClient()
        def stored_in_dict(cache, key):
            cache[key] = requests.Session()
        def global_binding():
            global _shared
            _shared = OpenAI()
        def stored_by_method():
            REGISTRY.append(OpenAI())
        def wrapped():
            client = OpenAI()
            agent = Agent(client)
            return agent
        def derived_copy(key):
            client = OpenAI()
            return client.with_options(api_key=key)
        def captured():
            http = httpx.Client()
            def get(url):
                return http.get(url)
            return get
        def set_attribute(holder):
            setattr(holder, "client", OpenAI())
        """) == []


def test_a_nested_def_that_binds_the_same_name_captures_nothing():
    """letta's Anthropic proxy: the streaming branch's generator builds its own `client`; the non-streaming
    path's `client` of the same name is not captured by it, and is built per request."""
    assert lines("""
        import httpx
        async def proxy(body, stream):
            if stream:
                async def relay():
                    async with httpx.AsyncClient() as client:
                        yield await client.post("https://api.anthropic.com/v1/messages", json=body)
                return relay()
            async with httpx.AsyncClient() as client:
                return await client.post("https://api.anthropic.com/v1/messages", json=body)

        def outer():
            http = httpx.Client()
            def middle():
                def inner():
                    return http.get("x")
                return inner
            return middle
        """, every_context=True) == [6, 9]


def test_returning_only_the_response_does_not_make_the_client_escape():
    assert lines("""
        from openai import OpenAI
        def summary(text):
            client = OpenAI()
            response = client.chat.completions.create(model="m", messages=[], stream=True)
            return response.choices[0].message.content
        """, every_context=True) == [4]


# ---------------------------------------------------------------- the function runs once


def test_functions_that_run_once():
    assert lines("""
        import functools
        import contextlib
        import httpx
        from openai import OpenAI
        from fastapi import FastAPI
        app = FastAPI()
        class Service:
            def __init__(self):
                client = OpenAI()
                self.models = client.models.list()
            async def __aenter__(self):
                http = httpx.AsyncClient()
                await http.get("http://warmup")
                return self
        def main():
            client = OpenAI()
            print(client.models.list())
        @functools.lru_cache(maxsize=None)
        def cached_models():
            client = OpenAI()
            return list(client.models.list())
        @app.on_event("startup")
        async def warm():
            async with httpx.AsyncClient() as c:
                await c.get("http://vllm:8000/health")
        async def hook(app):
            async with httpx.AsyncClient() as c:
                await c.get("http://vllm:8000/health")
        app2 = FastAPI(on_startup=[hook])
        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with httpx.AsyncClient() as c:
                await c.get("http://vllm:8000/health")
            yield
        """) == []


def test_functions_called_only_at_module_level_run_once():
    # false positive found in openai examples/azure_ad.py and streaming.py, anthropic examples/vertex.py
    source = """
        import asyncio
        from openai import OpenAI, AsyncOpenAI
        def sync_main():
            client = OpenAI()
            print(client.models.list())
        async def async_main():
            client = AsyncOpenAI()
            print(await client.models.list())
        def helper():
            return OpenAI().models.list()
        def run():
            helper()
        sync_main()
        asyncio.run(async_main())
        if __name__ == "__main__":
            run()
        """
    assert lines(source) == []


def test_a_function_also_called_per_request_is_still_reported():
    [finding] = findings("""
        from openai import OpenAI
        from flask import Flask
        app = Flask(__name__)
        def build_reply(q):
            client = OpenAI()
            return client.models.list()
        @app.route("/reply")
        def handler():
            return build_reply("q")
        build_reply("warmup")
        """)
    assert finding.line == 6 and finding.extra["context"] == "serving"
    assert finding.extra["entry"]["function"] == "handler" and finding.extra["entry"]["route"] == "/reply"
    assert [(step["line"], step["function"]) for step in finding.extra["via"]] == [(10, "handler"), (6, "build_reply")]


def test_stored_objects_are_never_per_call_returned_ones_are_where_the_factory_runs_per_call():
    stored = """
        import httpx
        from openai import OpenAI
        REGISTRY = []
        class Agent:
            def connect(self):
                self.client = OpenAI()
        def registered():
            REGISTRY.append(OpenAI())
        def cached(cache, key):
            cache[key] = httpx.Client()
        """
    assert lines(stored, every_context=True) == []
    factory = """
        from fastapi import Depends, FastAPI
        from openai import OpenAI
        app = FastAPI()
        def make_client():
            return OpenAI()
        def unused_factory():
            return OpenAI()
        @app.post("/chat")
        def chat(client=Depends(make_client)):
            return client.models.list()
        """
    [finding] = findings(factory)
    assert finding.line == 6 and "hands it to the caller" in finding.message


def test_helper_called_from_a_test_function_runs_once():
    # false positive found in openai tests/test_large_payload_contract.py (no pytest import there)
    assert lines("""
        from openai import OpenAI
        def check_large_responses():
            with OpenAI(api_key="k") as client:
                client.models.list()
        def test_large():
            check_large_responses()
        """) == []


def test_credential_fetchers_are_not_per_request():
    # false positives found in litellm: sap/credentials.py _request_token, cyberark _authenticate,
    # hashicorp _auth_via_..., databricks get_oauth_m2m_token, billing _fetch_token, hiddenlayer _get_jwt
    assert lines("""
        import httpx
        from fastapi import FastAPI
        app = FastAPI()
        def _request_token(url):
            with httpx.Client() as client:
                return client.post(url).json()["access_token"]
        async def _authenticate(url):
            return httpx.post(url).json()
        def get_jwt(url):
            return httpx.post(url).text
        """) == []


def test_a_credential_fetch_a_request_reaches_is_reported_unless_its_token_is_kept_or_refreshed():
    # chainlit's OAuth callback exchanges the code for a token on every login (`get_raw_token_response`)
    source = """
        import httpx
        from fastapi import FastAPI
        app = FastAPI()
        _cache = {}

        async def get_raw_token_response(code):
            async with httpx.AsyncClient() as client:
                return (await client.post("https://idp.example/token", data={"code": code})).json()

        async def get_service_token(key):
            async with httpx.AsyncClient() as client:
                return (await client.post("https://idp.example/token", data={"key": key})).json()

        async def refresh_access_token(token):
            async with httpx.AsyncClient() as client:
                return (await client.post("https://idp.example/token", data={"refresh": token})).json()

        @app.get("/oauth/callback")
        async def callback(code: str, key: str, token: str):
            user = await get_raw_token_response(code)
            if key not in _cache:
                _cache[key] = await get_service_token(key)
            return user, _cache[key], await refresh_access_token(token)
        """
    assert lines(source) == [8]


def test_a_fetcher_of_whatever_page_it_is_handed_is_not_reported():
    """An agent's web-fetch tool or a link reader goes to another host at each call (judged false on real code:
    agent-framework-lib's `web_fetch`, forgellm's `fetch_url`, brevia's `read_html_url`): a kept pool would
    hold nothing the next call could reuse. A client per call to one fixed API is still reported."""
    assert lines("""
        import httpx
        from fastapi import FastAPI
        app = FastAPI()

        async def web_fetch(url):
            async with httpx.AsyncClient(timeout=10) as client:
                return (await client.get(url)).text

        async def fetch_forecast(city):
            async with httpx.AsyncClient(timeout=10) as client:
                return (await client.get("https://api.weather.example/v1", params={"q": city})).json()

        @app.post("/chat")
        async def chat(url: str, city: str):
            return await web_fetch(url), await fetch_forecast(city)
        """) == [11]


# ---------------------------------------------------------------- HTTP helpers without evidence of repetition


def test_one_off_http_helper_is_not_reported():
    # false positive found in site-packages tiktoken/load.py read_file (a download, cached on disk) and in
    # litellm's proxy client SDK methods (one request per method call)
    assert lines("""
        import requests
        import httpx
        def read_file(blobpath):
            resp = requests.get(blobpath)
            return resp.content
        def list_keys(base):
            session = requests.Session()
            return session.send(requests.Request("GET", base).prepare(), timeout=10).json()
        def version(url):
            with httpx.Client() as c:
                return c.get(url).text
        """) == []


def test_polling_loops_are_not_repetition():
    # false positive found in litellm proxy/client/cli/commands/auth.py and autoroute/process.py
    assert lines("""
        import time
        import requests
        def poll(url, deadline):
            while time.monotonic() < deadline:
                if requests.get(url, timeout=2).status_code == 200:
                    return
                time.sleep(0.5)
        """) == []


def test_async_defs_in_command_line_modules_are_not_repetition():
    # false positive found in together lib/cli/api/fine_tuning/download_tokenized_dataset.py
    assert lines("""
        import httpx
        import click
        async def _download_url(url, path):
            async with httpx.AsyncClient(follow_redirects=True) as client:
                return (await client.get(url)).content
        """) == []


def test_type_checking_imports_do_not_make_a_server_module():
    # false positive found in litellm proxy/proxy_cli.py (run_health_check)
    assert lines("""
        from typing import TYPE_CHECKING
        import httpx
        if TYPE_CHECKING:
            from fastapi import FastAPI
        def run_health_check(host, port):
            return httpx.get(f"http://{host}:{port}/health").json()
        """) == []


def test_sdk_client_around_a_shared_pool_is_not_reported():
    # false positive found in litellm llms/azure/azure.py get_headers (http_client=litellm.client_session)
    assert lines("""
        import litellm
        from openai import AzureOpenAI
        def get_headers(api_key, api_base):
            client = AzureOpenAI(api_key=api_key, azure_endpoint=api_base, http_client=litellm.client_session)
            return client.models.with_raw_response.list().headers
        """) == []


def test_urllib3_request_uses_a_shared_pool():
    assert lines("""
        import urllib3
        from fastapi import FastAPI
        def fetch(url):
            return urllib3.request("GET", url, timeout=5).data
        """) == []


def test_test_modules_are_not_checked():
    assert lines("""
        import pytest
        import httpx
        from openai import OpenAI
        def make_client():
            client = OpenAI(api_key="test")
            client.models.list()
        async def helper(url):
            async with httpx.AsyncClient() as c:
                return await c.get(url)
        """) == []


def test_module_level_and_class_bodies_are_not_per_call():
    assert lines("""
        import httpx
        import requests
        from openai import OpenAI
        client = OpenAI()
        models = requests.get("http://x", timeout=3).json()
        class Holder:
            http = httpx.Client()
        def f(session=requests.Session()):
            return session
        """) == []


# ---------------------------------------------------------------- end to end


def test_scan_json_end_to_end(cli):
    fixture = ROOT / "fixtures" / "python" / "sdk" / "http_clients.py"
    result = cli("scan", "--select", "LLM003", "--format", "json", str(fixture))
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert {f["rule"] for f in data["findings"]} == {"LLM003"}
    lines = sorted(f["line"] for f in data["findings"])
    source = fixture.read_text().splitlines()
    assert lines == [n for n, text in enumerate(source, 1) if "hit: LLM003" in text]
    assert {f["context"] for f in data["findings"]} == {"serving"}
    assert "Traceback" not in result.stderr


def test_explain_states_cost_and_limits(cli):
    result = cli("explain", "LLM003")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "40-48 ms" in text and "43 ms" in text and "urllib3.request()" in text
    assert "request entry point" in text and "tests" in text


def test_a_retry_loop_that_backs_off_after_a_failure_still_builds_a_pool_per_call():
    """From petsitter (proxy.py:849): the proxy's upstream call retries on 429/5xx and sleeps before the next
    attempt, so the loop sleeps only after a failure and every request builds a client on its first attempt;
    a polling loop that waits before each request (gpt-researcher's image poll) is still exempt."""
    source = """
        import asyncio
        import httpx
        from fastapi import FastAPI
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(payload: dict):
            for attempt in range(3):
                async with httpx.AsyncClient() as client:
                    response = await client.post("https://api.openai.com/v1/chat/completions", json=payload)
                if response.status_code not in (429, 503):
                    break
                await asyncio.sleep(2 ** attempt)
            return response.json()

        @app.get("/images/{request_id}")
        async def image(request_id: str):
            for _ in range(30):
                await asyncio.sleep(5)
                async with httpx.AsyncClient() as client:
                    body = (await client.post(f"https://api.example.com/fetch/{request_id}")).json()
                if body["status"] == "success":
                    return body["output"]
        """
    assert lines(source) == [10]


def test_a_retry_loop_over_backoff_delays_waits_only_between_attempts():
    """From muaddib (providers/anthropic.py:155): `for attempt, delay in enumerate(backoff_delays)` sleeps under
    `if delay > 0:` before each retry, so the first attempt of every call builds its session without waiting;
    a loop over items that sleeps before each one (rate limiting) is still exempt."""
    source = """
        import asyncio
        import aiohttp
        from fastapi import FastAPI
        app = FastAPI()
        BACKOFF_DELAYS = [0, 2, 5, 10]

        @app.post("/chat")
        async def chat(payload: dict):
            for attempt, delay in enumerate(BACKOFF_DELAYS):
                if delay > 0:
                    await asyncio.sleep(delay)
                try:
                    async with aiohttp.ClientSession() as session:
                        async with session.post("https://api.anthropic.com/v1/messages", json=payload) as r:
                            return await r.json()
                except aiohttp.ClientError:
                    continue

        @app.post("/batch")
        async def batch(items: list[str]):
            for item in items:
                if item:
                    await asyncio.sleep(1)
                async with aiohttp.ClientSession() as session:
                    async with session.post("https://api.example.com/score", json={"text": item}) as r:
                        if r.ok:
                            return await r.json()
        """
    assert lines(source) == [14]


def test_a_subclass_of_a_client_is_that_client():
    """From django-ragamuffin (models.py:682, 1804): `class OpenAIClient(OpenAI)` only sets the key, so
    `OpenAIClient()` on every save builds an OpenAI client and its pool. A class a function defines (letta's
    `UnixSocketHTTPConnection(http.client.HTTPConnection)`, connecting to a Unix socket) is not followed."""
    source = """
        import http.client
        from fastapi import FastAPI
        from openai import OpenAI
        app = FastAPI()

        class OpenAIClient(OpenAI):
            def __init__(self, **kwargs):
                super().__init__(api_key="k", **kwargs)

            def vector_store(self, name):
                return self.vector_stores.retrieve(name)

        @app.post("/threads")
        def save(name: str):
            client = OpenAIClient()
            return client.vector_store(name)

        @app.post("/run")
        def run(body: str):
            class UnixSocketConnection(http.client.HTTPConnection):
                def connect(self):
                    pass
            connection = UnixSocketConnection("localhost")
            connection.request("POST", "/", body=body)
            return connection.getresponse().read()
        """
    assert lines(source) == [16]
