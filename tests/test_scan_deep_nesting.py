"""Input that crashes libcst's native parser (a segfault takes the whole process down) is reported per file.

CPython's own parser rejects it first (too many nested parentheses, RecursionError, MemoryError), so such a
file is an input error and is never handed to libcst; the other files are still scanned.
"""

import json
import sys

import pytest

HIT = "import time\nasync def f():\n    time.sleep(1)\n"
DEEP = {
    "brackets.py": HIT + "x = " + "[" * 3000 + "]" * 3000 + "\n",
    "unary.py": HIT + "x = " + "-" * 100_000 + "1\n",
    "chain.py": HIT + "x = " + "+".join(["1"] * 50_000) + "\n",
}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_deeply_nested_files_are_errors_and_the_scan_goes_on(cli, tmp_path, jobs):
    for name, text in DEEP.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "ok.py").write_text(HIT)
    result = cli("scan", ".", "--no-cache", "--jobs", jobs, "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert [(f["path"], f["rule"]) for f in report["findings"]] == [("ok.py", "LLM004")]
    reasons = {e["path"]: e["reason"] for e in report["errors"]}
    assert set(reasons) == set(DEEP)
    assert all("nested too deeply" in reason for reason in reasons.values())
    assert reasons["brackets.py"].endswith("the file was not checked")


def test_syntax_error_uses_python_s_own_message_and_line(cli, tmp_path):
    (tmp_path / "bad.py").write_text("import time\nasync def f()\n    time.sleep(1)\n")
    result = cli("scan", "bad.py", "--no-cache", "--format", "json", cwd=tmp_path)
    assert result.returncode == 2
    (error,) = json.loads(result.stdout)["errors"]
    assert error["line"] == 2
    assert error["reason"] == "syntax error: expected ':'"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python reads 3.12's syntax")
def test_newer_python_syntax_is_named_as_such_and_the_other_files_are_still_checked(cli, tmp_path):
    """A file valid from Python 3.12 on (a PEP 701 f-string reusing its quotes, a `type` alias) is no mistake of
    the user's: the message says the running Python is too old for it; a real syntax error keeps CPython's words."""
    (tmp_path / "rag.py").write_text('def cite(items):\n    return f"{", ".join(items)}"\n')
    (tmp_path / "types.py").write_text("type Vector = list[float]\n")
    (tmp_path / "bad.py").write_text("import time\nasync def f()\n    time.sleep(1)\n")
    (tmp_path / "ok.py").write_text("import time\nasync def f():\n    time.sleep(1)\n")
    result = cli("scan", ".", "--no-cache", "--format", "json", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert [(f["path"], f["rule"]) for f in report["findings"]] == [("ok.py", "LLM004")]
    reasons = {e["path"]: (e["line"], e["reason"]) for e in report["errors"]}
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert reasons["rag.py"][0] == 2 and reasons["rag.py"][1].startswith("syntax error: f-string")
    for name in ("rag.py", "types.py"):
        assert f"the file is newer Python than {running}, which runs llmdoctor, can read" in reasons[name][1]
    assert reasons["bad.py"] == (2, "syntax error: expected ':'")
