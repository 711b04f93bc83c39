"""Prove `scan --fix` and `--add-noqa` on real code: every fix applied, every fixed file compiles, a re-scan no
longer offers the applied fixes, a second `--fix` changes nothing; `--add-noqa` leaves a clean scan and
ruff's RUF100 quiet.

    python bench/fix_corpus.py DIR [DIR ...]          # each DIR: a corpus (e.g. bench/corpus/apps/<name>)
    options: --llmdoctor CMD  --ruff CMD  --fix-timeout S  --json FILE  --keep DIR

Not a test: it prints figures (docs/scan.md "Fixes on real code"). Each corpus is copied to a temporary
folder; the originals are never touched. Steps, all with `--isolated --no-cache`:

  1. scan --format json                                   findings, and those with an automatic fix
  2. scan --fix --unsafe-fixes --fix-timeout S --format json   fixes applied and skipped, files changed
  3. every changed file: compile() with this interpreter (and the original compiled)
  4. scan --unsafe-fixes --fix-timeout S --format json     no applicable fix left but the skipped ones
  5. scan --fix --unsafe-fixes ... again                    no file changes (sha256 of every file)
  6. on a fresh copy: scan --add-noqa, then scan            exit 0, no finding
  7. ruff check --isolated --select RUF100 --config "lint.external = ['LLM']"   on the noqa'd copy: nothing
     it did not already say about the original (RUF100 flags the project's own noqa of other linters)

The corpora behind the figures in docs/scan.md (all gitignored under bench/corpus/):
- apps/<name>: the .py files of 12 LLM applications' wheels (`pip download --no-deps NAME`, unzipped):
  litellm==1.110.2 aider-chat gpt-researcher khoj langroid smolagents paper-qa vanna mem0ai agno crewai dspy;
- apps2/<name>: likewise langchain-community llama-index-core haystack-ai semantic-kernel chainlit
  open-interpreter autogen-agentchat autogen-ext txtai marvin letta;
- precision/<name>: the pinned sdists of bench/precision (`python bench/precision/fetch_corpus.py`), of which
  fschat lightrag r2r openai-forward llm ragas camel lm-eval agentscope (the others are already in apps/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "NO_COLOR": "1"})


def scan_json(llmdoctor: list[str], cwd: Path, *extra: str) -> tuple[dict, int]:
    proc = run([*llmdoctor, "scan", ".", "--isolated", "--no-cache", "--format", "json", *extra], cwd)
    try:
        return json.loads(proc.stdout), proc.returncode
    except json.JSONDecodeError:
        sys.exit(f"llmdoctor did not print JSON (exit {proc.returncode}): {proc.stderr[-2000:]}")


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.py")) if p.is_file()}


def compiles(path: Path) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as err:
        return str(err)
    return None


def fixable(data: dict) -> int:
    return sum(1 for f in data["findings"] if isinstance(f.get("autofix"), dict))


def prove(corpus: Path, llmdoctor: list[str], ruff: list[str] | None, timeout: str, keep: Path | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="fixcorpus-"))
    fixed, noqa = work / "fixed", work / "noqa"
    shutil.copytree(corpus, fixed, symlinks=True)
    shutil.copytree(corpus, noqa, symlinks=True)
    unsafe = ["--unsafe-fixes", "--fix-timeout", timeout]
    before, _ = scan_json(llmdoctor, fixed, *unsafe)
    originals = digests(fixed)
    compiled_before = {name for name in originals if compiles(fixed / name) is None}
    fix, _ = scan_json(llmdoctor, fixed, "--fix", *unsafe)
    summary = fix.get("fixes") or {}
    changed = summary.get("changed_files", [])
    broken = {name: problem for name in changed if name in compiled_before
              and (problem := compiles(fixed / name)) is not None}
    after, _ = scan_json(llmdoctor, fixed, *unsafe)
    state = digests(fixed)
    again, _ = scan_json(llmdoctor, fixed, "--fix", *unsafe)
    second_changes = [name for name, digest in digests(fixed).items() if state.get(name) != digest]
    by_kind: dict[str, int] = {}
    for applied in summary.get("applied", []):
        key = f"{applied['rule']} {applied['kind']}"
        by_kind[key] = by_kind.get(key, 0) + 1
    skipped_reasons: dict[str, int] = {}
    for skipped in summary.get("skipped", []):
        key = f"{skipped['rule']} {skipped['kind']}: {skipped['reason'].split(':')[0]}"
        skipped_reasons[key] = skipped_reasons.get(key, 0) + 1
    noqa_proc = run([*llmdoctor, "scan", ".", "--isolated", "--no-cache", "--add-noqa", "--format", "json"], noqa)
    noqa_data = json.loads(noqa_proc.stdout) if noqa_proc.stdout.strip().startswith("{") else {}
    rescan = run([*llmdoctor, "scan", ".", "--isolated", "--no-cache"], noqa)
    rescan_data, _ = scan_json(llmdoctor, noqa)
    ruff_result = None
    if ruff:  # what RUF100 says about the noqa'd tree that it did not say about the original
        def ruf100(tree: Path) -> set[str]:
            proc = run([*ruff, "check", "--isolated", "--no-cache", "--select", "RUF100", "--config",
                        "lint.external = ['LLM']", "--output-format", "concise", "."], tree)
            return {line for line in (proc.stdout + proc.stderr).splitlines() if ": RUF100 " in line
                    or "noqa" in line.lower()}
        new = sorted(ruf100(noqa) - ruf100(corpus))
        ruff_result = {"new_diagnostics": len(new), "sample": new[:10]}
    result = {
        "corpus": str(corpus), "files": len(originals),
        "findings": before["summary"]["findings"], "with_fix": fixable(before),
        "applied": len(summary.get("applied", [])), "applied_by_kind": by_kind,
        "skipped": len(summary.get("skipped", [])), "skipped_by_reason": skipped_reasons,
        "files_changed": len(changed), "fixed_files_not_compiling": broken,
        "after_findings": after["summary"]["findings"], "after_applicable": fixable(after),
        "after_skipped_again": len((again.get("fixes") or {}).get("skipped", [])),
        "second_fix_applied": len((again.get("fixes") or {}).get("applied", [])),
        "second_fix_changed_files": second_changes,
        "noqa_added": noqa_data.get("added"), "noqa_files": len(noqa_data.get("files", [])),
        "noqa_unsilenced": len(noqa_data.get("unsilenced", [])),
        "rescan_after_noqa_exit": rescan.returncode, "rescan_after_noqa_tail": rescan.stdout.strip()[-300:],
        "rescan_after_noqa_findings": rescan_data["summary"]["findings"],
        # exit 2 where a file of the original could not be checked either (a syntax error for this Python)
        "inputs_not_checked_before": len(before.get("errors", [])),
        "inputs_not_checked_after_noqa": len(rescan_data.get("errors", [])),
        "ruff_rf100": ruff_result,
    }
    if keep:
        target = keep / corpus.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(work, target, symlinks=True)
    shutil.rmtree(work, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--llmdoctor", default=str(Path(sys.executable).with_name("llmdoctor")))
    parser.add_argument("--ruff", default=shutil.which("ruff") or str(Path(sys.executable).with_name("ruff")))
    parser.add_argument("--fix-timeout", default="30")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="copy the fixed and noqa'd trees here")
    args = parser.parse_args()
    ruff = shlex.split(args.ruff) if args.ruff and Path(shlex.split(args.ruff)[0]).exists() else None
    results = []
    for corpus in args.corpora:
        result = prove(corpus.resolve(), shlex.split(args.llmdoctor), ruff, args.fix_timeout, args.keep)
        results.append(result)
        print(json.dumps(result, indent=2), flush=True)
    totals = {key: sum(r[key] for r in results) for key in
              ("files", "findings", "with_fix", "applied", "skipped", "files_changed", "after_findings",
               "after_applicable", "second_fix_applied", "noqa_added", "noqa_unsilenced")}
    totals["fixed_files_not_compiling"] = sum(len(r["fixed_files_not_compiling"]) for r in results)
    totals["second_fix_changed_files"] = sum(len(r["second_fix_changed_files"]) for r in results)
    totals["rescans_after_noqa_not_clean"] = sum(1 for r in results if r["rescan_after_noqa_exit"] != 0)
    totals["rescan_after_noqa_findings"] = sum(r["rescan_after_noqa_findings"] for r in results)
    totals["rescans_with_new_unchecked_inputs"] = sum(
        1 for r in results if r["inputs_not_checked_after_noqa"] > r["inputs_not_checked_before"])
    totals["ruff_rf100_new_diagnostics"] = sum(r["ruff_rf100"]["new_diagnostics"] for r in results if r["ruff_rf100"])
    print("TOTAL", json.dumps(totals, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"corpora": results, "totals": totals}, indent=2))


if __name__ == "__main__":
    main()
