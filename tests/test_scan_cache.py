"""The result cache: same report as an uncached run, invalidated by content/rules/config, robust on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_scan_parallel import make_project, report_json

from llmdoctor.scan import cache as cache_module
from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan

BLOCKING = "import time\n\nasync def handler():\n    time.sleep(1)\n"
CLEAN = "import time\n\nasync def handler():\n    time.time()\n"


def scan(root: Path, **executor) -> tuple[dict, ScanExecutor]:
    executor.setdefault("jobs", 1)
    ex = ScanExecutor(**executor)
    report = run_scan(["."], ScanOptions(cwd=str(root)), analyze=ex)
    return report_json(report), ex


def cache_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("scan-*.json"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project", copies=1)
    (root / "pyproject.toml").write_text("[tool.llmdoctor]\nexclude = []\n")
    return root


def test_warm_run_parses_nothing_and_reports_the_same(project: Path, monkeypatch) -> None:
    cold, first = scan(project)
    assert first.cache.stats.hits == 0 and first.cache.stats.misses > 0
    uncached, _ = scan(project, use_cache=False)
    assert cold == uncached

    from llmdoctor.scan import engine

    def no_analysis(*args, **kwargs):
        raise AssertionError("a fully cached run analyses nothing")

    monkeypatch.setattr(engine, "analyze_module", no_analysis)
    monkeypatch.setattr("llmdoctor.scan.parallel.analyze_module", no_analysis)
    warm, second = scan(project)
    assert second.cache.stats.misses == 0 and second.cache.stats.hits == first.cache.stats.misses
    assert warm == cold
    pooled_warm, _ = scan(project, jobs=2)
    assert pooled_warm == cold


def test_cache_folder_layout_at_the_project_root(project: Path) -> None:
    sub = project / "pkg0"
    run_scan(["."], ScanOptions(cwd=str(sub)), analyze=ScanExecutor(jobs=1))
    folder = project / ".llmdoctor_cache"  # next to pyproject.toml, not in the cwd
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(cache_files(folder)) == 1
    assert not (sub / ".llmdoctor_cache").exists()
    data = json.loads(cache_files(folder)[0].read_text())
    assert data["magic"] == cache_module.MAGIC and data["format"] == cache_module.FORMAT


def test_cache_dir_option_env_and_no_cache(cli, project: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "elsewhere"
    assert cli("scan", "--cache-dir", str(chosen), ".", cwd=project).returncode == 1
    assert cache_files(chosen)
    from_env = tmp_path / "from-env"
    assert cli("scan", ".", cwd=project, env={"LLMDOCTOR_CACHE_DIR": str(from_env)}).returncode == 1
    assert cache_files(from_env)
    assert not (project / ".llmdoctor_cache").exists()
    assert cli("scan", "--no-cache", ".", cwd=project).returncode == 1
    assert not (project / ".llmdoctor_cache").exists()


def test_changed_content_with_the_same_stat_is_detected(tmp_path: Path) -> None:
    source = tmp_path / "app.py"
    source.write_text(BLOCKING)
    before = source.stat()
    first, _ = scan(tmp_path)
    assert [f["rule"] for f in first["findings"]] == ["LLM004"]
    same_size = BLOCKING.replace("time.sleep(1)", "time.ctime(1)")
    assert len(same_size) == len(BLOCKING)
    source.write_text(same_size)
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same mtime
    second, ex = scan(tmp_path)
    assert second["findings"] == [] and ex.cache.stats.misses == 1


def test_an_old_trusted_stat_is_a_hit_without_reading(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "app.py"
    source.write_text(BLOCKING)
    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # as if the file was last changed long ago
    scan(tmp_path)
    real_open = open

    def no_source_reads(path, *args, **kwargs):
        assert Path(path) != source, "a trusted stat match needs no read"
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_source_reads)
    warm, ex = scan(tmp_path)
    # nothing changed, every stat trusted: the project's last reports, without a read or an entry loaded
    assert ex.cache.stats.linked == 1 and ex.cache.stats.hits == 0
    assert [f["rule"] for f in warm["findings"]] == ["LLM004"]
    source.write_text(BLOCKING + "\n")  # the project changed: its files are looked up one by one again
    os.utime(source, ns=(time.time_ns() - 10**10,) * 2)
    monkeypatch.setattr("builtins.open", real_open)
    _, ex = scan(tmp_path)
    assert ex.cache.stats.linked == 0 and ex.cache.stats.misses == 1


def test_touched_file_with_same_content_is_confirmed_by_hash(tmp_path: Path) -> None:
    source = tmp_path / "app.py"
    source.write_text(BLOCKING)
    scan(tmp_path)
    later = time.time_ns() + 5_000_000_000
    os.utime(source, ns=(later, later))  # a fresh checkout: new mtimes, same bytes
    _, ex = scan(tmp_path)
    assert ex.cache.stats.hits == 1 and ex.cache.stats.rehashed == 1 and ex.cache.stats.misses == 0


def test_rules_and_config_are_part_of_the_key(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import mycorp.http\n\nasync def f():\n    mycorp.http.fetch('x')\n")
    assert scan(tmp_path)[0]["findings"] == []
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "inhouse.yaml").write_text("kind: tables\ntables:\n  blocking_calls:\n    - mycorp.http.fetch\n")
    (tmp_path / ".llmdoctor.yaml").write_text("rules-dir: [tables]\n")
    with_table, _ = scan(tmp_path)
    assert [f["rule"] for f in with_table["findings"]] == ["LLM004"]
    (tmp_path / ".llmdoctor.yaml").write_text("rules-dir: [tables]\nignore: [LLM004]\n")
    assert scan(tmp_path)[0]["findings"] == []
    (tmp_path / ".llmdoctor.yaml").write_text("rules-dir: [tables]\n")
    (tables / "inhouse.yaml").write_text("kind: tables\ntables:\n  blocking_calls:\n    - mycorp.http.other\n")
    assert scan(tmp_path)[0]["findings"] == []  # the edited user table, not the cached result
    assert len(cache_files(tmp_path / ".llmdoctor_cache")) == 4


@pytest.mark.parametrize("content", [
    b"",
    b"\x00\x01garbage",
    b'{"magic": "llmdoctor-scan-cache", "format": 1, "key": "',  # truncated
    b'{"magic": "someone-else", "files": {}}',
    b"[1, 2, 3]",
    b'{"magic": "llmdoctor-scan-cache", "format": 999, "key": "x", "files": {}}',
])
def test_corrupt_or_foreign_cache_is_ignored_and_rebuilt(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "app.py").write_text(BLOCKING)
    expected, ex = scan(tmp_path)
    Path(ex.cache.file).write_bytes(content)
    again, ex2 = scan(tmp_path)
    assert again == expected and ex2.cache.stats.hits == 0
    assert json.loads(Path(ex2.cache.file).read_text())["magic"] == cache_module.MAGIC
    assert scan(tmp_path)[1].cache.stats.hits == 1


def test_malformed_entries_are_misses_not_crashes(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(BLOCKING)
    (tmp_path / "other.py").write_text(CLEAN)
    expected, ex = scan(tmp_path)
    data = json.loads(Path(ex.cache.file).read_text())
    paths = sorted(data["files"])
    data["files"][paths[0]] = "not a list"
    data["files"][paths[1]][-1] = {"findings": [["LLM004"]], "errors": []}
    Path(ex.cache.file).write_text(json.dumps(data))
    again, ex2 = scan(tmp_path)
    assert again == expected and ex2.cache.stats.misses == 2


def test_unwritable_cache_dir_is_a_notice_not_a_failure(cli, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(BLOCKING)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    result = cli("scan", "--cache-dir", str(blocker / "cache"), "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [f["rule"] for f in json.loads(result.stdout)["findings"]] == ["LLM004"]
    text = cli("scan", "--cache-dir", str(blocker / "cache"), ".", cwd=tmp_path)
    assert "cache not written" in text.stdout + text.stderr


def test_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "app.py").write_text(BLOCKING)

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.os, "replace", crash)
    report, ex = scan(tmp_path)
    assert [f["rule"] for f in report["findings"]] == ["LLM004"]
    assert "No space left" in ex.notices[0]
    assert not cache_files(tmp_path / ".llmdoctor_cache")
    assert not list((tmp_path / ".llmdoctor_cache").glob(".tmp-*"))


def test_concurrent_runs_never_corrupt_the_cache(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", copies=1)
    script = ("import json, sys\nfrom llmdoctor.scan.parallel import ScanExecutor\n"
              "from llmdoctor.scan.runner import ScanOptions, run_scan\n"
              "r = run_scan(['.'], ScanOptions(cwd=sys.argv[1]), analyze=ScanExecutor(jobs=1))\n"
              "print(json.dumps(sorted((f.path, f.line, f.rule) for f in r.findings)))\n")
    runs = [subprocess.Popen([sys.executable, "-c", script, str(project)], stdout=subprocess.PIPE, text=True)
            for _ in range(4)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert len(set(outputs)) == 1
    files = cache_files(project / ".llmdoctor_cache")
    assert len(files) == 1
    json.loads(files[0].read_text())  # complete, valid JSON
    assert not list((project / ".llmdoctor_cache").glob(".tmp-*"))
    warm, ex = scan(project)
    assert ex.cache.stats.misses == 0
    assert json.dumps(sorted((f["path"], f["line"], f["rule"]) for f in warm["findings"])) + "\n" == outputs[0]


# ----------------------------------------------------------------------------- the journal (a few changed entries)


@pytest.fixture
def trusted(monkeypatch) -> None:
    """Every stat recorded is trusted at once (as if the files had been written long before the scan): the
    next run re-records only what changed."""
    monkeypatch.setattr(cache_module, "RACY_NS", 0)


def edit(path: Path, note: str = "edited") -> None:
    path.write_text(path.read_text() + f"\n# {note} {time.time_ns()}\n")


def journal_paths(ex: ScanExecutor) -> list[str]:
    """The paths of the journal's well-formed lines, in order."""
    out = []
    for line in Path(ex.cache.journal).read_bytes().splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            out.append(os.path.realpath(item["path"]))
    return out


def test_a_few_changed_entries_are_appended_to_the_journal(project: Path, trusted) -> None:
    _, first = scan(project)
    run_file = Path(first.cache.file)
    written = run_file.read_bytes()
    assert not Path(first.cache.journal).exists()
    changed = project / "pkg0" / "clean_service.py"
    edit(changed)
    warm, second = scan(project)
    assert warm == scan(project, use_cache=False)[0]
    assert run_file.read_bytes() == written  # not rewritten for one entry
    assert journal_paths(second) == [os.path.realpath(changed)]
    assert Path(second.cache.journal).read_bytes().startswith(cache_module.HEADER)  # ours, for pruning
    # the next run reads the journal's entry: a hit, no analysis
    fresh = cache_module.ScanCache(second.cache.directory, second.cache.key)
    assert fresh.lookup(str(changed)) is not None and fresh.stats.hits == 1


@pytest.mark.parametrize("forged", [
    "cut",  # a run killed while appending
    b"\x00\xff garbage\n",
    b'{"magic":"llmdoctor-scan-cache","format":2,"key":"another run key","path":"PATH","entry":[]}\n',
    b'{"magic":"llmdoctor-scan-cache","format":2,"key":"KEY","path":"PATH","entry":"not a list"}\n',
    b'{"magic":"llmdoctor-scan-cache","format":2,"key":"KEY","path":"PATH","entry":[1, 2, 3]}\n',
    b'{"magic":"llmdoctor-scan-cache","format":2,"key":"KEY","path":["not", "a", "path"]}\n',
    b'{"magic":"llmdoctor-scan-cache"}\n[1, 2, 3]\n',
    b'{"magic": "llmdoctor-scan-cache", "format": 2, "key": "KEY", "path": "PATH", "entry": "not ours"}\n',
], ids=["cut", "garbage", "other-key", "string-entry", "short-entry", "list-path", "list", "foreign"])
def test_a_cut_or_forged_journal_line_is_ignored_and_rebuilt(project: Path, trusted, forged) -> None:
    scan(project)
    changed = project / "pkg0" / "clean_service.py"
    edit(changed)
    _, ex = scan(project)
    journal = Path(ex.cache.journal)
    line = journal.read_bytes()
    if forged == "cut":
        forged = line[: len(line) // 2]
    forged = forged.replace(b"KEY", ex.cache.key.encode()).replace(b"PATH", str(changed).encode())
    journal.write_bytes(forged)
    edit(project / "pkg0" / "llm002" / os.listdir(project / "pkg0" / "llm002")[0], "another")  # a new state
    again, ex2 = scan(project)
    assert again == scan(project, use_cache=False)[0]
    assert ex2.cache.stats.misses == 2  # the changed file (its journal line unusable) and the other one
    fresh = cache_module.ScanCache(ex2.cache.directory, ex2.cache.key)
    assert fresh.lookup(str(changed)) is not None and fresh.stats.hits == 1  # rebuilt (journal or run file)


def test_the_journal_is_folded_into_the_run_file_when_it_outgrows_its_share(project: Path, trusted, monkeypatch) -> None:
    scan(project)
    first_change = project / "pkg0" / "clean_service.py"
    edit(first_change)
    _, ex = scan(project)
    assert Path(ex.cache.journal).exists()
    monkeypatch.setattr(cache_module, "JOURNAL_SHARE", 10**9)  # any journal is too large now
    second_change = project / "pkg0" / "llm002" / os.listdir(project / "pkg0" / "llm002")[0]
    edit(second_change)
    warm, ex2 = scan(project)
    assert warm == scan(project, use_cache=False)[0]
    assert not Path(ex2.cache.journal).exists()
    entries = json.loads(Path(ex2.cache.file).read_text())["files"]
    fresh = cache_module.ScanCache(ex2.cache.directory, ex2.cache.key)
    for path in (first_change, second_change):  # both folded in, as they are now
        key = next(p for p in entries if os.path.realpath(p) == os.path.realpath(path))
        assert fresh.lookup(key) is not None
    assert fresh.stats.hits == 2


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_journal_that_is_a_link_or_a_fifo_is_not_written_through(project: Path, trusted, tmp_path: Path, kind) -> None:
    _, ex = scan(project)
    journal = Path(ex.cache.journal)
    target = tmp_path / "precious"
    target.write_text("someone's file\n")
    if kind == "link":
        journal.symlink_to(target)
    else:
        os.mkfifo(journal)
    edit(project / "pkg0" / "clean_service.py")
    warm, ex2 = scan(project)  # a hang or a traceback here is the bug
    assert warm == scan(project, use_cache=False)[0]
    assert target.read_text() == "someone's file\n"
    assert journal.is_symlink() if kind == "link" else journal.is_fifo()  # left alone: not ours
    fresh = cache_module.ScanCache(ex2.cache.directory, ex2.cache.key)  # the run file was written whole
    assert fresh.lookup(str(project / "pkg0" / "clean_service.py")) is not None


def test_a_scan_gives_the_heap_back_to_the_collector(project: Path) -> None:
    import gc

    assert gc.get_freeze_count() == 0
    scan(project)
    edit(project / "pkg0" / "clean_service.py")
    scan(project, jobs=2)
    assert gc.get_freeze_count() == 0  # what the lookups and the link froze is given back at the end
    from llmdoctor.scan.catalog import load_catalog
    from llmdoctor.scan.engine import analyze_source
    from llmdoctor.scan.settings import ScanConfig

    analyze_source("app.py", BLOCKING.encode(), load_catalog(), ScanConfig())  # outside a scan: nothing frozen
    ex = ScanExecutor(jobs=1)  # nor in an executor used without run_scan
    list(ex([str(p) for p in sorted(project.rglob("*.py"))], load_catalog(), ScanConfig(root=str(project))))
    assert gc.get_freeze_count() == 0
