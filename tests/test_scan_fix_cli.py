"""End-to-end, with the installed command: `scan --fix/--diff/--unsafe-fixes/--show-fixes`, config `fix`,
`--add-noqa`, `--since`, `scan -` with `--stdin-filename`, the concise/grouped/gitlab formats, `--statistics`,
`-q`, SARIF fixes and `explain`'s fix section. 31 runs of the command (~12 s on an idle machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SLEEP = "import time\n\n\nasync def handler():\n    time.sleep(1)\n"
MIXED = textwrap.dedent('''\
    import time
    import requests


    async def handler(url):
        time.sleep(1)
        return requests.get(url).json()
''')


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- --fix, --diff


def test_fix_writes_the_safe_fix_and_a_second_run_is_clean(cli, tmp_path):
    app = write(tmp_path, "app.py", SLEEP)
    result = cli("scan", "--fix", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # nothing remains, as ruff
    assert "Found 1 finding (1 fixed, 0 remaining) in 1 file." in result.stdout
    assert app.read_text() == "import time\nimport asyncio\n\n\nasync def handler():\n    await asyncio.sleep(1)\n"
    again = cli("scan", "--fix", ".", cwd=tmp_path)
    assert again.returncode == 0 and "All checks passed in 1 file." in again.stdout
    assert app.read_text().count("asyncio.sleep") == 1


def test_fix_leaves_unsafe_fixes_and_says_how_to_enable_them(cli, tmp_path):
    app = write(tmp_path, "app.py", MIXED)
    result = cli("scan", "--fix", "--show-fixes", "app.py", cwd=tmp_path)
    assert result.returncode == 1  # requests.get remains
    assert "Fixed 1 finding:\n- app.py:\n    1 × LLM004 (Replace `time.sleep(x)` with `await asyncio.sleep(x)`)" \
        in result.stdout
    assert "Found 3 findings (1 fixed, 2 remaining) in 1 file." in result.stdout
    assert "No fixes available (2 hidden fixes can be enabled with `--unsafe-fixes`)." in result.stdout
    assert "requests.get(url).json()" in app.read_text()


def test_unsafe_fixes_with_the_users_timeout(cli, tmp_path):
    app = write(tmp_path, "app.py", MIXED)
    result = cli("scan", "--fix", "--unsafe-fixes", "--fix-timeout", "20", "--exit-non-zero-on-fix", "app.py",
                 cwd=tmp_path)
    assert result.returncode == 1 and "(3 fixed, 0 remaining)" in result.stdout  # 1: it fixed something
    assert "return (await asyncio.to_thread(requests.get, url, timeout=20)).json()" in app.read_text()
    compile(app.read_text(), "app.py", "exec")


def test_without_a_timeout_value_llm006_is_not_fixed_and_the_hint_says_why(cli, tmp_path):
    write(tmp_path, "app.py", "import requests\n\n\ndef fetch(url):\n    return requests.get(url)\n")
    fixed = cli("scan", "--fix", "--unsafe-fixes", "app.py", cwd=tmp_path)
    assert "app.py:5:12: LLM006 fix not applied: no timeout value: set `fix-timeout = <seconds>`" in fixed.stdout
    assert "No fixes available (1 more with `--fix-timeout SECONDS`)." in fixed.stdout


def test_diff_changes_nothing_and_exits_1(cli, tmp_path):
    app = write(tmp_path, "app.py", SLEEP)
    result = cli("scan", "--diff", "app.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("--- app.py\n+++ app.py\n@@ ")
    assert "-    time.sleep(1)\n+    await asyncio.sleep(1)\n" in result.stdout
    assert "Would fix 1 finding (0 remaining)." in result.stderr
    assert app.read_text() == SLEEP
    clean = cli("scan", "--diff", write(tmp_path, "ok.py", "x = 1\n").name, cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


def test_config_fix_unsafe_fixes_and_fix_timeout(cli, tmp_path):
    write(tmp_path, "pyproject.toml", "[tool.llmdoctor]\nfix = true\nunsafe-fixes = true\nfix-timeout = 7.5\n")
    app = write(tmp_path, "app.py", MIXED)
    result = cli("scan", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "requests.get, url, timeout=7.5)" in app.read_text()
    write(tmp_path, "pyproject.toml", "[tool.llmdoctor]\nfix = true\n")
    no_fix = cli("scan", "--no-fix", write(tmp_path, "b.py", SLEEP).name, cwd=tmp_path)
    assert no_fix.returncode == 1 and "time.sleep(1)" in (tmp_path / "b.py").read_text()


def test_fix_json_reports_what_was_applied_and_skipped(cli, tmp_path):
    write(tmp_path, "app.py", "import time\n\n\nasync def f(xs):\n    time.sleep(1)\n"
                              "    return sum(1 for x in xs if time.sleep(x) is None)\n")
    data = json.loads(cli("scan", "--fix", "--format", "json", ".", cwd=tmp_path).stdout)
    assert data["fixes"]["applied"] == [{"path": "app.py", "rule": "LLM004", "kind": "asyncio_sleep",
                                         "title": "Replace `time.sleep(x)` with `await asyncio.sleep(x)`"}]
    assert data["fixes"]["skipped"][0]["reason"].startswith("inside a generator expression")
    assert data["fixes"]["changed_files"] == ["app.py"] and data["summary"]["fixed"] == 1


def test_mode_conflicts_exit_2(cli, tmp_path):
    write(tmp_path, "app.py", SLEEP)
    for args in (["--fix", "--add-noqa"], ["--since", "HEAD", "--fix"], ["--fix-timeout", "0"]):
        result = cli("scan", *args, "app.py", cwd=tmp_path)
        assert result.returncode == 2 and "llmdoctor: error:" in result.stderr, args


# ----------------------------------------------------------------------------- stdin


def test_stdin_uses_the_filename_for_messages_config_and_ignores(cli, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.llmdoctor]\nper-file-ignores = { "batch/*" = ["LLM004"] }\n'
                                      'exclude = ["gen/*"]\n')
    result = cli("scan", "-", "--stdin-filename", "src/app.py", cwd=tmp_path, input=SLEEP)
    assert result.returncode == 1 and "src/app.py:5:5: LLM004 [warning]" in result.stdout
    ignored = cli("scan", "-", "--stdin-filename", "batch/job.py", cwd=tmp_path, input=SLEEP)
    assert ignored.returncode == 0, ignored.stdout  # (excludes with --force-exclude: test_scan_fix.py)


def test_stdin_fix_prints_the_fixed_code_and_the_rest_on_stderr(cli, tmp_path):
    result = cli("scan", "-", "--stdin-filename", "app.py", "--fix", cwd=tmp_path, input=MIXED)
    assert result.returncode == 1
    assert result.stdout == MIXED.replace("import requests\n", "import requests\nimport asyncio\n").replace(
        "    time.sleep(1)", "    await asyncio.sleep(1)")
    assert "app.py:8:12: LLM004 [warning]" in result.stderr and "(1 fixed, 2 remaining)" in result.stderr
    assert not (tmp_path / "app.py").exists()
    clean = cli("scan", "-", "--fix", cwd=tmp_path, input="x = 1\n")
    assert clean.returncode == 0 and clean.stdout == "x = 1\n"


# ----------------------------------------------------------------------------- --add-noqa


NOQA_CASES = textwrap.dedent('''\
    import time
    import requests


    async def handler(url):
        time.sleep(1)  # noqa: LLM001
        data = requests.post(
            url, json={"a": 1}, timeout=5,
        )
        text = f"""{requests.get(url,
            timeout=5).text}"""
        return data, text  # the answer
''')


def test_add_noqa_silences_everything_and_ruff_accepts_it(cli, tmp_path):
    app = write(tmp_path, "app.py", NOQA_CASES)
    result = cli("scan", "--add-noqa", "legacy, see TICKET-12", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Added 3 noqa directives in 1 file." in result.stdout
    lines = app.read_text().splitlines()
    assert lines[5] == "    time.sleep(1)  # noqa: LLM001, LLM004"  # merged into the existing directive
    assert lines[6] == "    data = requests.post(  # noqa: LLM004 legacy, see TICKET-12"  # the statement's first line
    # the statement's lines all end inside the f-string: never a comment there, an ignore line above it
    assert lines[9:11] == ["    # llmdoctor: ignore[LLM004] legacy, see TICKET-12", '    text = f"""{requests.get(url,']
    assert lines[12] == "    return data, text  # the answer"
    rescan = cli("scan", ".", cwd=tmp_path)
    assert rescan.returncode == 0 and "All checks passed" in rescan.stdout
    ruff = Path(sys.executable).with_name("ruff")
    ruff_cmd = str(ruff) if ruff.exists() else shutil.which("ruff")
    if ruff_cmd is None:
        pytest.skip("ruff is not installed (pip install '.[test]')")
    proc = subprocess.run([ruff_cmd, "check", "--isolated", "--no-cache", "--select", "RUF100", "--config",
                           "lint.external = ['LLM']", "app.py"], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr


def test_add_noqa_on_a_path_argument(cli, tmp_path):
    write(tmp_path, "src/app.py", SLEEP)
    result = cli("scan", "--add-noqa", "src", cwd=tmp_path)
    assert result.returncode == 0 and "Added 1 noqa directive in 1 file." in result.stdout
    assert (tmp_path / "src/app.py").read_text().endswith("time.sleep(1)  # noqa: LLM004\n")


# ----------------------------------------------------------------------------- --since


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


def test_since_reports_only_lines_changed_since_the_merge_base(cli, tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    write(tmp_path, "old.py", SLEEP)
    write(tmp_path, "moved.py", SLEEP.replace("handler", "other"))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "base")
    git(tmp_path, "checkout", "-q", "-b", "feature")
    write(tmp_path, "old.py", SLEEP + "\n\nasync def added():\n    time.sleep(2)\n")
    git(tmp_path, "mv", "moved.py", "renamed.py")
    git(tmp_path, "commit", "-q", "-am", "feature")
    write(tmp_path, "new.py", SLEEP)  # untracked: all new
    result = cli("scan", "--since", "main", "--format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 1
    reported = [line.split(" ")[0] for line in result.stdout.splitlines() if "LLM004" in line]
    assert reported == ["new.py:5:5:", "old.py:9:5:"]
    assert "2 findings on lines unchanged since main" in result.stdout
    data = json.loads(cli("scan", "--since", "main", "--format", "json", ".", cwd=tmp_path).stdout)
    assert data["summary"]["since"]["not_shown"] == 2 and len(data["findings"]) == 2
    unknown = cli("scan", "--since", "no-such-branch", ".", cwd=tmp_path)
    assert unknown.returncode == 2 and "--since no-such-branch: unknown git ref" in unknown.stderr


def test_since_outside_a_git_work_tree(cli, tmp_path):
    write(tmp_path, "app.py", SLEEP)
    result = cli("scan", "--since", "main", ".", cwd=tmp_path, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.returncode == 2 and "is not inside a git work tree" in result.stderr
    assert "Traceback" not in result.stderr


# ----------------------------------------------------------------------------- formats


def test_concise_grouped_quiet_and_statistics(cli, tmp_path):
    write(tmp_path, "a.py", SLEEP)
    write(tmp_path, "b.py", MIXED)
    concise = cli("scan", "--format", "concise", "-q", ".", cwd=tmp_path).stdout.splitlines()
    assert concise[0] == ("a.py:5:5: LLM004 [warning] [*] `time.sleep()` blocks the event loop inside "
                          "`async def handler`")
    assert len(concise) == 4 and not any(line.startswith("Found") for line in concise)  # -q: findings only
    grouped = cli("scan", "--output-format", "grouped", ".", cwd=tmp_path).stdout
    assert grouped.startswith("a.py: 1 finding\n  5:5  LLM004 [warning] [*] ")
    assert "\nb.py: 3 findings\n  6:5   LLM004" in grouped  # columns aligned per file
    quiet = cli("scan", "-q", ".", cwd=tmp_path).stdout
    assert "Found" not in quiet and "fixable" not in quiet and "LLM004 [warning]" in quiet


def test_gitlab_code_quality_report(cli, tmp_path):
    write(tmp_path, "app.py", SLEEP.replace("    time.sleep(1)\n", "    time.sleep(1)\n    time.sleep(1)\n"))
    issues = json.loads(cli("scan", "--format", "gitlab", ".", cwd=tmp_path).stdout)
    assert [i["location"]["positions"]["begin"]["line"] for i in issues] == [5, 6]
    assert set(issues[0]) == {"check_name", "description", "severity", "fingerprint", "location"}
    assert issues[0]["severity"] == "major" and issues[0]["check_name"] == "LLM004"
    assert issues[0]["location"]["path"] == "app.py" and issues[0]["description"].startswith("LLM004 ")
    assert len({i["fingerprint"] for i in issues}) == 2  # two identical findings, two fingerprints
    # (stable when code moves: test_scan_fix.py)


def test_sarif_results_carry_fixes_for_the_safe_ones(cli, tmp_path):
    write(tmp_path, "app.py", MIXED)
    run = json.loads(cli("scan", "--format", "sarif", ".", cwd=tmp_path).stdout)["runs"][0]
    with_fixes = [r for r in run["results"] if "fixes" in r]
    assert [r["ruleId"] for r in with_fixes] == ["LLM004"] and len(run["results"]) == 3
    (fix,) = with_fixes[0]["fixes"]
    change = fix["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "app.py"
    assert change["replacements"] == [
        {"deletedRegion": {"startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 1},
         "insertedContent": {"text": "import asyncio\n"}},
        {"deletedRegion": {"startLine": 6, "startColumn": 1, "endLine": 7, "endColumn": 1},
         "insertedContent": {"text": "    await asyncio.sleep(1)\n"}},
    ]


def test_explain_shows_each_fix_and_its_safety(cli):
    text = cli("explain", "LLM004").stdout
    assert "## Automatic fixes\n- **Replace `time.sleep(x)` with `await asyncio.sleep(x)`** (safe: applied by " \
           "`--fix`)." in text
    assert "(unsafe: applied by `--fix --unsafe-fixes`)" in text


def test_transitive_blocking_helper_is_fixed_at_the_async_call_site(cli, tmp_path):
    app = write(tmp_path, "app.py", textwrap.dedent('''\
        import requests
        from fastapi import FastAPI

        app = FastAPI()


        def fetch_user(uid):
            return requests.get(f"https://users.internal/{uid}", timeout=5).json()


        @app.get("/users/{uid}")
        async def get_user(uid: str):
            return fetch_user(uid)
    '''))
    cli("scan", "--fix", "--unsafe-fixes", "app.py", cwd=tmp_path)
    assert "    return await asyncio.to_thread(fetch_user, uid)\n" in app.read_text()
