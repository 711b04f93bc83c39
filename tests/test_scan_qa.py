"""User-level QA of `llmdoctor scan`: the ways a user gets it wrong, each with a clear message and exit code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmdoctor.scan import discovery

BLOCKING = "import time\nasync def f():\n    time.sleep(1)\n"


def test_unreadable_folder_is_reported_not_silently_skipped(tmp_path, monkeypatch):
    (tmp_path / "ok.py").write_text(BLOCKING)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(BLOCKING)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = discovery.discover([str(tmp_path)], root=str(tmp_path))
    assert found.files == [str(tmp_path / "ok.py")]
    assert [(e.path, e.reason) for e in found.errors] == [(str(locked), "cannot read folder: Permission denied")]


def test_file_in_a_folder_that_cannot_be_entered_is_not_called_missing(tmp_path, monkeypatch):
    target = str(tmp_path / "locked" / "a.py")
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        if os.fspath(path) == target:
            raise PermissionError(13, "Permission denied", target)
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    found = discovery.discover([target, str(tmp_path / "nope.py"), str(tmp_path / "x.py" / "y.py")],
                               root=str(tmp_path))
    assert [e.reason for e in found.errors] == [
        "cannot read: Permission denied", "no such file or directory", "no such file or directory"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads every folder")
def test_unreadable_folder_end_to_end(cli, tmp_path: Path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.py").write_text(BLOCKING)
    locked.chmod(0)
    try:
        result = cli("scan", "--no-cache", ".", cwd=tmp_path)
        explicit = cli("scan", "--no-cache", "locked/a.py", cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    assert result.returncode == 2, result
    assert "locked: error: cannot read folder: Permission denied" in result.stdout + result.stderr
    assert explicit.returncode == 2
    assert "locked/a.py: error: cannot read: Permission denied" in explicit.stdout + explicit.stderr
    assert "Traceback" not in result.stderr + explicit.stderr


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("id: [LLM004]\ntables: {}\n", "key 'id': no rule ['LLM004'] to extend"),
    ("id: {a: 1}\n", "key 'id': no rule {'a': 1} to extend"),
    ("tables:\n  blocking_calls: [mycorp.fetch]\n", "key 'id': missing: name the rule"),
])
def test_rules_dir_file_with_a_bad_id_names_file_and_key(cli, tmp_path: Path, yaml_text, expected):
    (tmp_path / "a.py").write_text(BLOCKING)
    (tmp_path / "rd").mkdir()
    (tmp_path / "rd" / "mine.yaml").write_text(yaml_text)
    for args in (("scan", "--no-cache", "--rules-dir", "rd", "a.py"), ("rules", "--rules-dir", "rd")):
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 2, result
        assert "Traceback" not in result.stderr
        assert "mine.yaml" in result.stderr and expected in result.stderr


def test_sarif_uris_are_relative_to_the_repository_holding_the_files(cli, tmp_path: Path):
    """CI that checks out into a sub-folder (actions/checkout `path: src`) runs from above the repository:
    GitHub resolves URIs against the repository root, not against where the tool ran."""
    import json

    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a b.py").write_text(BLOCKING)
    result = cli("scan", "--no-cache", "--format", "sarif", "checkout", cwd=tmp_path)
    assert result.returncode == 1, result
    run = json.loads(result.stdout)["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    [finding] = run["results"]
    location = finding["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/a%20b.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == 3
    rules = run["tool"]["driver"]["rules"]
    assert rules[finding["ruleIndex"]]["id"] == finding["ruleId"] == "LLM004"
    for rule in rules:
        assert {"id", "name", "shortDescription", "fullDescription", "help", "defaultConfiguration"} <= rule.keys()
    assert "fingerprints" not in finding and "partialFingerprints" not in finding


def test_skipped_files_are_announced_in_github_and_sarif_output(cli, tmp_path: Path):
    import json

    (tmp_path / "big.py").write_text(BLOCKING * 10)
    (tmp_path / "a.py").write_text(BLOCKING)
    args = ("scan", "--no-cache", "--max-file-size", "100", ".")
    github = cli(*args, "--format", "github", cwd=tmp_path)
    assert github.returncode == 1
    assert "::notice title=llmdoctor::big.py: skipped, 450 bytes is over the max-file-size limit" in github.stdout
    sarif = cli(*args, "--format", "sarif", cwd=tmp_path)
    notes = json.loads(sarif.stdout)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [n["level"] for n in notes] == ["note"]
    assert notes[0]["message"]["text"].startswith("big.py: skipped, 450 bytes")


def test_github_annotations_use_repository_relative_paths(cli, tmp_path: Path):
    """A CI step with `working-directory: backend` must still annotate `backend/app.py` in the PR."""
    (tmp_path / ".git").mkdir()
    backend = tmp_path / "backend"
    backend.mkdir()
    (backend / "a,b:100%.py").write_text(BLOCKING)
    (backend / "broken.py").write_text("import time\nasync def f():\n    time.sleep(1\n")
    result = cli("scan", "--no-cache", "--format", "github", ".", cwd=backend)
    assert result.returncode == 1, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith("::warning file=backend/a%2Cb%3A100%25.py,line=3,col=5,"), lines
    assert "title=LLM004::`time.sleep()` blocks the event loop inside `async def f`%0AFix: " in lines[0]
    assert lines[1].startswith("::error file=backend/broken.py,line="), lines


def test_nothing_to_check_says_so(cli, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.llmdoctor]\nexclude = ["gen"]\n')
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "a.py").write_text(BLOCKING)
    (tmp_path / "docs").mkdir()
    for path in ("gen", "docs"):
        result = cli("scan", "--no-cache", path, cwd=tmp_path)
        assert result.returncode == 0, result
        assert f"no Python files to check in {path}: none found, or all excluded" in result.stdout + result.stderr
    found = cli("scan", "--no-cache", "gen/a.py", cwd=tmp_path)
    assert found.returncode == 1 and "no Python files" not in found.stdout + found.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (("explain", "LLM04"), "unknown rule 'LLM04' (did you mean LLM004?)"),
    (("explain", "llm-4"), "unknown rule 'LLM-4' (did you mean LLM004?)"),
    (("explain", "LLM999"), "unknown rule 'LLM999'; known rules: LLM001"),
    (("scan", "--no-cache", "--select", "LLM04", "a.py"), "--select: unknown rule 'LLM04' (did you mean LLM004?)"),
    (("scan", "--no-cache", "--ignore", "LLM007", "a.py"), "unknown rule 'LLM007'; known rules"),
])
def test_unknown_rule_id_exits_2_with_a_suggestion_when_the_number_matches(cli, tmp_path: Path, args, expected):
    (tmp_path / "a.py").write_text(BLOCKING)
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result
    assert expected in result.stderr and "Traceback" not in result.stderr


def test_config_that_is_not_utf8_or_a_folder_exits_2_naming_it(cli, tmp_path: Path):
    (tmp_path / "a.py").write_text(BLOCKING)
    (tmp_path / ".llmdoctor.yaml").write_bytes(b"ignore: [LLM002]\nselect: ['\xe9']\n")
    found = cli("scan", "--no-cache", "a.py", cwd=tmp_path)
    assert found.returncode == 2 and "Traceback" not in found.stderr
    assert ".llmdoctor.yaml:2: not UTF-8 (byte 0xe9): save the file as UTF-8" in found.stderr
    (tmp_path / ".llmdoctor.yaml").unlink()
    (tmp_path / "conf").mkdir()
    folder = cli("scan", "--no-cache", "--config", "conf", "a.py", cwd=tmp_path)
    assert folder.returncode == 2 and "--config" in folder.stderr and "conf: is a folder" in folder.stderr


def test_bom_contradicting_the_coding_cookie_names_line_and_cause(cli, tmp_path: Path):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf# -*- coding: latin-1 -*-\n" + BLOCKING.encode())
    (tmp_path / "ok.py").write_text(BLOCKING)
    result = cli("scan", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 1, result
    assert ("bom.py:1: error: invalid encoding declaration: encoding problem: utf-8 (the file starts with a "
            "UTF-8 byte order mark: declare utf-8 or drop the mark)") in result.stdout
    assert "ok.py:3:5: LLM004" in result.stdout


@pytest.mark.parametrize("pattern", ["gen", "ABS/gen", "**/gen", "**/gen/*.py"])
def test_exclude_accepts_absolute_paths_and_leading_double_star(cli, tmp_path: Path, pattern):
    (tmp_path / ".git").mkdir()
    for folder in ("gen", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text(BLOCKING)
    pattern = pattern.replace("ABS", str(tmp_path))
    result = cli("scan", "--no-cache", "--exclude", pattern, ".", cwd=tmp_path)
    assert result.returncode == 1, result
    assert "src/a.py:3:5: LLM004" in result.stdout and "gen/a.py" not in result.stdout
