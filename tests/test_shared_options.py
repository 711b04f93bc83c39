"""One vocabulary: the README's table of shared options holds for each command's --help, old spellings still
work with a note, usage errors look like every other error (and are JSON when JSON was asked for), and
memory sizes below 1 MiB are refused. Every test runs the installed command (~6 s)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FIXTURES, REPO

COMMANDS = ("scan", "nginx", "proxy", "probe", "kv-budget", "gpu", "tokens", "rules", "explain")


def shared_options_table() -> list[tuple[list[str], set[str]]]:
    text = REPO.joinpath("README.md").read_text()
    section = text.split("<!-- section:shared-options -->")[1].split("<!-- /section:shared-options -->")[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`(-[-\w]+)", cells[0])
        commands = set(COMMANDS) if cells[2] == "every command" else {c.strip() for c in cells[2].split(",")}
        rows.append((names, commands))
    return rows


def test_the_readme_table_of_shared_options_matches_each_command_s_help(cli):
    rows = shared_options_table()
    assert len(rows) >= 10
    helps = {}
    for command in COMMANDS:
        result = cli(command, "--help", env={"COLUMNS": "250"})
        assert result.returncode == 0, result
        helps[command] = result.stdout
    for names, commands in rows:
        assert commands <= set(COMMANDS), commands
        for command in COMMANDS:
            shown = all(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", helps[command]) for n in names)
            if command in commands:
                assert shown, (names, command)
            elif names[-1] not in ("--config",):  # kv-budget/gpu keep --config as a hidden old spelling
                assert not shown, (names, command)


def test_model_config_and_max_model_len_and_the_old_spellings(cli):
    model = str(FIXTURES / "models" / "llama-3.1-8b")
    new = cli("kv-budget", "--model-config", model, "--max-model-len", "8192", "--format", "json")
    assert new.returncode == 0 and new.stderr == ""
    old = cli("kv-budget", "--config", model, "--seq", "8192", "--format", "json")
    assert old.returncode == 0
    assert old.stderr == ("llmdoctor: note: --config is now --model-config (a Hugging Face config.json); "
                          "--config still works here\n")
    assert json.loads(old.stdout)["kv_bytes_total"] == json.loads(new.stdout)["kv_bytes_total"]
    on_call = cli("kv-budget", "--model", "llama-3.1-8b", "--bs", "16", "--seq", "4096")  # the README's line
    assert on_call.returncode == 0 and "KV for 16 × 4,096" in on_call.stdout


def test_a_memory_size_below_1_mib_is_a_mistake(cli):
    result = cli("kv-budget", "--model", "llama-3.1-8b", "--gpu-mem", "80")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("llmdoctor: error: --gpu-mem 80: 80 bytes is less than 1 MiB; did you mean 80GiB "
                             "or 80GB? (a bare number is bytes)\n")
    assert cli("kv-budget", "--model", "llama-3.1-8b", "--kv-mem", "0.5KiB").returncode == 2
    assert cli("kv-budget", "--model", "llama-3.1-8b", "--gpu-mem", "80GB").returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    (("-Z",), "llmdoctor: error: no such option: -Z; see `llmdoctor --help`"),
    (("kv-budget", "--bs", "x"), "llmdoctor: error: invalid value for '--bs': 'x' is not a valid"),
    (("nginx",), "llmdoctor: error: missing argument 'PATH'; see `llmdoctor nginx --help`"),
    (("kv-budget", "--model", "llama-3.1-8b", "--format", "yaml"),
     "llmdoctor: error: --format 'yaml': choose one of text, json"),
])
def test_usage_errors_are_one_line_exit_2_and_json_when_asked(cli, args, message):
    text = cli(*args)
    assert text.returncode == 2 and text.stderr.startswith(message), text
    assert "╭" not in text.stderr and "Traceback" not in text.stderr and text.stdout == ""
    as_json = cli(*args, "--format=json") if "--format" not in args else None
    if as_json is not None:
        assert as_json.returncode == 2
        assert json.loads(as_json.stdout)["error"] in as_json.stderr


def test_version_short_flag(cli):
    from llmdoctor import __version__

    assert cli("-V").stdout.strip() == f"llmdoctor {__version__}"


def test_nginx_takes_the_reporting_options(cli, tmp_path):
    conf = str(FIXTURES / "nginx" / "rules" / "ngx002_hit.conf")
    only = cli("nginx", conf, "--select", "NGX002", "--statistics")
    assert only.returncode == 1
    assert "NGX001" not in only.stdout and re.search(r"^\s+1\s+NGX002\s+ignored-x-accel-buffering$", only.stdout,
                                                      re.MULTILINE)
    out = tmp_path / "report.json"
    quiet = cli("nginx", conf, "--ignore", "NGX001", "-o", str(out), "--format", "json", "--exit-zero")
    assert quiet.returncode == 0 and quiet.stdout == ""
    assert [f["rule"] for f in json.loads(out.read_text())["findings"]] == ["NGX002"]
    nothing = cli("nginx", conf, "--select", "NGX002", "--ignore", "NGX")
    assert nothing.returncode == 2 and "leaves no check to run: nothing would be checked" in nothing.stderr


def test_scan_select_and_ignore_of_the_same_rule_says_nothing_was_checked(cli, tmp_path):
    (tmp_path / "a.py").write_text("import time\n\nasync def h():\n    time.sleep(1)\n")
    result = cli("scan", "--no-cache", "--select", "LLM003", "--ignore", "LLM003", "a.py", cwd=tmp_path)
    assert result.returncode == 2 and "All checks passed" not in result.stdout
    assert "--select LLM003 with --ignore LLM003 leaves no rule to check: nothing would be checked" in result.stderr


def test_tokens_jobs_model_short_flag_and_threads_note(cli):
    new = cli("tokens", "-", "-j", "2", "-m", "gpt-4o", "--format", "json", input="hello world")
    assert new.returncode == 0 and new.stderr == ""
    old = cli("tokens", "-", "--threads", "2", "--format", "json", input="hello world")
    assert old.returncode == 0 and old.stderr == "llmdoctor: note: --threads is now --jobs/-j; --threads still works\n"
    assert json.loads(old.stdout)["total"] == json.loads(new.stdout)["total"] == 2


def test_tokens_reads_a_pipe_without_arguments_and_names_open_weights_models(cli):
    piped = cli("tokens", "--format", "json", input="hi")
    assert piped.returncode == 0 and json.loads(piped.stdout)["files"][0]["path"] == "<stdin>"
    empty = cli("tokens", input="")
    assert empty.returncode == 2 and "nothing on stdin" in empty.stderr
    llama = cli("tokens", "-m", "llama-3.1-8b", "-", input="hi")
    assert llama.returncode == 2
    assert "is known to kv-budget, but its tokenizer is its own" in llama.stderr
    assert "--tokenizer meta-llama/Llama-3.1-8B --context 131072" in llama.stderr
    assert "--encoding o200k_base --context 131072" in llama.stderr
