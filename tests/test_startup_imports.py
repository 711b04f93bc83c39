"""Start-up cost: commands that need no parsing, HTTP or tokenizer never import libcst, httpx or tiktoken,
and no command imports pydantic (typer 0.29 made every invocation import it: ~70 ms, a third of a warm scan;
pyproject.toml keeps typer below 0.29).

Each command runs in a fresh interpreter (as the console script would) that prints which heavy modules
ended up in `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("libcst", "httpx", "tiktoken", "pydantic", "tokenizers", "jinja2")

PROBE = f"""
import json, sys
from llmdoctor.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {set(HEAVY)!r})
sys.stderr.write('\\nIMPORTED=' + json.dumps({{'code': code, 'heavy': heavy}}) + '\\n')
"""


def imported(*args: str, cwd: Path | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    marker = [line for line in proc.stderr.splitlines() if line.startswith("IMPORTED=")]
    assert marker, proc.stderr
    return json.loads(marker[-1].removeprefix("IMPORTED="))


@pytest.mark.parametrize("args", [
    ("--version",),
    ("rules",),
    ("rules", "--format", "json"),
    ("explain", "LLM004"),
    ("kv-budget", "--model", "llama-3.1-8b", "--bs", "4", "--seq", "8192"),
    ("proxy", str(Path(__file__).resolve().parents[1] / "fixtures" / "proxy" / "envoy" / "envoy.yaml"),
     "--exit-zero"),
])
def test_light_commands_import_no_heavy_module(args: tuple[str, ...]) -> None:
    result = imported(*args)
    assert result["code"] == 0
    assert result["heavy"] == []


def test_kv_budget_with_a_preset_asks_no_server():
    """The server discovery (http.client, the live readers) loads only when no model is named."""
    probe = PROBE.replace("m.split('.')[0] in", "m in {'http.client', 'llmdoctor.kv.live', 'llmdoctor.kv.planner'} "
                                                "or m.split('.')[0] in")
    proc = subprocess.run([sys.executable, "-c", probe, "kv-budget", "--model", "llama-3.1-8b", "--kv-mem", "20GiB"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
    marker = [line for line in proc.stderr.splitlines() if line.startswith("IMPORTED=")]
    assert json.loads(marker[-1].removeprefix("IMPORTED=")) == {"code": 0, "heavy": []}


def test_fully_cached_scan_imports_no_heavy_module(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import time\n\nasync def handler():\n    time.sleep(1)\n")
    (tmp_path / "fetch.py").write_text("import requests\n\nasync def handler(url):\n    return requests.get(url)\n")
    (tmp_path / "clean.py").write_text("import asyncio\n\nasync def handler():\n    await asyncio.sleep(1)\n")
    cold = imported("scan", "--format", "json", ".", cwd=tmp_path)
    assert cold["code"] == 1 and "libcst" in cold["heavy"]  # the probe does see a real parse
    assert "pydantic" not in cold["heavy"]
    warm = imported("scan", "--format", "json", ".", cwd=tmp_path)
    assert warm == {"code": 1, "heavy": []}
    text = imported("scan", ".", cwd=tmp_path)
    assert text == {"code": 1, "heavy": []}


def test_scan_with_every_file_prefiltered_imports_no_heavy_module(tmp_path: Path) -> None:
    """No rule can fire in these files (the pre-filters say so, also the second stage on the code): nothing is
    parsed by libcst, so libcst is not imported, also without a cache."""
    (tmp_path / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "words.py").write_text('"""time.sleep and requests.get, in a docstring only."""\n\n'
                                       "async def handler():\n    return 1\n")
    assert imported("scan", "--no-cache", "--format", "json", ".", cwd=tmp_path) == {"code": 0, "heavy": []}


def test_implemented_rule_ids_agree_with_the_rule_classes() -> None:
    from llmdoctor.commands.catalog import implemented_rule_ids
    from llmdoctor.scan.rules import implemented_rules, rule_classes, rule_ids

    assert implemented_rule_ids() == set(implemented_rules())
    assert rule_ids() == set(rule_classes())
