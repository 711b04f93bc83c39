"""The project model (llmdoctor/scan/project/): modules linked into one program, execution contexts, calls
followed across modules, chains shown. Each test writes a small project and scans it as users do."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan


def write(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def scan(root: Path, *paths: str, cache: bool = False, **options):
    report = run_scan(list(paths) or ["."], ScanOptions(cwd=str(root), isolated=True, **options),
                      analyze=ScanExecutor(jobs=1, use_cache=cache))
    return report.findings


def found(findings, rule: str | None = None) -> list[tuple[str, int, str]]:
    return [(f.path, f.line, f.rule) for f in findings if rule is None or f.rule == rule]


HANDLER = """
    from fastapi import FastAPI
    from app.clients import fetch_user
    app = FastAPI()

    @app.get("/users/{uid}")
    async def get_user(uid: int):
        return fetch_user(uid)
    """
CLIENTS = """
    import requests

    def fetch_user(uid):
        return requests.get(f"http://users/{uid}", timeout=5).json()
    """


def test_an_async_handler_calling_a_blocking_helper_in_another_module(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS})
    findings = scan(root)
    assert found(findings) == [("app/clients.py", 5, "LLM003"), ("app/routes.py", 8, "LLM004")]
    llm004 = next(f for f in findings if f.rule == "LLM004")
    assert "`fetch_user()` blocks the event loop inside `async def get_user`" in llm004.message
    assert "requests.get()` at app/clients.py:5" in llm004.message
    assert llm004.extra["via"] == [{"path": "app/routes.py", "line": 8, "function": "get_user"},
                                   {"path": "app/clients.py", "line": 5, "function": "fetch_user"}]
    assert llm004.extra["context"] == "serving" and llm004.extra["entry"]["route"] == "GET /users/{uid}"
    llm003 = next(f for f in findings if f.rule == "LLM003")  # the helper's own module shows no server
    assert llm003.extra["context"] == "serving" and llm003.extra["entry"]["function"] == "get_user"


def test_the_chain_is_one_line_in_text_and_related_locations_in_sarif(cli, tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS})
    text = cli("scan", "--no-cache", "--select", "LLM004", ".", cwd=root).stdout
    assert "    via get_user → app/clients.py:5 fetch_user" in text
    sarif = json.loads(cli("scan", "--no-cache", "--select", "LLM004", "--format", "sarif", ".", cwd=root).stdout)
    (result,) = sarif["runs"][0]["results"]
    assert [r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]] == [8, 5]
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert flow[-1]["location"]["physicalLocation"]["artifactLocation"]["uri"] == "app/clients.py"
    github = cli("scan", "--no-cache", "--select", "LLM004", "--format", "github", ".", cwd=root).stdout
    assert "Via: get_user → app/clients.py:5 fetch_user" in github


@pytest.mark.parametrize(("layout", "importer"), [
    ({"src/app/__init__.py": "", "src/app/clients.py": CLIENTS}, "src/app/routes.py"),  # src layout
    ({"app/clients.py": CLIENTS}, "app/routes.py"),  # a namespace package (no __init__.py)
])
def test_imports_resolve_in_src_layouts_and_namespace_packages(tmp_path, layout, importer):
    root = write(tmp_path, {**layout, importer: HANDLER})
    assert (importer, 8, "LLM004") in found(scan(root))


def test_relative_imports_and_re_exports(tmp_path):
    root = write(tmp_path, {
        "svc/__init__.py": "from .clients import fetch_user\n",
        "svc/clients.py": CLIENTS,
        "svc/api/__init__.py": "",
        "svc/api/routes.py": HANDLER.replace("from app.clients import fetch_user", "from .. import fetch_user"),
    })
    assert ("svc/api/routes.py", 8, "LLM004") in found(scan(root))


def test_methods_through_self_instances_and_return_values(tmp_path):
    root = write(tmp_path, {"app.py": """
        import requests
        from fastapi import FastAPI
        app = FastAPI()

        class Controller:
            def status(self, name):
                return self._post(name)
            def _post(self, name):
                return requests.post(name + "/status", timeout=5).json()

        class Service:
            def __init__(self):
                self.controller = Controller()
            async def check(self, name):
                return self.controller.status(name)

        def create_controller():
            controller = Controller()
            return "args", controller

        @app.post("/status")
        async def status(name: str):
            return controller.status(name)

        @app.post("/check")
        async def check(name: str):
            return await Service().check(name)

        if __name__ == "__main__":
            args, controller = create_controller()
        """})
    findings = scan(root)
    assert found(findings, "LLM004") == [("app.py", 16, "LLM004"), ("app.py", 24, "LLM004")]
    by_line = {f.line: f for f in findings if f.rule == "LLM004"}
    assert [step["function"] for step in by_line[24].extra["via"]] == ["status", "Controller.status",
                                                                      "Controller._post"]
    assert found(findings, "LLM003") == [("app.py", 10, "LLM003")]


def test_a_factory_returning_a_sync_client_is_followed(tmp_path):
    root = write(tmp_path, {"llm.py": """
        from openai import OpenAI

        def get_client():
            return OpenAI()
        """, "api.py": """
        from fastapi import FastAPI
        from llm import get_client
        app = FastAPI()

        @app.post("/chat")
        async def chat(q: str):
            reply = get_client().chat.completions.create(model="m", messages=[], stream=True)
            return reply
        """})
    assert ("api.py", 8, "LLM004") in found(scan(root))


SCRIPT = """
    import asyncio, time

    async def fetch(i):
        time.sleep(1)
        return i

    async def main():
        {body}

    if __name__ == "__main__":
        asyncio.run(main())
    """


@pytest.mark.parametrize("body", [
    "return [await fetch(i) for i in range(3)]",  # the loop runs nothing else
    "return await asyncio.gather(*(fetch(i) for i in range(3)))",  # the script's own jobs wait for each other
])
def test_a_script_blocks_no_one_waiting_for_a_request(tmp_path, body):
    """A batch script's gathered jobs are its own throughput, no request's latency (judged false on real code:
    llama-stack's `llama download`, xinference's host start-up); `--every-context` still shows them."""
    root = write(tmp_path, {"job.py": SCRIPT.format(body=body)})
    assert [f.line for f in scan(root) if f.rule == "LLM004"] == []
    assert [(f.line, f.extra["context"]) for f in scan(root, every_context=True) if f.rule == "LLM004"] == \
        [(5, "run-once")]


def test_a_task_spawned_by_a_startup_hook_shares_the_serving_loop(tmp_path):
    root = write(tmp_path, {"monitor.py": """
        import asyncio
        from fastapi import FastAPI
        app = FastAPI()

        async def update_stats():
            while True:
                with open("calls.log") as log:
                    log.read()
                await asyncio.sleep(60)

        @app.on_event("startup")
        async def start():
            with open("config.json") as config:  # before serving: nobody waits
                config.read()
            asyncio.create_task(update_stats())
        """})
    assert [(f.line, f.extra["context"]) for f in scan(root)] == [(8, "run-once")]


BUS = {
    "app/bus.py": """
        import asyncio

        class MessageBus:
            def __init__(self):
                self.inbound: asyncio.Queue = asyncio.Queue()
                self.log = asyncio.Queue()  # a queue nobody fills from a request

            async def publish(self, message):
                await self.inbound.put(message)

            async def consume(self):
                return await self.inbound.get()
        """,
    "app/agent.py": """
        from app.bus import MessageBus

        class AgentLoop:
            def __init__(self, bus: MessageBus):
                self.bus = bus

            async def run(self):
                with open("persona.md") as persona:  # set-up, before the first message: once
                    self.persona = persona.read()
                while True:
                    message = await self.bus.consume()
                    await self.answer(message)

            async def answer(self, message):
                self.save(message)

            def save(self, message):
                with open("history.jsonl", "a") as history:
                    history.write(message)

            async def drain_log(self):
                while True:
                    entry = await self.bus.log.get()
                    self.save(entry)
        """,
    "app/main.py": """
        import asyncio
        import uvicorn
        from fastapi import FastAPI
        from app.agent import AgentLoop
        from app.bus import MessageBus

        app = FastAPI()
        bus = MessageBus()
        agent = AgentLoop(bus)

        @app.post("/chat")
        async def chat(text: str):
            await bus.publish(text)

        async def main():
            server = uvicorn.Server(uvicorn.Config(app))
            await asyncio.gather(server.serve(), agent.run(), agent.drain_log())

        if __name__ == "__main__":
            asyncio.run(main())
        """,
}


MCP_SERVER = """
    import httpx
    from mcp.server.fastmcp import FastMCP
    from memory.store import load_notes
    mcp = FastMCP("notes")

    @mcp.tool()
    async def notes(topic: str) -> str:
        found = load_notes(topic)
        async with httpx.AsyncClient(timeout=5) as client:
            await client.post("http://localhost:9000/log", json={{"topic": topic}})
        return found

    if __name__ == "__main__":
        {run}
    """
STORE = """
    def load_notes(topic):
        with open(f"notes/{topic}.md") as notes:
            return notes.read()
    """


@pytest.mark.parametrize("run", ['mcp.run()', 'mcp.run(transport="stdio")', 'mcp.run("stdio")',
                                 'import asyncio; asyncio.run(mcp.run_stdio_async())'])
def test_an_mcp_server_on_stdio_serves_its_one_client(tmp_path, run):
    """The client that spawned it is the only one waiting (judged false on real code: distill-mcp's SQLite
    reads, chicane's hand-off map, zaniidb's persona file); its per-call costs stay findings."""
    root = write(tmp_path, {"server.py": MCP_SERVER.format(run=run), "memory/__init__.py": "",
                            "memory/store.py": STORE})
    findings = scan(root)
    assert found(findings) == [("server.py", 10, "LLM003")]
    assert [(f.line, f.extra["context"]) for f in scan(root, every_context=True) if f.rule == "LLM004"] == \
        [(9, "serving")]


@pytest.mark.parametrize("run", ['mcp.run(transport="sse")', 'mcp.run(transport=args.transport)',
                                 'mcp.run(); app = mcp.streamable_http_app()'])
def test_an_mcp_server_on_a_network_transport_serves_several(tmp_path, run):
    """memoryos (`--transport http`), pdf2zh (an SSE Starlette app): several clients share the loop."""
    root = write(tmp_path, {"server.py": MCP_SERVER.format(run=run), "memory/__init__.py": "",
                            "memory/store.py": STORE})
    assert found(scan(root)) == [("server.py", 9, "LLM004"), ("server.py", 10, "LLM003")]


def test_a_helper_an_mcp_tool_on_stdio_shares_with_a_route_still_blocks_the_route(tmp_path):
    root = write(tmp_path, {"server.py": MCP_SERVER.format(run="mcp.run()"), "memory/__init__.py": "",
                            "memory/store.py": STORE, "web.py": """
        from fastapi import FastAPI
        from server import notes
        app = FastAPI()

        @app.get("/notes/{topic}")
        async def read(topic: str):
            return await notes(topic)
        """})
    assert ("server.py", 9, "LLM004") in found(scan(root))


def test_a_coroutine_taking_requests_off_a_queue_serves_them(tmp_path):
    """A chat bot's message bus (holdout22's nanobot: the channel handlers put each message on an asyncio.Queue,
    the agent loop started beside the server takes it and answers): what the consumer does after its `get` runs
    per request on the serving loop; its set-up before the `get`, and a queue no request fills, do not."""
    findings = [f for f in scan(write(tmp_path, BUS)) if f.rule == "LLM004"]
    assert [(f.path, f.line, f.extra["context"], f.extra["entry"]["framework"], f.extra["entry"]["function"])
            for f in findings] == [("app/agent.py", 16, "serving", "queue", "AgentLoop.run")]
    assert findings[0].extra["entry"]["route"] == "queue put by MessageBus.publish"
    assert [step["function"] for step in findings[0].extra["via"]] == ["answer", "AgentLoop.save"]


@pytest.mark.parametrize("helper", [
    # a lazy one-time initialisation
    ("_cache = None\ndef fetch_user(uid):\n    global _cache\n    if _cache is None:\n"
     "        _cache = requests.get('http://users', timeout=5).json()\n    return _cache[uid]\n"),
    # a file shipped with the code (a path built from `__file__`): read from the page cache, a few KB
    ("import os\ndef fetch_user(uid):\n    here = os.path.dirname(os.path.abspath(__file__))\n"
     "    path = os.path.join(here, 'users.json')\n    with open(path) as f:\n        return f.read()\n"),
    ("import os\nUSERS = os.path.join(os.path.dirname(__file__), 'users.json')\ndef fetch_user(uid):\n"
     "    with open(USERS) as f:\n        return f.read()\n"),
    # compute-if-absent into a mapping
    ("_users = {}\ndef fetch_user(uid):\n    if _users.get(uid) is None:\n"
     "        _users[uid] = requests.get(f'http://users/{uid}', timeout=5).json()\n    return _users[uid]\n"),
    # cached: the body runs once per argument
    ("import functools\n@functools.lru_cache\ndef fetch_user(uid):\n"
     "    return requests.get(f'http://users/{uid}', timeout=5).json()\n"),
    # the blocking line is suppressed inside the helper: every chain through it is silent
    "def fetch_user(uid):\n    return requests.get(f'http://users/{uid}', timeout=5).json()  # noqa: LLM004, LLM003\n",
])
def test_helpers_that_do_not_block_per_call(tmp_path, helper):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": "import requests\n" + helper})
    assert found(scan(root), "LLM004") == []


def test_a_guard_on_a_parameter_still_runs_per_call(tmp_path):
    # `if not status: status = fetch_status()` fills a parameter the caller left out: every such call blocks
    helper = ("def fetch_status():\n    return requests.get('http://status', timeout=5).json()\n\n"
              "def fetch_user(uid, status=None):\n    if not status:\n        status = fetch_status()\n"
              "    return status[uid]\n")
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": "import requests\n" + helper})
    assert found(scan(root), "LLM004") == [("app/routes.py", 8, "LLM004")]


def test_offloaded_and_suppressed_call_sites(tmp_path):
    routes = HANDLER.replace("return fetch_user(uid)", "return await asyncio.to_thread(fetch_user, uid)")
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": "import asyncio\n" + routes,
                            "app/clients.py": CLIENTS})
    assert found(scan(root), "LLM004") == []
    suppressed = HANDLER.replace("return fetch_user(uid)", "return fetch_user(uid)  # noqa: LLM004")
    write(tmp_path, {"app/routes.py": suppressed})
    assert found(scan(root), "LLM004") == []


def test_tests_and_scripts_are_not_serving(tmp_path):
    root = write(tmp_path, {
        "app/__init__.py": "", "app/clients.py": CLIENTS,
        "tests/test_api.py": "import asyncio\nfrom app.clients import fetch_user\n\n"
                             "async def check():\n    return fetch_user(1)\n",
        "scripts/report.py": "from openai import OpenAI\nclient = OpenAI()\n\n"
                             "def main():\n    return client.chat.completions.create(model='m', messages=[])\n\n"
                             "if __name__ == '__main__':\n    main()\n",
    })
    assert found(scan(root)) == []


def test_a_module_shadowed_by_a_package_of_the_same_name_never_runs(tmp_path):
    # `import app.clients` finds the package app/clients/, as CPython's finder does: app/clients.py is dead
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS,
                            "app/clients/__init__.py": "def fetch_user(uid):\n    return {'id': uid}\n"})
    assert found(scan(root)) == []


def test_an_sdk_import_inside_a_package_folder_named_like_the_sdk_is_the_sdk(tmp_path):
    # vanna/integrations/openai/llm.py: `from openai import OpenAI` is the SDK, not the sibling folder `openai/`
    root = write(tmp_path, {"app/__init__.py": "", "app/integrations/__init__.py": "",
                            "app/integrations/openai/__init__.py": "from .llm import Service\n",
                            "app/integrations/openai/llm.py": """
        from openai import OpenAI

        class Service:
            def __init__(self):
                self.client = OpenAI(timeout=30)

            async def send(self, messages):
                return self.client.chat.completions.create(model="m", messages=messages, stream=True)
        """})
    assert ("app/integrations/openai/llm.py", 9, "LLM004") in found(scan(root))


def test_a_console_script_is_a_run_once_entry(tmp_path):
    root = write(tmp_path, {"tool/__init__.py": "", "tool/cli.py": """
        import requests

        def run():
            for url in ["a", "b"]:
                requests.get(url, timeout=5)
        """})
    (root / "pyproject.toml").write_text("[project]\nname = 'tool'\n[project.scripts]\ntool = 'tool.cli:run'\n")
    assert found(scan(root)) == []
    (root / "pyproject.toml").write_text("[project]\nname = 'tool'\n")
    assert found(scan(root)) == [("tool/cli.py", 6, "LLM003")]  # nobody calls it: a loop still repeats


def test_scanning_one_file_of_a_project_uses_the_whole_project(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS})
    assert found(scan(root, "app/clients.py")) == [("app/clients.py", 5, "LLM003")]
    assert found(scan(root, "app/routes.py")) == [("app/routes.py", 8, "LLM004")]


def test_the_cache_gives_the_same_findings_and_re_links_every_run(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS})
    cold = scan(root, cache=True)
    warm = scan(root, cache=True)
    assert warm == cold and found(cold) == [("app/clients.py", 5, "LLM003"), ("app/routes.py", 8, "LLM004")]
    (root / "app" / "routes.py").write_text(textwrap.dedent(HANDLER).replace("async def", "def"))
    # only routes.py changed: clients.py's cached candidates are decided again, with the new graph
    assert found(scan(root, cache=True)) == [("app/clients.py", 5, "LLM003")]


def test_every_context_reports_the_rules_own_decisions(tmp_path):
    root = write(tmp_path, {"batch.py": """
        from openai import OpenAI
        client = OpenAI()

        def judge(item):
            return client.chat.completions.create(model="m", messages=[{"role": "user", "content": item}])

        if __name__ == "__main__":
            judge("x")
        """})
    assert found(scan(root)) == []
    reported = {f.rule: f for f in scan(root, every_context=True)}
    assert reported["LLM001"].extra["context"] == "run-once"
    assert reported["LLM003"].line == 3 and "top-level code" in reported["LLM003"].message


@pytest.mark.parametrize("decorator, cached", [
    ("@locked_cached(ttl=300)", True),  # gpustack's own TTL cache, named for what it does
    ("@memoize", True),
    ("@never_cache", False),  # Django's opposite, and other names that only mention a cache
    ("@cache_control(max_age=60)", False),
])
def test_a_project_decorator_named_as_a_cache_caches(tmp_path, decorator, cached):
    root = write(tmp_path, {"app/__init__.py": "", "app/clients.py": CLIENTS, "app/routes.py": f"""
        from fastapi import FastAPI
        from app.clients import fetch_user
        from app.caching import locked_cached, memoize, never_cache, cache_control
        app = FastAPI()

        {decorator}
        def search(uid):
            return fetch_user(uid)

        @app.get("/search/{{uid}}")
        def get_search(uid: int):
            return search(uid)
        """, "app/caching.py": """
        def locked_cached(ttl=None):
            return lambda f: f

        def memoize(f):
            return f

        def never_cache(f):
            return f

        def cache_control(**kwargs):
            return lambda f: f
        """})
    assert found(scan(root), "LLM003") == ([] if cached else [("app/clients.py", 5, "LLM003")])


def test_a_cached_function_runs_once_so_what_it_calls_is_not_per_request(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    root = write(tmp_path / "a", {"app/__init__.py": "", "app/clients.py": CLIENTS, "app/routes.py": """
        import functools
        from fastapi import FastAPI
        from app.clients import fetch_user
        app = FastAPI()

        @functools.lru_cache(maxsize=None)
        def settings():
            return fetch_user(0)

        @app.get("/settings")
        def get_settings():
            return settings()

        @app.get("/users/{uid}")
        def get_user(uid: int):
            return fetch_user(uid)
        """})
    (llm003,) = [f for f in scan(root) if f.rule == "LLM003"]
    assert llm003.extra["entry"]["function"] == "get_user"  # still per request there, not through `settings`
    root_only_cached = write(tmp_path / "b", {"app/__init__.py": "", "app/clients.py": CLIENTS,
                                                  "app/routes.py": """
        import functools
        from fastapi import FastAPI
        from app.clients import fetch_user
        app = FastAPI()

        @functools.cache
        def settings():
            return fetch_user(0)

        @app.get("/settings")
        def get_settings():
            return settings()
        """})
    assert found(scan(root_only_cached), "LLM003") == []


MEMO_ROUTES = """
    from fastapi import FastAPI
    from app.clients import make_client
    app = FastAPI()
    _clients = {}

    @app.get("/users/{uid}")
    def get_user(uid: int, key: str):
        GUARD
        return client.get(f"http://users/{uid}", timeout=5).json()
    """
MEMO_CLIENTS = """
    import requests

    def make_client(key):
        session = requests.Session()
        session.headers["Authorization"] = key
        return session
    """


@pytest.mark.parametrize("guard, per_request", [
    # the caller keeps what the factory makes in a module-level dict: one client per key, not per request
    ("client = _clients.get(key)\n        if not client:\n            client = make_client(key)\n"
     "            _clients[key] = client", False),
    ("if _clients.get(key) is None:\n            _clients[key] = make_client(key)\n        client = _clients[key]",
     False),
    ("if key not in _clients:\n            _clients[key] = make_client(key)\n        client = _clients[key]", False),
    # a lazy guard on a local only: still a client per request
    ("client = None\n        if client is None:\n            client = make_client(key)", True),
])
def test_a_factory_call_memoised_by_its_caller_is_not_per_request(tmp_path, guard, per_request):
    root = write(tmp_path, {"app/__init__.py": "", "app/clients.py": MEMO_CLIENTS,
                            "app/routes.py": MEMO_ROUTES.replace("GUARD", guard)})
    assert found(scan(root), "LLM003") == ([("app/clients.py", 5, "LLM003")] if per_request else [])


FORWARDING = """
    import requests

    def _request(method, path, **kwargs):
        return requests.request(method, "https://api.example.com" + path, **kwargs)

    def get_user(uid):
        return _request("GET", f"/users/{uid}", headers={"Accept": "json"})
    """


@pytest.mark.parametrize("caller, reported", [
    ("", True),  # no call passes `timeout=`: the forwarded keywords never hold one
    ("def get_team(tid):\n    return _request('GET', f'/teams/{tid}', timeout=5)\n", False),
    ("def get_any(**options):\n    return _request('GET', '/any', **options)\n", False),
    ("import functools\nretry = functools.partial(_request, 'GET')\n", False),  # handed over: callers unknown
])
def test_a_timeout_forwarded_through_kwargs_is_checked_at_every_caller(tmp_path, caller, reported):
    root = write(tmp_path, {"api.py": FORWARDING + "\n" + caller})
    findings = [f for f in scan(root) if f.rule == "LLM006"]
    assert [(f.path, f.line) for f in findings] == ([("api.py", 5)] if reported else [])
    if reported:
        assert "no call of `_request` in the project passes `timeout=`" in findings[0].message
        assert findings[0].extra["callers"] == 1 and "autofix" not in findings[0].extra


def test_a_public_function_forwarding_kwargs_is_not_reported(tmp_path):
    root = write(tmp_path, {"api.py": FORWARDING.replace("_request", "request_api")})
    assert [f for f in scan(root) if f.rule == "LLM006"] == []  # callers outside the project may pass it


def test_a_route_added_on_a_router_of_unknown_type_is_an_entry_point(tmp_path):
    # FastAPI's `add_api_route` on a router taken from an object the model cannot type (xinference's routers)
    root = write(tmp_path, {"app/__init__.py": "", "app/clients.py": CLIENTS, "app/routes.py": """
        from app.clients import fetch_user

        async def get_user(uid: int):
            return fetch_user(uid)

        def register(api):
            router = api._router
            router.add_api_route("/users/{uid}", get_user, methods=["GET"])
        """})
    (finding,) = [f for f in scan(root) if f.rule == "LLM004"]
    assert (finding.path, finding.line, finding.extra["context"]) == ("app/routes.py", 5, "serving")
    assert finding.extra["entry"]["route"] == "/users/{uid}"


@pytest.mark.parametrize("guard", [
    "if client._well_known is not None:\n        return client._well_known",
    "if client._well_known:\n        return client._well_known",
])
def test_a_client_built_after_a_return_if_cached_guard_is_built_once(tmp_path, guard):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    root = write(tmp_path / "a", {"app.py": f"""
import httpx
from fastapi import FastAPI
app = FastAPI()

async def well_known(client):
    {guard}
    async with httpx.AsyncClient(timeout=5) as http:
        client._well_known = (await http.get(client.issuer + "/.well-known/openid-configuration")).json()
    return client._well_known

@app.get("/login")
async def login():
    return await well_known(app.state.oidc)
"""})
    assert found(scan(root), "LLM003") == []
    unguarded = write(tmp_path / "b", {"app.py": (root / "app.py").read_text().replace(guard.split(chr(10))[0],
                                                                                        "if False:")})
    assert found(scan(unguarded), "LLM003") == [("app.py", 9, "LLM003")]


@pytest.mark.parametrize("sets_flag, reported", [
    ("self._loaded = True", []),  # the rest of the block sets it
    ("self._apply(data)", []),  # ... through a method it calls (ai-synapse's models.dev load)
    ("pass", [("app.py", 19, "LLM003"), ("app.py", 39, "LLM004")]),  # only `close()` sets a flag
])
def test_work_after_a_return_if_done_flag_runs_once_when_it_sets_the_flag(tmp_path, sets_flag, reported):
    root = write(tmp_path, {"app.py": f"""
import threading
import requests
from fastapi import FastAPI
app = FastAPI()

class Capabilities:
    def __init__(self):
        self._loaded = False
        self._closed = False
        self._lock = threading.Lock()

    def fetch(self):
        if self._loaded:
            return True
        with self._lock:
            if self._loaded:
                return True
            data = requests.get("https://models.dev/api.json", timeout=15).json()
            {sets_flag}
            return data

    def _apply(self, data):
        self._loaded = True

    def write(self, path, text):
        if self._closed:
            return
        with open(path, "w") as f:
            f.write(text)

    def close(self):
        self._closed = True

capabilities = Capabilities()

@app.get("/models")
async def models():
    capabilities.fetch()
    capabilities.write("/tmp/log", "x")
"""})
    assert sorted(found(scan(root))) == sorted([*reported, ("app.py", 40, "LLM004")])  # `close()`'s flag


def test_a_nested_project_is_its_own_and_its_findings_are_reported_once(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": HANDLER, "app/clients.py": CLIENTS,
                            "examples/pyproject.toml": "[project]\nname = 'examples'\n",
                            "examples/demo.py": """
        import requests
        from fastapi import FastAPI
        app = FastAPI()

        @app.get("/")
        async def index():
            return requests.get("http://localhost:8000/users/1", timeout=5).json()
        """})
    findings = scan(root)
    assert sorted(found(findings)) == [("app/clients.py", 5, "LLM003"), ("app/routes.py", 8, "LLM004"),
                                       ("examples/demo.py", 8, "LLM003"),
                                       ("examples/demo.py", 8, "LLM004")]


MEDIA = """
    import asyncio
    import threading


    class MediaMessage:
        def __init__(self, data=None, media_id=None):
            self.data = data
            if media_id:
                self.media_id = media_id
                return
            thread = threading.Thread(target=self._register)
            thread.start()
            thread.join()

        def _register(self):
            asyncio.run(self._register_media())

        async def _register_media(self):
            await asyncio.sleep(0)


    class ImageMessage(MediaMessage):
        pass
    """


def test_a_plugin_with_a_setup_py_inside_the_package_is_part_of_the_project(tmp_path):
    """kirara's IM adapters: `kirara_ai/plugins/telegram/` holds a `setup.py` (a plugin manifest) and imports
    `kirara_ai.im.message`; inside a package of the project around it, a marker starts no project of its own,
    and the adapter's constructor call is followed into the message's thread join (and a module named
    `setup.py`, `app/cli/setup.py`, is a module)."""
    root = write(tmp_path, {"bot/__init__.py": "", "bot/im/__init__.py": "", "bot/im/message.py": MEDIA,
                            "bot/cli/__init__.py": "", "bot/cli/setup.py": "def run():\n    pass\n",
                            "bot/plugins/telegram/__init__.py": "",
                            "bot/plugins/telegram/setup.py": "from setuptools import setup\nsetup(name='tg')\n",
                            "bot/plugins/telegram/adapter.py": """
        from bot.im.message import ImageMessage

        async def convert_to_message(data: bytes):
            return ImageMessage(data=data)

        async def from_store(media_id: str):
            return ImageMessage(media_id=media_id)  # the constructor returns before its thread

        async def from_nothing():
            return ImageMessage(media_id=None)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.path, f.line) for f in findings] == [("bot/plugins/telegram/adapter.py", 5),
                                                    ("bot/plugins/telegram/adapter.py", 11)]
    assert findings[0].extra["via"][-1] == {"path": "bot/im/message.py", "line": 14,
                                            "function": "MediaMessage.__init__"}
    assert "`threading.Thread.join()`" in findings[0].message


HANDLERS = """
    import time


    def register_handlers(sio, prefix=""):
        @sio.on("chat")
        async def chat(sid, data):
            time.sleep(1)

        @sio.event
        async def connect(sid, environ):
            time.sleep(1)
    """


@pytest.mark.parametrize(("main", "served"), [
    # the server every caller hands over: its handlers serve events
    (("import socketio\nfrom app.handlers import register_handlers\n\nsio = socketio.AsyncServer()\n"
      "register_handlers(sio)\n"), True),
    (("import socketio\nfrom app.handlers import register_handlers\n\n"
      "register_handlers(prefix='x', sio=socketio.AsyncServer())\n"), True),
    # two callers handing different objects, or one nothing tells: no guess
    (("import socketio\nfrom app.handlers import register_handlers\n\n"
      "register_handlers(socketio.AsyncServer())\nregister_handlers(object())\n"), False),
    ("from app.handlers import register_handlers\n\ndef setup(server):\n    register_handlers(server)\n", False),
])
def test_a_decorator_on_a_parameter_is_one_on_what_every_caller_passes(tmp_path, main, served):
    """agentic-code-editor's `register_handlers(sio)`: `@sio.on("client:command")` and `@sio.event` inside it,
    called at import with `sio = socketio.AsyncServer(...)` in another module, register Socket.IO event
    handlers; a warm run (the caller's module replayed from the cache) finds the same."""
    root = write(tmp_path, {"app/__init__.py": "", "app/handlers.py": HANDLERS, "app/main.py": main})
    cold = [(f.line, f.extra["context"]) for f in scan(root, cache=True) if f.rule == "LLM004"]
    assert cold == ([(8, "serving"), (12, "serving")] if served else [])
    (root / "app" / "handlers.py").write_text((root / "app" / "handlers.py").read_text() + "\n# edited\n")
    warm = [(f.line, f.extra["context"]) for f in scan(root, cache=True) if f.rule == "LLM004"]
    assert warm == cold


def test_a_return_under_a_conjunction_leaves_its_switches_undecided(tmp_path):
    """folderbot's `CalendarStore.update(..., status=None)`: after `if status is not None and status not in
    STATUSES: raise`, the update runs with `status` given too (a known status); after `if archived is not None:
    return`, the write runs only without `archived`."""
    root = write(tmp_path, {"app.py": """
        import sqlite3

        STATUSES = ("open", "done")

        class Store:
            def update(self, event_id, status=None):
                if status is not None and status not in STATUSES:
                    raise ValueError(status)
                sqlite3.connect("x.db").execute("UPDATE t SET s = ? WHERE id = ?", (status, event_id))

            def archive(self, event_id, archived=None):
                if archived is not None:
                    return
                sqlite3.connect("x.db").execute("UPDATE t SET a = 1 WHERE id = ?", (event_id,))

        async def change(store: Store, request):
            store.update(request.id, status=request.status)
            store.archive(request.id, archived=request.archived)
        """})
    assert [f.line for f in scan(root, every_context=True) if f.rule == "LLM004"] == [18]


def test_a_project_root_inside_a_package_belongs_to_the_project_around_it(tmp_path):
    from llmdoctor.scan.project.layout import project_root

    root = write(tmp_path, {"app/__init__.py": "", "app/plugins/tg/__init__.py": "", "app/plugins/tg/setup.py": "",
                            "app/vendored/lib/pyproject.toml": "", "app/vendored/lib/x.py": "",
                            "tools/pyproject.toml": "", "tools/x.py": "", "tools/pkg/__init__.py": "",
                            "tools/pkg/sub/setup.py": ""})
    memo: dict = {}
    for path, expected in [("app/plugins/tg/setup.py", root), ("app/vendored/lib/x.py", root),
                           ("tools/x.py", root / "tools"), ("tools/pkg/sub/setup.py", root / "tools"),
                           ("app/__init__.py", root)]:
        assert project_root(str(root / path), memo) == str(expected), path
        assert project_root(str(root / path)) == str(expected), path  # the same without the memo


def test_a_step_from_a_factory_into_its_closure_names_the_closure_s_line(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/routes.py": """
        import httpx
        from fastapi import FastAPI
        app = FastAPI()

        def make_search(base):
            async def search(q):
                return await cluster(base, q)
            return search

        async def cluster(base, q):
            async with httpx.AsyncClient(base_url=base) as client:
                return (await client.get("/", params={"q": q})).json()

        @app.get("/search")
        async def route(q: str):
            search = make_search("http://cluster")
            return await search(q)
        """})
    (llm003,) = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(s["line"], s["function"]) for s in llm003.extra["via"]] == [
        (17, "route"), (7, "make_search"), (8, "make_search.search"), (12, "cluster")]


def test_a_sync_wrapper_running_a_public_coroutine_does_not_make_it_run_once(tmp_path):
    root = write(tmp_path, {"lib/__init__.py": "", "lib/export.py": """
        import asyncio

        async def aexport(path, rows):
            with open(path, "w") as f:
                f.write(str(rows))

        def export(path, rows):
            return asyncio.get_event_loop().run_until_complete(aexport(path, rows))
        """, "scripts/dump.py": """
        import asyncio

        async def main():
            with open("out.txt", "w") as f:
                f.write("done")

        if __name__ == "__main__":
            asyncio.run(main())
        """})
    findings = scan(root)
    assert found(findings, "LLM004") == [("lib/export.py", 5, "LLM004")]  # the script's main blocks no one
    assert findings[0].extra["context"] == "unknown"
    assert "scripts/dump.py" in {f.path for f in scan(root, every_context=True)}


def test_a_function_handed_to_a_constructor_at_startup_is_not_run_once(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/main.py": """
        import requests
        from fastapi import FastAPI

        class Tool:
            def __init__(self, function):
                self.function = function

            def __call__(self, *args):
                return self.function(*args)

        def lookup(q):
            return requests.get("http://search", params={"q": q})

        def create_app():
            app = FastAPI()
            tool = Tool(function=lookup)

            @app.get("/ask")
            def ask(q: str):
                return tool(q)
            return app

        app = create_app()
        """})
    assert found(scan(root), "LLM006") == [("app/main.py", 13, "LLM006")]


def test_a_config_file_read_while_building_an_object_is_set_up_not_a_blocking_chain(tmp_path):
    root = write(tmp_path, {"app/__init__.py": "", "app/config.py": """
        import json

        class Config:
            def __init__(self, path="config.json"):
                with open(path) as f:
                    self.values = json.load(f)

        def load_index(path):
            with open(path, "rb") as f:
                return f.read()
        """, "app/routes.py": """
        from fastapi import FastAPI
        from app.config import Config, load_index
        app = FastAPI()

        @app.get("/ask")
        async def ask(q: str):
            config = Config()
            return load_index(config.values["index"])
        """})
    assert found(scan(root), "LLM004") == [("app/routes.py", 9, "LLM004")]


def test_examples_nobody_serves_are_offline_and_a_served_example_is_serving(tmp_path):
    root = write(tmp_path, {"examples/pyproject.toml": "[project]\nname = 'examples'\n", "examples/evals.py": """
        import time

        async def run_experiment(row):
            time.sleep(1)
        """, "examples/app.py": """
        import time
        from fastapi import FastAPI
        app = FastAPI()

        @app.get("/")
        async def index():
            time.sleep(1)
        """, "lib/slow.py": """
        import time

        async def public_api():
            time.sleep(1)
        """})
    assert found(scan(root), "LLM004") == [("examples/app.py", 8, "LLM004"), ("lib/slow.py", 5, "LLM004")]
    assert ("examples/evals.py", 5, "LLM004") in found(scan(root, every_context=True))


def test_a_batch_script_blocks_no_one_before_or_after_its_gather(tmp_path):
    root = write(tmp_path, {"evaluate.py": """
        import asyncio
        import json

        async def judge(item):
            await asyncio.sleep(0)
            return item

        async def main():
            with open("dataset.json") as f:
                items = json.load(f)
            results = await asyncio.gather(*[judge(i) for i in items])
            with open("results.json", "w") as f:
                json.dump(results, f)

        if __name__ == "__main__":
            asyncio.run(main())
        """, "serve.py": """
        import asyncio

        async def handle(reader, writer):
            with open("log.txt", "a") as f:
                f.write("hit")

        async def main():
            server = await asyncio.start_server(handle, "127.0.0.1", 8888)
            with open("started.txt", "w") as f:
                f.write("up")
            await server.serve_forever()

        if __name__ == "__main__":
            asyncio.run(main())
        """})
    # the connection handler serves each connection; main's own body runs before they do
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.path, f.line, f.extra["context"]) for f in findings] == [("serve.py", 5, "serving")]
    assert findings[0].extra["entry"]["framework"] == "asyncio"


@pytest.mark.parametrize(("call", "expected"), [
    ("Tool(lookup)", []),  # the switch keeps its False default
    ("Tool(lookup, synthesize=False)", []),
    ("Tool(lookup, None, False)", []),
    ("Tool(lookup, synthesize=True)", [8]),
    ("Tool(lookup, None, True)", [8]),
    ("Tool(lookup, **options)", [8]),  # it may be on
    ("Tool(lookup).load()", []),  # `elif path is not None:` with path=None kept
    ("Tool(lookup).load(path='x.json')", [8]),
])
def test_a_step_under_a_switch_the_caller_leaves_off_is_not_followed(tmp_path, call, expected):
    root = write(tmp_path, {"tools.py": f"""
        import time
        from fastapi import FastAPI
        app = FastAPI()

        @app.post("/tool")
        async def make_tool(options: dict):
            return {call}

        class Tool:
            def __init__(self, func, schema=None, synthesize=False):
                self.func = func
                if synthesize and schema is None:
                    self.schema = self.synthesize_schema()

            def synthesize_schema(self):
                time.sleep(0.5)
                return {{}}

            def load(self, data=b"", path=None):
                if data:
                    return data
                elif path is not None:
                    time.sleep(0.5)
                return b""

        def lookup(q):
            return q
        """})
    assert [f.line for f in scan(root) if f.rule == "LLM004"] == expected


def test_an_import_relative_to_a_folder_inside_the_package_resolves_as_a_last_resort(tmp_path):
    # `cd backend && uvicorn server.app:app` (or a sys.path edit): `server.utils` is backend/server/utils.py
    root = write(tmp_path, {"backend/__init__.py": "", "backend/server/__init__.py": "",
                            "backend/server/utils.py": CLIENTS, "backend/server/app.py": """
        from fastapi import FastAPI
        from server.utils import fetch_user
        app = FastAPI()

        @app.get("/users/{uid}")
        async def get_user(uid: int):
            return fetch_user(uid)
        """})
    assert found(scan(root)) == [("backend/server/app.py", 8, "LLM004"), ("backend/server/utils.py", 5, "LLM003")]


def test_a_template_folder_inside_a_package_imports_the_package_not_its_same_named_module(tmp_path):
    # embedchain's `embedchain/deployment/fly.io/app.py` runs `from embedchain import App`: the package
    # (embedchain/__init__.py), not embedchain/embedchain.py found by putting the package folder on the path
    root = write(tmp_path, {"pkg/__init__.py": "from pkg.app import App\n",
                            "pkg/pkg.py": "class Other:\n    pass\n",
                            "pkg/clients.py": CLIENTS, "pkg/app.py": """
        from pkg.clients import fetch_user

        class App:
            def add(self, uid):
                return fetch_user(uid)
        """, "pkg/deployment/fly.io/app.py": """
        from fastapi import FastAPI
        from pkg import App
        app = FastAPI()
        embedded = App()

        @app.post("/add")
        async def add(uid: int):
            return embedded.add(uid)
        """})
    assert ("pkg/deployment/fly.io/app.py", 9, "LLM004") in found(scan(root))


def test_a_context_verdict_may_name_several_flags_and_a_bad_one_names_the_file(tmp_path):
    import shutil

    from llmdoctor.errors import UserError
    from llmdoctor.scan.catalog import load_catalog, shipped_rules_dir
    from llmdoctor.scan.project.link import _verdict_flags

    assert _verdict_flags("if repeats or concurrent") == ["repeats", "concurrent"]
    rules = tmp_path / "rules"
    shutil.copytree(shipped_rules_dir(), rules)
    spec = rules / "llm003.yaml"
    text = spec.read_text()
    spec.write_text(text.replace('unknown: "if repeats or api"', 'unknown: "if repeats or dropped"'))
    assert load_catalog(shipped_dir=rules).rules["LLM003"].contexts["unknown"] == "if repeats or dropped"
    spec.write_text(text.replace('unknown: "if repeats or api"', 'unknown: "if repeats or"'))
    with pytest.raises(UserError, match=r"llm003\.yaml.*contexts\.unknown"):
        load_catalog(shipped_dir=rules)


def test_llm001_a_stream_false_chosen_against_a_stream_flag_is_not_a_finding(tmp_path):
    root = write(tmp_path, {"app.py": """
        from fastapi import FastAPI
        from fastapi.responses import StreamingResponse
        from openai import OpenAI
        app = FastAPI()
        client = OpenAI()

        def deltas(stream):
            for chunk in stream:
                yield chunk.choices[0].delta.content or ""

        @app.post("/chat")
        def chat(q: str, stream: bool = False):
            messages = [{"role": "user", "content": q}]
            if stream:
                return StreamingResponse(deltas(client.chat.completions.create(model="m", messages=messages,
                                                                               stream=True)))
            return client.chat.completions.create(model="m", messages=messages, stream=False)

        @app.post("/answer")
        def answer(q: str):
            def once():
                yield client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}]).id
            return StreamingResponse(once())
        """})
    assert found(scan(root), "LLM001") == [("app.py", 23, "LLM001")]


def test_llm001_only_where_the_request_path_streams(tmp_path):
    """A route answering one JSON body cannot show a token sooner: not reported; the same call under a route
    that streams (SSE), a websocket or a UI callback is."""
    root = write(tmp_path, {"app.py": """
        from fastapi import FastAPI, WebSocket
        from openai import OpenAI
        from sse_starlette.sse import EventSourceResponse
        app = FastAPI()
        client = OpenAI()

        def complete(q):
            return client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])

        @app.post("/json")
        def as_json(q: str):
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
            return {"answer": reply.choices[0].message.content}

        @app.get("/events")
        def as_events(q: str):
            def events():
                yield complete(q).choices[0].message.content
            return EventSourceResponse(events())

        @app.websocket("/ws")
        async def chat(ws: WebSocket):
            q = await ws.receive_text()
            await ws.send_text(client.chat.completions.create(model="m", messages=[]).id)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM001"]
    assert [(f.line, f.extra["entry"]["function"]) for f in findings] == [(9, "as_events"), (25, "chat")]
    every = {f.line: f.extra["context"] for f in scan(root, every_context=True) if f.rule == "LLM001"}
    assert every == {9: "serving", 13: "serving", 25: "serving"}  # the JSON route serves, but does not stream


def test_llm001_only_a_completion_whose_value_goes_on_to_the_reader(tmp_path):
    """In a route that streams, a completion parsed into a score, or a draft fed to the next step, shows the
    reader nothing sooner if streamed: only the one whose value each caller gives back (returned, yielded,
    sent, or stored in what is) is reported, with its chain."""
    root = write(tmp_path, {"app.py": """
        from fastapi import FastAPI, WebSocket
        from fastapi.responses import StreamingResponse
        from openai import OpenAI
        app = FastAPI()
        client = OpenAI()

        def score(draft):
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": draft}])
            return float(reply.choices[0].message.content)

        def draft(q):
            return client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])

        def best(q):
            drafts = []
            for _ in range(3):
                drafts.append(draft(q).choices[0].message.content)
            ranked = sorted(drafts, key=score)
            final = client.chat.completions.create(model="m", messages=[{"role": "user", "content": ranked[-1]}])
            result = {"text": final.choices[0].message.content}
            return result

        @app.post("/best")
        def answer(q: str):
            def events():
                yield best(q)["text"]
            return StreamingResponse(events())

        @app.websocket("/ws")
        async def chat(ws: WebSocket):
            q = await ws.receive_text()
            summary = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
            topic = summary.choices[0].message.content
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": topic}])
            await ws.send_text(reply.choices[0].message.content)
        """})
    findings = {f.line: f for f in scan(root) if f.rule == "LLM001"}
    assert sorted(findings) == [20, 35]  # the final answer and the reply sent, not the summary in its prompt
    assert [step["function"] for step in findings[20].extra["via"]] == ["answer", "answer.events", "best"]
    every = {f.line for f in scan(root, every_context=True) if f.rule == "LLM001"}
    assert every == {9, 13, 20, 33, 35}  # the score, the drafts and the summary still serve, but feed code


LOG_HELPERS = """
    import logging
    progress_logger = logging.getLogger("progress")
    dev_logger = logging.getLogger("dev")
    dev_mode = False

    def color_print(message, **kwargs):
        progress_logger.info(message)

    def debug(message):
        if dev_mode:
            dev_logger.info(message)

    def log_size(message):
        progress_logger.info("%d characters", len(message))

    def print_excerpt(message):
        progress_logger.info(f"{message[:40]}...")

    def log_preview(message, title):
        progress_logger.info("preview: %.40s", message)
        progress_logger.info("%s" % title)

    def log_warning(title, message):
        progress_logger.warning(f"{title}: {message}")
    """


def test_a_coroutine_one_of_two_branches_builds_runs_on_the_loop_asyncio_run_makes(tmp_path):
    """From django-ragamuffin (mathpix.py:582): `conversion = _convert_pdf(...)` or `_convert_image(...)`, then
    `asyncio.run(conversion)`: either coroutine runs on a loop of its own, there and then (their file reads block
    no one else); before, the run was not followed and both read as code nobody calls."""
    root = write(tmp_path, {"app.py": """
        import asyncio
        from pathlib import Path
        from django.http import JsonResponse

        async def _convert_pdf(path):
            return Path(path).read_bytes()

        async def _convert_image(path):
            return Path(path).read_bytes()

        def convert(path):
            if path.endswith(".pdf"):
                conversion = _convert_pdf(path)
            else:
                conversion = _convert_image(path)
            return asyncio.run(conversion)

        def upload(request):
            return JsonResponse({"size": len(convert(request.POST["path"]))})
        """})
    assert found(scan(root), "LLM004") == []
    assert sorted(f.line for f in scan(root, every_context=True) if f.rule == "LLM004") == [7, 10]


def test_a_nested_coroutine_its_function_runs_with_asyncio_run_is_on_a_loop_of_its_own(tmp_path):
    """From bgs-chat-app (api_calls.py:210, holdout34): a sync Django view's helper defines `async def poll()` and
    runs it with `asyncio.run(poll())`; its sync requests between sleeps block only that private loop. Its
    definition is no way in for anyone else, with or without a request path around it."""
    root = write(tmp_path, {"chat.py": """
        import asyncio
        import requests

        class DirectLine:
            def _poll_once(self):
                return requests.get("https://directline.botframework.com/v3/activities", timeout=10).json()

            def get_response(self):
                async def poll_for_latest_response():
                    while True:
                        found = self._poll_once()
                        if found:
                            return found
                        await asyncio.sleep(1)
                return asyncio.run(poll_for_latest_response())

        def view(request):
            return DirectLine().get_response()
        """, "urls.py": """
        from django.urls import path
        from chat import view
        urlpatterns = [path("chat/", view)]
        """})
    assert found(scan(root), "LLM004") == []
    assert found(scan(root, every_context=True), "LLM004") == [("chat.py", 12, "LLM004")]
    (root / "urls.py").unlink()  # library code nobody in the project calls: the same
    assert found(scan(root), "LLM004") == []


def test_llm005_a_payload_handed_to_a_logging_helper_of_the_program(tmp_path):
    root = write(tmp_path, {"app/log.py": LOG_HELPERS, "app/search.py": """
        from fastapi import FastAPI
        from openai import OpenAI
        from app import log
        from app.log import color_print, log_warning
        app = FastAPI()
        client = OpenAI()

        @app.get("/query")
        def query(original_query: str):
            log.color_print(f"<query> {original_query} </query>")
            log.debug(original_query)
            log.log_size(original_query)
            log.print_excerpt(original_query)
            log.log_preview(original_query, "q")
            color_print(message=original_query)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": original_query}])
            if not reply.choices:
                log_warning("empty", original_query)
            log_warning(original_query, "done")
            log.color_print("searching", original_query)
            return reply
        """})
    findings = [f for f in scan(root) if f.rule == "LLM005"]
    assert [(f.path, f.line) for f in findings] == [("app/search.py", 11), ("app/search.py", 16), ("app/search.py", 20)]
    first = findings[0]
    assert "`color_print` logs its `message` at INFO" in first.message
    assert first.extra["helper"] == {"path": "app/log.py", "line": 7, "function": "color_print", "parameter": "message"}
    assert first.extra["level"] == "INFO" and first.extra["context"] == "serving"
    assert findings[2].extra["level"] == "WARNING"  # `log_warning`'s title, outside the error branch


def test_llm005_a_method_logging_its_parameter_is_a_helper_too(tmp_path):
    root = write(tmp_path, {"app.py": """
        import logging
        from openai import OpenAI
        from flask import Flask
        app = Flask(__name__)

        class Base:
            def __init__(self):
                self.logger = logging.getLogger(__name__)
                self.client = OpenAI()

            def log(self, message: str, title: str = "Info"):
                self.logger.info(f"{title}: {message}")

            def generate_sql(self, question: str) -> str:
                prompt = f"Write SQL for: {question}"
                self.log(title="SQL Prompt", message=prompt)
                llm_response = self.client.responses.create(model="m", input=prompt).output_text
                self.log(llm_response, "LLM Response")
                return llm_response

        base = Base()

        @app.get("/sql")
        def sql():
            return base.generate_sql("how many users")
        """})
    assert found(scan(root), "LLM005") == [("app.py", 17, "LLM005"), ("app.py", 19, "LLM005")]


def test_llm005_payloads_collected_with_append_and_modules_calling_a_model_over_http(tmp_path):
    root = write(tmp_path, {"app.py": """
        import logging
        import httpx
        from fastapi import FastAPI
        app = FastAPI()
        log = logging.getLogger("app")
        http = httpx.AsyncClient(base_url="http://vllm:8000")

        @app.post("/chat")
        async def chat(turns: list[str]):
            messages = []
            for turn in turns:
                messages.append({"role": "user", "content": turn})
            log.info("request: %s", messages)
            reply = await http.post("/v1/chat/completions", json={"model": "m", "messages": messages})
            log.info("sent %d messages", len(messages))
            return reply.json()
        """})
    assert found(scan(root), "LLM005") == [("app.py", 14, "LLM005")]


@pytest.mark.parametrize(("call", "expected"), [
    ("Session()", []),  # __init__ stores the False default; _prepare's `if self.specify:` is off
    ("Session(specify=False)", []),
    ("Session(specify=True)", [8]),
    ("SHARED._prepare()", [8]),  # an object built elsewhere: its attribute is not known here
    ("Session(specify=True, prepare=False)", []),  # a True default turned off by the call
    ("Session(specify=True, prepare=True)", [8]),
])
def test_a_switch_stored_on_self_in_init_is_off_for_objects_built_with_it_off(tmp_path, call, expected):
    root = write(tmp_path, {"agents.py": f"""
        import time
        from fastapi import FastAPI
        app = FastAPI()

        @app.post("/session")
        async def start():
            return {call}

        class Session:
            def __init__(self, specify=False, prepare=True):
                self.specify = specify
                if prepare:
                    self._prepare()

            def _prepare(self):
                if self.specify:
                    time.sleep(0.5)

        SHARED = Session()
        """})
    assert [f.line for f in scan(root) if f.rule == "LLM004"] == expected


@pytest.mark.parametrize(("text", "message"), [
    ("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.run], argument: 0, in_caller: 'yes'}\n",
     "key 'entrypoints.run_once.registrations[0]': 'in_caller' must be true or false"),
    ("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.on], argument: 0, serving_loop: 1}\n",
     "key 'entrypoints.run_once.registrations[0]': 'serving_loop' must be true or false"),
    ("entrypoints:\n  run_once:\n    decorators:\n      - {names: [mylib.start], serving_loop: 'no'}\n",
     "key 'entrypoints.run_once.decorators': 'serving_loop' must be true or false"),
    (("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.submit], argument: 0, in_caller: true,"
     " loop: {argument: 1, keyword: loop}}\n"),
     "key 'entrypoints.run_once.registrations[0].loop': needs 'private'"),
    (("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.submit], argument: 0, in_caller: true,"
     " loop: {argument: one, keyword: loop, private: [mylib.new_loop]}}\n"),
     "key 'entrypoints.run_once.registrations[0].loop': 'argument' must be a position"),
    ("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.submit], argument: 0, loop: [1]}\n",
     "key 'entrypoints.run_once.registrations[0].loop': must be a mapping"),
    (("entrypoints:\n  run_once:\n    registrations:\n      - {calls: [mylib.submit], argument: 0,"
      " loop: {argument: 1, keyword: 3, private: [mylib.new_loop]}}\n"),
     "key 'entrypoints.run_once.registrations[0].loop': 'keyword' must be a keyword argument name"),
    (("entrypoints:\n  request:\n    - framework: mine\n      decorators:\n"
      "        - {names: [mylib.route], serving_loop: true}\n"),
     "unknown key 'serving_loop'"),
    ("entrypoints:\n  request:\n    - framework: mine\n      streams: maybe\n",
     "key 'entrypoints.request[0].streams': must be true or false"),
    ("entrypoints:\n  offline:\n    example_paths: [3]\n", "key 'entrypoints.offline.example_paths': must be a list"),
    ("entrypoints:\n  run_once:\n    concurrency: [mylib.serve]\n", "unknown key 'concurrency'"),
    ("entrypoints:\n  run_once:\n    events: on_ready\n", "key 'entrypoints.run_once.events': must be a list"),
    ("entrypoints:\n  run_once:\n    events: [3]\n", "key 'entrypoints.run_once.events'"),
    ("entrypoints:\n  library_api:\n    names: [chat]\n", "unknown key 'names'"),
    ("entrypoints:\n  library_api:\n    name_globs: chat\n", "key 'entrypoints.library_api.name_globs': must be a list"),
    ("entrypoints:\n  dev_tooling:\n    routes: [dev]\n", "unknown key 'routes'"),
    ("entrypoints:\n  admin_console:\n    name_words: [admin]\n", "unknown key 'name_words'"),
    ("entrypoints:\n  run_once:\n    enters: contextlib.ExitStack.enter_context\n",
     "key 'entrypoints.run_once.enters': must be a list"),
    ("entrypoints:\n  admin_console:\n    route_segments: admin\n",
     "key 'entrypoints.admin_console.route_segments': must be a list"),
    ("entrypoints:\n  admin_console:\n    guards: is_admin\n", "key 'entrypoints.admin_console.guards': must be a list"),
    ("entrypoints:\n  probes:\n    routes: [health]\n", "unknown key 'routes'"),
    ("entrypoints:\n  probes:\n    route_segments: health\n", "key 'entrypoints.probes.route_segments': must be a list"),
    ("entrypoints:\n  replies:\n    names: [send]\n", "unknown key 'names'"),
    ("entrypoints:\n  replies:\n    methods: send\n", "key 'entrypoints.replies.methods': must be a list"),
    ("entrypoints:\n  handoffs:\n    take: [mylib.Queue.get]\n", "unknown key 'take'"),
    ("entrypoints:\n  handoffs:\n    put: mylib.Queue.put\n", "key 'entrypoints.handoffs.put': must be a list"),
    ("entrypoints:\n  handoffs:\n    get: [3]\n", "key 'entrypoints.handoffs.get'"),
    ("entrypoints:\n  dev_tooling:\n    route_segments: dev\n",
     "key 'entrypoints.dev_tooling.route_segments': must be a list"),
    ("tables:\n  setup_functions: [1]\n", "key 'tables.setup_functions[0]'"),
    ("entrypoints:\n  scheduled:\n    jobs: [mylib.every]\n", "unknown key 'jobs'"),
    (("entrypoints:\n  scheduled:\n    registrations:\n      - {calls: [mylib.add_job], argument: 0,"
      " trigger: {argument: 1, keyword: trigger, once: date}}\n"),
     "key 'entrypoints.scheduled.registrations[0].trigger': must be a list"),
    (("entrypoints:\n  scheduled:\n    registrations:\n      - {calls: [mylib.add_job], argument: 0,"
      " trigger: {keyword: trigger}}\n"),
     "key 'entrypoints.scheduled.registrations[0].trigger': 'argument' must be a position"),
    ("entrypoints:\n  request:\n    - framework: mine\n      registrations:\n"
     "        - {calls: [mylib.add], argument: 1, unresolved_methods: ['add route']}\n",
     "'unresolved_methods' must be method names"),    ("entrypoints:\n  one_client:\n    - stdio: [{calls: [mylib.run]}]\n",
     "key 'entrypoints.one_client[0].framework': missing"),
    ("entrypoints:\n  one_client:\n    - {framework: mine, stdio: [{calls: []}]}\n",
     "key 'entrypoints.one_client[0].stdio[0]': needs calls"),
    ("entrypoints:\n  one_client:\n    - {framework: mine, stdio: [{calls: [mylib.run], transport: {keyword: how}}]}\n",
     "key 'entrypoints.one_client[0].stdio[0].transport': 'argument' must be a position"),
    ("entrypoints:\n  one_client:\n    - {framework: mine, network: mylib.serve}\n",
     "key 'entrypoints.one_client[0].network': must be a list"),
    ("entrypoints:\n  one_client:\n    - {framework: mine, clients: 1}\n", "unknown key 'clients'"),
])
def test_bad_project_knowledge_in_rules_dir_names_the_file_and_key(cli, tmp_path, text, message):
    root = write(tmp_path, {"app.py": "async def main():\n    pass\n"})
    (root / "rules").mkdir()
    (root / "rules" / "mine.yaml").write_text("kind: tables\nname: mine\n" + text)
    result = cli("scan", "--no-cache", "--rules-dir", "rules", "app.py", cwd=root)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "mine.yaml" in result.stderr and message in result.stderr


def test_a_connection_event_added_in_rules_dir_is_a_start_up_hook(cli, tmp_path):
    """`run_once.events` is a table a team extends: a bot framework's own connection event (`on_gateway_up`)
    registered by a request decorator runs once per connection, like `on_ready` (also registered by hand: `bot.listen("on_ready")(warm_up)`)."""
    root = write(tmp_path, {"bot.py": """
        import discord
        bot = discord.Bot()

        async def warm_up():
            with open("boot.json") as saved:
                bot.boot = saved.read()

        bot.listen("on_ready")(warm_up)

        @bot.event
        async def on_gateway_up():
            with open("state.json") as saved:
                bot.state = saved.read()

        @bot.event
        async def on_message(message):
            with open("state.json") as saved:
                await message.reply(saved.read())
        """})
    (root / "rules").mkdir()
    (root / "rules" / "mine.yaml").write_text("kind: tables\nname: mine\nentrypoints:\n  run_once:\n"
                                              "    events: [on_gateway_up]\n")
    plain = json.loads(cli("scan", "--no-cache", "--format", "json", ".", cwd=root).stdout)
    extended = json.loads(cli("scan", "--no-cache", "--format", "json", "--rules-dir", "rules", ".", cwd=root).stdout)
    assert sorted(f["line"] for f in plain["findings"]) == [13, 18]
    assert sorted(f["line"] for f in extended["findings"]) == [18]


def scans_without_and_with_rules_dir(cli, root: Path, tables: str) -> tuple[dict, dict]:
    """The JSON reports of a scan of `root` as shipped and with `rules/mine.yaml` holding `tables`."""
    (root / "rules").mkdir()
    (root / "rules" / "mine.yaml").write_text("kind: tables\nname: mine\n" + tables)
    plain = json.loads(cli("scan", "--no-cache", "--format", "json", ".", cwd=root).stdout)
    extended = json.loads(cli("scan", "--no-cache", "--format", "json", "--rules-dir", "rules", ".", cwd=root).stdout)
    return plain, extended


def test_a_reply_method_added_in_rules_dir_gives_the_answer_back(cli, tmp_path):
    """`replies` is a table a team extends: a completion handed to the team's own push call reaches the reader,
    as one handed to `ws.send_text` does."""
    root = write(tmp_path, {"app.py": """
        from fastapi import FastAPI, WebSocket
        from openai import OpenAI
        from hub import Hub
        app = FastAPI()
        client = OpenAI()
        hub = Hub()

        @app.websocket("/ws")
        async def chat(ws: WebSocket):
            q = await ws.receive_text()
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": q}])
            await hub.push_to_reader(ws, reply.choices[0].message.content)
        """})
    plain, extended = scans_without_and_with_rules_dir(cli, root, "entrypoints:\n  replies:\n"
                                                                  "    methods: [push_to_reader]\n")
    assert [f["line"] for f in plain["findings"] if f["rule"] == "LLM001"] == []
    assert [f["line"] for f in extended["findings"] if f["rule"] == "LLM001"] == [12]


def test_a_module_level_queue_imported_by_the_route_and_the_consumer(tmp_path):
    root = write(tmp_path, {
        "app/bus.py": "import asyncio\ninbound = asyncio.Queue()\n",
        "app/agent.py": """
            from app.bus import inbound

            async def agent_loop():
                while True:
                    message = await inbound.get()
                    with open("history.jsonl", "a") as history:
                        history.write(message)
            """,
        "app/main.py": """
            import asyncio
            import uvicorn
            from fastapi import FastAPI
            from app import bus
            from app.agent import agent_loop
            app = FastAPI()

            @app.post("/chat")
            async def chat(text: str):
                bus.inbound.put_nowait(text)

            async def main():
                await asyncio.gather(uvicorn.Server(uvicorn.Config(app)).serve(), agent_loop())

            if __name__ == "__main__":
                asyncio.run(main())
            """})
    assert [(f.path, f.line, f.extra["context"]) for f in scan(root) if f.rule == "LLM004"] == \
        [("app/agent.py", 7, "serving")]


def test_a_queue_added_in_rules_dir_hands_requests_to_its_consumer(cli, tmp_path):
    """`handoffs` is a table a team extends: the team's own async queue class hands the route's requests to the
    coroutine that takes them, as asyncio.Queue does."""
    files = {name: text.replace("asyncio.Queue = asyncio.Queue()", "teamqueue.Queue = teamqueue.Queue()")
             .replace("import asyncio\n", "import asyncio\n        import teamqueue\n") for name, text in BUS.items()}
    root = write(tmp_path, files)
    plain, extended = scans_without_and_with_rules_dir(
        cli, root, "entrypoints:\n  handoffs:\n    put: [teamqueue.Queue.put]\n    get: [teamqueue.Queue.get]\n")
    assert [f["line"] for f in plain["findings"] if f["rule"] == "LLM004"] == []
    assert [(f["path"], f["line"]) for f in extended["findings"] if f["rule"] == "LLM004"] == [("app/agent.py", 16)]


def test_a_name_either_branch_binds_holds_either_value(tmp_path):
    """`if provider == "openai": p = OpenAIProvider() / else: p = GroqProvider()` (holdout22's nanobot
    transcription, gpt-researcher's image providers): after the `if`, `p.transcribe()` is either class's, as a type
    checker joins the branches; a branch that returns says nothing of what follows; a sync client of either
    branch blocks where both do."""
    root = write(tmp_path, {"app.py": """
        import anthropic
        import httpx
        from fastapi import FastAPI
        app = FastAPI()

        class OpenAIProvider:
            async def transcribe(self, path):
                async with httpx.AsyncClient() as client:
                    return await client.post("https://api.openai.com/v1/audio", timeout=30)

        class GroqProvider:
            async def transcribe(self, path):
                with open(path, "rb") as f:
                    return f.read()

        class LocalProvider:
            async def transcribe(self, path):
                with open(path + ".txt") as f:
                    return f.read()

        @app.post("/voice")
        async def voice(path: str, name: str):
            if name == "openai":
                provider = OpenAIProvider()
            elif name == "local":
                provider = LocalProvider()
                return "offline"
            else:
                provider = GroqProvider()
            return await provider.transcribe(path)

        def ask(vertex, text):
            if vertex:
                client = anthropic.AnthropicVertex()
            else:
                client = anthropic.Anthropic()
            return client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": text}])

        @app.post("/ask")
        async def ask_route(text: str):
            return ask(False, text)
        """})
    assert [(f.line, f.rule, f.extra["context"]) for f in scan(root)] == [
        (9, "LLM003", "serving"), (14, "LLM004", "serving"),
        (19, "LLM004", "unknown"),  # the branch that binds LocalProvider returns: no request reaches it
        (35, "LLM003", "serving"), (37, "LLM003", "serving"), (42, "LLM004", "serving")]


def test_a_project_wrapper_running_a_coroutine_on_its_own_loop_is_a_runner(tmp_path):
    """A Celery task's sync wrapper (holdout23's gabay: `run_async(generate_brief(user))` with `def run_async(coro):
    return asyncio.get_event_loop().run_until_complete(coro)`) runs the coroutine as `asyncio.run` would: on a
    loop of its own, where a blocking call stalls no one else (reported with --every-context only)."""
    root = write(tmp_path, {"tasks.py": """
        import asyncio
        from celery import Celery
        app = Celery("worker")

        def run_async(coro):
            try:
                return asyncio.get_event_loop().run_until_complete(coro)
            except RuntimeError:
                return asyncio.new_event_loop().run_until_complete(coro)

        async def brief(user):
            with open(f"{user}.txt") as notes:
                return notes.read()

        @app.task
        def process_brief(user):
            return run_async(brief(user))

        @app.task
        def process_keyword(user):
            return run_async(coro=brief(user))
        """})
    assert found(scan(root)) == []
    assert [(f.line, f.extra["context"]) for f in scan(root, every_context=True)] == [(13, "worker")]


def test_closing_enters_the_object_it_is_given(tmp_path):
    """`with closing(db.cursor()) as cursor:` (holdout23's matrix-gptbot, every room setting read): the name is the
    cursor itself, whose `execute` blocks."""
    root = write(tmp_path, {"app.py": """
        import sqlite3
        from contextlib import closing
        from fastapi import FastAPI
        app = FastAPI()
        db = sqlite3.connect("bot.db")

        @app.get("/model")
        async def model(room: str):
            with closing(db.cursor()) as cursor:
                cursor.execute("SELECT value FROM room_settings WHERE room_id = ?", (room,))
                return cursor.fetchone()
        """})
    assert found(scan(root)) == [("app.py", 11, "LLM004")]


def test_reading_a_property_runs_its_getter(tmp_path):
    """squidbot's `Session.history` reads the whole transcript, llama-stack's `OllamaInferenceAdapter.client` builds
    a client on every access (holdout21, holdout3): reading the property calls the getter, there and then, whether
    the call it is read in is awaited or not; what the getter returns types what follows (`self.client.generate`);
    a `cached_property` runs once per object."""
    root = write(tmp_path, {"app.py": """
        import functools
        import json
        from fastapi import FastAPI
        from ollama import AsyncClient
        app = FastAPI()

        class Session:
            def __init__(self, path: str):
                self.path = path

            @property
            def history(self) -> list:
                with open(self.path) as transcript:
                    return [json.loads(line) for line in transcript]

            @functools.cached_property
            def persona(self) -> str:
                with open("persona.md") as persona:
                    return persona.read()

        class Adapter:
            def __init__(self, url: str):
                self.url = url

            @property
            def client(self) -> AsyncClient:
                return AsyncClient(host=self.url)

            async def generate(self, prompt):
                return await self.client.generate(model="m", prompt=prompt)

        adapter = Adapter("http://ollama:11434")

        async def run_agent(text, history, persona):
            return await adapter.generate(text)

        @app.post("/chat")
        async def chat(text: str):
            session = Session("s.jsonl")
            return await run_agent(text, session.history, session.persona)
        """})
    findings = scan(root)
    assert [(f.line, f.rule, f.extra["context"]) for f in findings] == [
        (28, "LLM003", "serving"), (41, "LLM004", "serving")]
    assert "`@functools.cached_property` in place of `@property` on `client`" in findings[0].fix
    read = findings[1]
    assert read.message.startswith("reading the property `history` blocks the event loop inside `async def chat`")
    assert [step["function"] for step in read.extra["via"]] == ["chat", "Session.history"]


def test_elements_of_a_path_listing_and_of_parents_are_paths(tmp_path):
    """What `glob`, `rglob` and `iterdir` yield (also through `sorted`/`list`) and an element of `parents` are
    `pathlib.Path`s (rules/common.yaml `library_results` `items`), so reading or appending to them blocks; a
    path built from `__file__` exempts a read of a file shipped with the code, never a write (audit.log). A
    comprehension binds its variable as a loop does, only inside it."""
    root = write(tmp_path, {"app/__init__.py": "", "app/files.py": """
        from pathlib import Path
        PROJECT_ROOT = Path(__file__).resolve().parents[1]
        AUDIT_LOG = PROJECT_ROOT / "audit.log"
        PROMPTS = Path(__file__).parent / "prompts"
        SKILLS = Path("skills")

        def audit(line):
            with AUDIT_LOG.open("a") as f:
                f.write(line)

        def prompt(name):
            return (PROMPTS / f"{name}.txt").read_text()

        def relevant(query):
            for path in sorted(SKILLS.glob("*.md")):
                if query in path.read_text():
                    return path.name
            for entry in SKILLS.iterdir():
                entry.read_bytes()

        def notes(names):
            path = "notes"
            return [path.read_text() for path in SKILLS.rglob("*.txt")] + [path.upper() for path in names]
        """, "app/main.py": """
        from fastapi import FastAPI
        from app.files import audit, notes, prompt, relevant
        app = FastAPI()

        @app.post("/shot")
        async def shot():
            audit("shot")
            return prompt("shot")

        @app.get("/recall")
        async def recall(query: str):
            return relevant(query) + notes([query])
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.path, f.line, f.message.split("`")[1]) for f in findings] == [
        ("app/main.py", 8, "audit()"), ("app/main.py", 13, "relevant()"), ("app/main.py", 13, "notes()")]
    assert [f.extra["call"] for f in findings] == ["pathlib.Path.open", "pathlib.Path.read_text", "pathlib.Path.read_text"]
    assert [(step["path"], step["line"]) for step in findings[0].extra["via"]] == [
        ("app/main.py", 8), ("app/files.py", 9)]


def test_a_write_is_told_the_write_fix_and_a_read_the_read_fix(tmp_path):
    """`open(path, "w")` and `path.open("a")` (whose mode is its first argument) write: their fix names
    `write_text`, directly and at the end of a chain; a read's names `read_text`."""
    root = write(tmp_path, {"app.py": """
        from pathlib import Path
        from fastapi import FastAPI
        app = FastAPI()
        LOG = Path("audit.log")

        def audit(line):
            with LOG.open("a") as f:
                f.write(line)

        @app.post("/notes")
        async def notes(text: str):
            audit(text)
            with open("notes.txt", "w") as f:
                f.write(text)
            with LOG.open("a") as f:
                f.write(text)
            return LOG.open().read()
        """})
    fixes = {f.line: f.fix for f in scan(root) if f.rule == "LLM004"}
    assert sorted(fixes) == [13, 14, 16, 18]
    for line in (13, 14, 16):
        assert "path.write_text, text" in fixes[line] and "read_text" not in fixes[line]
    assert "path.read_text" in fixes[18] and "write_text" not in fixes[18]


def test_a_module_level_name_a_start_up_hook_rebinds_holds_either_value(tmp_path):
    """From axiom-rag-engine (main.py): the lifespan swaps the in-memory response cache for Redis through
    `global`, so a handler's `_cache.get()` may be Redis's sync GET; a name only a lazy getter fills (`None` at
    module level) and a rebinding to a value the module cannot tell leave the name as it was."""
    root = write(tmp_path, {"app/__init__.py": "", "app/cache.py": """
        import redis

        class MemoryCache:
            def get(self, key):
                return None

        class RedisCache:
            def __init__(self, url):
                self.client = redis.Redis(host=url)

            def get(self, key):
                return self.client.get(key)
        """, "app/main.py": """
        from fastapi import FastAPI
        from app.cache import MemoryCache, RedisCache
        _cache = MemoryCache()
        _other = MemoryCache()

        async def lifespan(app):
            global _cache, _other  # swapped at start-up
            _cache = RedisCache("redis")
            if app:
                from app.plugins import make_cache
                _other = make_cache()
            yield

        app = FastAPI(lifespan=lifespan)

        @app.get("/answer")
        async def answer(key: str):
            return _cache.get(key) or _other.get(key)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.path, f.line, f.message.split("`")[1]) for f in findings] == [("app/main.py", 19, "_cache.get()")]
    assert [step["function"] for step in findings[0].extra["via"]] == ["answer", "RedisCache.get"]
    main = root / "app" / "main.py"  # the same with Windows line ends (axiom-rag-engine's sdist has them)
    main.write_bytes(main.read_bytes().replace(b"\n", b"\r\n"))
    assert [(f.path, f.line) for f in scan(root) if f.rule == "LLM004"] == [("app/main.py", 19)]


def test_a_chroma_collection_blocks_and_its_result_dict_does_not(tmp_path):
    """chromadb's sync collection reads its store on the loop (rules/llm004.yaml); the dict its `get` returns is
    no store (`results.get("ids")`), and a collection the client makes is a `chromadb.Collection`
    (rules/common.yaml `library_results`)."""
    root = write(tmp_path, {"app.py": """
        import chromadb
        from fastapi import FastAPI
        app = FastAPI()
        client = chromadb.PersistentClient(path="index")

        @app.get("/ids")
        async def ids(source: str):
            collection = client.get_or_create_collection("docs")
            results = collection.get(where={"source": source}, include=[])
            return results.get("ids", [])
        """})
    assert [(f.line, f.message.split("`")[1]) for f in scan(root) if f.rule == "LLM004"] == [
        (9, "chromadb.PersistentClient.get_or_create_collection()"), (10, "chromadb.Collection.get()")]


SEARCH = """
    import aiohttp
    from fastapi import FastAPI
    app = FastAPI()

    async def search_with_google(query):
        async with aiohttp.ClientSession() as session:
            return await (await session.get("https://www.googleapis.com/customsearch/v1", params={"q": query})).json()

    async def search_with_bing(query):
        async with aiohttp.ClientSession() as session:
            return await (await session.get("https://api.bing.microsoft.com/v7.0/search", params={"q": query})).json()

    async def search_online(query, engines):
        chosen = []
        if "google" in engines:
            chosen.append(("google", search_with_google))
        chosen.extend([("bing", search_with_bing)])
        return [await search(query) for _, search in chosen]

    @app.get("/search")
    async def search(q: str):
        return await search_online(q, ["google"])
    """


def test_callables_stored_in_a_tuple_or_list_by_a_request_path_run_per_request(tmp_path):
    """khoj's online search: engines are appended as (name, function) pairs, then each is called: the
    functions are reached from the handler (`via`), not left as library code nobody calls."""
    root = write(tmp_path, {"app.py": SEARCH})
    findings = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(f.line, f.extra["context"]) for f in findings] == [(7, "serving"), (11, "serving")]
    assert [step["function"] for step in findings[0].extra["via"]][:2] == ["search", "search_online"]


def test_callables_stored_by_run_once_code_do_not_make_them_run_once(tmp_path):
    """A registry filled at start-up hands the functions over for later: they keep the context of whoever
    calls them (here nobody in the project: unknown), not the start-up's."""
    root = write(tmp_path, {"app.py": """
        import time

        def slow_tool(x):
            time.sleep(1)
            return x

        async def run_tool(x):
            return slow_tool(x)

        TOOLS = []

        def register():
            TOOLS.append(("slow", run_tool))

        if __name__ == "__main__":
            register()
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["context"]) for f in findings] == [(9, "unknown")]


def test_a_coroutine_run_on_its_own_loop_by_a_sync_handler_blocks_only_that_loop(tmp_path):
    """gptme's per-step `asyncio.run(_acp_step())` in a worker thread: its loop serves that step alone, so a
    blocking call there stalls no one else (not LLM004); the same coroutine awaited by an async route shares
    the server's loop (LLM004), and tasks gathered on the private loop run beside each other (LLM004)."""
    root = write(tmp_path, {"app.py": """
        import asyncio
        import threading
        import time
        from fastapi import FastAPI
        from flask import Flask

        web = Flask(__name__)
        api = FastAPI()

        async def step(path):
            with open(path) as handle:
                return handle.read()

        async def fetch(n):
            time.sleep(0.1)
            return n

        async def batch():
            return await asyncio.gather(*(fetch(n) for n in range(3)))

        async def step_alone(path):
            time.sleep(0.1)
            return await step(path)

        def run_step(path):
            asyncio.run(step_alone(path))

        @web.post("/step")
        def start_step():
            threading.Thread(target=run_step, args=("log.txt",)).start()
            return asyncio.run(batch())

        @api.get("/step")
        async def read_step():
            return await step("log.txt")
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["context"]) for f in findings] == [(12, "serving"), (16, "serving")]
    shared = next(f for f in findings if f.line == 12)
    assert shared.extra["entry"]["function"] == "read_step"
    every = [f.line for f in scan(root, every_context=True) if f.rule == "LLM004"]
    assert every == [12, 16, 23]  # --every-context reports every candidate, the private loop's too


@pytest.mark.parametrize("runs", [
    "pool.submit(asyncio.run, self._step(name)).result()",
    "asyncio.new_event_loop().run_in_executor(None, asyncio.run, self._step(name))",
])
def test_asyncio_run_handed_to_a_thread_with_its_coroutine_runs_it_on_a_loop_of_its_own(tmp_path, runs):
    """folderbot's `FolderTools.execute`: `pool.submit(asyncio.run, self._execute_tool_internal(...))` runs the
    coroutine in a pool thread on a loop of its own, as `asyncio.run(...)` there would; its blocking call stalls
    only that loop (not LLM004), and the coroutine created for it is not a call of it."""
    root = write(tmp_path, {"app.py": f"""
        import asyncio
        import concurrent.futures
        import time
        from fastapi import FastAPI

        class Tools:
            def execute(self, name):
                with concurrent.futures.ThreadPoolExecutor() as pool:
                    return {runs}

            async def _step(self, name):
                time.sleep(1)
                return name

        app = FastAPI()
        tools = Tools()

        @app.get("/x")
        def x():
            return tools.execute("a")
        """})
    assert [f for f in scan(root) if f.rule == "LLM004"] == []
    every = [(f.line, f.extra["via"][-1]["function"]) for f in scan(root, every_context=True) if f.rule == "LLM004"]
    assert every == [(13, "Tools._step")]


def test_a_coroutine_a_task_runs_on_a_loop_of_its_own_does_not_run_beside_that_task(tmp_path):
    """folderbot's heartbeat task calls `FolderTools.execute`, which runs the tool coroutine with `asyncio.run` in a
    pool thread: the task runs beside the requests, the coroutine on a new loop alone (a task it spawned there
    would run beside it)."""
    root = write(tmp_path, {"app.py": """
        import asyncio
        import concurrent.futures
        import time
        from contextlib import asynccontextmanager
        from fastapi import FastAPI

        async def _step():
            time.sleep(1)

        def execute():
            with concurrent.futures.ThreadPoolExecutor() as pool:
                return pool.submit(asyncio.run, _step()).result()

        async def heartbeat():
            while True:
                execute()
                await asyncio.sleep(1)

        @asynccontextmanager
        async def lifespan(app):
            task = asyncio.create_task(heartbeat())
            yield

        app = FastAPI(lifespan=lifespan)
        """})
    assert 9 not in [f.line for f in scan(root) if f.rule == "LLM004"]
    assert 9 in [f.line for f in scan(root, every_context=True) if f.rule == "LLM004"]


def test_a_private_coroutine_run_by_asyncio_run_is_private_and_a_public_one_is_api(tmp_path):
    """Library code: `_step` is only ever run by the sync wrapper's `asyncio.run` (its own loop), while the
    public `acomplete` may also be awaited by the library's users on their server loops."""
    root = write(tmp_path, {"lib.py": """
        import asyncio
        import time

        async def _step(x):
            time.sleep(0.1)
            return x

        def step(x):
            return asyncio.run(_step(x))

        async def acomplete(x):
            time.sleep(0.1)
            return x

        def complete(x):
            return asyncio.run(acomplete(x))
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["context"]) for f in findings] == [(13, "unknown")]


def test_a_textual_apps_handlers_run_once_for_the_user_at_the_terminal(tmp_path):
    """A Textual app's event handlers and actions run on its own loop for one user (gptme's TUI): run-once,
    like a CLI command, not library code nobody calls."""
    root = write(tmp_path, {"tui.py": """
        from textual.app import App
        from textual.widgets import Input

        class Chat(App):
            def on_input_submitted(self, event: Input.Submitted) -> None:
                self._submit(event.value)

            async def _submit(self, text):
                with open("chat.log", "a") as log:
                    log.write(text)

            async def action_save(self):
                with open("chat.md", "w") as out:
                    out.write("saved")
        """})
    findings = scan(root, every_context=True)
    assert [(f.line, f.rule, f.extra["context"]) for f in findings] == [
        (10, "LLM004", "run-once"), (14, "LLM004", "run-once")]
    assert [f for f in scan(root) if f.rule == "LLM004"] == []


def test_an_attribute_given_by_the_caller_or_built_here_has_the_type_built_here(tmp_path):
    """chainlit's DynamoDB data layer: `self.client = client` when one is passed, else `boto3.client(...)`;
    a `None` or a parameter says nothing about the type, as in `client or boto3.client(...)`. Two different
    known values leave it unknown."""
    root = write(tmp_path, {"layer.py": """
        import boto3
        import httpx

        class Layer:
            def __init__(self, client=None):
                self.http = None
                if client:
                    self.client = client
                else:
                    self.client = boto3.client("dynamodb")
                self.either = httpx.Client() if client else boto3.client("s3")

            async def get_thread(self, thread_id):
                self.http = httpx.Client()
                self.either.get("x")
                return self.client.get_item(TableName="t", Key={"id": {"S": thread_id}})

            async def ping(self):
                return self.http.get("https://example.com/health")
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["call"]) for f in findings] == [
        (17, "boto3.client.get_item"), (20, "httpx.Client.get")]


def test_an_object_picked_from_a_literal_list_or_dict_is_one_of_its_elements(tmp_path):
    """chainlit's OAuth providers: `providers = [GithubProvider(), GoogleProvider()]`, looked up by a loop;
    letta's `function_map = {"fetch": self.fetch, ...}[name](...)`. A call on the element reaches every
    element's method; a literal of data (strings) or of more than MAX_MEMBERS elements resolves to nothing."""
    root = write(tmp_path, {"app/providers.py": """
        import httpx

        class Github:
            id = "github"
            async def get_user(self, token):
                async with httpx.AsyncClient() as client:
                    return await client.get("https://api.github.com/user")

        class Google:
            id = "google"
            async def get_user(self, token):
                async with httpx.AsyncClient() as client:
                    return await client.get("https://openidconnect.googleapis.com/v1/userinfo")

        providers = [Github(), Google()]
        names = ["github", "google"]

        def get_provider(name):
            for p in providers:
                if p.id == name:
                    return p
            return None
        """, "app/tools.py": """
        import time

        class Tools:
            async def execute(self, name, **args):
                table = {"wait": self.wait, "nap": self.nap}
                return await table[name](**args)

            async def wait(self):
                time.sleep(1)

            async def nap(self):
                time.sleep(2)

            async def each(self):
                for key, tool in {"wait": self.wait}.items():
                    await tool()
        """, "app/server.py": """
        from fastapi import FastAPI
        from app.providers import get_provider, providers
        from app.tools import Tools

        app = FastAPI()
        tools = Tools()

        @app.get("/login/{name}")
        async def login(name: str, token: str):
            return await get_provider(name).get_user(token)

        @app.post("/tools/{name}")
        async def run_tool(name: str):
            return await tools.execute(name)
        """})
    findings = scan(root)
    assert found(findings) == [
        ("app/providers.py", 7, "LLM003"), ("app/providers.py", 13, "LLM003"),
        ("app/tools.py", 10, "LLM004"), ("app/tools.py", 13, "LLM004")]
    assert {f.extra["via"][-2]["function"] for f in findings if f.rule == "LLM003"} == {"login"}


def test_a_model_servers_lifecycle_operations_run_once_per_admin_operation(tmp_path):
    """xinference's worker actor: `launch_builtin_model`, `terminate_model`, `reload_model` rewrite a few-KB
    JSON of launch arguments once per operation that itself takes minutes; a method named like a request
    (`chat`) doing the same is reported. rules/entrypoints.yaml run_once.name_globs."""
    root = write(tmp_path, {"worker.py": """
        import json

        class WorkerActor:
            def _persist(self, args):
                with open("launch.json", "w") as out:
                    json.dump(args, out)

            async def launch_builtin_model(self, uid, **args):
                self._persist(args)

            async def terminate_model(self, uid):
                self._persist({})

            async def reload_model(self, uid):
                self._persist({})

            async def chat(self, uid, prompt):
                self._persist({"last": prompt})
        """})
    assert found(scan(root), "LLM004") == [("worker.py", 19, "LLM004")]


def test_a_registry_filled_by_a_class_decorator_holds_the_classes_it_registers(tmp_path):
    """langbot's boot stages: `@stage_class("LoadConfigStage")` stores the class in `preregistered_stages`,
    which `make_app` (run once, from `main`) iterates; the stages' `run` methods then run once too, and a
    request handler reaching a registered class through the same kind of registry is serving."""
    root = write(tmp_path, {"app/stage.py": """
        registry: dict = {}
        handlers = []

        def stage_class(name):
            def decorator(cls):
                registry[name] = cls
                return cls
            return decorator

        def handler(cls):
            handlers.append(cls)
            return cls
        """, "app/stages.py": """
        import time
        import requests
        from app import stage

        @stage.stage_class("load")
        class LoadConfig:
            async def run(self):
                time.sleep(1)

        @stage.handler
        class Fetch:
            def handle(self):
                return requests.get("https://example.com", timeout=5)
        """, "app/main.py": """
        import asyncio
        from fastapi import FastAPI
        from app import stage, stages

        app = FastAPI()

        async def main():
            for name in ["load"]:
                await stage.registry[name]().run()

        @app.get("/fetch")
        async def fetch():
            for cls in stage.handlers:
                cls().handle()

        if __name__ == "__main__":
            asyncio.run(main())
        """})
    findings = scan(root, every_context=True)
    assert [(f.path, f.line, f.rule, f.extra["context"]) for f in findings] == [
        ("app/main.py", 15, "LLM004", "serving"), ("app/stages.py", 9, "LLM004", "run-once"),
        ("app/stages.py", 14, "LLM003", "serving")]
    assert [(f.path, f.line) for f in scan(root)] == [("app/main.py", 15), ("app/stages.py", 14)]


def test_a_call_on_an_abstract_method_reaches_the_subclasses_definitions(tmp_path):
    """letta's LLM clients: a handler holds an `LLMClientBase` (abstract `request_async`), and every provider
    subclass defines its own, each building an SDK client per call; langbot's `ConfigManager.file:
    ConfigFile` reaches the JSON and YAML files' `load`. `self.m()` inside the base class is the object's
    own method, not every subclass's (the subclass the object is of is not known there)."""
    root = write(tmp_path, {"app/clients.py": """
        import abc
        import time
        import httpx

        class LLMClientBase(abc.ABC):
            @abc.abstractmethod
            async def request_async(self, data):
                ...

            def count(self, data):
                raise NotImplementedError

            async def step(self, data):
                self.count(data)
                return await self.request_async(data)

        class OpenAIClient(LLMClientBase):
            async def request_async(self, data):
                async with httpx.AsyncClient() as client:
                    return await client.post("https://api.openai.com/v1/chat/completions", json=data)

            def count(self, data):
                time.sleep(1)

        class GroqClient(LLMClientBase):
            async def request_async(self, data):
                async with httpx.AsyncClient() as client:
                    return await client.post("https://api.groq.com/openai/v1/chat/completions", json=data)

            def count(self, data):
                return len(data)
        """, "app/server.py": """
        from fastapi import FastAPI
        from app.clients import LLMClientBase

        app = FastAPI()

        class Agent:
            def __init__(self, client: LLMClientBase):
                self.client = client

        agent = Agent(None)

        @app.post("/chat")
        async def chat(data: dict):
            return await agent.client.request_async(data)

        @app.post("/step")
        async def step(data: dict):
            return await agent.client.step(data)
        """})
    assert found(scan(root)) == [("app/clients.py", 20, "LLM003"), ("app/clients.py", 28, "LLM003")]


def test_an_attribute_given_two_values_holds_what_its_class_declares(tmp_path):
    """phidata's `Agent.model: Optional[Model] = Field(None, alias="provider")`, set to `OpenAIChat()` when
    unset and narrowed with `cast(Model, self.model)` before the call: the two values leave the declared type,
    whose abstract `aresponse` reaches every model class's own. A pydantic `Field(...)` (or dataclasses'
    `field(...)`) says nothing of the value; the annotation does."""
    root = write(tmp_path, {"app/models.py": """
        import httpx

        class Model:
            async def aresponse(self, messages):
                raise NotImplementedError

        class OpenAIChat(Model):
            async def aresponse(self, messages):
                async with httpx.AsyncClient() as client:
                    return await client.post("https://api.openai.com/v1/chat/completions", json=messages)

        class Claude(Model):
            async def aresponse(self, messages):
                async with httpx.AsyncClient() as client:
                    return await client.post("https://api.anthropic.com/v1/messages", json=messages)
        """, "app/server.py": """
        from typing import Optional, cast
        from fastapi import FastAPI
        from pydantic import BaseModel, Field
        from app.models import Model, OpenAIChat

        app = FastAPI()

        class Agent(BaseModel):
            model: Optional[Model] = Field(None, alias="provider")

            def update_model(self):
                if self.model is None:
                    self.model = OpenAIChat()

            async def arun(self, messages):
                self.update_model()
                self.model = cast(Model, self.model)
                return await self.model.aresponse(messages)

        agent = Agent()

        @app.post("/run")
        async def run(messages: list):
            return await agent.arun(messages)
        """})
    findings = scan(root)
    assert found(findings) == [("app/models.py", 10, "LLM003"), ("app/models.py", 15, "LLM003")]
    assert [step["function"] for step in findings[1].extra["via"]] == ["run", "Agent.arun", "Claude.aresponse"]


def test_a_decorator_applied_as_a_call_makes_the_same_entry_point(tmp_path):
    """mcp-agent's CLI registers its typer commands by hand, `app_cmd.command(name="cancel")(cancel_workflow)`,
    and each command runs its coroutine through a project helper that calls `asyncio.run(coro)`: run-once, as
    with `@app_cmd.command()`. The same for a route: `app.post("/chat")(chat)` serves."""
    root = write(tmp_path, {"app/utils.py": """
        import asyncio

        def run_async(coro):
            try:
                return asyncio.run(coro)
            except RuntimeError:
                raise
        """, "app/cli.py": """
        import typer
        from app.utils import run_async

        async def _cancel_async(run_id: str):
            with open("credentials.json") as f:
                return f.read()

        def cancel(run_id: str):
            run_async(_cancel_async(run_id))

        app_cmd = typer.Typer()
        app_cmd.command(name="cancel")(cancel)
        """, "app/server.py": """
        from fastapi import FastAPI

        app = FastAPI()

        async def chat(data: dict):
            with open("history.json") as f:
                return f.read()

        app.post("/chat")(chat)
        """})
    findings = scan(root, every_context=True)
    assert [(f.path, f.line, f.extra["context"]) for f in findings if f.rule == "LLM004"] == [
        ("app/cli.py", 6, "run-once"), ("app/server.py", 7, "serving")]
    chat = next(f for f in findings if f.path == "app/server.py")
    assert chat.extra["entry"]["route"] == "POST /chat"
    assert found(scan(root)) == [("app/server.py", 7, "LLM004")]


def test_an_examples_main_does_not_make_the_library_it_demonstrates_run_once(tmp_path):
    """mcp-agent's `examples/tracing/llm/main.py` runs the OpenAI completion task once under `__main__`: the task,
    library code named like a model API operation, stays `unknown` and is reported; the example itself is
    offline."""
    root = write(tmp_path, {"lib/llm.py": """
        from openai import AsyncOpenAI

        async def chat_completion(messages):
            async with AsyncOpenAI() as client:
                return await client.chat.completions.create(model="m", messages=messages, stream=True)
        """, "examples/demo/main.py": """
        import asyncio
        from lib.llm import chat_completion

        async def main():
            print(await chat_completion([{"role": "user", "content": "hi"}]))

        if __name__ == "__main__":
            asyncio.run(main())
        """})
    findings = scan(root, every_context=True)
    assert [(f.path, f.line, f.extra["context"]) for f in findings if f.rule == "LLM003"] == [
        ("lib/llm.py", 5, "unknown")]
    assert found(scan(root), "LLM003") == [("lib/llm.py", 5, "LLM003")]


def test_a_malformed_container_reference_resolves_to_nothing(tmp_path, monkeypatch):
    """A reference read back from a cache file is only shape-checked: `A:` without its braces is unknown."""
    from llmdoctor.scan.project import link

    models = []
    original = link.ProjectModel

    def keep(*args, **kwargs):
        models.append(original(*args, **kwargs))
        return models[-1]

    monkeypatch.setattr(link, "ProjectModel", keep)
    root = write(tmp_path, {"app.py": "providers = [dict(), list()]\n\ndef pick():\n    return providers\n"})
    scan(root)
    (model,) = models
    node = model.node(str(root / "app.py"), "pick").id
    assert [model.resolve(node, ref) for ref in ("A:", "A:{", "A:}x", "A:M:x|", "A:{}[]")] == [None] * 5


def test_an_abstract_call_reaches_at_most_max_subclasses_definitions(tmp_path, monkeypatch):
    """docs/scan.md: "up to 64 subclasses" (model.MAX_SUBCLASSES): a call on an abstract method of a wider
    hierarchy reaches the first 64 subclasses' definitions, not all of them."""
    from llmdoctor.scan.project import link
    from llmdoctor.scan.project.model import MAX_SUBCLASSES

    models = []
    original = link.ProjectModel
    monkeypatch.setattr(link, "ProjectModel", lambda *a, **k: models.append(original(*a, **k)) or models[-1])
    subclasses = "".join(f"""
        class Impl{n}(Base):
            def run(self):
                time.sleep({n})
        """ for n in range(MAX_SUBCLASSES + 6))
    root = write(tmp_path, {"app.py": """
        import time
        from fastapi import FastAPI

        class Base:
            def run(self):
                raise NotImplementedError
        """ + subclasses + """
        class Holder:
            def __init__(self, impl: Base):
                self.impl = impl

        holder = Holder(None)
        app = FastAPI()

        @app.get("/run")
        async def run():
            holder.impl.run()
        """})
    assert [f.rule for f in scan(root)] == ["LLM004"]
    (model,) = models
    route = model.node(str(root / "app.py"), "run")
    (call,) = [c for c in route.function.calls if c.text == "holder.impl.run"]
    reached = [model.nodes[n].function.key for n in model.callee_nodes(route.id, call)]
    assert reached == [f"Impl{n}.run" for n in range(MAX_SUBCLASSES)]


ADAPTER = """
    from openai import AsyncOpenAI

    class FireworksAdapter:
        def _get_client(self):
            return AsyncOpenAI(base_url="https://api.fireworks.ai/inference/v1")

        async def chat_completion(self, messages):
            return await self._get_client().chat.completions.create(model="m", messages=messages, stream=True)

        async def list_models(self):
            return await AsyncOpenAI().models.list()

        async def batch(self, prompts):
            async def completion(prompt):  # a nested helper, not the library's API
                return await AsyncOpenAI().completions.create(model="m", prompt=prompt)
            return [await completion(p) for p in prompts]
    """


def test_a_library_api_operation_nobody_calls_is_per_request(tmp_path):
    """entrypoints.yaml `library_api`: a method named like a model API call (`chat_completion`) is what a
    server's routing table or the library's users call per request: its per-call client is reported, with
    the chain from the operation; other unknown code, and nested defs named alike, are not."""
    root = write(tmp_path, {"adapters/__init__.py": "", "adapters/fireworks.py": ADAPTER})
    findings = scan(root)
    assert found(findings, "LLM003") == [("adapters/fireworks.py", 6, "LLM003")]
    finding = next(f for f in findings if f.rule == "LLM003")
    assert finding.extra["context"] == "unknown"
    assert [step["function"] for step in finding.extra["via"]] == ["FireworksAdapter.chat_completion",
                                                                   "FireworksAdapter._get_client"]


def test_a_library_api_operation_a_script_runs_is_run_once(tmp_path):
    script = ADAPTER + """
    if __name__ == "__main__":
        import asyncio
        asyncio.run(FireworksAdapter().chat_completion([]))
    """
    root = write(tmp_path, {"adapters/__init__.py": "", "adapters/fireworks.py": script})
    assert found(scan(root), "LLM003") == []


def test_a_closure_reaches_a_def_later_in_its_enclosing_function(tmp_path):
    """agent-framework-lib's `create_workspace_router()`: `handle_webhook`, a route defined inside it, hands
    `_process_webhook`, defined below it, to `background_tasks.add_task`; at run time the closure reads the
    enclosing function's binding, so the later def is the one it hands over. A name bound twice there is not
    taken for its def."""
    root = write(tmp_path, {"app.py": """
        import time
        from fastapi import APIRouter, BackgroundTasks, FastAPI

        def create_router():
            router = APIRouter()

            @router.post("/webhook")
            async def handle_webhook(background_tasks: BackgroundTasks):
                background_tasks.add_task(_process_webhook)
                _other()

            async def _process_webhook():
                time.sleep(1)

            def _other():
                time.sleep(1)

            if router.prefix:
                _other = print
            return router

        app = FastAPI()
        app.include_router(create_router())
        """})
    assert [(f.line, f.extra["context"]) for f in scan(root) if f.rule == "LLM004"] == [(14, "serving")]


def test_a_test_named_like_a_library_api_operation_is_not_one(tmp_path):
    """cc-claw's `TestToolExecutor.test_execute_from_tools_file_search` (`*_search`): a test named like a model API
    operation is a test, so the tools only it builds (a per-call `requests.get`) get no per-request claim."""
    root = write(tmp_path, {"app/__init__.py": "", "app/tools.py": """
        import requests

        class DataScraper:
            def fetch(self, url):
                return requests.get(url, timeout=5).text

        class ToolExecutor:
            def run(self, url):
                return DataScraper().fetch(url)
        """, "tests/test_tools.py": """
        from app.tools import ToolExecutor

        class TestToolExecutor:
            def test_execute_from_tools_file_search(self):
                assert ToolExecutor().run("http://localhost") is not None
        """})
    assert found(scan(root), "LLM003") == []
    every = [(f.path, f.line, f.extra["context"]) for f in scan(root, every_context=True) if f.rule == "LLM003"]
    assert every == [("app/tools.py", 6, "unknown")]


SESSIONS = """
    import asyncio
    from threading import Thread
    from fastapi import FastAPI, WebSocket

    app = FastAPI()


    class AgentSession:
        def __init__(self):
            self.loop = asyncio.new_event_loop()

        async def start(self):
            Thread(target=self._run, daemon=True).start()
            coro = self._start()
            asyncio.run_coroutine_threadsafe(coro, self.loop).add_done_callback(print)

        async def _start(self):
            with open("state.json") as f:
                return f.read()

        def _run(self):
            asyncio.set_event_loop(self.loop)
            self.loop.run_forever()


    class Session:
        def __init__(self):
            self.agent_session = AgentSession()
            self.loop = asyncio.get_event_loop()

        async def dispatch(self, data):
            asyncio.run_coroutine_threadsafe(self._add_event(data), loop=self.agent_session.loop)
            asyncio.run_coroutine_threadsafe(self._send_status(data), self.loop)

        async def _add_event(self, data):
            with open("events.json", "a") as f:
                f.write(data)

        async def _send_status(self, data):
            with open("status.json", "a") as f:
                f.write(data)


    @app.websocket("/ws")
    async def ws(websocket: WebSocket):
        session = Session()
        await session.agent_session.start()
        await session.dispatch(await websocket.receive_text())
    """


def test_a_coroutine_handed_to_a_loop_of_its_own_in_a_thread_blocks_only_that_loop(tmp_path):
    """openhands' per-session agent loop: `run_coroutine_threadsafe(coro, self.loop)` where `self.loop =
    asyncio.new_event_loop()` runs in a thread of the session's own; handed to the server's loop
    (`get_event_loop()`), the coroutine shares it with every request."""
    root = write(tmp_path, {"app/__init__.py": "", "app/sessions.py": SESSIONS})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["context"]) for f in findings] == [(41, "serving")]
    assert [f.extra["via"][-1]["function"] for f in findings] == ["Session._send_status"]
    every = [f.line for f in scan(root, every_context=True) if f.rule == "LLM004"]
    assert every == [19, 37, 41]


POLL = """
async def poll():
    while True:
        with open("calls.log") as log:
            log.read()
        await asyncio.sleep(60)
"""


@pytest.mark.parametrize(("imports", "starter", "reported"), [
    # a lifespan's task runs beside every request on the serving loop
    ("from contextlib import asynccontextmanager\nfrom fastapi import FastAPI",
     ("@asynccontextmanager\nasync def lifespan(app):\n    task = asyncio.create_task(poll())\n    yield\n\n"
      "app = FastAPI(lifespan=lifespan)"), True),
    ("from aiohttp import web",
     ("async def start_background(app):\n    app['poller'] = asyncio.create_task(poll())\n\n"
      "app = web.Application()\napp.on_startup.append(start_background)"), True),
    # agent-brain-rag's job worker: the lifespan starts it through a guarded method that keeps its task
    ("from contextlib import asynccontextmanager\nfrom fastapi import FastAPI",
     ("class Worker:\n    def __init__(self):\n        self._task = None\n\n"
      "    async def start(self):\n        if self._task is not None:\n            return\n"
      "        self._task = asyncio.create_task(poll())\n\n"
      "@asynccontextmanager\nasync def lifespan(app):\n    await Worker().start()\n    yield\n\n"
      "app = FastAPI(lifespan=lifespan)"), True),
    # agentscope's index consumer: the lifespan enters it on an exit stack, its `__aenter__` starts the task
    ("import contextlib\nfrom contextlib import asynccontextmanager\nfrom fastapi import FastAPI",
     ("class Consumer:\n    async def __aenter__(self):\n        self.task = asyncio.create_task(poll())\n"
      "        return self\n\n    async def __aexit__(self, *exc):\n        self.task.cancel()\n\n"
      "@asynccontextmanager\nasync def lifespan(app):\n    async with contextlib.AsyncExitStack() as stack:\n"
      "        await stack.enter_async_context(Consumer())\n        yield\n\n"
      "app = FastAPI(lifespan=lifespan)"), True),
    # a CLI's own task: the command is slower, no request waits on it
    ("import click",
     ("@click.command()\ndef watch():\n    asyncio.run(main())\n\n"
      "async def main():\n    await asyncio.gather(poll(), asyncio.sleep(1))"), False),
])
def test_a_task_started_beside_requests_is_reported_and_a_cli_s_own_task_is_not(tmp_path, imports, starter,
                                                                                 reported):
    text = f"import asyncio\n{imports}\n{POLL}\n{starter}\n"
    line = text.splitlines().index('        with open("calls.log") as log:') + 1
    root = write(tmp_path, {"service.py": text})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["context"]) for f in findings] == ([(line, "run-once")] if reported else [])


def test_a_declared_library_type_wins_over_an_attribute_of_another_library_s_object(tmp_path):
    """telechatai's `def _conn(self) -> sqlite3.Connection: ... return self._local.conn`: an attribute of a
    `threading.local()` says nothing of what it holds, the declaration does; a declaration of the same library
    as the value (`-> httpx.Client` returning `httpx.Client(...)`) changes nothing."""
    root = write(tmp_path, {"kb.py": """
        import sqlite3
        import threading


        class KnowledgeBase:
            def __init__(self):
                self._local = threading.local()

            def _conn(self) -> sqlite3.Connection:
                if not hasattr(self._local, "conn"):
                    self._local.conn = sqlite3.connect("kb.db", check_same_thread=False)
                return self._local.conn

            def search(self, query):
                return self._conn().execute("SELECT doc FROM chunks WHERE text MATCH ?", (query,)).fetchall()
        """, "bot.py": """
        from fastapi import FastAPI
        from kb import KnowledgeBase
        app = FastAPI()
        kb = KnowledgeBase()

        @app.post("/ask")
        async def ask(query: str):
            return kb.search(query)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.path, f.line) for f in findings] == [("bot.py", 9)]
    assert "`sqlite3.Connection.execute()`" in findings[0].message


def test_a_lazy_singleton_getter_returns_what_it_keeps(tmp_path):
    """memoryos's rate limiter: `if _redis_client is not None: return _redis_client`, then the client is built,
    kept in the global and returned; the early return is the kept value, so the getter returns a redis client
    (a getter whose only return is the early one returns what it keeps too)."""
    root = write(tmp_path, {"limits.py": """
        _redis_client = None


        def get_redis():
            global _redis_client
            if _redis_client is not None:
                return _redis_client
            try:
                import redis
                _redis_client = redis.from_url("redis://cache")
                return _redis_client
            except Exception:
                return None
        """, "app.py": """
        from fastapi import FastAPI
        from limits import get_redis
        app = FastAPI()

        @app.get("/hits")
        async def hits(key: str):
            pipe = get_redis().pipeline()
            pipe.incr(key)
            return pipe.execute()
        """})
    assert [(path, line) for path, line, _ in found(scan(root), "LLM004")] == [("app.py", 10)]


def test_a_parameter_or_its_fallback_holds_the_parameter_s_declared_type(tmp_path):
    """squidbot's `self.store_path = store_path or DATA_DIR / "sessions"` with `store_path: Path | None`: a Path
    either way, as a type checker holds the fallback to the declaration."""
    root = write(tmp_path, {"store.py": """
        from pathlib import Path
        DATA_DIR = Path.home() / ".bot"


        class Sessions:
            def __init__(self, store_path: Path | None = None):
                self.store_path = store_path or DATA_DIR / "sessions"
                self.index = self.store_path / "sessions.json"

            def save(self, text):
                self.index.write_text(text)
        """, "bot.py": """
        from fastapi import FastAPI
        from store import Sessions
        app = FastAPI()
        sessions = Sessions()

        @app.post("/message")
        async def message(text: str):
            sessions.save(text)
        """})
    assert [(path, line) for path, line, _ in found(scan(root), "LLM004")] == [("bot.py", 9)]


def test_a_local_annotation_is_the_declared_type_of_what_it_is_assigned(tmp_path):
    """openhands' `runtime: Runtime = request.state.session.agent_session.runtime`: the value is a request's
    state (unknown), the annotation says it is a `Runtime`, whose abstract `list_files` the sandbox runtime
    implements with a sync `requests.Session`; `typing` forms (`Any`) say nothing and the value decides."""
    root = write(tmp_path, {"app.py": """
        import requests
        from abc import ABC, abstractmethod
        from typing import Any
        from fastapi import FastAPI, Request

        app = FastAPI()


        class Runtime(ABC):
            @abstractmethod
            def list_files(self, path): ...


        class SandboxRuntime(Runtime):
            def __init__(self):
                self.session = requests.Session()

            def list_files(self, path):
                return self.session.post("http://sandbox/list", json={"path": path}, timeout=10).json()


        @app.get("/files")
        async def list_files(request: Request, path: str):
            runtime: Runtime = request.state.session.runtime
            return runtime.list_files(path)


        @app.get("/any")
        async def list_any(path: str):
            runtime: Any = SandboxRuntime()
            return runtime.list_files(path)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["via"][-1]["function"]) for f in findings] == [(26, "SandboxRuntime.list_files"),
                                                                          (32, "SandboxRuntime.list_files")]


def test_iterating_a_sync_generator_in_async_def_runs_its_body_on_the_loop(tmp_path):
    """openhands' websocket replays history with `for event in event_stream.get_events()`, each event a file
    read: a `for` runs the generator's body there and then; a generator only returned runs nothing yet."""
    root = write(tmp_path, {"app.py": """
        import json
        from fastapi import FastAPI, WebSocket

        app = FastAPI()


        class EventStream:
            def get_events(self, start=0):
                for i in range(start, 10):
                    with open(f"events/{i}.json") as f:
                        yield json.load(f)


        STREAM = EventStream()


        @app.websocket("/ws")
        async def replay(websocket: WebSocket):
            for event in STREAM.get_events():
                await websocket.send_json(event)


        @app.get("/events")
        async def events():
            return STREAM.get_events()  # handed on, not run here
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [f.line for f in findings] == [20]
    assert findings[0].message.startswith("iterating `STREAM.get_events()` blocks the event loop inside `async def "
                                          "replay`: the generator `EventStream.get_events` calls `open()`")
    assert "await asyncio.to_thread(list, STREAM.get_events(...))" in findings[0].fix


def test_a_parameter_given_by_dependency_injection_has_the_dependency_s_type(tmp_path):
    """magentic-ui's and autogenstudio's routes take `db=Depends(get_db)` where `async def get_db() ->
    DatabaseManager`: the sync SQLModel manager runs on the loop; `Annotated[T, Depends(f)]` names T; a sync
    route runs in FastAPI's thread pool (not LLM004's)."""
    root = write(tmp_path, {"app.py": """
        from typing import Annotated, Optional
        from fastapi import APIRouter, Depends
        from sqlmodel import Session, create_engine

        router = APIRouter()


        class DatabaseManager:
            def __init__(self):
                self.engine = create_engine("sqlite:///app.db")

            def get(self, model):
                with Session(self.engine) as session:
                    return session.exec(model).all()


        _db: Optional[DatabaseManager] = None


        async def get_db() -> DatabaseManager:
            return _db


        @router.get("/sessions")
        async def list_sessions(user_id: str, db=Depends(get_db)):
            return db.get("Session")


        @router.get("/runs")
        async def list_runs(db: Annotated[DatabaseManager, Depends(get_db)]):
            return db.get("Run")


        @router.get("/teams")
        def list_teams(db=Depends(dependency=get_db)):
            return db.get("Team")
        """})
    findings = [f for f in scan(root) if f.rule == "LLM004"]
    assert [(f.line, f.extra["via"][-1]["function"]) for f in findings] == [(27, "DatabaseManager.get"),
                                                                          (32, "DatabaseManager.get")]


def test_an_annotated_alias_names_its_type_in_any_module(tmp_path):
    """agentf's `DBSession = Annotated[Session, Depends(get_db)]` in core/deps.py, imported by the routes: a
    parameter annotated with the alias holds a sync SQLAlchemy session, as one annotated with the `Annotated`
    itself does."""
    root = write(tmp_path, {"app/__init__.py": "", "app/deps.py": """
        from typing import Annotated
        from fastapi import Depends
        from sqlalchemy.orm import Session, sessionmaker

        SessionLocal = sessionmaker()


        def get_db():
            db = SessionLocal()
            try:
                yield db
            finally:
                db.close()


        DBSession = Annotated[Session, Depends(get_db)]
        """, "app/routes.py": """
        from fastapi import APIRouter
        from app.deps import DBSession

        router = APIRouter()


        @router.get("/sources")
        async def list_sources(db: DBSession):
            return db.query(int).all()
        """})
    assert found(scan(root), "LLM004") == [("app/routes.py", 10, "LLM004")]



@pytest.mark.parametrize("annotation", ['"Agent"', 'Optional["Agent"]', '"Optional[Agent]"', '"Agent | None"',
                                        'list["Agent"]'])
def test_a_string_annotation_names_its_type_as_a_type_checker_reads_it(tmp_path, annotation):
    """local-pigeon's adapters keep `agent: "LocalPigeonAgent"` (a forward reference to a class imported under
    `if TYPE_CHECKING:`, against an import cycle): the attribute holds that class's instance, so a Discord
    message reaches the agent's blocking tool call through it."""
    element = annotation.startswith("list")
    root = write(tmp_path, {"app/__init__.py": "", "app/agent.py": """
        import time


        class Agent:
            async def chat(self, text):
                time.sleep(1)
                return text
        """, "app/base.py": f"""
        from typing import TYPE_CHECKING, Optional

        if TYPE_CHECKING:
            from app.agent import Agent


        class Adapter:
            def __init__(self, agent: {annotation}):
                self.agent = agent
        """, "app/bot.py": f"""
        import discord
        from discord.ext import commands
        from app.base import Adapter


        class DiscordAdapter(Adapter):
            def __init__(self, agent):
                super().__init__(agent)
                self.bot = commands.Bot(command_prefix="!", intents=discord.Intents.default())

                @self.bot.event
                async def on_message(message):
                    await self.agent{"[0]" if element else ""}.chat(message.content)
        """})
    findings = {(f.path, f.line): f.extra["context"] for f in scan(root, every_context=True)}
    assert findings == {("app/agent.py", 7): "serving"}



def test_any_says_nothing_of_a_value_s_type(tmp_path):
    """folderbot's `services: "dict[str, Any]"` (here unquoted): an element of it is of no known type, so a
    helper declared `-> FolderServices | None` that returns one has the declared type (`Any` is no library
    class)."""
    root = write(tmp_path, {"app/__init__.py": "", "app/services.py": """
        from dataclasses import dataclass, field
        from pathlib import Path
        from typing import Any


        @dataclass
        class Context:
            services: dict[str, Any] = field(default_factory=dict)


        class Services:
            def __init__(self, root: Path):
                self.root = root

            def validate(self, name: str) -> Path:
                return self.root / name


        def get_service(context: Context, key: str) -> Any:
            return context.services.get(key)


        def get_services(context: Context) -> Services | None:
            return get_service(context, "folder")
        """, "app/tools.py": """
        from app.services import Context, get_services


        async def read_file(name: str, context: Context):
            path = get_services(context).validate(name)
            return path.read_text()
        """})
    assert found(scan(root), "LLM004") == [("app/tools.py", 7, "LLM004")]



def test_an_attribute_given_two_values_holds_either(tmp_path):
    """chainlit's `DynamoDBDataLayer`: `self.client = client` (a parameter typed with boto3's stubs) or
    `self.client = boto3.client("dynamodb")`: a call on it blocks, as each of the two does. A store picked
    between two project classes runs either one's method."""
    root = write(tmp_path, {"app/__init__.py": "", "app/stores.py": """
        import boto3
        from mypy_boto3_dynamodb import DynamoDBClient


        class FileStore:
            def load(self, key):
                with open(key) as f:
                    return f.read()


        class MemoryStore:
            def load(self, key):
                return key


        class Layer:
            def __init__(self, client: DynamoDBClient | None = None, local: bool = False):
                if client:
                    self.client = client
                else:
                    self.client = boto3.client("dynamodb")
                if local:
                    self.store = MemoryStore()
                else:
                    self.store = FileStore()

            async def get_user(self, uid):
                return self.client.get_item(TableName="users", Key={"id": {"S": uid}})

            async def load(self, key):
                return self.store.load(key)
        """})
    assert found(scan(root), "LLM004") == [("app/stores.py", 29, "LLM004"), ("app/stores.py", 32, "LLM004")]



def test_a_with_statement_runs_the_manager_s_enter_and_exit(tmp_path):
    """`with Store() as s:` runs `Store.__enter__` (and `__exit__` after the block), `async with` the awaited
    `__aenter__` / `__aexit__`, as a type checker reads the statement: a handler that enters a project's context
    manager runs what its enter does. A library's manager (`open(...)`) is judged by the call that built it."""
    root = write(tmp_path, {"app/__init__.py": "", "app/store.py": """
        import sqlite3


        class Store:
            def __enter__(self):
                self.conn = sqlite3.connect("app.db")
                return self

            def __exit__(self, *exc):
                self.conn.close()


        class Rows:
            async def __aenter__(self):
                with open("rows.txt") as f:
                    self.rows = f.read()
                return self

            async def __aexit__(self, *exc):
                return None
        """, "app/api.py": """
        from fastapi import FastAPI
        from app.store import Rows, Store
        app = FastAPI()


        @app.get("/count")
        async def count():
            with Store() as store:
                return store.conn


        @app.get("/rows")
        async def rows():
            async with Rows() as found:
                return found.rows


        @app.get("/text")
        async def text():
            with open("text.txt") as f:
                return f.read()
        """})
    findings = scan(root)
    assert found(findings, "LLM004") == [("app/api.py", 9, "LLM004"), ("app/api.py", 21, "LLM004"),
                                         ("app/store.py", 16, "LLM004")]
    by_line = {(f.path, f.line): f for f in findings}
    entered = by_line[("app/api.py", 9)]
    assert [hop["function"] for hop in entered.extra["via"]] == ["count", "Store.__enter__"]
    assert entered.message.startswith("`with Store()` blocks the event loop inside `async def count`: its "
                                      "`Store.__enter__` calls `sqlite3.connect()`")
    assert entered.fix.startswith("move the `with` block into a sync function")
    assert by_line[("app/store.py", 16)].extra["context"] == "serving"



@pytest.mark.parametrize("how", ["call=lambda p, k: p.forward_chat(body, k)", "lambda p, k: p.forward_chat(body, k)"])
def test_a_lambda_s_parameters_are_what_the_callee_s_callable_annotation_calls_it_with(tmp_path, how):
    """freeride's failover: `try_call_with_failover(chain, call=lambda p, k: p.forward_chat(...))` where the
    callee declares `call: Callable[[Provider, str], Awaitable[T]]`: `p` is a `Provider`, so the route reaches
    every provider's `forward_chat` (each builds an `httpx.AsyncClient` per request), as a type checker infers
    a lambda's parameters from the type it is expected to have."""
    keyword = how.startswith("call=")
    root = write(tmp_path, {"app/__init__.py": "", "app/failover.py": f"""
        from typing import Awaitable, Callable, Optional, TypeVar
        from app.provider import Provider

        T = TypeVar("T")


        async def try_call(chain: list[Provider], {"*, " if keyword else ""}call: Optional[Callable[[Provider, str], Awaitable[T]]]):
            for provider in chain:
                return await call(provider, "key")
        """, "app/provider.py": """
        import httpx


        class Provider:
            async def forward_chat(self, body, key):
                raise NotImplementedError


        class OpenAICompat(Provider):
            async def forward_chat(self, body, key):
                async with httpx.AsyncClient(timeout=30) as client:
                    return await client.post("https://api.example.com/v1/chat/completions", json=body)
        """, "app/routes.py": f"""
        from fastapi import FastAPI
        from app.failover import try_call
        app = FastAPI()
        CHAIN = []


        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            return await try_call(CHAIN, {how})
        """})
    findings = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(f.path, f.line, f.extra["context"]) for f in findings] == [("app/provider.py", 12, "serving")]
    assert [hop["function"] for hop in findings[0].extra["via"]] == ["chat", "chat.<lambda>",
                                                                     "OpenAICompat.forward_chat"]



def test_a_protocol_s_call_reaches_the_classes_that_implement_it_structurally(tmp_path):
    """freeride's `class Provider(Protocol)` with `forward_chat` and `forward_embeddings`: its provider plugins
    implement both without naming it, so a call through a `Provider` reaches each one's own method, as a type
    checker matches them; a class that has only one of the two methods is no `Provider`."""
    root = write(tmp_path, {"app/__init__.py": "", "app/provider.py": """
        from typing import Protocol


        class Provider(Protocol):
            async def forward_chat(self, body): ...

            async def forward_embeddings(self, body): ...
        """, "app/plugins.py": """
        import httpx


        class Groq:
            async def forward_chat(self, body):
                async with httpx.AsyncClient(timeout=30) as client:
                    return await client.post("https://api.groq.com/openai/v1/chat/completions", json=body)

            async def forward_embeddings(self, body):
                return None


        class Recorder:
            async def forward_chat(self, body):
                async with httpx.AsyncClient(timeout=30) as client:
                    return await client.post("https://audit.example.com/chat", json=body)
        """, "app/routes.py": """
        from fastapi import FastAPI
        from app.provider import Provider
        app = FastAPI()


        async def relay(provider: Provider, body: dict):
            return await provider.forward_chat(body)


        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            return await relay(PROVIDERS[0], body)


        PROVIDERS: list = []
        """})
    findings = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(f.path, f.line, f.extra["context"]) for f in findings] == [("app/plugins.py", 7, "serving")]


def test_a_protocol_of_one_method_is_implemented_by_the_classes_defining_it_with_its_parameters(tmp_path):
    """distill-mcp's `DistillerPort(Protocol)` has only `distill(self, raw_text)`: its Ollama and Gemini
    distillers define it with the same parameters (a type checker matches their names too), so a call through
    the port reaches both; a class whose `distill` takes other parameters is no `DistillerPort`."""
    root = write(tmp_path, {"app/__init__.py": "", "app/ports.py": """
        from typing import Protocol


        class DistillerPort(Protocol):
            async def distill(self, raw_text: str) -> str: ...
        """, "app/adapters.py": """
        import httpx


        class OllamaDistiller:
            async def distill(self, raw_text: str) -> str:
                async with httpx.AsyncClient(timeout=60) as client:
                    return (await client.post("http://localhost:11434/api/generate", json={"prompt": raw_text})).text


        class Still:
            async def distill(self, mash, temperature):
                async with httpx.AsyncClient(timeout=60) as client:
                    return await client.post("https://still.example.com/run", json={"mash": mash})
        """, "app/routes.py": """
        from fastapi import FastAPI
        from app.ports import DistillerPort
        app = FastAPI()


        class Memory:
            def __init__(self, distiller: DistillerPort):
                self._distiller = distiller

            async def add(self, text: str) -> str:
                return await self._distiller.distill(text)


        MEMORY = Memory(make_distiller())


        @app.post("/memories")
        async def add(text: str):
            return await MEMORY.add(text)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(f.path, f.line, f.extra["context"]) for f in findings] == [("app/adapters.py", 7, "serving")]


CONTROL_PLANE_APP = {
    "app/__init__.py": "",
    "app/store.py": """
        import json, requests

        def save_rule(data):
            with open("rules.json", "w") as f:
                json.dump(data, f)

        def load_profile(uid):
            with open(f"profiles/{uid}.json") as f:
                return json.load(f)

        def check_provider(url):
            return requests.Session().get(url, timeout=5).status_code
        """,
    "app/admin.py": """
        from fastapi import APIRouter
        from app.store import check_provider, load_profile, save_rule
        router = APIRouter()

        @router.put("/rules")
        async def update_rules(data: dict):
            save_rule(data)

        @router.post("/backends/test")
        async def test_provider(url: str):
            return check_provider(url)

        @router.get("/profiles/{uid}")
        async def show_profile(uid: str):
            return load_profile(uid)
        """,
    "app/chat.py": """
        from fastapi import APIRouter
        from app.store import load_profile
        router = APIRouter()

        @router.post("/chat")
        async def chat(uid: str, prompt: str):
            return {"profile": load_profile(uid), "prompt": prompt}
        """,
}


def test_entry_points_declared_control_plane(tmp_path):
    """What only the admin routes reach is `control-plane` (not reported by LLM003/LLM004), the admin routes'
    own call sites of a helper the chat route shares included; the chat route's call stays `serving`;
    --every-context shows the rest with their contexts."""
    root = write(tmp_path, CONTROL_PLANE_APP)
    before = found(scan(root))
    assert ("app/admin.py", 8, "LLM004") in before and ("app/store.py", 13, "LLM003") in before
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'demo'\n\n[tool.llmdoctor]\ncontrol-plane = ['app/admin.py']\n")
    report = run_scan(["."], ScanOptions(cwd=str(root)), analyze=ScanExecutor(jobs=1, use_cache=False))
    assert found(report.findings) == [("app/chat.py", 8, "LLM004")]
    assert report.findings[0].extra["context"] == "serving" and report.findings[0].extra["entry"]["function"] == "chat"
    every = run_scan(["."], ScanOptions(cwd=str(root), every_context=True),
                     analyze=ScanExecutor(jobs=1, use_cache=False)).findings
    contexts = {(f.path, f.line, f.rule): f.extra["context"] for f in every}
    assert contexts[("app/admin.py", 8, "LLM004")] == contexts[("app/admin.py", 16, "LLM004")] == "control-plane"
    assert contexts[("app/store.py", 13, "LLM003")] == "control-plane"
    assert next(f for f in every if f.line == 8 and f.path == "app/admin.py").extra["entry"]["function"] == \
        "update_rules"


def test_control_plane_on_the_command_line(cli, tmp_path):
    root = write(tmp_path, CONTROL_PLANE_APP)
    result = cli("scan", "--no-cache", "--format", "json", "--control-plane", "app/admin.py", ".", cwd=root)
    assert [(f["path"], f["line"], f["rule"]) for f in json.loads(result.stdout)["findings"]] == [
        ("app/chat.py", 8, "LLM004")]
    inside = cli("scan", "--no-cache", "--format", "json", "--control-plane", "admin.py", ".", cwd=root / "app")
    assert [f["line"] for f in json.loads(inside.stdout)["findings"]] == [8]  # relative to the cwd
    bad = cli("scan", "--no-cache", "--control-plane", "app/admin.py::", ".", cwd=root)
    assert bad.returncode == 2 and "--control-plane 'app/admin.py::': expected a file glob" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_declared_function_glob_narrows_to_those_entry_points(cli, tmp_path):
    root = write(tmp_path, CONTROL_PLANE_APP)
    (root / ".llmdoctor.yaml").write_text("control-plane: ['app/admin.py::update_*', 'app/admin.py::test_*']\n")
    result = cli("scan", "--no-cache", "--format", "json", ".", cwd=root)
    findings = json.loads(result.stdout)["findings"]
    assert [(f["path"], f["line"], f["rule"]) for f in findings] == [
        ("app/admin.py", 16, "LLM004"), ("app/chat.py", 8, "LLM004")]  # show_profile is not declared
    assert result.returncode == 1


DEV_TOOLING_APP = {
    "app/__init__.py": "",
    "app/files.py": """
        def read_source(name):
            with open(name) as f:
                return f.read()

        def write_source(name, text):
            with open(name, "w") as f:
                f.write(text)
        """,
    "app/dev_server.py": """
        from fastapi import FastAPI
        from app.files import write_source

        class DevServer:
            def register(self, app: FastAPI):
                @app.put("/files/{name}")
                async def save_file(name: str, text: str):
                    write_source(name, text)
        """,
    "app/api.py": """
        from fastapi import FastAPI
        from app.files import read_source
        app = FastAPI()

        @app.get("/dev/apps/{name}/source")
        async def show_source(name: str):
            return read_source(name)

        @app.get("/devices/{name}")
        async def device(name: str):
            return read_source(name)
        """,
}


def contexts_and_routes(root) -> dict[tuple[str, int], tuple[str, str]]:
    """(path, line) -> (context, entry route) of every finding in any context."""
    return {(f.path, f.line): (f.extra["context"], f.extra["entry"]["route"]) for f in scan(root, every_context=True)}


def test_developer_tooling_routes_count_as_control_plane(tmp_path):
    """Routes with a `dev` segment (`/dev/apps/...`) and routes of a `dev_server` module / `DevServer` class
    serve a developer's tooling (entrypoints.yaml `dev_tooling`): what only they reach is `control-plane`.
    `/devices/...` is no dev route: the helper it shares stays `serving` there."""
    root = write(tmp_path, DEV_TOOLING_APP)
    contexts = contexts_and_routes(root)
    assert contexts[("app/dev_server.py", 9)] == ("control-plane", "PUT /files/{name}")
    assert contexts[("app/api.py", 8)] == ("control-plane", "GET /dev/apps/{name}/source")
    assert contexts[("app/api.py", 12)] == ("serving", "GET /devices/{name}")
    assert found(scan(root)) == [("app/api.py", 12, "LLM004")]


def test_dev_tooling_words():
    from llmdoctor.scan.project.knowledge import EntryKnowledge
    knowledge = EntryKnowledge(dev_route_segments=frozenset({"dev", "dev-ui"}), dev_name_words=frozenset({"dev"}))
    assert knowledge.dev_tooling("src/adk/cli/_dev_deploy.py", "register.deploy", "POST /deploy")
    assert knowledge.dev_tooling("app/server.py", "DevServer._register_dev_endpoints.create_test", "")
    assert knowledge.dev_tooling("app/server.py", "assets", "GET /dev-ui/assets/config.json")
    assert not knowledge.dev_tooling("app/devices.py", "DeviceServer.develop", "GET /api/devices/{id}")
    assert not EntryKnowledge().dev_tooling("app/dev.py", "chat", "POST /dev")



ADMIN_CONSOLE_APP = {
    "app/__init__.py": "",
    "app/store.py": """
        import sqlite3

        def count_users():
            return sqlite3.connect("app.db").execute("select count(*) from users").fetchone()
        """,
    "app/admin.py": """
        from fastapi import APIRouter
        from app.store import count_users
        router = APIRouter(prefix="/api/admin")

        @router.get("/stats")
        async def stats():
            return count_users()

        @router.get("/progress")
        async def progress():
            return count_users()
        """,
    "app/ops.py": """
        from flask import Blueprint
        from app.store import count_users
        ops = Blueprint("ops", __name__, url_prefix="/admin/")

        @ops.route("/users")
        async def users():
            return str(count_users())
        """,
    "app/main.py": """
        from fastapi import FastAPI
        from app.admin import router
        from app.store import count_users
        app = FastAPI()
        app.include_router(router)

        @app.get("/administrators/online")
        async def online():
            return count_users()

        @app.post("/setup/llm")
        async def setup_llm():
            return count_users()

        @app.get("/api/config")
        async def config():
            return count_users()

        @app.get("/settings")
        async def settings():
            return count_users()

        @app.post("/api/seed")
        async def seed():
            return count_users()

        @app.get("/api/status")
        async def status():
            return count_users()

        @app.get("/api/providers/{name}/models")
        async def provider_models(name: str):
            return count_users()
        """,
}


def test_admin_console_routes_count_as_control_plane(tmp_path):
    """A route with an `admin` segment, also one its router's or blueprint's prefix gives
    (`APIRouter(prefix=...)`, `Blueprint(url_prefix=...)`), serves an admin console (entrypoints.yaml
    `admin_console`): what only it reaches is `control-plane`. `/administrators/...` has no such segment: the
    helper it shares is `serving` through it. The operator's set-up and configuration routes (`/setup/...`,
    `/.../config`) are admin routes too, and so are a one-time seed (`/api/seed`) and the model providers' set-up
    (`/api/providers/...`); a user's `/settings` and a status route a chat UI polls are not."""
    root = write(tmp_path, ADMIN_CONSOLE_APP)
    contexts = contexts_and_routes(root)
    assert contexts[("app/admin.py", 8)] == ("control-plane", "GET /api/admin/stats")
    assert contexts[("app/admin.py", 12)] == ("control-plane", "GET /api/admin/progress")
    assert contexts[("app/ops.py", 8)] == ("control-plane", "/admin/users")
    assert contexts[("app/main.py", 10)] == ("serving", "GET /administrators/online")
    assert contexts[("app/main.py", 14)] == ("control-plane", "POST /setup/llm")
    assert contexts[("app/main.py", 18)] == ("control-plane", "GET /api/config")
    assert contexts[("app/main.py", 22)] == ("serving", "GET /settings")
    assert contexts[("app/main.py", 26)] == ("control-plane", "POST /api/seed")
    assert contexts[("app/main.py", 30)] == ("serving", "GET /api/status")
    assert contexts[("app/main.py", 34)] == ("control-plane", "GET /api/providers/{name}/models")
    assert found(scan(root)) == [("app/main.py", 10, "LLM004"), ("app/main.py", 22, "LLM004"),
                                 ("app/main.py", 30, "LLM004")]


def test_an_entry_point_only_administrators_reach_is_admin_console(tmp_path):
    """faithful's `@is_admin()` slash commands (upload or remove the persona's example messages) and a web app's
    `@admin_required` route: the decorator says only administrators get in (entrypoints.yaml
    `admin_console.guards`), so what only they reach is `control-plane`; `@login_required` lets every user in."""
    root = write(tmp_path, {"app/__init__.py": "", "app/store.py": """
        def reload_messages():
            with open("messages.txt") as saved:
                return saved.read().splitlines()
        """, "app/bot.py": """
        from discord.ext import commands
        from app.store import reload_messages
        bot = commands.Bot(command_prefix="!")

        @bot.command()
        @commands.is_owner()
        async def reload(ctx):
            reload_messages()
        """, "app/web.py": """
        from flask import Flask
        from app.auth import admin_required, login_required
        from app.store import reload_messages
        app = Flask(__name__)

        @app.post("/messages/reload")
        @admin_required
        async def reload_all():
            return str(reload_messages())

        @app.get("/messages")
        @login_required
        async def messages():
            return str(reload_messages())
        """, "app/auth.py": """
        def admin_required(view):
            return view

        def login_required(view):
            return view
        """})
    contexts = {(f.path, f.line): f.extra["context"] for f in scan(root, every_context=True)}
    assert contexts == {("app/bot.py", 9): "control-plane", ("app/web.py", 10): "control-plane",
                        ("app/web.py", 15): "serving"}
    assert found(scan(root)) == [("app/web.py", 15, "LLM004")]


def test_a_health_probe_s_route_runs_once_per_probe_period(tmp_path):
    """`/health`, `/healthz`...: a load balancer asks it once per probe period (entrypoints.yaml `probes`), so what
    only it reaches is `scheduled` (judged false on real code: actflare's and zaniidb's counts, agent-framework's
    small file read): a client built per probe is not reported, a probe that waits on a peer on the event loop
    is (every request on the loop waits with it), and a helper a request also reaches stays `serving`."""
    root = write(tmp_path, {"app/__init__.py": "", "app/checks.py": """
        import json
        import requests

        def read_marker():
            with open("index/marker.json") as marker:
                return json.load(marker)

        def upstream_ok():
            return requests.get("http://127.0.0.1:8000/health", timeout=2).ok
        """, "app/main.py": """
        from fastapi import FastAPI
        from app.checks import read_marker, upstream_ok
        app = FastAPI()

        @app.get("/healthz")
        async def healthz():
            return {"index": read_marker(), "upstream": upstream_ok()}

        @app.get("/api/status")
        async def status():
            return upstream_ok()
        """})
    findings = scan(root)
    assert [(f.path, f.line, f.rule, f.extra["context"], f.extra["call"]) for f in findings] == [
        ("app/checks.py", 10, "LLM003", "serving", "requests.get"),
        ("app/main.py", 8, "LLM004", "scheduled", "requests.get"),
        ("app/main.py", 12, "LLM004", "serving", "requests.get")]
    assert findings[1].extra["entry"]["route"] == "GET /healthz"
    every = {(f.line, f.extra["call"]): f.extra["context"] for f in scan(root, every_context=True)
             if f.path == "app/main.py"}
    assert every[(8, "builtins.open")] == "scheduled"  # the marker read: a local file, once per probe


def test_admin_console_segments():
    from llmdoctor.scan.project.knowledge import EntryKnowledge
    knowledge = EntryKnowledge(admin_route_segments=frozenset({"admin"}))
    assert knowledge.admin_console("GET /api/admin/users/{user_id}")
    assert knowledge.admin_console("GET /Admin")
    assert not knowledge.admin_console("GET /administrators/online")
    assert not knowledge.admin_console("POST /v1/chat/completions")
    assert not EntryKnowledge().admin_console("GET /admin")

TYPE_BRANCH_APP = {
    "app/__init__.py": "",
    "app/content.py": """
        from pathlib import Path

        def load_file(path):
            return Path(path).read_bytes()

        def parts(*items, role="user"):
            out = []
            for item in items:
                if isinstance(item, str):
                    out.append({"role": role, "text": item})
                elif isinstance(item, Path):
                    out.append({"role": role, "data": load_file(item)})
            return out

        def user(*items):
            return parts(*items, role="user")

        def one(message: str | Path):
            if isinstance(message, Path):
                return load_file(message)
            return message
        """,
    "app/api.py": """
        from pathlib import Path
        from fastapi import FastAPI
        from app.content import one, user
        app = FastAPI()

        @app.post("/chat")
        async def chat(message: str, tries: int = 1):
            first = user(message)
            note = f"try {tries}"
            second = user(note, "literal", str(tries))
            third = one("text")
            return first, second, third

        @app.post("/upload")
        async def upload(name: str):
            return user(Path("uploads") / name), one(Path(name))

        @app.post("/any")
        async def anything(item):
            return user(item)
        """,
}


def test_a_branch_the_arguments_type_never_takes_is_not_followed(tmp_path):
    """`parts` reads a file only for a `Path` item (`isinstance(item, Path)` over its `*items`), through `user`
    that hands its `*items` on: a `str` argument (annotated, an f-string, a literal, `str(...)`) never takes the
    branch; an argument of unknown type, or a `Path`, may."""
    root = write(tmp_path, TYPE_BRANCH_APP)
    findings = [(f.line, f.column) for f in scan(root) if f.rule == "LLM004"]
    assert findings == [(17, 12), (17, 42), (21, 12)]  # upload: both calls; anything: its unknown item


def test_argument_types_in_the_index():
    import ast

    from llmdoctor.scan.project.index import index_module
    source = textwrap.dedent(TYPE_BRANCH_APP["app/content.py"]) + textwrap.dedent("""
        def caller(message: str, path, *rest: int):
            text = "a" + message
            parts(message, path, text, "-".join(rest), *rest)
        """)
    module = index_module(source, ast.parse(source))
    calls = {(f.name, c.text): c for f in module.functions for c in f.calls}
    assert calls[("parts", "load_file")].guards == ("isinstance:items:*0:Path",)
    assert calls[("user", "parts")].types == ("*0=@items:*0", "role=str")
    assert calls[("one", "load_file")].guards == ("isinstance:message:0:Path",)
    assert calls[("caller", "parts")].types == ("0=str@message:0", "1=@path:1", "2=str", "3=str", "*4=int@rest:*2")


def test_a_method_handed_to_a_project_function_that_keeps_it_does_not_run_there(tmp_path):
    """`self.register(self.search)` in `__init__`: `register` stores the method in a `Function` (a class), so
    the tool runs when an agent calls it, not when the toolkit is built: `unknown`, not `run-once`. A project
    function that calls what it is handed (`run_now`) runs it in its caller's context."""
    root = write(tmp_path, {"app/__init__.py": "", "app/tools.py": """
        import requests

        class Function:
            def __init__(self, name, entrypoint):
                self.name, self.entrypoint = name, entrypoint

        class Toolkit:
            def __init__(self):
                self.functions = {}

            def register(self, function, sanitize=True):
                self.functions[function.__name__] = Function(name=function.__name__, entrypoint=function)

        class Search(Toolkit):
            def __init__(self):
                super().__init__()
                self.register(self.search)
                run_now(self.warm_up)

            def search(self, query):
                return requests.get("https://api.example.com/search", params={"q": query}).text

            def warm_up(self):
                return requests.get("https://api.example.com/ping").status_code

        def run_now(step):
            return step()

        if __name__ == "__main__":
            Search()
        """})
    findings = scan(root, every_context=True)
    contexts = {(f.line, f.rule): f.extra["context"] for f in findings}
    assert contexts[(22, "LLM006")] == "unknown"  # search: a tool, run whenever an agent calls it
    assert contexts[(25, "LLM006")] == "run-once"  # warm_up: run by run_now while the toolkit is built
    # a search tool is called once per query (entrypoints.yaml library_api): its per-call pool is reported too
    assert [(f.line, f.rule) for f in scan(root)] == [(22, "LLM003"), (22, "LLM006")]


def test_an_element_of_an_annotated_container_attribute_is_an_instance_of_its_type(tmp_path):
    """`rag_agents: List[RAGAgent]` kept on `self`: `self.rag_agents[i].query()` reaches the agents' `query`
    (the abstract method's overrides), so their per-call client is on the route's path."""
    root = write(tmp_path, {"app/__init__.py": "", "app/agents.py": """
        import abc
        import requests

        class RAGAgent(abc.ABC):
            @abc.abstractmethod
            def query(self, q): ...

        class WebAgent(RAGAgent):
            def query(self, q):
                return requests.get("https://search.example/api", params={"q": q}, timeout=5).json()
        """, "app/router.py": """
        from typing import Dict, List
        from app.agents import RAGAgent

        class Router:
            def __init__(self, agents: List[RAGAgent], named: Dict[str, RAGAgent]):
                self.agents = agents
                self.named = named

            def query(self, q, i):
                return self.agents[i].query(q)

            def by_name(self, q, name):
                return self.named[name].query(q)
        """, "app/main.py": """
        from fastapi import FastAPI
        from app.router import Router
        app = FastAPI()
        router = Router([], {})

        @app.get("/query")
        def query(q: str):
            return router.query(q, 0)
        """})
    llm003 = [f for f in scan(root) if f.rule == "LLM003"]
    assert found(llm003) == [("app/agents.py", 11, "LLM003")]
    assert [step["function"] for step in llm003[0].extra["via"]] == ["query", "Router.query", "WebAgent.query"]


def test_coroutines_gathered_from_a_list_run_beside_each_other(tmp_path):
    """`tasks = [self.search(q) for q in queries]; await asyncio.gather(*tasks)` under `asyncio.run` in a sync
    route: the gathered searches share that loop, so a blocking call in one holds the others back."""
    root = write(tmp_path, {"app.py": """
        import asyncio
        import time
        from fastapi import FastAPI
        app = FastAPI()

        class Searcher:
            async def search(self, q):
                time.sleep(0.2)
                return q

            async def search_all(self, queries):
                tasks = [self.search(q) for q in queries]
                return await asyncio.gather(*tasks)

        searcher = Searcher()

        @app.get("/search")
        def search(q: str):
            return asyncio.run(searcher.search_all([q, q + "!"]))
        """})
    assert found(scan(root), "LLM004") == [("app.py", 9, "LLM004")]


def test_a_method_handed_to_a_constructor_is_not_run_by_it(tmp_path):
    """`super().__init__(combine=self._combine)` keeps the method for later calls (as `Tool(function=f)`
    does): `_combine` does not become run-once code because `__init__` runs once."""
    root = write(tmp_path, {"app.py": """
        import logging
        from openai import OpenAI
        logger = logging.getLogger(__name__)
        client = OpenAI()

        class Operator:
            def __init__(self, combine):
                self.combine = combine

        class Evaluator(Operator):
            def __init__(self):
                super().__init__(combine=self._combine)

            def _combine(self, question):
                answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
                logger.info("answer: %s", answer.choices[0].message.content)
        """})
    every = {(f.line, f.rule): f.extra["context"] for f in scan(root, every_context=True)}
    assert every[(17, "LLM005")] == "unknown"


SCHEDULER = """
    import requests
    from pathlib import Path
    from apscheduler.schedulers.asyncio import AsyncIOScheduler
    from fastapi import FastAPI
    app = FastAPI()
    scheduler = AsyncIOScheduler()

    async def tick():
        wishes = Path("wishlist.json").read_text()  # a small file once per period: not reported
        requests.post("https://hooks.example/tick", data=wishes)  # waits on a peer: reported, and no timeout

    async def catch_up():
        Path("backlog.json").read_text()

    @app.on_event("startup")
    async def start():
        scheduler.add_job(tick, "interval", minutes=5)
        scheduler.add_job(catch_up, trigger="date")  # runs once, now: not a periodic job
        scheduler.start()
    """


def test_a_job_a_scheduler_repeats_is_scheduled_and_reports_only_what_waits_on_more_than_a_file(tmp_path):
    root = write(tmp_path, {"app.py": SCHEDULER})
    every = [(f.line, f.rule, f.extra["context"]) for f in scan(root, every_context=True)]
    assert every == [(10, "LLM004", "scheduled"), (11, "LLM003", "scheduled"), (11, "LLM004", "scheduled"),
                     (11, "LLM006", "scheduled"), (14, "LLM004", "unknown")]
    assert [(f.line, f.rule) for f in scan(root)] == [(11, "LLM004"), (11, "LLM006"), (14, "LLM004")]


@pytest.mark.parametrize("registration", [
    "import schedule\nschedule.every(5).minutes.do(tick)\n",
    "from fastapi_utils.tasks import repeat_every\nrepeat_every(seconds=300)(tick)\n",
    "import aiocron\naiocron.crontab('*/5 * * * *', func=tick)\n",
    ("from apscheduler.schedulers.background import BackgroundScheduler\nBackgroundScheduler().add_job(tick, 'cron',"
     " minute='*/5')\n"),
])
def test_the_documented_schedulers_make_a_job_scheduled(tmp_path, registration):
    root = write(tmp_path, {"jobs.py": "from pathlib import Path\n\nasync def tick():\n"
                                      "    Path('state.json').read_text()\n\n" + registration})
    assert [(f.line, f.extra["context"]) for f in scan(root, every_context=True)] == [(4, "scheduled")]
    assert scan(root) == []


def test_a_decorated_job_is_scheduled_and_a_route_reaching_its_helper_still_serves(tmp_path):
    root = write(tmp_path, {"app.py": """
        from pathlib import Path
        from fastapi import FastAPI
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        app = FastAPI()
        scheduler = AsyncIOScheduler()

        def load_plan():
            return Path("plan.json").read_text()

        @scheduler.scheduled_job("cron", hour=0, minute=1)
        async def plan_the_day():
            load_plan()

        @app.get("/plan")
        async def plan():
            return load_plan()
        """})
    findings = scan(root, every_context=True)
    assert [(f.line, f.extra["context"]) for f in findings] == [(13, "scheduled"), (17, "serving")]
    assert [f.line for f in scan(root)] == [17]


def test_a_warm_run_replays_the_scheduled_jobs_of_unchanged_modules(tmp_path):
    root = write(tmp_path, {"app.py": SCHEDULER, "other.py": "def helper():\n    return 1\n"})
    cold = scan(root, cache=True)
    (root / "other.py").write_text("def helper():\n    return 2\n")  # same interface: app.py's links replay
    warm = scan(root, cache=True)
    assert warm == cold and [(f.line, f.rule) for f in warm] == [(11, "LLM004"), (11, "LLM006"), (14, "LLM004")]


def test_a_hook_assigned_to_an_attribute_registers_as_the_call_would_and_is_not_called_there(tmp_path):
    """folderbot's `self.application.post_init = self._post_init`: python-telegram-bot runs it once before polling,
    as `ApplicationBuilder.post_init(callback)` would register it; the assignment itself runs nothing."""
    root = write(tmp_path, {"bot.py": """
        import json
        from telegram.ext import Application, CommandHandler

        class Bot:
            def __init__(self):
                self.application = Application.builder().token("T").build()

            async def _post_init(self, application):
                with open("versions.json") as f:
                    return json.load(f)

            async def status(self, update, context):
                self.application.post_shutdown = self._post_init
                await update.message.reply_text("ok")

            def run(self):
                self.application.post_init = self._post_init
                self.application.add_handler(CommandHandler("status", self.status))
                self.application.run_polling()
        """})
    assert [(f.line, f.extra["context"]) for f in scan(root, every_context=True)] == [(10, "run-once")]
    assert scan(root) == []
    assert scan(root, cache=True, every_context=True) == scan(root, cache=True, every_context=True)  # read back


def test_a_helper_s_return_annotation_types_its_result_unless_it_names_a_base_class(tmp_path):
    """vanna's `_resolve_path(...) -> Path`, then `file_path.write_text(...)` in an async tool, and folderbot's
    `get_services(context) -> FolderServices | None` (a class nothing derives from) whose `validate_path` gives
    the `Path` its tools read: the annotation types what the `return`s do not. A base class named there
    (`-> Store`, which `LocalStore` derives from) stands for any subclass and types nothing."""
    root = write(tmp_path, {"app.py": """
        from pathlib import Path
        from fastapi import FastAPI

        app = FastAPI()

        class Store:
            def save(self, data):
                with open("store.json", "w") as f:
                    f.write(data)

        class LocalStore(Store):
            pass

        class FolderServices:
            def validate_path(self, name: str) -> Path | None:
                return None if ".." in name else ROOT / name

        def upload_path(file_id: str) -> Path:
            return Path("/data") / file_id

        def store() -> Store:
            return STORES[0]

        def get_services(context) -> FolderServices | None:
            return context.services.get("folder")

        @app.post("/files/{file_id}")
        async def upload(file_id: str, data: str, context):
            upload_path(file_id).write_text(data)
            store().save(data)
            return get_services(context).validate_path(file_id).read_text()
        """})
    assert [(f.line, f.extra["call"]) for f in scan(root)] == [(30, "pathlib.Path.write_text"),
                                                               (32, "pathlib.Path.read_text")]


def test_a_class_built_by_its_constructor_or_a_from_classmethod_types_the_attribute(tmp_path):
    """agent-framework-lib's GCS backend: `self.client = storage.Client.from_service_account_json(path)` with a key
    file, else `storage.Client(project=...)`: a Client either way; two different classes leave it unknown."""
    root = write(tmp_path, {"app.py": """
        import httpx
        import requests
        from google.cloud import storage

        class GCSFiles:
            def __init__(self, key_file=None):
                if key_file:
                    self.client = storage.Client.from_service_account_json(key_file)
                else:
                    self.client = storage.Client()
                self.http = httpx.Client() if key_file else requests.Session()

            async def store(self, name, data):
                self.client.bucket("files").blob(name).upload_from_string(data)
                self.http.get("https://example.com", timeout=5)
        """})
    assert [(f.line, f.rule) for f in scan(root)] == [(15, "LLM004")]


@pytest.mark.parametrize("second_caller, reported", [
    ("", [(8, "LLM004"), (9, "LLM004")]),  # every caller passes the `runtime` module
    ("_handle(scope, other_runtime)", []),  # callers that disagree leave the parameter unknown
    ("callbacks.append(_handle)", []),  # handed over: callers the project does not show
])
def test_an_unannotated_parameter_is_what_every_caller_passes(tmp_path, second_caller, reported):
    """airlock-llm's batch middleware: `async def _handle_file_content(path, send, runtime)` called with the
    `runtime` module each time; `runtime.read_upload()` and the store's `get()` block the event loop."""
    root = write(tmp_path, {"app/__init__.py": "", "app/middleware.py": f"""
        from app import runtime, other_runtime

        callbacks = []

        async def _handle(scope, runtime):
            store = runtime.get_store()
            data = runtime.read_upload(scope["file_id"])
            return store.get(data)

        class Middleware:
            async def __call__(self, scope, receive, send):
                await _handle(scope, runtime)
                {second_caller}
        """, "app/runtime.py": """
        import sqlite3

        class Store:
            def get(self, key):
                return sqlite3.connect("/var/app.db").execute("SELECT 1 WHERE ?", (key,)).fetchone()

        def get_store():
            return Store()

        def read_upload(file_id):
            with open(f"/uploads/{file_id}") as f:
                return f.read()
        """, "app/other_runtime.py": """
        def get_store():
            return None

        def read_upload(file_id):
            return b""
        """, "app/asgi.py": """
        from app.middleware import Middleware
        from starlette.applications import Starlette
        app = Starlette()
        app.add_middleware(Middleware)
        """})
    assert [(line, rule) for path, line, rule in found(scan(root)) if path.endswith("middleware.py")] == reported


def test_a_with_over_a_contextmanager_helper_runs_its_body_up_to_the_yield(tmp_path):
    """link-project-to-chat's relay store, xinference's download store: `with self._connect() as db:` where
    `_connect` is a `@contextmanager` generator that opens the SQLite connection before its `yield`."""
    root = write(tmp_path, {"app.py": """
        import sqlite3
        from contextlib import contextmanager
        from fastapi import FastAPI
        app = FastAPI()

        class Store:
            @contextmanager
            def _connect(self):
                conn = sqlite3.connect("/var/app.db")
                try:
                    yield conn
                finally:
                    conn.close()

            def rows(self):
                for row in self._rows():
                    yield row

            def _rows(self):
                yield from ()

            def bump(self, key):
                with self._connect() as db:
                    db.execute("UPDATE t SET n = n + 1 WHERE k = ?", (key,))

        store = Store()

        @app.post("/bump/{key}")
        async def bump(key: str):
            store.bump(key)
            store.rows()  # a plain generator: calling it runs nothing
        """})
    assert found(scan(root), "LLM004") == [("app.py", 31, "LLM004")]


def test_self_in_a_mixin_is_the_class_deriving_from_it_and_super_looks_up(tmp_path):
    """A mixin's method uses what the class built from it has (`self.runtime`, set by the base it is mixed
    with); `super().__init__()` of a class whose base has no `__init__` of its own is `object`'s, never a
    sibling subclass's."""
    root = write(tmp_path, {
        "app/store.py": """
            import json

            class Store:
                def load(self):
                    with open("state.json") as f:
                        return json.load(f)
            """,
        "app/router.py": """
            import subprocess

            from app.store import Store

            class Serializable:
                pass

            class Message(Serializable):
                def __init__(self, text):
                    super().__init__()
                    self.text = text

            class Checkout(Serializable):
                def __init__(self):
                    self.status = subprocess.run(["git", "status"], capture_output=True).stdout

            class GitCommandsMixin:
                async def handle_status(self, update):
                    Message(update)
                    return self.store.load()

            class RouterBase:
                def __init__(self):
                    self.store = Store()

            class Router(GitCommandsMixin, RouterBase):
                pass
            """,
        "app/bot.py": """
            from telegram.ext import Application, CommandHandler
            from app.router import Router

            def build(token):
                app = Application.builder().token(token).build()
                router = Router()
                app.add_handler(CommandHandler("status", router.handle_status))
                return app
            """,
    })
    findings = scan(root)
    assert found(findings, "LLM004") == [("app/router.py", 21, "LLM004")]
    (finding,) = findings
    assert finding.extra["context"] == "serving"
    assert [step["function"] for step in finding.extra["via"]][-1] == "Store.load"


def test_a_module_named_like_a_framework_does_not_shadow_it_for_its_siblings(tmp_path):
    """`from telegram.ext import CommandHandler` inside `app/runners/telegram.py` is python-telegram-bot (an
    absolute import), not the module itself: its handlers are entry points."""
    root = write(tmp_path, {
        "app/__init__.py": "",
        "app/runners/__init__.py": "",
        "app/runners/telegram.py": """
            from telegram.ext import ApplicationBuilder, CommandHandler

            def save_user():
                with open("user.pkl", "wb") as f:
                    f.write(b"x")

            class Bot:
                async def new_thread(self, update, context):
                    save_user()

                def run(self):
                    app = ApplicationBuilder().token("t").build()
                    app.add_handler(CommandHandler("new_thread", self.new_thread))
                    app.run_polling()

            if __name__ == "__main__":
                Bot().run()
            """,
    })
    (finding,) = scan(root)
    assert (finding.path, finding.line, finding.rule) == ("app/runners/telegram.py", 10, "LLM004")
    assert finding.extra["context"] == "serving" and finding.extra["entry"]["framework"] == "telegram"


def test_an_item_of_a_tuple_in_an_annotated_list_has_the_item_s_type(tmp_path):
    """From freeride-gateway (core/failover.py): the failover walk takes `chain: list[tuple[Provider, list[str]]]`
    and unpacks each element (`for provider, keys in chain`), so `provider.forward_chat_stream(...)` is every
    provider's stream, each of which opens a client per request; the other item (`keys`) is not a provider."""
    root = write(tmp_path, {"app/__init__.py": "", "app/providers.py": """
        from typing import AsyncIterator, Protocol
        import httpx

        class Provider(Protocol):
            def forward_chat_stream(self, body: dict) -> AsyncIterator[str]:
                ...

            def classify(self, status: int) -> str:
                ...

        class OpenAIProvider:
            async def forward_chat_stream(self, body):
                async with httpx.AsyncClient(timeout=30) as client:
                    async with client.stream("POST", "https://api.openai.com/v1/chat/completions", json=body) as resp:
                        async for line in resp.aiter_lines():
                            yield line

            def classify(self, status):
                return "retry" if status == 429 else "fail"
        """, "app/failover.py": """
        from app.providers import Provider

        async def try_stream(chain: list[tuple[Provider, list[str]]], body: dict):
            for provider, keys in chain:
                gen = provider.forward_chat_stream(body)
                first = await gen.__anext__()
                keys.forward_chat_stream(body)
                return first, gen
        """, "app/server.py": """
        from fastapi import FastAPI
        from app.failover import try_stream
        from app.providers import OpenAIProvider
        app = FastAPI()
        CHAIN = [(OpenAIProvider(), ["key"])]

        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            return await try_stream(CHAIN, body)
        """})
    findings = [f for f in scan(root) if f.rule == "LLM003"]
    assert [(f.path, f.line, f.extra["context"]) for f in findings] == [("app/providers.py", 14, "serving")]
    assert [step["function"] for step in findings[0].extra["via"]] == [
        "chat", "try_stream", "OpenAIProvider.forward_chat_stream"]


def test_a_returned_tuple_s_item_given_differently_by_two_returns_is_either(tmp_path):
    """From lestrade (llm/__init__.py): `get_llm` returns `(_ollama, name)` for a local model and `(_openai, model)`
    otherwise; the route's `llm, model = get_llm(...)` is either client, and the Ollama one opens a client per
    streamed completion; a function returning the OpenAI client either way reaches only its kept client."""
    root = write(tmp_path, {"app/__init__.py": "", "app/llm.py": """
        import httpx

        class OllamaLLM:
            async def chat_stream(self, model, messages):
                async with httpx.AsyncClient(timeout=60) as client:
                    async with client.stream("POST", "http://localhost:11434/api/chat", json=messages) as resp:
                        async for line in resp.aiter_lines():
                            yield line

        class OpenAILLM:
            def __init__(self):
                self.client = httpx.AsyncClient(timeout=60)

            async def chat_stream(self, model, messages):
                async with self.client.stream("POST", "https://api.openai.com/v1/chat/completions") as resp:
                    async for line in resp.aiter_lines():
                        yield line

        _ollama = OllamaLLM()
        _openai = OpenAILLM()

        def get_llm(model):
            if model.startswith("ollama/"):
                return _ollama, model.split("/", 1)[1]
            return _openai, model

        def get_remote(model):
            if model.startswith("openai/"):
                return _openai, model.split("/", 1)[1]
            return _openai, model
        """, "app/server.py": """
        from fastapi import FastAPI
        from fastapi.responses import StreamingResponse
        from app.llm import get_llm, get_remote
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            llm, model = get_llm(body["model"])
            return StreamingResponse(llm.chat_stream(model, body["messages"]))

        @app.post("/v2/chat/completions")
        async def chat_remote(body: dict):
            llm, model = get_remote(body["model"])
            return StreamingResponse(llm.chat_stream(model, body["messages"]))
        """})
    findings = [(f.path, f.line, f.extra["entry"]["route"]) for f in scan(root) if f.rule == "LLM003"]
    assert findings == [("app/llm.py", 6, "POST /v1/chat/completions")]


def test_a_default_hook_that_gives_back_its_argument_stands_for_its_overrides(tmp_path):
    """From petsitter (trick.py, proxy.py): `Trick.pre_hook(self, context, params)` only returns `context`; the
    proxy's handler runs each configured trick's hook, and what runs is a subclass's override, one of which calls
    the model again with a sync httpx client on the loop. A default with a body of its own (`return []`) is no
    stand-in: a call on the base runs it."""
    root = write(tmp_path, {"app/__init__.py": "", "app/tricks.py": """
        import httpx

        class Trick:
            def pre_hook(self, context: list, params: dict) -> list:
                \"\"\"Modify context before it reaches the model.\"\"\"
                return context

            def tools(self) -> list:
                return []

        class Politeify(Trick):
            def pre_hook(self, context, params):
                with httpx.Client(timeout=30) as client:
                    reply = client.post("http://localhost:8080/v1/chat/completions", json={"messages": context})
                return context + [reply.json()]

            def tools(self):
                return [httpx.get("http://localhost:8080/tools", timeout=5).json()]
        """, "app/server.py": """
        from fastapi import FastAPI
        from app.tricks import Trick
        app = FastAPI()
        TRICKS: list[Trick] = []

        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            context = body["messages"]
            for trick in TRICKS:
                context = trick.pre_hook(context, body)
                body["tools"] = trick.tools()
            return context
        """})
    assert [(f.path, f.line) for f in scan(root) if f.rule == "LLM004"] == [("app/server.py", 11)]
