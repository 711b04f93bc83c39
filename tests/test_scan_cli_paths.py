"""File names that are not valid UTF-8 (possible on Linux) never crash a renderer."""

from __future__ import annotations

import json
import os
import sys

import pytest

HIT = "import time\nasync def f():\n    time.sleep(1)\n"


@pytest.mark.skipif(sys.platform != "linux", reason="needs a filesystem that stores raw bytes")
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_undecodable_file_name(cli, tmp_path, fmt):
    os.mkdir(tmp_path / ".git")
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "w") as handle:
        handle.write(HIT)
    result = cli("scan", ".", "--format", fmt, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    if fmt == "sarif":
        (res,) = json.loads(result.stdout)["runs"][0]["results"]
        assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "caf%E9.py"
