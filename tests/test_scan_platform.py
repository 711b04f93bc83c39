"""Platform tests decide their branches (config `python-platform`, as pyright's `pythonPlatform` and mypy's
`--platform`): a branch the served platform rules out never runs, so no rule reports in it and the project
model follows no call out of it. Each test writes a small project and scans it as users do."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan

APP = """
    import os
    import platform
    import subprocess
    import sys

    import requests
    from fastapi import FastAPI

    app = FastAPI()
    IS_WINDOWS = sys.platform == "win32"


    def kill_tree(pid):
        if IS_WINDOWS:
            subprocess.run(["taskkill", "/T", "/PID", str(pid)])
        else:
            os.kill(pid, 9)


    def lock(handle):
        if os.name == "nt":
            subprocess.run(["icacls", handle])


    @app.post("/cancel")
    async def cancel(pid: int):
        kill_tree(pid)
        lock("state.json")
        if platform.system() == "Windows" and pid:
            requests.get("http://localhost:9/notify")
        version = subprocess.check_output(["ver"]) if sys.platform.startswith("win") else b""
        return version
    """
WINDOWS_ONLY = {  # (line, rule) of what only runs on Windows
    (28, "LLM004"), (29, "LLM004"), (31, "LLM003"), (31, "LLM004"), (31, "LLM006"), (32, "LLM004"),
}


def scan(root: Path, platform: str | None):
    setting = f"[tool.llmdoctor]\npython-platform = '{platform}'\n" if platform else ""
    (root / "pyproject.toml").write_text(f"[project]\nname = 'demo'\n{setting}")
    (root / "app.py").write_text(textwrap.dedent(APP))
    report = run_scan(["."], ScanOptions(cwd=str(root)), analyze=ScanExecutor(jobs=1, use_cache=False))
    return {(f.line, f.rule) for f in report.findings}


@pytest.mark.parametrize("platform", [None, "linux", "darwin"])
def test_windows_branches_do_not_run_on_posix(tmp_path, platform):
    assert scan(tmp_path, platform) == set()


@pytest.mark.parametrize("platform", ["win32", "all"])
def test_windows_and_all_keep_them(tmp_path, platform):
    assert scan(tmp_path, platform) == WINDOWS_ONLY


def test_a_name_bound_twice_or_mixed_tests_decide_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "app.py").write_text(textwrap.dedent("""
        import subprocess
        import sys

        IS_WINDOWS = sys.platform == "win32"
        IS_WINDOWS = True  # rebound: no longer the platform test


        async def handler(prompt):
            if IS_WINDOWS:
                subprocess.run(["a"])
            if sys.platform == "win32" or len(prompt) > 1000:
                subprocess.run(["b"])
        """))
    report = run_scan(["."], ScanOptions(cwd=str(tmp_path)), analyze=ScanExecutor(jobs=1, use_cache=False))
    assert sorted(f.line for f in report.findings) == [11, 13]


EARLY_EXIT = """
    import platform
    import subprocess
    import time

    from fastapi import FastAPI

    app = FastAPI()


    def discover_apps():
        apps = ["notepad"]
        if platform.system() != "Windows":
            return apps
        apps.extend(open("start_menu.lnk").read().split())
        return apps


    def suspend():
        system = platform.system()
        if system == "Windows":
            subprocess.run(["rundll32.exe", "powrprof.dll,SetSuspendState"])
        elif system == "Linux":
            subprocess.run(["systemctl", "suspend"])


    @app.post("/apps")
    async def apps_route():
        for name in discover_apps():
            if platform.system() == "Windows":
                continue
            time.sleep(0.1)
        suspend()
    """


@pytest.mark.parametrize(("platform", "reported"), [
    ("linux", {(32, "LLM004"), (33, "LLM004")}),
    ("win32", {(29, "LLM004"), (33, "LLM004")}),
    ("all", {(29, "LLM004"), (32, "LLM004"), (33, "LLM004")}),
])
def test_a_branch_that_leaves_the_block_and_a_local_name_decide_too(tmp_path, platform, reported):
    """`if platform.system() != "Windows": return` leaves the rest of the block to Windows; `system =
    platform.system()` reads the platform in the tests after it."""
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 'demo'\n[tool.llmdoctor]\npython-platform = '{platform}'\n")
    (tmp_path / "app.py").write_text(textwrap.dedent(EARLY_EXIT))
    report = run_scan(["."], ScanOptions(cwd=str(tmp_path)), analyze=ScanExecutor(jobs=1, use_cache=False))
    found = {(f.line, f.rule) for f in report.findings}
    assert found == reported, [(f.line, f.rule, f.message[:90]) for f in report.findings]
