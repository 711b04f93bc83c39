"""Hostile input to `llmdoctor scan` (issue 12): each reproduction is generated here, small, and must give an
exit code, a message naming the file (and line or key), the other files' results intact, and no hang.

Timeouts below are hang guards for the subprocess, never timed assertions.
"""

from __future__ import annotations

import codecs
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from llmdoctor.scan import cache as cache_module
from llmdoctor.scan import parallel
from llmdoctor.scan.parallel import ScanExecutor
from llmdoctor.scan.runner import ScanOptions, run_scan

# a finding of a libcst rule (LLM006), so that every file holding it is parsed by libcst
HIT = "import requests\n\ndef handler(url):\n    requests.get(url)\n"
GUARD = 60  # seconds: a hang guard only


def report_of(result) -> dict:
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def scan_json(cli, root: Path, *args: str, env: dict | None = None) -> tuple[int, dict]:
    result = cli("scan", "--format", "json", *args, cwd=root, env=env, timeout=GUARD)
    return result.returncode, report_of(result)


def cli_result(root: Path):
    from conftest import run_llmdoctor

    result = run_llmdoctor("scan", "--no-cache", "--jobs", "1", ".", cwd=root, timeout=GUARD)
    assert "Traceback" not in result.stderr and "Found" in result.stdout, result
    return result


def run_main(args: list[str], cwd: Path, capsys, monkeypatch, env: dict | None = None):
    """The CLI in this process (no interpreter start-up): (exit code, stdout, stderr)."""
    from llmdoctor.cli import main

    monkeypatch.chdir(cwd)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def project_with(root: Path, extra: dict[str, str], ok_files: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for index in range(ok_files):
        (root / f"ok{index}.py").write_text(HIT)
    for name, text in extra.items():
        (root / name).write_text(text)
    return root


# ----------------------------------------------------------------------------- 1. libcst crashes


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_and_chain_that_segfaults_libcst_is_one_input_error(tmp_path, jobs, capsys, monkeypatch):
    chain = HIT + "    x = " + " and ".join(["a"] * 8_000) + "\n"  # libcst: SIGSEGV (stack overflow)
    # (a def no rule needs would be left out of libcst's parse, its header too: this one reports)
    inside = HIT + "\ndef g(url):\n    return requests.get(url) or " + " or ".join(["b"] * 7_999) + "\n"
    root = project_with(tmp_path, {"chain.py": chain, "inside.py": inside}, ok_files=20)
    code, out, _ = run_main(["scan", "--format", "json", "--no-cache", "--jobs", jobs, "."], root, capsys,
                            monkeypatch)
    report = json.loads(out)
    assert code == 1
    assert sorted(f["path"] for f in report["findings"]) == sorted(f"ok{i}.py" for i in range(20))
    errors = {e["path"]: e for e in report["errors"]}
    assert set(errors) == {"chain.py", "inside.py"}
    assert errors["chain.py"]["line"] == 5 and errors["inside.py"]["line"] == 7
    assert all("and`/`or` chain of 8,000 parts" in e["reason"] for e in errors.values())
    if jobs == "1":  # the real command too: no SIGSEGV (exit 139), the report on stdout
        assert cli_result(root).returncode == 1


def _killing_analyze(real):
    parent = os.getpid()

    def analyze(path, data, catalog, config, **options):
        if "crash" in os.path.basename(path) and os.getpid() != parent:
            import faulthandler

            faulthandler.disable()  # pytest's would print the stack of the "crash" (a real one prints nothing)
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(path, data, catalog, config, **options)
    return analyze


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="isolation uses fork")
def test_a_dead_worker_costs_no_other_file_its_result(tmp_path, monkeypatch):
    """Any crash of native code in a worker (the pool's workers are forked: they see this patch): the files of
    the broken pool are re-run, the culprit alone in its own process."""
    root = project_with(tmp_path / "p", {"crash_a.py": HIT, "crash_b.py": HIT}, ok_files=30)
    options = ScanOptions(cwd=str(root), isolated=True)
    expected = run_scan(["."], options, analyze=ScanExecutor(jobs=1, use_cache=False))
    monkeypatch.setattr(parallel, "analyze_module", _killing_analyze(parallel.analyze_module))
    report = run_scan(["."], options, analyze=ScanExecutor(jobs=2, use_cache=False))
    assert report.findings == [f for f in expected.findings if "crash" not in f.path]
    assert [(e.path, "SIGSEGV" in e.reason) for e in report.errors] == [("crash_a.py", True), ("crash_b.py", True)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="isolation uses fork")
def test_a_file_python_rejects_is_never_handed_to_libcst(tmp_path, monkeypatch):
    """CPython's ast reads every file for the project model: a syntax error is reported in its words, and
    libcst (which nothing could protect from such a file) never sees it, in this process or another."""
    from llmdoctor.scan import engine

    parent, seen = os.getpid(), tmp_path / "seen"
    real = engine.analyze_module

    def spy(path, data, catalog, config, rules=True, isolate=None):
        where = "parent" if os.getpid() == parent else "child"
        with open(seen, "a") as log:
            log.write(f"{os.path.basename(path)} {where} {isolate is not None}\n")
        return real(path, data, catalog, config, rules=rules, isolate=isolate)

    root = project_with(tmp_path / "p", {"broken.py": HIT + "def (:\n"}, ok_files=1)
    monkeypatch.setattr(parallel, "analyze_module", spy)
    report = run_scan(["."], ScanOptions(cwd=str(root), isolated=True),
                      analyze=ScanExecutor(jobs=1, use_cache=False))
    assert [e.path for e in report.errors] == ["broken.py"] and "syntax error" in report.errors[0].reason
    calls = seen.read_text().splitlines()
    assert "broken.py parent True" in calls and not any(c.startswith("broken.py child") for c in calls)
    assert "ok0.py parent True" in calls and not any(c.startswith("ok0.py child") for c in calls)
    assert [f.path for f in report.findings] == ["ok0.py"]


# ----------------------------------------------------------------------------- 2.-5. the cache


def _scan(root: Path, **executor):
    executor.setdefault("jobs", 1)
    ex = ScanExecutor(**executor)
    report = run_scan(["."], ScanOptions(cwd=str(root)), analyze=ex)
    return [(f.path, f.line, f.rule, f.severity) for f in report.findings], [e.path for e in report.errors], ex


@pytest.mark.parametrize("mutate", [
    lambda entry: "a string",
    lambda entry: ["a", "list"],
    lambda entry: entry[:-1],
    lambda entry: [*entry[:6], {**entry[6], "findings": [["LLM004", "warning", "x", 5, 4, 18, "m", None, {}]]}],
    lambda entry: [*entry[:6], {**entry[6], "findings": [["LLM004", "bogus", 4, 5, 4, 18, "[bold]m", None, {}]]}],
    lambda entry: [*entry[:6], {**entry[6], "findings": [["LLM004", "warning", 4, 5, 4, 18, "m", None, []]]}],
    lambda entry: [*entry[:6], {**entry[6], "errors": [[None, "x"]]}],
    lambda entry: [*entry[:6], {**entry[6], "suppressed": "7"}],
    lambda entry: [True, *entry[1:]],
], ids=["string", "list", "short", "line-x", "severity-bogus", "extra-list", "error-types", "counter", "bool-stat"])
def test_well_formed_but_corrupt_entries_are_misses(tmp_path, mutate):
    (tmp_path / "app.py").write_text(HIT)
    expected, _, ex = _scan(tmp_path)
    data = json.loads(Path(ex.cache.file).read_text())
    (path,) = data["files"]
    data["files"][path] = mutate(data["files"][path])
    Path(ex.cache.file).write_text(json.dumps(data))
    again, _, ex2 = _scan(tmp_path)
    assert again == expected and ex2.cache.stats.misses == 1 and ex2.cache.stats.hits == 0


def test_a_cache_file_that_is_a_fifo_or_a_device_is_not_read(cli, tmp_path, capsys, monkeypatch):
    (tmp_path / "app.py").write_text(HIT)
    _, _, ex = _scan(tmp_path)
    run_file = Path(ex.cache.file)
    run_file.unlink()
    os.mkfifo(run_file)
    code, report = scan_json(cli, tmp_path)  # a hang here is the bug (the subprocess has a timeout)
    assert code == 1 and [f["rule"] for f in report["findings"]] == ["LLM006"]
    assert run_file.is_file() and not run_file.is_symlink()  # replaced by a real run file
    run_file.unlink()
    run_file.symlink_to("/dev/zero")  # read to its (no) end: a MemoryError
    (tmp_path / "app.py").touch()  # a changed project (on a slow machine the last reports would answer)
    code, out, _ = run_main(["scan", ".", "--format", "json"], tmp_path, capsys, monkeypatch)
    assert code == 1 and [f["rule"] for f in json.loads(out)["findings"]] == ["LLM006"]
    assert run_file.is_file() and not run_file.is_symlink()


def test_a_symlinked_cache_folder_is_not_written_through(cli, tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    keep = {f"scan-{n}.json": "not llmdoctor's" for n in range(5)}
    keep[".tmp-old"] = "someone's temporary file"
    for name, text in keep.items():
        (target / name).write_text(text)
        os.utime(target / name, (1_000_000_000, 1_000_000_000))
    root = project_with(tmp_path / "project", {})
    (root / ".llmdoctor_cache").symlink_to(target)
    result = cli("scan", ".", cwd=root, timeout=GUARD)
    assert result.returncode == 1 and "is a symbolic link" in result.stdout
    assert sorted(p.name for p in target.iterdir()) == sorted(keep)


def test_only_files_the_cache_wrote_are_ever_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "KEEP_RUN_FILES", 1)
    folder = tmp_path / ".llmdoctor_cache"
    (tmp_path / "app.py").write_text(HIT)
    _, _, ex = _scan(tmp_path)
    stale_ours = folder / ("scan-" + "f" * 32 + ".json")
    stale_ours.write_bytes(Path(ex.cache.file).read_bytes())
    foreign = folder / "scan-0000.json"
    foreign.write_text('{"not": "ours"}')
    for path in (foreign, stale_ours):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    (tmp_path / ".llmdoctor.yaml").write_text("ignore: [LLM001]\n")  # another run key: a new run file, pruning
    _scan(tmp_path)
    assert foreign.exists() and not stale_ours.exists()


def test_cache_dir_in_an_existing_folder_adds_no_gitignore(tmp_path):
    (tmp_path / "app.py").write_text(HIT)
    _scan(tmp_path, cache_dir=str(tmp_path))  # `--cache-dir .`: a .gitignore of `*` would hide the project
    assert not (tmp_path / ".gitignore").exists() and not (tmp_path / "CACHEDIR.TAG").exists()
    assert list(tmp_path.glob("scan-*.json"))


def _forge(root: Path) -> None:
    """Edit the cache as a pull request could: keep the file's sha256 and size, drop its findings."""
    (run_file,) = (root / ".llmdoctor_cache").glob("scan-*.json")
    data = json.loads(run_file.read_text())
    for entry in data["files"].values():
        entry[6]["findings"] = []
    run_file.write_text(json.dumps(data))


def test_in_ci_a_cache_inside_the_checkout_is_not_trusted(tmp_path, capsys, monkeypatch):
    root = project_with(tmp_path / "project", {}, ok_files=1)
    assert run_main(["scan", "."], root, capsys, monkeypatch)[0] == 1
    _forge(root)
    assert run_main(["scan", "."], root, capsys, monkeypatch)[0] == 0  # trusted on a laptop (as ruff's cache)
    code, out, _ = run_main(["scan", "."], root, capsys, monkeypatch, env={"CI": "true"})
    assert code == 1 and "not read: CI is set" in out
    _forge(root)  # (the CI run rewrote it with what it computed)
    restored = run_main(["scan", "."], root, capsys, monkeypatch, env={"LLMDOCTOR_CACHE_DIR": ".llmdoctor_cache"})
    assert restored[0] == 0  # a cache the workflow names is its own decision


# ----------------------------------------------------------------------------- 6. config and rule files


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + f"\nid: *a{levels - 1}\n"


CONFIGS = {
    "deep-toml": ("pyproject.toml", "[tool.llmdoctor]\nselect = " + "[" * 100_000 + "\n",
                  "pyproject.toml:2: key 'select': nested more than 100 levels"),
    "deep-yaml": (".llmdoctor.yaml", "select: " + "[" * 20_000 + "\n", ".llmdoctor.yaml:1: invalid YAML"),
    "deep-yaml-block": (".llmdoctor.yaml", "select:\n" + "".join(" " * i + "-\n" for i in range(1500)),
                        "invalid YAML"),
    "digits-toml": ("pyproject.toml", "[tool.llmdoctor]\nmax-file-size = " + "9" * 5000 + "\n",
                    "an integer of more than 4,300 digits"),
    "digits-yaml": (".llmdoctor.yaml", "max-file-size: " + "9" * 5000 + "\n", "an integer of more than 4,300"),
    "huge-yaml": (".llmdoctor.yaml", "max-file-size: " + "9" * 100 + "\n", "key 'max-file-size'"),
    "bomb-config": (".llmdoctor.yaml", _bomb().replace("id:", "select:"), "aliases are expanded"),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hostile_config_files_are_exit_2_naming_the_file(tmp_path, name, capsys, monkeypatch):
    filename, text, needle = CONFIGS[name]
    root = project_with(tmp_path / "project", {filename: text}, ok_files=1)
    code, _, err = run_main(["scan", ".", "--no-cache"], root, capsys, monkeypatch)
    assert code == 2 and filename in err and needle in err, err
    assert len(err) < 1000


RULE_FILES = {
    "unhashable-methods": ("kind: tables\nname: x\nclients:\n  - {constructors: [x.C], async: false, methods: [[m]]}\n",
                           "methods"),
    "bomb-id": (_bomb(), "aliases are expanded"),
    "deep": ("kind: tables\ntables: " + "[" * 20_000 + "\n", "invalid YAML"),
    "huge-name": ("id: LLM004\ntables:\n  blocking_calls:\n    - '" + "x." * 50_000 + "'\n", "not a dotted name"),
    "exempt-list": ("kind: tables\nname: y\nmethod_sets:\n  s:\n    exempt_when: [[1]]\n", "exempt_when"),
}


@pytest.mark.parametrize("name", sorted(RULE_FILES))
def test_hostile_rule_files_are_exit_2_naming_the_file_and_key(tmp_path, name, capsys, monkeypatch):
    text, needle = RULE_FILES[name]
    root = project_with(tmp_path / "project", {}, ok_files=1)
    (root / "rules").mkdir()
    (root / "rules" / "mine.yaml").write_text(text)
    code, _, err = run_main(["scan", ".", "--no-cache", "--rules-dir", "rules"], root, capsys, monkeypatch)
    assert code == 2 and "mine.yaml" in err and needle in err, err
    assert len(err) < 1000


def test_a_rule_file_that_is_a_fifo_is_named_not_waited_for(tmp_path, capsys, monkeypatch):
    root = project_with(tmp_path / "project", {}, ok_files=1)
    (root / "rules").mkdir()
    os.mkfifo(root / "rules" / "pipe.yaml")
    code, _, err = run_main(["scan", ".", "--no-cache", "--rules-dir", "rules"], root, capsys, monkeypatch)
    assert code == 2 and "pipe.yaml" in err and "FIFO" in err


@pytest.mark.parametrize("value", ["9" * 5000, "99999999999999999999", "2GiB"])
def test_max_file_size_option_is_bounded(tmp_path, value, capsys, monkeypatch):
    root = project_with(tmp_path / "project", {}, ok_files=1)
    code, _, err = run_main(["scan", ".", "--no-cache", "--max-file-size", value], root, capsys, monkeypatch)
    assert code == 2 and "--max-file-size" in err and len(err) < 300


# ----------------------------------------------------------------------------- 11. terminal escapes, JSON


def test_control_characters_in_file_names_are_escaped_in_text(tmp_path, capsys, monkeypatch):
    name = "esc\x1b]0;PWNED\x07\x1b[2J.py"
    (tmp_path / name).write_text(HIT)
    (tmp_path / "bad.py").write_text("x = (\n")
    _, text, _ = run_main(["scan", ".", "--no-cache"], tmp_path, capsys, monkeypatch)
    assert "\x1b" not in text and "\x07" not in text
    assert "esc\\x1b]0;PWNED\\x07\\x1b[2J.py:4:5: LLM006" in text
    _, github, _ = run_main(["scan", ".", "--no-cache", "--format", "github"], tmp_path, capsys, monkeypatch)
    assert "\x1b" not in github and "\x07" not in github and "esc\\x1b]0;PWNED" in github


@pytest.mark.skipif(sys.platform == "darwin", reason="APFS refuses file names that are not UTF-8")
def test_an_undecodable_file_name_is_strict_json_that_round_trips(cli, tmp_path, capsys, monkeypatch):
    raw = b"bad\xffna\\me.py"
    with open(os.path.join(os.fsencode(tmp_path), raw), "w") as handle:
        handle.write(HIT)
    result = cli("scan", ".", "--no-cache", "--format", "json", cwd=tmp_path)
    result.stdout.encode("utf-8")  # strict: no lone surrogates
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["path"] == "bad\\xffna\\\\me.py"
    assert os.fsencode(os.fsdecode(codecs.escape_decode(finding["path"])[0])) == raw
    _, text, _ = run_main(["scan", ".", "--no-cache"], tmp_path, capsys, monkeypatch)
    assert "bad\\xffna\\me.py:4:5" in text


# ----------------------------------------------------------------------------- the 5,000 strings, outliers


def test_5000_adjacent_strings_name_their_line_inside_the_file(tmp_path, capsys, monkeypatch):
    strings = " ".join(['"s"'] * 5000)
    (tmp_path / "app.py").write_text(f"import requests\n\ndef handler(url):\n    x = ({strings})\n    requests.get(url)\n")
    code, out, _ = run_main(["scan", ".", "--no-cache", "--format", "json"], tmp_path, capsys, monkeypatch)
    report = json.loads(out)
    (error,) = report["errors"]
    assert code == 2 and error["line"] == 4
    assert "adjacent string literals of 5,000 parts" in error["reason"]


def test_a_long_one_line_module_statement_no_rule_needs_is_left_out_of_the_parse():
    from llmdoctor.scan.catalog import load_catalog
    from llmdoctor.scan.codefacts import read_code
    from llmdoctor.scan.engine import analyze_source
    from llmdoctor.scan.regions import pruned_source
    from llmdoctor.scan.rules import rule_classes
    from llmdoctor.scan.settings import ScanConfig

    source = HIT + "\nDATA = [" + ", ".join(str(i) for i in range(5000)) + "]\nLATER = 1\n"
    catalog = load_catalog()
    classes = rule_classes()
    active = [spec for r, spec in sorted(catalog.rules.items()) if r in classes]
    pruned = pruned_source(source, read_code(source), active, catalog)
    assert pruned.splitlines()[5] == '""' and pruned.splitlines()[6] == "LATER = 1"
    assert len(pruned.splitlines()) == len(source.splitlines())
    result = analyze_source("app.py", source.encode(), catalog, ScanConfig())
    assert [(f.rule, f.line) for f in result.findings] == [("LLM006", 4)]


def test_many_small_functions_no_rule_needs_cost_libcst_one_string(monkeypatch):
    # the 100,000-functions outlier (3.8 MB: 68 s and 2.7 GB before), 5,000 here: a run of defs, decorated
    # ones and classes that no rule needs and the kept code never names leaves libcst's parse headers too
    from llmdoctor.scan import engine
    from llmdoctor.scan.catalog import load_catalog
    from llmdoctor.scan.codefacts import read_code
    from llmdoctor.scan.regions import pruned_source
    from llmdoctor.scan.rules import rule_classes
    from llmdoctor.scan.settings import ScanConfig

    parts = [HIT, "import functools\n"]
    for i in range(5000):
        if i % 1000 == 999:  # a needed one now and then: the runs around it are cut there
            parts.append(f"def f_{i}(x):\n    return requests.post(x, json={{'i': {i}}})\n")
        elif i % 7 == 0:
            parts.append(f"@functools.cache\ndef f_{i}(x): return x * {i}\n")
        elif i % 11 == 0:
            parts.append(f"class C_{i}:\n    def m(self, x):\n        return x - {i}\n")
        else:
            parts.append(f"def f_{i}(x):\n    return x + {i}\n")
    parts.append("async def main():\n    return requests.get('http://x')\n")
    source = "\n".join(parts)
    catalog = load_catalog()
    classes = rule_classes()
    active = [spec for r, spec in sorted(catalog.rules.items()) if r in classes]
    pruned = pruned_source(source, read_code(source), active, catalog)
    assert len(pruned.splitlines()) == len(source.splitlines())
    assert pruned.count("def f_") == 5 and "class C_" not in pruned and "@functools" not in pruned
    assert pruned.count('"""') == 2 * 5  # one literal per run before each needed function
    assert len(pruned.replace("\n", "")) < 1_000

    def scan(pruning: bool) -> tuple[list, list]:
        if not pruning:
            monkeypatch.setattr(engine, "pruned", lambda text, facts, rules, catalog: (text, True))
        result = engine.analyze_source("app.py", source.encode(), catalog, ScanConfig())
        return ([(f.rule, f.line, f.column, f.end_line, f.end_column, f.message, f.extra) for f in result.findings],
                result.errors)

    findings, errors = scan(True)
    assert (findings, errors) == scan(False)
    hits = [n for n, line in enumerate(source.splitlines(), 1) if "requests.post(" in line or "get(url)" in line]
    assert [(rule, line) for rule, line, *_ in findings] == [("LLM006", n) for n in hits] and errors == []


def test_the_collector_is_paused_for_one_file_only():
    import gc

    from llmdoctor.scan.catalog import load_catalog
    from llmdoctor.scan.engine import analyze_source
    from llmdoctor.scan.settings import ScanConfig

    catalog, config = load_catalog(), ScanConfig()
    assert gc.isenabled()
    assert analyze_source("app.py", HIT.encode(), catalog, config).findings
    assert gc.isenabled()
    gc.disable()
    try:
        analyze_source("app.py", b"def f(:\n", catalog, config)
        assert not gc.isenabled()  # the caller's choice stays
    finally:
        gc.enable()
