"""Before/after figures for the engine's hot path, in one process, on one directory, serial.

    python bench/engine_ablation.py DIR [--repeat 2]

Runs the same scan (every file, no cache, 1 job) with each speed-up switched off in turn and prints the
CPU seconds of each configuration and the files parsed:

  baseline      libcst `module.visit()` (rebuilds every node) + root-name pre-filter only, whole files
                parsed with libcst's node validation
  +name filter  every component of a table entry must occur in the file (llmdoctor/scan/prefilter.py)
  +fastwalk     read-only traversal, trivia skipped (llmdoctor/scan/fastwalk.py), callbacks for every node
  +handled only fastwalk calling back only for node types the visitor handles
  +regions      only the bodies that can matter are parsed (llmdoctor/scan/regions.py)
  current       + libcst's per-node validation skipped for its parser's trees (what ships)

Findings must be identical in every configuration (checked). CPU time (time.process_time) rather than
wall time, so the figures hold on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmdoctor.scan import engine, fastwalk, prefilter, visitor
from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan


def libcst_walk(root, on_visit, on_leave, wanted=(), handles=None):
    import libcst as cst

    class Adapter(cst.CSTVisitor):
        def on_visit(self, node):
            on_visit(node)
            return True

        def on_leave(self, original_node):
            on_leave(original_node)

    root.visit(Adapter())


def every_type_walk(root, on_visit, on_leave, wanted=(), handles=None):
    fastwalk.walk(root, on_visit, on_leave, wanted=wanted)


CONFIGS = {  # walker, name filter, regions, validation skipped
    "baseline": (libcst_walk, False, False, False),
    "+name filter": (libcst_walk, True, False, False),
    "+fastwalk": (every_type_walk, True, False, False),
    "+handled only": (fastwalk.walk, True, False, False),
    "+regions": (fastwalk.walk, True, True, False),
    "current": (fastwalk.walk, True, True, True),
}
SHIPPED = (engine.pruned_source, engine._parse)


def _validating_parse(source):
    import libcst as cst

    return cst.parse_module(source)


def run(target: Path, walker, name_filter: bool, regions: bool = True, skip_validation: bool = True):
    visitor.walk = walker
    original = prefilter.NameIndex.may_match
    if not name_filter:
        prefilter.NameIndex.may_match = lambda self, source: True
    engine.pruned_source = SHIPPED[0] if regions else (lambda source, facts, active, catalog: source)
    engine._parse = SHIPPED[1] if skip_validation else _validating_parse
    try:
        started = time.process_time()
        report = run_scan([str(target)], ScanOptions(isolated=True, respect_gitignore=False),
                          analyze=ScanExecutor(jobs=1, use_cache=False))
        return time.process_time() - started, report
    finally:
        prefilter.NameIndex.may_match = original
        visitor.walk = fastwalk.walk
        engine.pruned_source, engine._parse = SHIPPED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU time of the scan with each speed-up switched off.")
    parser.add_argument("dir", type=Path)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    run(args.dir, fastwalk.walk, True)  # warm the imports and the catalog's memo
    reference = None
    for label, config in CONFIGS.items():
        best = None
        for _ in range(max(1, args.repeat)):
            seconds, report = run(args.dir, *config)
            best = seconds if best is None else min(best, seconds)
        found = [(f.path, f.line, f.column, f.rule, f.message) for f in report.findings]
        reference = found if reference is None else reference
        same = "same findings" if found == reference else "DIFFERENT FINDINGS"
        parsed = report.summary_extra.get("parsed")
        print(f"{label:<14} {best:8.2f} s CPU   parsed {parsed:>5} of {report.files_checked}   "
              f"{len(found)} findings ({same})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
