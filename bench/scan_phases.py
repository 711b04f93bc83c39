"""Where a cold scan's CPU goes, phase by phase, in one process (1 job, no cache, best of N runs).

    python bench/scan_phases.py DIR [--repeat 3]

Prints the CPU seconds of: CPython's `ast` parse (`codefacts.parse_python`), the facts walk
(`codefacts.read_code`), the project model's index of each module (`index.index_module`), the region
decisions (`regions.pruned`), libcst's parse (without, then with its per-node validation), the walk and the
rules (`visitor.run_rules`), positions (`positions.positions_for`; then with libcst's whole-module provider
instead of the statement-local path), the project link (`link._link`: the model, the contexts, the chains),
and the rest (decoding, first-stage pre-filter, discovery, results). Not a test: figures for
docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import libcst as cst

from llmdoctor.scan import engine, positions, visitor
from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.project import index, link
from llmdoctor.scan.runner import ScanOptions, run_scan

PHASES = {
    "ast parse": (engine, "parse_python"),
    "facts walk": (engine, "read_code"),
    "project index": (index, "index_module"),
    "region decisions": (engine, "pruned"),
    "libcst parse": (engine, "_parse"),
    "walk + rules": (visitor, "run_rules"),
    "positions": (positions, "positions_for"),
    "project link": (link, "_link"),
}


def timed(spent: Counter, label: str, function):
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - started
    return wrapper


def scan(target: Path) -> None:
    run_scan([str(target)], ScanOptions(isolated=True, respect_gitignore=False),
             analyze=ScanExecutor(jobs=1, use_cache=False))


def measure(target: Path, repeat: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(max(1, repeat)):
        spent: Counter = Counter()
        originals = [(module, name, getattr(module, name)) for module, name in PHASES.values()]
        for label, (module, name) in PHASES.items():
            setattr(module, name, timed(spent, label, getattr(module, name)))
        try:
            started = time.process_time()
            scan(target)
            spent["total"] = time.process_time() - started
        finally:
            for module, name, original in originals:
                setattr(module, name, original)
        for label, seconds in spent.items():
            best[label] = min(best.get(label, seconds), seconds)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    scan(args.dir)  # warm the imports and the catalog's memo
    shipped = measure(args.dir, args.repeat)
    fast_parse = engine._parse
    engine._parse = cst.parse_module  # libcst's own validating parse
    try:
        validating = measure(args.dir, args.repeat)["libcst parse"]
    finally:
        engine._parse = fast_parse
    statement_local = positions._by_statement
    positions._by_statement = lambda module, source, wanted: None  # every file falls back to the whole module
    try:
        whole_module = measure(args.dir, args.repeat).get("positions", 0.0)
    finally:
        positions._by_statement = statement_local
    for label in PHASES:
        print(f"{label:<28} {shipped.get(label, 0.0):7.2f} s CPU")
    print(f"{'  (validating parse)':<28} {validating:7.2f} s CPU")
    print(f"{'  (whole-module positions)':<28} {whole_module:7.2f} s CPU")
    print(f"{'rest':<28} {shipped['total'] - sum(shipped.get(label, 0.0) for label in PHASES):7.2f} s CPU")
    print(f"{'total':<28} {shipped['total']:7.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
