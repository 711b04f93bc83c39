"""`scan` and `tokens` walk directories with one walker and one .gitignore matcher: they skip the same things.

Each place in the tree holds both a Python file and a text file; scan takes the `.py`, tokens every file
(or its `--glob`), and the folders both of them read from must be the same.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from llmdoctor.scan.discovery import SKIP_DIRS, discover
from llmdoctor.scan.globs import glob_matches
from llmdoctor.tokens.inputs import walk

HIT = "import time\nasync def f():\n    time.sleep(1)\n"  # one LLM004 finding, so scan's output names the file

# generated/: a folder at any depth; *.log.py: a name glob; /top_only: anchored to the work tree's top;
# docs/*/draft: anchored, a wildcard in the middle; logs/**/old: ** across folders; !vendor/kept: negation
GITIGNORE = """# comment
generated/
*.log.py
/top_only
docs/*/draft
logs/**/old
vendor/*
!vendor/kept
"""

PLACES = [  # ".git/hooks" also makes the tree a git work tree
    "app", "pkg/mod", "generated", "pkg/generated", "top_only", "pkg/top_only", "docs/a/draft",
    "docs/a/b/draft", "logs/old", "logs/x/y/old", "vendor/dropped", "vendor/kept", "sub/local", "sub/other",
    "node_modules/m", ".git/hooks", "__pycache__", ".venv/lib", "build", "dist", "x.egg-info", "myenv/lib",
]
READ = ["app", "docs/a/b/draft", "pkg/mod", "pkg/top_only", "sub/other", "vendor/kept"]


def _tree(root: Path) -> None:
    (root / ".gitignore").write_text(GITIGNORE)
    for place in PLACES:
        folder = root / place
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "m.py").write_text(HIT)
        (folder / "m.txt").write_text("hello")
    (root / "logs" / "x" / "y" / "old.log.py").write_text(HIT)
    (root / "sub" / ".gitignore").write_text("local/\n!important.log.py\n")
    (root / "sub" / "important.log.py").write_text(HIT)
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")


def _scan_files(root: Path) -> list[str]:
    return [Path(f).relative_to(root).as_posix() for f in discover([str(root)], root=str(root)).files]


def _tokens_files(root: Path, glob: str | None) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in walk(root, glob))


def test_both_commands_read_the_same_folders(tmp_path):
    _tree(tmp_path)
    scanned = _scan_files(tmp_path)
    assert scanned == sorted([f"{place}/m.py" for place in READ] + ["sub/important.log.py"])
    assert _tokens_files(tmp_path, "*.py") == scanned
    counted = _tokens_files(tmp_path, None)
    assert [f for f in counted if f.endswith(".py")] == scanned
    assert sorted({str(Path(f).parent) for f in counted}) == sorted({".", "sub", *READ})


@pytest.mark.parametrize("name", sorted(SKIP_DIRS | {"x.egg-info"}))
def test_every_skipped_folder_is_skipped_by_both(tmp_path, name):
    for file in ("m.py", "m.txt"):
        (tmp_path / name / "deep").mkdir(parents=True, exist_ok=True)
        (tmp_path / name / "deep" / file).write_text("x = 1\n")
    (tmp_path / "m.py").write_text("x = 1\n")
    assert _scan_files(tmp_path) == ["m.py"]
    assert _tokens_files(tmp_path, None) == ["m.py"]


def test_gitignore_outside_a_work_tree_is_ignored_by_both(tmp_path):
    """git itself reads no .gitignore outside a work tree; tokens used to apply the top folder's own."""
    (tmp_path / ".gitignore").write_text(GITIGNORE)
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "m.py").write_text("x = 1\n")
    assert _scan_files(tmp_path) == ["generated/m.py"]
    assert _tokens_files(tmp_path, None) == [".gitignore", "generated/m.py"]


def test_a_named_ignored_folder_is_walked_by_both(tmp_path):
    _tree(tmp_path)
    assert _scan_files(tmp_path / "generated") == ["m.py"]
    assert _tokens_files(tmp_path / "generated", None) == ["m.py", "m.txt"]


def test_symlinked_folders_are_not_followed_by_either(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n")
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "again")
    os.symlink(tmp_path, tmp_path / "up")
    assert _scan_files(tmp_path) == ["pkg/m.py"]
    assert _tokens_files(tmp_path, None) == ["pkg/m.py"]


def test_glob_is_gitignore_style_relative_to_the_folder_given():
    assert glob_matches("*.txt", "a/b/c.txt")              # no slash: the name, at any depth
    assert glob_matches("prompts/**/*.txt", "prompts/x/y/c.txt")
    assert glob_matches("prompts/**/*.txt", "prompts/c.txt")
    assert not glob_matches("prompts/*.txt", "prompts/x/c.txt")  # `*` stays within a name
    assert glob_matches("/c.txt", "c.txt") and not glob_matches("/c.txt", "a/c.txt")  # leading / anchors
    assert glob_matches("[ab].txt", "b.txt") and not glob_matches("[!ab].txt", "b.txt")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_tokens_passes_over_a_pipe_found_in_a_folder(cli, tmp_path):
    (tmp_path / "a.txt").write_text("hello world")
    os.mkfifo(tmp_path / "pipe.txt")  # reading it would block forever: it has no writer
    result = cli("tokens", ".", "--format", "json", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == ["a.txt"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_end_to_end_scan_and_tokens_report_the_same_files(cli, tmp_path):
    _tree(tmp_path)
    tokens = cli("tokens", ".", "--glob", "*.py", "--format", "json", cwd=tmp_path)
    assert tokens.returncode == 0, tokens.stdout + tokens.stderr
    scan = cli("scan", ".", "--isolated", "--no-cache", "--format", "json", cwd=tmp_path)
    assert scan.returncode == 1, scan.stdout + scan.stderr
    scanned = sorted({finding["path"] for finding in json.loads(scan.stdout)["findings"]})
    counted = sorted(f["path"] for f in json.loads(tokens.stdout)["files"])
    assert counted == scanned == sorted([f"{place}/m.py" for place in READ] + ["sub/important.log.py"])
