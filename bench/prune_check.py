"""Check on real code that leaving bodies out of the parse (llmdoctor/scan/regions.py), or the whole file when
nothing is left where a rule could report, changes no finding.

    python bench/prune_check.py DIR [DIR ...] [--jobs 2]

Every .py file under the folders is analysed twice in the same process, all rules enabled, with and without
the pruning; findings (rule, line, column, end, message) and input errors must be identical. Prints the
files whose results differ, the bytes libcst parsed with and without the pruning, and the CPU time of each.
Not a test: it needs corpora this repository does not ship (docs/performance.md lists the ones used).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmdoctor.scan import engine
from llmdoctor.scan.catalog import load_catalog
from llmdoctor.scan.settings import ScanConfig

CATALOG = load_catalog()
CONFIG = ScanConfig()
_parsed_chars = [0]


def _counting_prune(source, facts, active, catalog):
    text, may_report = _original_prune(source, facts, active, catalog)
    _parsed_chars[0] += len(text) if may_report else 0
    return text, may_report


_original_prune = engine.pruned


def _no_prune(source, facts, active, catalog):
    _parsed_chars[0] += len(source)
    return source, True


def _key(result):
    return ([(f.rule, f.line, f.column, f.end_line, f.end_column, f.message) for f in result.findings],
            [(e.line, e.reason) for e in result.errors])


def check(path: str) -> tuple[str, bool, int, int, float, float]:
    data = Path(path).read_bytes()
    out = []
    for prune in (_counting_prune, _no_prune):
        engine.pruned = prune
        _parsed_chars[0] = 0
        started = time.process_time()
        result = engine.analyze_source(path, data, CATALOG, CONFIG)
        out.append((_key(result), _parsed_chars[0], time.process_time() - started))
    (pruned, pruned_chars, pruned_cpu), (full, full_chars, full_cpu) = out
    return path, pruned == full, pruned_chars, full_chars, pruned_cpu, full_cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    paths = [str(p) for d in args.dirs for p in sorted(Path(d).rglob("*.py")) if p.is_file()]
    differ: list[str] = []
    totals = [0, 0, 0.0, 0.0]
    with ProcessPoolExecutor(args.jobs) as pool:
        for path, same, pruned_chars, full_chars, pruned_cpu, full_cpu in pool.map(check, paths, chunksize=16):
            if not same:
                differ.append(path)
                print(f"DIFFERENT: {path}", flush=True)
            for index, value in enumerate((pruned_chars, full_chars, pruned_cpu, full_cpu)):
                totals[index] += value
    print(f"{len(paths)} files; results differ in {len(differ)}")
    print(f"characters parsed by libcst: {totals[0]:,} pruned vs {totals[1]:,} whole "
          f"({totals[0] / max(totals[1], 1):.0%})")
    print(f"analysis CPU: {totals[2]:.1f} s pruned vs {totals[3]:.1f} s whole")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
