"""The pre-commit hook, exercised with pre-commit's own `try-repo` against a temporary git repository.

pre-commit builds the hook's virtualenv from this repository (`pip install .` plus dependencies), so the
test needs the package index (or a warm pip cache). Without it the test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
HIT = "import time\n\n\nasync def handler():\n    time.sleep(1)\n"
CLEAN = "import asyncio\n\n\nasync def handler():\n    await asyncio.sleep(1)\n"
OFFLINE_SIGNS = ("Failed to establish a new connection", "No matching distribution found",
                 "Could not find a version that satisfies", "Temporary failure in name resolution")


def _pre_commit() -> str:
    candidate = Path(sys.executable).with_name("pre-commit")
    found = str(candidate) if candidate.exists() else shutil.which("pre-commit")
    if not found:
        pytest.skip("pre-commit is not installed (pip install '.[test]')")
    return found


def test_manifest_declares_the_hooks():
    check, fix = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert (check["id"], fix["id"]) == ("llmdoctor", "llmdoctor-fix")
    assert check["entry"] == "llmdoctor scan --force-exclude"
    assert fix["entry"] == "llmdoctor scan --force-exclude --fix"
    for hook in (check, fix):
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi"]
        assert hook["require_serial"] is True


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    """A git repository with one file that has a finding and one that is clean."""
    if not (REPO / ".git").exists():
        pytest.skip("needs the llmdoctor git checkout (try-repo clones it)")
    root = tmp_path_factory.mktemp("consumer")
    env = _git_env(tmp_path_factory.mktemp("home"))
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    (root / "bad.py").write_text(HIT)
    (root / "good.py").write_text(CLEAN)
    (root / "notes.txt").write_text("time.sleep in async def\n")
    subprocess.run(["git", "add", "."], cwd=root, check=True, env=env)
    return root, env


def _git_env(home: Path) -> dict:
    env = {**os.environ, "HOME": str(home), "PRE_COMMIT_HOME": str(home / "pre-commit"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid", "NO_COLOR": "1"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_INDEX_FILE", None)
    pip_cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    env["PIP_CACHE_DIR"] = str(pip_cache)  # keep the user's pip cache: the hook env installs faster
    return env


def _head() -> str:
    """The committed tree: try-repo would otherwise also pick up uncommitted edits of tracked files."""
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()


def _try_repo(consumer_root: Path, env: dict, *files: str, hook: str = "llmdoctor") -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [_pre_commit(), "try-repo", str(REPO), hook, "--ref", _head(), "--verbose", "--color", "never",
         "--files", *files],
        cwd=consumer_root, env=env, capture_output=True, text=True, timeout=900,
    )
    output = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1) or "An unexpected error has occurred" in output:
        if any(sign in output for sign in OFFLINE_SIGNS):
            pytest.skip("pre-commit could not install the hook environment (no package index here)")
    return proc


def test_hook_fails_on_a_finding_and_passes_on_clean_code(consumer):
    root, env = consumer
    failing = _try_repo(root, env, "bad.py", "good.py", "notes.txt")
    output = failing.stdout + failing.stderr
    assert failing.returncode == 1, output
    assert "bad.py:5:5: LLM004" in output
    assert "Failed" in output

    passing = _try_repo(root, env, "good.py", "notes.txt")
    output = passing.stdout + passing.stderr
    assert passing.returncode == 0, output
    assert "Passed" in output and "LLM004" not in output


def test_fix_hook_fixes_the_file_and_fails(consumer, cli):
    """As ruff's hook with --fix: the file is changed, and pre-commit fails the hook because it was (one
    try-repo run: each builds the hook's environment anew, ~15-25 s)."""
    root, env = consumer
    (root / "fixme.py").write_text(HIT)
    subprocess.run(["git", "add", "fixme.py"], cwd=root, check=True, env=env)
    fixing = _try_repo(root, env, "fixme.py", hook="llmdoctor-fix")
    output = fixing.stdout + fixing.stderr
    assert fixing.returncode == 1, output
    assert "Failed" in output and "files were modified by this hook" in output
    assert (root / "fixme.py").read_text() == CLEAN.replace("import asyncio\n", "import time\nimport asyncio\n")
    assert cli("scan", "fixme.py", cwd=root).returncode == 0  # the next commit passes
