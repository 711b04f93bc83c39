"""End-to-end: the installed `llmdoctor scan|rules|explain` command, every format and exit code, bad inputs."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from llmdoctor import __version__

REPO = Path(__file__).resolve().parents[1]
HIT = "import time\n\n\nasync def handler():\n    time.sleep(1)\n"
CLEAN = "import asyncio\n\n\nasync def handler():\n    await asyncio.sleep(1)\n"


def write(root: Path, name: str, text: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def no_traceback(result) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


# ----------------------------------------------------------------------------- exit codes and text

def test_text_output_and_exit_1(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert ("app.py:5:5: LLM004 [warning] [*] `time.sleep()` blocks the event loop inside `async def handler`"
            in result.stdout)  # the severity as a word; [*]: `--fix` fixes it
    assert "Found 1 finding in 1 file." in result.stdout
    assert "[*] 1 fixable with `--fix`." in result.stdout
    assert "\x1b[" not in result.stdout  # no colour when not a terminal


def test_clean_exit_0_default_path_is_cwd(cli, tmp_path):
    write(tmp_path, "app.py", CLEAN)
    result = cli("scan", cwd=tmp_path)
    assert result.returncode == 0 and "All checks passed in 1 file." in result.stdout


def test_exit_zero_and_statistics(cli, tmp_path):
    write(tmp_path, "a.py", HIT)
    write(tmp_path, "b.py", HIT)
    result = cli("scan", ".", "--exit-zero", "--statistics", cwd=tmp_path)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["2", "LLM004", "[*]", "blocking-call-in-async"]  # only the counts, as ruff
    assert "handler" not in result.stdout and "Found 2 findings in 2 files." in lines


def test_shipped_fixtures_have_findings(cli):
    result = cli("scan", "fixtures/python", "--format", "json", cwd=REPO)
    assert result.returncode == 1
    by_rule = json.loads(result.stdout)["summary"]["by_rule"]
    assert by_rule["LLM004"] >= 15 and by_rule["LLM002"] >= 6


# ----------------------------------------------------------------------------- formats

def test_json_format(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    write(tmp_path, "bad.py", "import time\nasync def f(:\n    time.sleep(1)\n")
    result = cli("scan", ".", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["findings"] == [{
        "rule": "LLM004", "severity": "warning", "path": "app.py", "line": 5, "column": 5,
        "message": "`time.sleep()` blocks the event loop inside `async def handler`",
        "end_line": 5, "end_column": 18, "fix": "use await asyncio.sleep(...)", "call": "time.sleep",
        "autofix": {"kind": "asyncio_sleep", "safety": "safe",
                    "title": "Replace `time.sleep(x)` with `await asyncio.sleep(x)`"},
        "context": "unknown",
    }]
    assert data["errors"][0]["path"] == "bad.py" and data["errors"][0]["reason"].startswith("syntax error")
    assert data["summary"]["findings"] == 1 and data["summary"]["files"] == 2
    assert data["summary"]["by_rule"] == {"LLM004": 1}


def test_sarif_format(cli, tmp_path):
    write(tmp_path, "src/app.py", HIT)
    os.mkdir(tmp_path / ".git")
    result = cli("scan", "src", "--format", "sarif", cwd=tmp_path)
    assert result.returncode == 1
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "llmdoctor" and run["tool"]["driver"]["version"] == __version__
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"LLM002", "LLM004"} <= set(rules)
    rule = rules["LLM004"]
    assert rule["name"] == "blocking-call-in-async"
    assert rule["shortDescription"]["text"] and "## Why it matters" in rule["fullDescription"]["text"]
    assert rule["help"]["markdown"] and rule["defaultConfiguration"]["level"] == "warning"
    (res,) = run["results"]
    assert res["ruleId"] == "LLM004" and res["level"] == "warning"
    location = res["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/app.py"
    assert location["region"]["startLine"] == 5 and location["region"]["startColumn"] == 5
    assert "partialFingerprints" not in res and "fingerprints" not in res


def test_github_format_escapes(cli, tmp_path):
    write(tmp_path, "a,b:c.py", HIT)
    result = cli("scan", ".", "--format", "github", cwd=tmp_path)
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith("::warning file=a%2Cb%3Ac.py,line=5,col=5,")
    assert ",title=LLM004::`time.sleep()` blocks the event loop" in first
    assert "%0AFix: use await asyncio.sleep(...)" in first


def test_output_file(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", "--format", "json", "--output", "report.json", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["findings"] == 1


def test_output_to_unwritable_place(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", "--output", "no/such/dir/r.txt", cwd=tmp_path)
    assert result.returncode == 2 and "--output" in result.stderr
    no_traceback(result)


def test_force_colour_is_honoured_off_with_no_color(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", cwd=tmp_path, env={"NO_COLOR": "1", "TERM": "xterm-256color"})
    assert "\x1b[" not in result.stdout


# ----------------------------------------------------------------------------- rules / explain

def test_rules_lists_ids(cli):
    result = cli("rules")
    assert result.returncode == 0
    row = next(line for line in result.stdout.splitlines() if line.startswith("LLM004"))
    assert "blocking-call-in-async" in row and "warning" in row
    data = json.loads(cli("rules", "--format", "json").stdout)
    assert {"id": "LLM002", "name": "tokenizer-per-call", "severity": "warning"}.items() <= \
        next(r for r in data["rules"] if r["id"] == "LLM002").items()


def test_explain(cli):
    result = cli("explain", "llm002")
    assert result.returncode == 0
    text = result.stdout
    order = [text.index(h) for h in ("## What it does", "## Why it matters", "## Example", "## Use instead",
                                     "## Fix safety")]
    assert order == sorted(order)
    assert "false" in text and "GIL" in text  # the honest correction of the popular claim


def test_explain_unknown_id_exits_2(cli):
    result = cli("explain", "LLM999")
    assert result.returncode == 2 and "unknown rule 'LLM999'" in result.stderr
    no_traceback(result)


# ----------------------------------------------------------------------------- bad inputs

def test_missing_path_exits_2(cli, tmp_path):
    result = cli("scan", "nope.py", cwd=tmp_path)
    assert result.returncode == 2 and "nope.py: error: no such file or directory" in result.stdout
    no_traceback(result)


def test_missing_path_with_findings_elsewhere_exits_1(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", "app.py", "nope.py", cwd=tmp_path)
    assert result.returncode == 1 and "no such file" in result.stdout


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("syntax.py", b"import time\nasync def f(:\n    time.sleep(1)\n", "syntax error"),
    ("undecodable.py", b"async def f():\n    return '\xff'\n", "cannot decode as utf-8"),
    ("binary.py", b"\x00\x01\x02async\xff", "binary data"),
])
def test_bad_files_exit_2_and_other_files_still_scanned(cli, tmp_path, name, data, reason):
    write(tmp_path, name, data)
    write(tmp_path, "ok.py", CLEAN)
    result = cli("scan", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert name in result.stdout and reason in result.stdout
    assert "No findings in 2 files; 1 input could not be checked." in result.stdout
    no_traceback(result)
    write(tmp_path, "hit.py", HIT)
    assert cli("scan", ".", cwd=tmp_path).returncode == 1  # findings win over errors


def test_latin1_and_empty_files_are_fine(cli, tmp_path):
    write(tmp_path, "latin.py", "# -*- coding: latin-1 -*-\nimport time\nasync def f():\n    time.sleep(1)  # \xe9t\xe9\n"
          .encode("latin-1"))
    write(tmp_path, "empty.py", b"")
    result = cli("scan", ".", "--format", "json", cwd=tmp_path)
    data = json.loads(result.stdout)
    assert data["errors"] == [] and [f["line"] for f in data["findings"]] == [4]


def test_symlink_loop_does_not_hang(cli, tmp_path):
    write(tmp_path, "pkg/app.py", CLEAN)
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink("self.py", tmp_path / "pkg" / "self.py")
    result = cli("scan", ".", cwd=tmp_path, timeout=60)
    assert result.returncode == 0
    assert "symlink loop" in result.stdout  # a notice, not an error
    explicit = cli("scan", "pkg/self.py", cwd=tmp_path)
    assert explicit.returncode == 2 and "symlink loop" in explicit.stdout


def test_special_file_is_reported_not_read(cli, tmp_path):
    os.mkfifo(tmp_path / "pipe.py")  # reading it would block forever
    write(tmp_path, "ok.py", CLEAN)
    result = cli("scan", ".", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "pipe.py: error: cannot read: not a regular file" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(cli, tmp_path):
    path = write(tmp_path, "secret.py", HIT)
    path.chmod(0)
    result = cli("scan", ".", cwd=tmp_path)
    assert result.returncode == 2 and "cannot read" in result.stdout


def test_large_file_skipped_with_notice(cli, tmp_path):
    write(tmp_path, "big.py", HIT + "#" * 5000 + "\n")
    write(tmp_path, "small.py", CLEAN)
    result = cli("scan", ".", "--max-file-size", "4KB", cwd=tmp_path)
    assert result.returncode == 0
    assert "big.py: skipped" in result.stdout and "max-file-size" in result.stdout
    assert "note: big.py: skipped" in result.stdout  # a display path, not the absolute one


@pytest.mark.parametrize(("args", "needle"), [
    (["--format", "xml"], "--format 'xml'"),
    (["--select", "LLM999"], "unknown rule 'LLM999'"),
    (["--max-file-size", "big"], "--max-file-size"),
    (["--rules-dir", "nowhere"], "not a directory"),
    (["--config", "nope.toml"], "--config"),
])
def test_bad_options_exit_2(cli, tmp_path, args, needle):
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", *args, cwd=tmp_path)
    assert result.returncode == 2 and needle in result.stderr
    no_traceback(result)


def test_malformed_rule_yaml_in_rules_dir(cli, tmp_path):
    write(tmp_path, "app.py", HIT)
    write(tmp_path, "myrules/corp.yaml", "id: LLM004\ntables:\n  blocking_calls: [\"bad name!\"]\n")
    result = cli("scan", ".", "--rules-dir", "myrules", cwd=tmp_path)
    assert result.returncode == 2
    assert "corp.yaml: key 'tables.blocking_calls[0]'" in result.stderr
    no_traceback(result)


def test_user_rules_dir_adds_a_call(cli, tmp_path):
    write(tmp_path, "app.py", "from mycorp.http import fetch\n\nasync def h():\n    fetch('u')\n")
    write(tmp_path, "myrules/corp.yaml", "id: LLM004\ntables:\n  blocking_calls: [mycorp.http.fetch]\n")
    assert cli("scan", ".", cwd=tmp_path).returncode == 0
    result = cli("scan", ".", "--rules-dir", "myrules", cwd=tmp_path)
    assert result.returncode == 1 and "`mycorp.http.fetch()` blocks" in result.stdout



def test_user_rules_dir_adds_calls_sharing_their_keys_with_names(cli, tmp_path):
    write(tmp_path, "app.py", "from mycorp.db import read, write\n\nasync def h():\n    read('k')\n    write('k')\n")
    write(tmp_path, "myrules/corp.yaml", """\
        id: LLM004
        tables:
          blocking_calls:
            - names: [mycorp.db.read, mycorp.db.write]
              use_instead: "await mycorp.db.aread(...)"
        """)
    result = cli("scan", ".", "--rules-dir", "myrules", "--format", "json", cwd=tmp_path)
    findings = json.loads(result.stdout)["findings"]
    assert result.returncode == 1
    assert [(f["line"], f["fix"]) for f in findings] == [(4, "use await mycorp.db.aread(...)"),
                                                          (5, "use await mycorp.db.aread(...)")]


@pytest.mark.parametrize(("entry", "key"), [
    ("{names: mycorp.db.read}", "tables.blocking_calls[0].names"),
    ("{names: []}", "tables.blocking_calls[0].names"),
    ("{names: [mycorp.db.read, 'bad name!']}", "tables.blocking_calls[0].names[1]"),
    ("{names: [mycorp.db.read], use_instead: {nested: 1}}", "tables.blocking_calls[0].names[0].use_instead"),
])
def test_a_bad_names_group_in_rules_dir_names_the_file_and_key(cli, tmp_path, entry, key):
    write(tmp_path, "app.py", HIT)
    write(tmp_path, "myrules/corp.yaml", f"id: LLM004\ntables:\n  blocking_calls:\n    - {entry}\n")
    result = cli("scan", ".", "--rules-dir", "myrules", cwd=tmp_path)
    assert result.returncode == 2 and f"corp.yaml: key '{key}'" in result.stderr
    no_traceback(result)


# ----------------------------------------------------------------------------- config through the CLI

def test_pyproject_config(cli, tmp_path):
    write(tmp_path, "pyproject.toml", """\
        [tool.llmdoctor]
        exclude = ["generated"]
        per-file-ignores = { "scripts/*" = ["LLM004"] }
        severity = { LLM004 = "error" }
    """)
    write(tmp_path, "generated/g.py", HIT)
    write(tmp_path, "scripts/s.py", HIT)
    write(tmp_path, "src/app.py", HIT)
    result = cli("scan", "--format", "json", cwd=tmp_path / "src")  # config found walking up
    data = json.loads(result.stdout)
    assert [(f["path"], f["severity"]) for f in data["findings"]] == [("app.py", "error")]
    result = cli("scan", ".", "--format", "json", cwd=tmp_path)
    assert [f["path"] for f in json.loads(result.stdout)["findings"]] == ["src/app.py"]


def test_llmdoctor_yaml_config_and_rules_dir(cli, tmp_path):
    write(tmp_path, ".llmdoctor.yaml", "ignore: [LLM002]\nrules-dir: [corp-rules]\n")
    write(tmp_path, "corp-rules/x.yaml", "kind: tables\ntables:\n  blocking_calls: [mycorp.sleep]\n")
    write(tmp_path, "app.py", "import mycorp\nasync def f():\n    mycorp.sleep()\n")
    result = cli("scan", cwd=tmp_path)
    assert result.returncode == 1 and "mycorp.sleep" in result.stdout


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("pyproject.toml", "[tool.llmdoctor]\nselct = ['LLM004']\n", "key 'tool.llmdoctor.selct'"),
    ("pyproject.toml", "[tool.llmdoctor]\nselect = 'LLM004\n", "invalid TOML"),
    ("pyproject.toml", "[tool.llmdoctor]\nseverity = { LLM004 = 'loud' }\n", "key 'tool.llmdoctor.severity'"),
    ("pyproject.toml", "[tool.llmdoctor]\nmax-file-size = -1\n", "key 'tool.llmdoctor.max-file-size'"),
    ("pyproject.toml", "[tool.llmdoctor]\nignore = ['LLM123']\n", "unknown rule 'LLM123'"),
    (".llmdoctor.yaml", "select: [LLM004\n", "invalid YAML"),
    (".llmdoctor.yaml", "exclude: 3\n", "key 'exclude'"),
    ("pyproject.toml", "[tool.llmdoctor]\ncontrol-plane = ['::admin']\n", "key 'tool.llmdoctor.control-plane'"),
    ("pyproject.toml", "[tool.llmdoctor]\npython-platform = 'windows'\n", "key 'tool.llmdoctor.python-platform'"),
    (".llmdoctor.yaml", "- a\n- b\n", "must be a mapping"),
])
def test_malformed_config_exits_2(cli, tmp_path, name, text, needle):
    write(tmp_path, name, text)
    write(tmp_path, "app.py", HIT)
    result = cli("scan", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert name in result.stderr and needle in result.stderr
    no_traceback(result)


def test_isolated_ignores_config(cli, tmp_path):
    write(tmp_path, ".llmdoctor.yaml", "ignore: [LLM004]\n")
    write(tmp_path, "app.py", HIT)
    assert cli("scan", cwd=tmp_path).returncode == 0
    assert cli("scan", "--isolated", cwd=tmp_path).returncode == 1
