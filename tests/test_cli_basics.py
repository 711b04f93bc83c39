from llmdoctor import __version__


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"llmdoctor {__version__}"


def test_help_lists_commands(cli):
    result = cli("--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout


def test_unknown_command_exits_2_without_traceback(cli):
    result = cli("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_bad_input_with_format_json_also_prints_a_json_error(cli, tmp_path):
    import json

    cases = [
        ("kv-budget", "--model", "no-such-model", "--bs", "1", "--seq", "8", "--format", "json"),
        ("scan", "--format=json", str(tmp_path / "missing.toml"), "--config", str(tmp_path / "missing.toml")),
    ]
    for args in cases:
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("llmdoctor: error: ")
        error = json.loads(result.stdout)["error"]
        assert error and error in result.stderr
    text = cli("kv-budget", "--model", "no-such-model", "--bs", "1", "--seq", "8")
    assert text.returncode == 2 and text.stdout == ""


def test_the_console_script_ends_with_its_output_flushed_and_exit_handlers_run() -> None:
    """`end_process` skips the interpreter's teardown of the heap, not the output nor the atexit handlers."""
    import subprocess
    import sys

    code = ("import atexit, sys\n"
            "from llmdoctor.cli import end_process\n"
            "atexit.register(lambda: print('handler ran'))\n"
            "sys.stdout.write('x' * 200_000)\n"
            "sys.stderr.write('to stderr')\n"
            "end_process(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 3
    assert proc.stdout == "x" * 200_000 + "handler ran\n"
    assert proc.stderr == "to stderr"


def test_the_console_script_waits_for_a_thread_still_running() -> None:
    import subprocess
    import sys

    code = ("import sys, threading, time\n"
            "from llmdoctor.cli import end_process\n"
            "threading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()\n"
            "end_process(0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (0, "thread done\n")
