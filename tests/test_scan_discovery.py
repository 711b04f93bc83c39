"""Which files a scan picks: recursion, skipped folders, .gitignore, excludes, explicit files, limits."""

from __future__ import annotations

import os
from pathlib import Path

from llmdoctor.scan.discovery import discover
from llmdoctor.scan.gitignore import GitIgnore
from llmdoctor.scan.globs import matches


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(tmp_path: Path, *paths: str, **kw) -> list[str]:
    result = discover([str(tmp_path / p) for p in (paths or ("",))], root=str(tmp_path), **kw)
    return [os.path.relpath(f, tmp_path) for f in result.files]


def test_recursion_suffixes_and_skipped_folders(tmp_path):
    touch(tmp_path, "a.py", "b.pyi", "c.txt", "pkg/d.py", ".git/e.py", "node_modules/f.py",
          "__pycache__/g.py",
          "build/h.py", "dist/i.py", ".venv/lib/j.py", "myenv/k.py", "x.egg-info/l.py", ".tox/m.py")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert found(tmp_path) == ["a.py", "b.pyi", "pkg/d.py"]


def test_gitignore_inside_a_work_tree(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n/top_only.py\n!keep_pb2.py\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.py\n")
    touch(tmp_path, "app.py", "generated/x.py", "msg_pb2.py", "keep_pb2.py", "top_only.py", "sub/top_only.py",
          "sub/local.py", "sub/other.py")
    assert found(tmp_path) == ["app.py", "keep_pb2.py", "sub/other.py", "sub/top_only.py"]
    assert "msg_pb2.py" in found(tmp_path, respect_gitignore=False)


def test_gitignore_is_not_applied_outside_a_work_tree(tmp_path):
    (tmp_path / ".gitignore").write_text("*.py\n")
    touch(tmp_path, "app.py")
    assert found(tmp_path) == ["app.py"]


def test_explicit_files_are_scanned_unless_force_exclude(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    touch(tmp_path, "generated/x.py", "vendor/y.py", "app.py")
    assert found(tmp_path, exclude=("vendor",)) == ["app.py"]
    explicit = found(tmp_path, "generated/x.py", "vendor/y.py", exclude=("vendor",))
    assert explicit == ["generated/x.py", "vendor/y.py"]
    assert found(tmp_path, "generated/x.py", "vendor/y.py", "app.py", exclude=("vendor",),
                 force_exclude=True) == ["app.py"]


def test_explicit_non_python_file_is_scanned(tmp_path):
    touch(tmp_path, "script")
    assert found(tmp_path, "script") == ["script"]


def test_symlinked_directories_are_not_followed(tmp_path):
    touch(tmp_path, "pkg/a.py")
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "again")
    os.symlink(tmp_path, tmp_path / "pkg" / "up")
    assert found(tmp_path) == ["pkg/a.py"]


def test_duplicates_are_scanned_once(tmp_path):
    touch(tmp_path, "a.py")
    assert found(tmp_path, "a.py", "", "a.py") == ["a.py"]


def test_max_file_size_notice(tmp_path):
    (tmp_path / "big.py").write_text("x" * 100)
    result = discover([str(tmp_path)], root=str(tmp_path), max_file_size=10)
    assert result.files == [] and "over the max-file-size limit of 10 bytes" in result.notices[0]


def test_missing_path_is_an_error(tmp_path):
    result = discover([str(tmp_path / "nope")], root=str(tmp_path))
    assert result.errors[0].reason == "no such file or directory"


def test_globs():
    assert matches("build", "src/build/x.py")
    assert matches("*_pb2.py", "a/b/c_pb2.py")
    assert matches("tests/*", "tests/unit/t.py")
    assert matches("src/**/gen/*.py", "src/a/b/gen/x.py")
    assert not matches("tests/*", "src/tests_x.py")
    assert not matches("/src", "lib/src/x.py")
    assert matches("./src/", "src/x.py")


def test_gitignore_negation_and_anchoring(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("# comment\n\nlogs/**/debug.py\ndoc/*.py\n")
    touch(tmp_path, "logs/a/b/debug.py", "doc/x.py", "doc/sub/y.py")
    ignore = GitIgnore()
    assert ignore.ignored(str(tmp_path / "logs/a/b/debug.py"), is_dir=False)
    assert ignore.ignored(str(tmp_path / "doc/x.py"), is_dir=False)
    assert not ignore.ignored(str(tmp_path / "doc/sub/y.py"), is_dir=False)
