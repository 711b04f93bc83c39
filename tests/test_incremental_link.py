"""Incremental linking (llmdoctor/scan/project/incremental.py): a warm run re-links only the changed modules
when their interfaces are unchanged, and its findings are always those of a cold (`--no-cache`) run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan

ROUTES = """
    from fastapi import FastAPI
    from app.helpers import load, other
    app = FastAPI()

    @app.get("/users/{uid}")
    async def get_user(uid: int):
        return load(uid)

    @app.get("/other")
    async def get_other():
        return other()
    """
HELPERS = """
    import time

    def load(uid):
        time.sleep(1)
        return uid

    def other():
        return 1
    """
QUIET = HELPERS.replace("time.sleep(1)", "time.time()")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    write(root, {"app/__init__.py": "", "app/routes.py": ROUTES, "app/helpers.py": HELPERS,
                 "app/unrelated.py": "def f():\n    return 2\n"})
    return root


def scan(root: Path, *paths: str, cache: bool = True) -> tuple[list, ScanExecutor]:
    executor = ScanExecutor(jobs=1, use_cache=cache)
    report = run_scan(list(paths) or ["."], ScanOptions(cwd=str(root), isolated=True), analyze=executor)
    return [(f.path, f.line, f.rule, json.dumps(f.extra, sort_keys=True)) for f in report.findings], executor


def same_as_cold(root: Path, *paths: str) -> tuple[list, int]:
    """The warm run's findings (asserted equal to a --no-cache run's) and how many modules it replayed."""
    warm, executor = scan(root, *paths)
    cold, _ = scan(root, *paths, cache=False)
    assert warm == cold
    return warm, executor.cache.stats.replayed


def lines(findings: list) -> list[tuple[str, int, str]]:
    return [f[:3] for f in findings]


def test_a_callee_changed_in_another_module_updates_the_caller_s_finding(project: Path) -> None:
    first, replayed = same_as_cold(project)
    assert lines(first) == [("app/routes.py", 8, "LLM004")] and replayed == 0
    write(project, {"app/helpers.py": QUIET})  # a body edit: same interface, helpers.py alone re-linked
    quiet, replayed = same_as_cold(project)
    assert quiet == [] and replayed == 3
    write(project, {"app/helpers.py": HELPERS})
    again, replayed = same_as_cold(project)
    assert again == first and replayed == 3
    # as pre-commit runs it: only the changed file is passed, the project around it is still the model
    write(project, {"app/helpers.py": QUIET})
    assert same_as_cold(project, "app/helpers.py") == ([], 3)
    assert lines(same_as_cold(project, "app/routes.py")[0]) == []


def test_a_blocking_call_moved_into_another_callee_is_followed(project: Path) -> None:
    same_as_cold(project)
    write(project, {"app/helpers.py": QUIET.replace("return 1", "time.sleep(2)\n        return 1")})
    moved, replayed = same_as_cold(project)
    assert lines(moved) == [("app/routes.py", 12, "LLM004")] and replayed == 3
    assert "app/helpers.py" in moved[0][3]  # the chain names the helper's new blocking line


def test_renaming_or_removing_a_function_invalidates_its_callers(project: Path) -> None:
    first, _ = same_as_cold(project)
    assert lines(first) == [("app/routes.py", 8, "LLM004")]
    write(project, {"app/helpers.py": HELPERS.replace("def load(", "def load_user(")})
    renamed, replayed = same_as_cold(project)
    assert renamed == [] and replayed == 0  # another interface: the whole program is linked again
    write(project, {"app/helpers.py": HELPERS})
    assert same_as_cold(project) == (first, 0)  # the interface changed back: linked whole again
    write(project, {"app/helpers.py": "import time\n\ndef other():\n    return 1\n"})
    assert same_as_cold(project)[0] == []


def test_a_caller_changed_alone_is_re_linked_against_the_stored_callees(project: Path) -> None:
    same_as_cold(project)
    write(project, {"app/routes.py": ROUTES.replace("return other()", "load(2)\n        return other()")})
    found, replayed = same_as_cold(project)
    assert lines(found) == [("app/routes.py", 8, "LLM004"), ("app/routes.py", 12, "LLM004")] and replayed == 3
    write(project, {"app/routes.py": ROUTES})
    found, replayed = same_as_cold(project)
    assert lines(found) == [("app/routes.py", 8, "LLM004")] and replayed == 3
    write(project, {"app/routes.py": ROUTES.replace("async def get_other", "async def get_other_again")})
    found, replayed = same_as_cold(project)
    assert lines(found) == [("app/routes.py", 8, "LLM004")] and replayed == 0  # a renamed function: all


def test_a_class_decorator_registering_it_elsewhere_is_part_of_the_interface(project: Path) -> None:
    """A class registered by a decorator into another module's container changes what a call on that
    container reaches (ProjectModel._registries): adding or removing the decorator links the whole program."""
    registry = """
        registry = []

        def register(cls):
            registry.append(cls)
            return cls
        """
    plugin = """
        import time
        from app.registry import register

        class Plugin:
            def run(self):
                time.sleep(1)
        """
    routes = """
        from fastapi import FastAPI
        from app import plugin
        from app.registry import registry
        app = FastAPI()

        @app.get("/run")
        async def run():
            for cls in registry:
                cls().run()
        """
    write(project, {"app/registry.py": registry, "app/plugin.py": plugin, "app/routes.py": routes})
    assert same_as_cold(project) == ([], 0)
    write(project, {"app/plugin.py": plugin.replace("class Plugin", "@register\n        class Plugin")})
    registered, replayed = same_as_cold(project)
    assert lines(registered) == [("app/routes.py", 10, "LLM004")] and replayed == 0
    write(project, {"app/plugin.py": plugin})
    assert same_as_cold(project) == ([], 0)


def test_added_or_removed_modules_link_the_whole_program(project: Path) -> None:
    same_as_cold(project)
    write(project, {"app/extra.py": "from app.helpers import load\n\nasync def h():\n    load(1)\n"})
    found, replayed = same_as_cold(project)
    assert replayed == 0 and ("app/extra.py", 4, "LLM004") in lines(found)
    (project / "app" / "extra.py").unlink()
    assert same_as_cold(project)[1] == 0


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"magic":"llmdoctor-scan-cache","format":2}',
                                     "hostile"])
def test_a_corrupt_or_hostile_program_file_is_a_full_link(project: Path, content) -> None:
    first, _ = same_as_cold(project)
    (stored,) = (project / ".llmdoctor_cache").glob("program-*.json")
    if content == "hostile":  # our header, every edge pointing somewhere else
        data = json.loads(stored.read_text())
        for module in data["modules"].values():
            for node in module["p"]["n"]:
                node[1] = [["/elsewhere.py", 99, 0, 999]]
                node[2] = 10**6
        content = json.dumps(data).encode()
    stored.write_bytes(content)
    write(project, {"app/unrelated.py": "def f():\n    return 3\n"})
    again, replayed = same_as_cold(project)
    assert again == first and replayed == 0


def test_a_resolution_cycle_is_never_replayed(project: Path) -> None:
    # each class's base is an attribute of the other: resolving either needs the other's bases first
    write(project, {"app/loop.py": "class A(B.x):\n    pass\n\n\nclass B(A.y):\n    pass\n"})
    same_as_cold(project)
    (stored,) = (project / ".llmdoctor_cache").glob("program-*.json")
    assert json.loads(stored.read_text())["modules"] is None
    write(project, {"app/helpers.py": QUIET})
    assert same_as_cold(project) == ([], 0)


def test_a_start_up_hook_replayed_still_starts_its_task_beside_the_requests(project: Path) -> None:
    write(project, {"app/main.py": """
        import asyncio
        from fastapi import FastAPI
        from app.monitor import poll
        app = FastAPI()

        @app.on_event("startup")
        async def start():
            asyncio.create_task(poll())
        """, "app/monitor.py": """
        import asyncio

        async def poll():
            while True:
                with open("calls.log") as log:
                    log.read()
                await asyncio.sleep(60)
        """})
    first, _ = same_as_cold(project)
    assert ("app/monitor.py", 6, "LLM004") in lines(first)
    write(project, {"app/monitor.py": (project / "app/monitor.py").read_text().replace("60", "30")})
    again, replayed = same_as_cold(project)  # main.py's hook and task come from the replay
    assert again == first and replayed == 5


def test_a_blocking_call_on_a_parameter_is_decided_again_from_the_callers_each_run(project: Path) -> None:
    """`client.get(url)` in a helper blocks when every caller passes a requests.Session: the helper's module is
    replayed when only a caller changed, and what the caller passes now decides."""
    write(project, {"app/store.py": """
        def fetch(client, url):
            return client.get(url, timeout=5)
        """, "app/pages.py": """
        import httpx
        import requests
        from fastapi import FastAPI
        from app.store import fetch
        app = FastAPI()
        session = requests.Session()
        pool = httpx.AsyncClient()

        @app.get("/")
        async def index():
            return await fetch(pool, "https://example.com")
        """})
    first, _ = same_as_cold(project)
    assert ("app/pages.py", 12, "LLM004") not in lines(first)
    write(project, {"app/pages.py": (project / "app/pages.py").read_text().replace("await fetch(pool",
                                                                                   "fetch(session")})
    again, replayed = same_as_cold(project)  # store.py's link is replayed, its blocking call found again
    assert ("app/pages.py", 12, "LLM004") in lines(again) and replayed >= 1


def test_a_mixin_s_member_set_by_the_class_built_from_it_follows_that_class_s_edits(project: Path) -> None:
    """`self.store` in a mixin is what the class deriving from it sets (in another module): an edit there,
    the mixin's module unchanged, gives a warm run the cold run's findings."""
    write(project, {
        "app/stores.py": """
            import json

            class FileStore:
                def load(self):
                    with open("state.json") as f:
                        return json.load(f)

            class MemoryStore:
                def load(self):
                    return {}
            """,
        "app/mixin.py": """
            class StatusMixin:
                async def handle_status(self, update):
                    return self.store.load()
            """,
        "app/router.py": """
            from telegram.ext import Application, CommandHandler
            from app.mixin import StatusMixin
            from app.stores import FileStore, MemoryStore

            class Router(StatusMixin):
                def __init__(self):
                    self.store = FileStore()

            def build(token):
                app = Application.builder().token(token).build()
                app.add_handler(CommandHandler("status", Router().handle_status))
                return app
            """,
    })
    found, _ = same_as_cold(project)
    assert ("app/mixin.py", 4, "LLM004") in lines(found)
    router = (project / "app/router.py").read_text()
    (project / "app/router.py").write_text(router.replace("self.store = FileStore()", "self.store = MemoryStore()"))
    found, _ = same_as_cold(project)
    assert ("app/mixin.py", 4, "LLM004") not in lines(found)
    (project / "app/router.py").write_text(router)
    found, _ = same_as_cold(project)
    assert ("app/mixin.py", 4, "LLM004") in lines(found)
