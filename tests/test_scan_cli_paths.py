"""File names that are not valid UTF-8 (possible on Linux) never crash a renderer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import llmdoctor_executable

HIT = "import time\nasync def f():\n    time.sleep(1)\n"


@pytest.mark.skipif(sys.platform != "linux", reason="needs a filesystem that stores raw bytes")
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_undecodable_file_name(tmp_path, fmt):
    os.mkdir(tmp_path / ".git")
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"), "w") as handle:
        handle.write(HIT)
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run([llmdoctor_executable(), "scan", ".", "--format", fmt], cwd=tmp_path,
                          capture_output=True, env=env, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr
    if fmt == "sarif":
        (res,) = json.loads(proc.stdout)["runs"][0]["results"]
        assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "caf%E9.py"
    if fmt == "text":
        # the undecodable byte escaped, as `ls` shows it on a terminal: printed raw it would be a lone
        # surrogate, which a UTF-8 locale's strict stdout cannot encode (and 0x80-0x9f are C1 controls)
        assert b"caf\\xe9.py:3:5: LLM004" in proc.stdout
