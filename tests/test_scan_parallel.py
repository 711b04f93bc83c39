"""`--jobs N`: a process pool gives exactly the serial results, in a stable order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmdoctor.scan import parallel
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.parallel import ScanExecutor, analyze_many
from llmdoctor.scan.runner import ScanOptions, run_scan
from llmdoctor.scan.settings import ScanConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "python"


def make_project(root: Path, copies: int = 2) -> Path:
    """The python fixtures (hits and near-misses of every rule) several times over, plus bad inputs."""
    for index in range(copies):
        shutil.copytree(FIXTURES, root / f"pkg{index}")
    bad = root / "bad"
    bad.mkdir()
    (bad / "syntax.py").write_text("def f(:\n    pass\n")
    (bad / "latin1.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport time\nasync def f():\n"
                                    b"    time.sleep(1)  # caf\xe9\n")
    (bad / "undecodable.py").write_bytes(b"x = '\xff\xfe'\n")
    (bad / "binary.py").write_bytes(b"\x00\x01\x02")
    (bad / "empty.py").write_text("")
    return root


def report_json(report) -> dict:
    return {
        "findings": [f.to_dict() for f in report.findings],
        "errors": [e.to_dict() for e in report.errors],
        "summary": report.summary(),
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def test_parallel_results_equal_serial_results(project: Path) -> None:
    options = ScanOptions(cwd=str(project), isolated=True)
    serial = run_scan(["."], options, analyze=ScanExecutor(jobs=1, use_cache=False))
    pooled = run_scan(["."], options, analyze=ScanExecutor(jobs=2, use_cache=False))
    assert report_json(serial)["findings"], "the fixtures must produce findings for this test to mean anything"
    assert report_json(serial)["errors"]
    assert report_json(pooled) == report_json(serial)
    # and the same as the engine's own default (serial, no executor)
    assert report_json(run_scan(["."], options)) == report_json(serial)


def test_pool_returns_results_in_input_order(project: Path) -> None:
    catalog = load_catalog()
    config = ScanConfig(root=str(project))
    files = sorted(str(p) for p in project.rglob("*.py"))
    assert len(files) >= 2 * parallel.MIN_FILES_PER_WORKER, "enough files for the pool to be used"
    shuffled = files[1::2] + files[0::2]
    results = [result for result, _ in analyze_many(shuffled, catalog, config, jobs=2)]
    assert [r.path for r in results] == shuffled
    serial = [result for result, _ in analyze_many(shuffled, catalog, config, jobs=1)]
    assert [(r.path, r.findings, r.errors, r.parsed) for r in results] == \
        [(r.path, r.findings, r.errors, r.parsed) for r in serial]


def test_the_heap_is_frozen_only_while_the_files_are_analysed(project: Path) -> None:
    import gc

    files = sorted(str(p) for p in project.rglob("*.py"))
    seen = []
    for jobs in (1, 2):
        for _ in analyze_many(files, load_catalog(), ScanConfig(root=str(project)), jobs=jobs):
            seen.append(gc.get_freeze_count())
        assert gc.get_freeze_count() == 0  # everything back in the collector's sight
    assert min(seen) > 0
    gc.freeze()  # somebody else's freeze is left as it was
    try:
        list(analyze_many(files[:3], load_catalog(), ScanConfig(root=str(project)), jobs=1))
        assert gc.get_freeze_count() > 0  # (minus what was freed meanwhile)
    finally:
        gc.unfreeze()


def test_pool_is_not_started_for_a_few_files(project: Path, monkeypatch) -> None:
    import concurrent.futures

    def refuse(*args, **kwargs):
        raise AssertionError("no process pool for a handful of files")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", refuse)
    files = sorted(str(p) for p in project.rglob("*.py"))[:3]
    results = list(analyze_many(files, load_catalog(), ScanConfig(root=str(project)), jobs=8))
    assert [r.path for r, _ in results] == files


def test_stamp_describes_the_bytes_analysed(tmp_path: Path) -> None:
    import hashlib

    source = tmp_path / "a.py"
    source.write_bytes(b"import requests\ndef f(u):\n    return requests.get(u)\n")
    result, stamp = parallel.analyze_with_stamp(str(source), load_catalog(), ScanConfig(root=str(tmp_path)))
    assert [f.rule for f in result.findings] == ["LLM003", "LLM006"]  # candidates: the project model decides
    assert result.index is not None and [f.name for f in result.index.functions] == ["<module>", "f"]
    assert stamp[2] == source.stat().st_size
    assert stamp[-1] == hashlib.sha256(source.read_bytes()).hexdigest()
    missing, no_stamp = parallel.analyze_with_stamp(str(tmp_path / "gone.py"), load_catalog(), ScanConfig())
    assert no_stamp is None and missing.errors[0].reason.startswith("cannot read")


def test_cli_jobs_gives_identical_json(cli, project: Path) -> None:
    one = cli("scan", "--isolated", "--no-cache", "--jobs", "1", "--format", "json", ".", cwd=project)
    two = cli("scan", "--isolated", "--no-cache", "--jobs", "2", "--format", "json", ".", cwd=project)
    assert one.returncode == two.returncode == 1
    assert json.loads(one.stdout) == json.loads(two.stdout)


@pytest.mark.parametrize("value", ["0", "-3"])
def test_cli_rejects_a_bad_jobs_value(cli, tmp_path: Path, value: str) -> None:
    result = cli("scan", "--jobs", value, ".", cwd=tmp_path)
    assert result.returncode == 2
    assert f"--jobs {value}" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
