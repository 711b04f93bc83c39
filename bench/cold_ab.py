"""Cold scans of one tree by two llmdoctor commands and ruff, interleaved round by round (best of N each).

    python bench/cold_ab.py DIR --before "CMD" --after "CMD" [--rounds 5] [--jobs N] [--tools-bin DIR]

CMD runs llmdoctor (e.g. `env PYTHONPATH=/tmp/base python -m llmdoctor.cli` for another tree's code; run
from outside the repository so that the cwd does not decide which code runs). On a machine shared with
other jobs the load moves between runs of bench_scan.py; interleaving before / after / ruff in every round
puts the three under the same load, so their ratios compare. Prints, per command, the best wall-clock and
CPU seconds (user + system of the whole process tree, workers included) and the ratios to ruff's, the
load average at each round, and whether the two commands' JSON reports are identical. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(elapsed, usage.ru_utime + usage.ru_stime)
"""


def measure(argv: list[str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir()).stdout.split()
    return float(out[0]), float(out[1])


def report(command: list[str], target: Path, jobs: list[str]) -> str:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([*command, "scan", "--isolated", "--no-gitignore", "--no-cache", "--format", "json",
                        "--exit-zero", "-o", out.name, *jobs, str(target)], check=True, capture_output=True,
                       cwd=tempfile.gettempdir())
        data = json.loads(Path(out.name).read_text())
    return json.dumps([data["findings"], data["errors"]], sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--before", required=True, help="the llmdoctor command before the change")
    parser.add_argument("--after", required=True, help="the llmdoctor command after the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=0, help="llmdoctor --jobs (default: its own default)")
    parser.add_argument("--tools-bin", type=Path, help="folder holding ruff (else PATH)")
    args = parser.parse_args(argv)
    ruff = shutil.which("ruff", path=str(args.tools_bin) if args.tools_bin else None)
    if ruff is None:
        print("ruff not found (--tools-bin)", file=sys.stderr)
        return 2
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    commands = {"before": shlex.split(args.before), "after": shlex.split(args.after)}
    runs = {name: [*command, "scan", "--isolated", "--no-gitignore", "--format", "json", "--exit-zero",
                   "--no-cache", *jobs, str(args.dir)] for name, command in commands.items()}
    runs["ruff"] = [ruff, "check", "--select", "ASYNC,LOG,G,S113", "--no-cache", "--no-respect-gitignore",
                    "--exit-zero", "-q", str(args.dir)]
    best: dict[str, list[float]] = {name: [float("inf"), float("inf")] for name in runs}
    loads = []
    for _ in range(max(1, args.rounds)):
        loads.append(os.getloadavg()[0])
        for name, argv_ in runs.items():
            wall, cpu = measure(argv_)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    ruff_wall, ruff_cpu = best["ruff"]
    print(f"{args.dir}: best of {args.rounds} interleaved rounds; load average "
          f"{min(loads):.1f}-{max(loads):.1f} (1 min, at each round's start)")
    for name, (wall, cpu) in best.items():
        print(f"  {name:<7} wall {wall:7.3f} s {wall / ruff_wall:6.1f}x ruff    CPU {cpu:7.3f} s {cpu / ruff_cpu:6.1f}x ruff")
    same = report(commands["before"], args.dir, jobs) == report(commands["after"], args.dir, jobs)
    print(f"  findings and errors identical before / after: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
