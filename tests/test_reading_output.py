"""Reading the output: summaries count the right things, `explain` renders Markdown on a terminal and prints
it plain when piped, kv-budget fits 80 columns, and the progress bar of scan and tokens appears on a terminal
only, never with JSON. Every test runs the installed command (~8 s)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import FIXTURES, llmdoctor_executable


def run_on_a_terminal(*args: str, stream: str = "stdout", env: dict | None = None, cwd=None) -> tuple[int, str, str]:
    """Run the installed command with `stream` (stdout or stderr) on a pseudo-terminal; (code, tty, other)."""
    import tempfile

    master, slave = os.openpty()
    full_env = {**os.environ, "COLUMNS": "100", "TERM": "xterm", **(env or {})}
    full_env.pop("NO_COLOR", None)
    other_file = tempfile.TemporaryFile()  # noqa: SIM115 - a file, not a pipe: a full pipe would block the child
    streams = {"stdout": other_file, "stderr": other_file, stream: slave}
    proc = subprocess.Popen([llmdoctor_executable(), *args], stdin=subprocess.DEVNULL, env=full_env, cwd=cwd,
                            **streams)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait(timeout=120)
    os.close(master)
    other_file.seek(0)
    other = other_file.read()
    other_file.close()
    return code, b"".join(chunks).decode("utf-8", "replace"), other.decode("utf-8", "replace")


def test_summary_counts_files_with_findings_out_of_files_read(cli, tmp_path):
    (tmp_path / "hit.py").write_text("import time\n\nasync def h():\n    time.sleep(1)\n")
    (tmp_path / "clean.py").write_text("import asyncio\n\nasync def h():\n    await asyncio.sleep(1)\n")
    result = cli("scan", "--no-cache", ".", cwd=tmp_path)
    assert result.stdout.splitlines()[-2:] == ["Found 1 finding in 1 of 2 files.", "[*] 1 fixable with `--fix`."]
    data = json.loads(cli("scan", "--no-cache", "--format", "json", ".", cwd=tmp_path).stdout)
    assert (data["summary"]["files"], data["summary"]["files_with_findings"]) == (2, 1)
    missing = cli("scan", "--no-cache", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stdout.splitlines()[-1] == "Nothing was checked: 1 input could not be checked."


def test_explain_renders_markdown_on_a_terminal_and_plain_when_piped(cli):
    code, shown, _ = run_on_a_terminal("explain", "NGX001")
    assert code == 0
    assert "What it does" in shown and "## What it does" not in shown and "```" not in shown
    piped = cli("explain", "NGX001")
    assert "## What it does" in piped.stdout and "```nginx" in piped.stdout


@pytest.mark.parametrize("args", [
    ("--model", "mistral-7b", "--bs", "16", "--seq", "32768", "--kv-mem", "10GiB"),
    ("--model", "llama-3.1-8b", "--seq", "131072", "--kv-mem", "10GiB"),
    ("--model", "deepseek-v3", "--tp", "8", "--gpu-mem", "141GB", "--bs", "16", "--dtype", "fp8"),
    ("--model", "llama-3.1-405b", "--gpu-mem", "80GB", "--bs", "3", "--seq", "5000"),
])
def test_kv_budget_fits_80_columns_and_never_splits_a_value(cli, args):
    result = cli("kv-budget", *args, env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert not any(line.strip().startswith(("GB", "GiB", "B)")) for line in lines)


def test_progress_bar_on_a_terminal_only_and_never_with_json(tmp_path):
    fast = {"LLMDOCTOR_PROGRESS_AFTER_S": "0"}
    python = tmp_path / "src"
    python.mkdir()
    for name in ("a", "b", "c"):
        (python / f"{name}.py").write_text("import time\n\nasync def h():\n    time.sleep(1)\n")
    code, bar, _ = run_on_a_terminal("scan", "--no-cache", "-j", "1", str(python), stream="stderr", env=fast, cwd=tmp_path)
    assert code == 1 and "scanning" in bar
    code, bar, out = run_on_a_terminal("scan", "--no-cache", "-j", "1", "--format", "json", str(python),
                                       stream="stderr", env=fast, cwd=tmp_path)
    assert code == 1 and bar == "" and json.loads(out)["findings"]
    code, bar, _ = run_on_a_terminal("tokens", str(FIXTURES / "tokens" / "prompts"), stream="stderr", env=fast)
    assert code == 0 and "counting" in bar
    piped = subprocess.run([llmdoctor_executable(), "scan", "--no-cache", "-j", "1", str(python)], capture_output=True,
                           text=True, env={**os.environ, **fast}, cwd=tmp_path, check=False)
    assert piped.stderr == ""


def test_progress_updates_from_many_threads_open_one_bar(monkeypatch, capsys):
    """tokens counts on worker threads: the first updates race to open the bar (a KeyError from rich before)."""
    import threading

    from llmdoctor.report.progress import Progress

    monkeypatch.setenv("LLMDOCTOR_PROGRESS_AFTER_S", "0")
    for _ in range(20):
        progress = Progress("counting", enabled=True)
        start = threading.Barrier(8)
        errors = []

        def work(progress=progress, start=start, errors=errors):
            start.wait()
            try:
                for done in range(1, 50):
                    progress.update(done, 100)
            except Exception as error:  # noqa: BLE001 - any error from the bar is the failure
                errors.append(error)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        progress.close()
        assert errors == []
