"""bench/client_build_cost.py and bench/password_hash_cost.py, the sources of the boto3 build times LLM003 quotes
and the bcrypt times LLM004 quotes: their bad input is a message and exit code 2, not a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("script, unit", [("client_build_cost.py", "builds"), ("password_hash_cost.py", "calls")])
@pytest.mark.parametrize("repeat", ["0", "-3", "x"])
def test_a_repeat_that_is_not_a_positive_count_is_refused(script, unit, repeat):
    result = run(script, "--repeat", repeat)
    assert result.returncode == 2
    assert f"argument --repeat: '{repeat}' is not a whole number of {unit}, 1 or more" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(importlib.util.find_spec("boto3") is not None, reason="boto3 is installed here")
def test_without_boto3_it_says_how_to_get_it():
    result = run("client_build_cost.py")
    assert (result.returncode, result.stderr.strip()) == (2, "boto3 is not installed: pip install boto3")


@pytest.mark.skipif(importlib.util.find_spec("bcrypt") is not None, reason="bcrypt is installed here")
def test_without_bcrypt_it_says_how_to_get_it():
    result = run("password_hash_cost.py")
    assert (result.returncode, result.stderr.strip()) == (2, "bcrypt is not installed: pip install bcrypt")
