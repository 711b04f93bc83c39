"""The rule YAML files ship inside the wheel (`rules/` -> `llmdoctor/rules/`), so a plain install works."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_wheel_contains_every_rule_file(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        if "No matching distribution" in proc.stderr or "Failed to establish" in proc.stderr:
            pytest.skip("cannot fetch the build backend (hatchling) without a package index")
        pytest.fail(proc.stderr)
    (wheel,) = tmp_path.glob("llmdoctor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"llmdoctor/rules/{p.name}" for p in (REPO / "rules").glob("*.yaml")}
    expected = {f"llmdoctor/rules/{name}" for name in ("llm002.yaml", "llm004.yaml", "common.yaml")}
    assert expected <= shipped
    assert shipped <= names
    assert "llmdoctor/scan/rules/llm002.py" in names and "llmdoctor/scan/project/llm004.py" in names
