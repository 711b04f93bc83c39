"""A fixed-seed slice of bench/fuzz/fuzz.py (the full run: docs/reliability.md): a few cases of every target,
seconds not minutes. A failure prints the case; `python bench/fuzz/fuzz.py TARGET --cases N --seed S --save
DIR` reproduces it and saves the input."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "bench" / "fuzz" / "fuzz.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("llmdoctor_fuzz", HARNESS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["llmdoctor_fuzz"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("target", "cases"), [("nginx", 12), ("kv", 40), ("tokens", 10), ("probe", 6)])
def test_in_process_targets_hold(fuzz, target, cases, tmp_path):
    outcome = fuzz.TARGETS[target](cases, 20260101, tmp_path)
    assert outcome.cases == cases
    assert outcome.failures == [], outcome.failures[:3]
    assert len(outcome.exit_codes) >= 2 or target == "probe"  # the generators reach more than one verdict


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs and raw-byte file names")
def test_scan_batch_holds_across_jobs_and_the_cache(fuzz, tmp_path, monkeypatch):
    pytest.importorskip("hypothesmith")
    monkeypatch.setattr(fuzz, "BATCH", 16)
    outcome = fuzz.fuzz_scan(16, 20260101, tmp_path, timeout=240)
    assert outcome.cases == 16 and outcome.failures == [], outcome.failures[:3]
