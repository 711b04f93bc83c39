"""Benchmark `llmdoctor scan` against ruff, Fixit and flake8-async on the same files, in the same run.

    python bench/bench_scan.py                       # synthetic corpus: 100, 1,000 and 10,000 files
    python bench/bench_scan.py --sizes 100,1000      # fewer sizes
    python bench/bench_scan.py DIR [DIR ...]         # any directories (e.g. a real project)
    options: --jobs N  --repeat R  --tools-bin DIR  --peers-max-files N  --llmdoctor "CMD"  --json FILE

Not a test: it prints figures. For every corpus:

  llmdoctor cold     `scan --no-cache` (nothing reused), with --jobs N (default: the CPUs) and with --jobs 1
  llmdoctor first    `scan` with an empty cache folder (cold + writing the cache)
  llmdoctor warm     `scan` again, nothing changed (every file a cache hit)
  pre-commit         in a copy of the corpus, warm: 3 files changed (a comment line inserted at the top, so every
                     line moves), `scan` of those 3 paths as pre-commit runs it (the project around them is
                     the model); best of --repeat (at least 3), each with new edits; ruff on the same 3 files;
                     findings compared with `--no-cache` on the same state
  ruff               `ruff check --select ASYNC,LOG,G,S113 --no-cache` (the closest ruff rule set)
  fixit              `fixit lint` (its default rules; a libcst linter like llmdoctor)
  flake8-async       `flake8-async FILES` when installed

with files/s and MB/s for the cold run, the pre-filter skip rate (files never parsed, from the scan's
JSON summary), the peak RSS of the largest llmdoctor process, every time as a ratio to ruff's, and a check
that cold, cold with 1 job and warm give identical findings. Each time is shown as wall-clock and as CPU
seconds (user + system of the whole process tree, workers included): on a shared machine the CPU figure
is the stable one. Times are the best of --repeat runs
(peers above --peers-max-files files run once, Fixit is skipped there: it takes minutes).

The synthetic corpus (bench/corpus_gen.py, deterministic) is generated into bench/corpus/ (gitignored).
Peers are found in --tools-bin (e.g. a separate venv: `python3 -m venv /tmp/benchvenv &&
/tmp/benchvenv/bin/pip install ruff fixit flake8-async`, then `--tools-bin /tmp/benchvenv/bin`), else on
PATH. After all sizes: the least-squares slope of cold time against file count (linear scaling check).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from corpus_gen import generate

MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(elapsed, code, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


@dataclass
class Timing:
    seconds: float
    code: int
    peak_kib: int
    cpu: float  # user + system seconds of the whole process tree


@dataclass
class CorpusResult:
    name: str
    files: int
    bytes: int
    times: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds (user + system) of the same runs
    peak_mib: float = 0.0
    prefiltered: int = 0
    parsed: int = 0
    findings: int = 0
    identical: bool | None = None
    precommit_identical: bool | None = None
    precommit_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def measure(command: list[str], cwd: Path | None = None, env: dict | None = None) -> Timing:
    """Wall time, exit code and peak RSS (largest process of the tree, KiB) of one command."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True,
                         cwd=cwd, env=env, check=True)
    seconds, code, peak, cpu = out.stdout.split()
    return Timing(float(seconds), int(code), int(peak), float(cpu))


def best(command: list[str], repeat: int, **kwargs) -> Timing:
    runs = [measure(command, **kwargs) for _ in range(max(1, repeat))]
    return min(runs, key=lambda t: t.seconds)


def tool(name: str, tools_bin: Path | None) -> str | None:
    if tools_bin is not None and (tools_bin / name).exists():
        return str(tools_bin / name)
    return shutil.which(name)


def python_files(root: Path) -> list[Path]:
    skip = {".git", ".venv", "venv", "node_modules", "__pycache__", ".llmdoctor_cache", "build", "dist"}
    found = []
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.endswith(".egg-info"))
        found.extend(Path(current, f) for f in sorted(files) if f.endswith((".py", ".pyi")))
    return found


def scan_json(llmdoctor: list[str], target: Path, extra: list[str], env: dict, paths: list[str] | None = None) -> dict:
    """The JSON report of `scan` of `target` (or of `paths` inside it, run from there)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([*llmdoctor, "scan", "--isolated", "--no-gitignore", "--format", "json", "-o", out.name,
                        "--exit-zero",
                        *extra, *(paths or [str(target)])], env=env, check=True, capture_output=True,
                       cwd=target if paths else None)
        return json.loads(Path(out.name).read_text())


def findings_key(report: dict) -> list:
    return [json.dumps(f, sort_keys=True) for f in report["findings"]] + \
        [json.dumps(e, sort_keys=True) for e in report["errors"]]


def record(result: CorpusResult, label: str, timing: Timing) -> Timing:
    result.times[label] = timing.seconds
    result.cpu[label] = timing.cpu
    return timing


def bench_corpus(name: str, target: Path, args, llmdoctor: list[str], env: dict) -> CorpusResult:
    files = python_files(target)
    result = CorpusResult(name=name, files=len(files), bytes=sum(f.stat().st_size for f in files))
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    scan = [*llmdoctor, "scan", "--isolated", "--no-gitignore", "--format", "json", "--exit-zero", str(target)]
    repeat = args.repeat if result.files <= args.peers_max_files else 1

    cold = record(result, "llmdoctor cold", best([*scan, "--no-cache", *jobs], repeat, env=env))
    result.peak_mib = cold.peak_kib / 1024
    if not args.skip_serial:
        record(result, "llmdoctor cold, 1 job", best([*scan, "--no-cache", "--jobs", "1"], repeat, env=env))
    with tempfile.TemporaryDirectory() as cache:
        first = record(result, "llmdoctor first (writes cache)", measure([*scan, "--cache-dir", cache, *jobs], env=env))
        record(result, "llmdoctor warm", best([*scan, "--cache-dir", cache, *jobs], max(repeat, 3), env=env))
        result.peak_mib = max(result.peak_mib, first.peak_kib / 1024)
        reference = scan_json(llmdoctor, target, ["--no-cache", *jobs], env)
        cached = scan_json(llmdoctor, target, ["--cache-dir", cache, *jobs], env)
    summary = reference["summary"]
    result.prefiltered, result.parsed = summary.get("prefiltered", 0), summary.get("parsed", 0)
    result.findings = summary["findings"]
    same = findings_key(cached) == findings_key(reference)
    if not args.skip_serial:
        serial = scan_json(llmdoctor, target, ["--no-cache", "--jobs", "1"], env)
        same = same and findings_key(serial) == findings_key(reference)
    result.identical = same

    ruff = tool("ruff", args.tools_bin)
    if not args.skip_precommit:
        bench_precommit(result, target, files, args, llmdoctor, env, ruff)
    if ruff:
        record(result, "ruff", best([ruff, "check", "--select", "ASYNC,LOG,G,S113", "--no-cache",
                                     "--no-respect-gitignore", "--exit-zero", "-q", str(target)], repeat))
    else:
        result.notes.append("ruff not installed")
    fixit = tool("fixit", args.tools_bin)
    if fixit and result.files <= args.peers_max_files:
        record(result, "fixit", measure([fixit, "lint", str(target)]))
    elif fixit:
        result.notes.append(f"fixit skipped above {args.peers_max_files} files (--peers-max-files)")
    else:
        result.notes.append("fixit not installed")
    flake8_async = tool("flake8-async", args.tools_bin)
    if flake8_async and result.files <= args.peers_max_files:
        record(result, "flake8-async", measure([flake8_async, *map(str, files)]))
    elif flake8_async:
        result.notes.append(f"flake8-async skipped above {args.peers_max_files} files")
    return result


PRECOMMIT = "llmdoctor pre-commit, 3 changed"
RUFF_PRECOMMIT = "ruff, the same 3 files"


def bench_precommit(result: CorpusResult, target: Path, files: list[Path], args, llmdoctor: list[str], env: dict,
                    ruff: str | None) -> None:
    """A warm project where 3 files changed, scanned as pre-commit does: only those 3 paths are passed."""
    by_size = sorted(files, key=lambda f: (f.stat().st_size, str(f)))
    if len(by_size) < 3:
        return
    chosen = sorted({by_size[int(len(by_size) * q)] for q in (0.5, 0.75, 0.9)})
    if len(chosen) < 3:
        chosen = by_size[-3:]
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work, "project")
        shutil.copytree(target, copy, ignore=shutil.ignore_patterns(".llmdoctor_cache", "__pycache__"))
        if not any((copy / marker).exists() for marker in ("pyproject.toml", "setup.cfg", "setup.py", ".git")):
            (copy / "pyproject.toml").write_text("")
        paths = [str(f.relative_to(target)) for f in chosen]
        result.precommit_files = paths
        cache = str(Path(work, "cache"))
        scan = [*llmdoctor, "scan", "--isolated", "--no-gitignore", "--format", "json", "--exit-zero",
                "--cache-dir", cache, *(["--jobs", str(args.jobs)] if args.jobs else [])]
        measure([*scan, "."], cwd=copy, env=env)  # the project's cache, as a previous commit left it
        time.sleep(2.1)  # older than the cache's racy window: the unchanged files are trusted by their stat
        measure([*scan, "."], cwd=copy, env=env)
        texts = {path: (copy / path).read_text(encoding="utf-8", errors="surrogateescape") for path in paths}
        runs = []
        for attempt in range(max(args.repeat, 3)):
            for path, text in texts.items():
                (copy / path).write_text(f"# edit {attempt} {time.time_ns()}\n{text}", encoding="utf-8",
                                         errors="surrogateescape")
            runs.append(measure([*scan, *paths], cwd=copy, env=env))
        record(result, PRECOMMIT, min(runs, key=lambda t: t.seconds))
        warm = scan_json([*llmdoctor], copy, ["--cache-dir", cache], env, paths=paths)
        cold = scan_json([*llmdoctor], copy, ["--no-cache"], env, paths=paths)
        result.precommit_identical = findings_key(warm) == findings_key(cold)
        if ruff:
            record(result, RUFF_PRECOMMIT, best([ruff, "check", "--select", "ASYNC,LOG,G,S113", "--no-cache",
                                                 "--exit-zero", "-q", *paths], max(args.repeat, 3), cwd=copy))


def print_result(result: CorpusResult) -> None:
    mb = result.bytes / 1e6
    cold = result.times["llmdoctor cold"]
    ruff = result.times.get("ruff")
    ruff_cpu = result.cpu.get("ruff")
    print(f"\n== {result.name}: {result.files} files, {mb:.2f} MB")
    print(f"  {'':<32} {'wall':>11} {'':>13} {'CPU (user+sys)':>16}")
    for label, seconds in result.times.items():
        base, base_cpu = ruff, ruff_cpu
        if label in (PRECOMMIT, RUFF_PRECOMMIT):  # against ruff on the same 3 files
            base, base_cpu = result.times.get(RUFF_PRECOMMIT), result.cpu.get(RUFF_PRECOMMIT)
        ratio = f"{seconds / base:8.1f}x ruff" if base else ""
        cpu = result.cpu.get(label, 0.0)
        cpu_ratio = f"{cpu / base_cpu:8.1f}x ruff" if base_cpu else ""
        print(f"  {label:<32} {seconds:9.3f} s {ratio}  {cpu:9.3f} s {cpu_ratio}")
    print(f"  cold throughput                  {result.files / cold:9.1f} files/s  {mb / cold:.2f} MB/s")
    skipped = result.prefiltered / result.files if result.files else 0
    print(f"  pre-filter skipped               {result.prefiltered} of {result.files} files ({skipped:.0%}); "
          f"parsed {result.parsed}")
    print(f"  peak RSS (largest process)       {result.peak_mib:9.1f} MiB")
    print(f"  findings                         {result.findings}; identical cold / 1 job / warm: "
          f"{'yes' if result.identical else 'NO'}")
    if result.precommit_files:
        print(f"  pre-commit files                 {', '.join(result.precommit_files)}; findings identical to "
              f"--no-cache: {'yes' if result.precommit_identical else 'NO'}")
    for note in result.notes:
        print(f"  note: {note}")


def slope(results: list[CorpusResult], key: str, kind: str = "times") -> tuple[float, float] | None:
    points = [(r.files, getattr(r, kind)[key]) for r in results if key in getattr(r, kind)]
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    b = sxy / sxx
    a = mean_y - b * mean_x
    ss_tot = sum((y - mean_y) ** 2 for _, y in points)
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in points)
    return b, (1 - ss_res / ss_tot) if ss_tot else 1.0


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cpus} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark llmdoctor scan against ruff / Fixit / flake8-async.")
    parser.add_argument("dirs", nargs="*", type=Path, help="directories to scan instead of the synthetic corpus")
    parser.add_argument("--sizes", default="100,1000,10000", help="synthetic corpus sizes (files)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=0, help="llmdoctor --jobs (default: its own default)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing, best kept")
    parser.add_argument("--tools-bin", type=Path, help="folder holding ruff / fixit / flake8-async")
    parser.add_argument("--peers-max-files", type=int, default=1000,
                        help="run Fixit and flake8-async only on corpora up to this many files")
    parser.add_argument("--skip-serial", action="store_true", help="skip the --jobs 1 runs")
    parser.add_argument("--skip-precommit", action="store_true", help="skip the pre-commit row")
    parser.add_argument("--llmdoctor", default=f"{shlex.quote(sys.executable)} -m llmdoctor.cli",
                        help="command that runs llmdoctor (default: this interpreter)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    llmdoctor = shlex.split(args.llmdoctor)
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("LLMDOCTOR_CACHE_DIR", None)
    # llmdoctor as installed: pip compiles a package's bytecode when it installs it; without it (a checkout in
    # an environment that sets PYTHONDONTWRITEBYTECODE) every run would compile llmdoctor's own sources again
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"machine: {machine()}")
    version = subprocess.run([*llmdoctor, "--version"], capture_output=True, text=True, env=env,
                             check=False).stdout.strip()
    print(f"tool:    {version}")
    for name in ("ruff", "fixit", "flake8-async"):
        path = tool(name, args.tools_bin)
        print(f"peer:    {name}: {path or 'not installed'}")

    targets: list[tuple[str, Path]] = []
    if args.dirs:
        targets = [(str(d), d.resolve()) for d in args.dirs]
    else:
        for size in (int(s) for s in args.sizes.split(",") if s.strip()):
            folder = BENCH / "corpus" / f"synthetic-{size}-seed{args.seed}"
            if not folder.is_dir():
                generate(folder, size, args.seed)
            targets.append((f"synthetic {size}", folder))

    results = []
    for name, folder in targets:
        started = time.perf_counter()
        result = bench_corpus(name, folder, args, llmdoctor, env)
        print_result(result)
        print(f"  (benchmark of this corpus took {time.perf_counter() - started:.0f} s)")
        results.append(result)
    for kind, label in (("times", "wall"), ("cpu", "CPU")):
        fit = slope(results, "llmdoctor cold", kind)
        if fit and not args.dirs:
            b, r2 = fit
            print(f"scaling: cold {label} time = {b * 1000:.2f} ms per file (least squares over "
                  f"{len(results)} sizes, R^2 = {r2:.4f})")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
