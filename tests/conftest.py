"""Shared test helpers: run the installed `llmdoctor` command as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


def llmdoctor_executable() -> str:
    """The console script installed next to this interpreter (the venv the test command built)."""
    candidate = Path(sys.executable).with_name("llmdoctor")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("llmdoctor")
    if not found:
        pytest.fail("the llmdoctor command is not installed: run ./scripts/test.sh")
    return found


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_llmdoctor(*args: str, cwd: Path | str | None = None, input: str | None = None,
                  env: dict | None = None, timeout: float = 120) -> Result:
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    full_env.pop("FORCE_COLOR", None)
    full_env.pop("CI", None)  # the scan cache reads differently in CI (docs/reliability.md); tests set it explicitly
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [llmdoctor_executable(), *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """Tests run the same on a CI runner (which sets CI=true) as on a laptop; a test that needs CI sets it."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def cli():
    """`cli("scan", "x.py", cwd=tmp_path)` runs the installed command and returns a Result."""
    return run_llmdoctor
