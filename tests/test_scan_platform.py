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
