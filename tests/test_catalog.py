"""The catalog of every check of every command (rules/*.yaml, llmdoctor.catalog): each check's hit examples
fire and its near-miss examples stay quiet when run through its own command, the severities it emits are the
ones it declares, and `rules` / `explain` serve every id. The list of checks comes from the catalog itself
(Gixy's way): a new check without both kinds of example, or without an example runner for its command, fails.

Scan examples are run by tests/test_rules_examples.py (the engine on each code string); here the other
commands run in-process through `llmdoctor.cli.main`, as the console script does. ~2 s.
"""

from __future__ import annotations

import copy
import io
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from llmdoctor.catalog import load_checks
from llmdoctor.cli import main
from llmdoctor.report.model import SEVERITIES

CATALOG = load_checks()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GIB = 1024**3


# ----------------------------------------------------------------------------- one runner per command
# Each takes one example and returns the (rule, severity, line or None) it produced.


def run_nginx(example: str, tmp_path: Path, monkeypatch) -> list[tuple[str, str, int | None]]:
    from llmdoctor.nginx.check import check

    conf = tmp_path / "example.conf"
    conf.write_text(example)
    report = check([str(conf)])
    assert report.errors == [], report.errors
    return [(f.rule, f.severity, f.line) for f in report.findings]


def run_probe(example: dict, tmp_path: Path, monkeypatch) -> list[tuple[str, str, int | None]]:
    from llmdoctor.probe import VERDICT_RULES
    from llmdoctor.probe.analyze import analyze
    from llmdoctor.probe.events import SSE
    from llmdoctor.probe.record import Read, Recording

    reads = [Read(t, 100 * events, events) for t, events in example["reads"]]
    rec = Recording(
        status=example.get("status", 200), reason="", http_version="HTTP/1.1",
        headers=[("content-type", example.get("content_type", "text/event-stream"))],
        headers_s=example.get("headers_s", reads[0].t), end_s=reads[-1].t, reads=reads,
        event_times=[r.t for r in reads for _ in range(r.events)],
        body_bytes=sum(r.size for r in reads), complete="error" not in example, error=example.get("error"),
        event_format=SSE if "event-stream" in example.get("content_type", "text/event-stream") else "not-a-stream",
    )
    verdict = analyze(rec).verdict
    return [(*VERDICT_RULES[verdict], None)] if verdict in VERDICT_RULES else []


def _json_findings(args: list[str], capsys) -> list[tuple[str, str, int | None]]:
    code = main([*args, "--format", "json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return [(f["rule"], f["severity"], None) for f in json.loads(out)["findings"]]


def run_kv_budget(example: str, tmp_path: Path, monkeypatch, capsys) -> list[tuple[str, str, int | None]]:
    return _json_findings(["kv-budget", *shlex.split(example)], capsys)


def run_tokens(example: dict, tmp_path: Path, monkeypatch, capsys) -> list[tuple[str, str, int | None]]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(example["stdin"].encode())))
    return _json_findings(["tokens", *shlex.split(example["args"])], capsys)


def run_gpu(example: dict, tmp_path: Path, monkeypatch, capsys) -> list[tuple[str, str, int | None]]:
    import fake_pynvml
    from test_gpu import TWO_GPUS

    scenario = copy.deepcopy(TWO_GPUS)
    template = scenario["gpus"][1]
    scenario["gpus"] = [{**template, "uuid": f"GPU-{i}", "total": g["total"], "used": g["used"],
                         "reserved": 0, "processes": []} for i, g in enumerate(example["gpus"])]
    fake_pynvml.configure(scenario)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    return _json_findings(["gpu", *shlex.split(example["args"])], capsys)


PROXY_FILE_NAMES = {"haproxy": "haproxy.cfg", "caddy": "Caddyfile", "apache": "httpd.conf",
                    "kubernetes": "manifests.yaml", "envoy": "envoy.yaml", "traefik": "dynamic.yaml"}


def run_proxy(example: str, tmp_path: Path, monkeypatch, check_id: str) -> list[tuple[str, str, int | None]]:
    """A complete config of the check's kind, in a file named as users name it."""
    from llmdoctor.proxy.catalog import kind_of
    from llmdoctor.proxy.check import check

    monkeypatch.chdir(tmp_path)
    kind = kind_of(check_id)
    path = tmp_path / PROXY_FILE_NAMES[kind]
    path.write_text(example)
    result = check([str(path)])
    assert result.report.errors == [], result.report.errors
    assert [layer.kind for layer in result.layers] == [kind]
    return [(f.rule, f.severity, f.line) for f in result.report.findings]


RUNNERS = {"nginx": run_nginx, "probe": run_probe, "kv-budget": run_kv_budget, "tokens": run_tokens,
           "gpu": run_gpu, "proxy": run_proxy}
NEEDS_CAPSYS = {"kv-budget", "tokens", "gpu"}


def _run(check, example, tmp_path, monkeypatch, capsys):
    runner = RUNNERS[check.command]
    if check.command in NEEDS_CAPSYS:
        return runner(example, tmp_path, monkeypatch, capsys)
    if check.command == "proxy":
        return runner(example, tmp_path, monkeypatch, check.id)
    return runner(example, tmp_path, monkeypatch)


def _examples(kind: str):
    for check_id, check in sorted(CATALOG.checks.items()):
        if check.command == "scan":
            continue
        for index, example in enumerate(check.hits if kind == "hit" else check.near_misses):
            yield pytest.param(check_id, example, id=f"{check_id}-{kind}-{index}")


def test_every_command_with_checks_has_an_example_runner():
    assert set(CATALOG.commands()) - {"scan"} <= set(RUNNERS)
    assert {"scan", "nginx", "proxy", "probe", "kv-budget", "gpu", "tokens"} <= set(CATALOG.commands())


@pytest.mark.parametrize(("check_id", "example"), list(_examples("hit")))
def test_hit_example_fires(check_id, example, tmp_path, monkeypatch, capsys):
    check = CATALOG.checks[check_id]
    found = _run(check, example, tmp_path, monkeypatch, capsys)
    mine = [f for f in found if f[0] == check_id]
    assert mine, f"{check_id} did not fire on its own hit example: {found}"
    assert {severity for _, severity, _ in mine} <= check.declared_severities()
    if isinstance(example, str):
        marked = [n for n, text in enumerate(example.splitlines(), 1) if re.search(r"#\s*hit\b", text)]
        if marked:
            assert sorted({line for _, _, line in mine}) == marked


@pytest.mark.parametrize(("check_id", "example"), list(_examples("near_miss")))
def test_near_miss_example_is_quiet(check_id, example, tmp_path, monkeypatch, capsys):
    check = CATALOG.checks[check_id]
    found = _run(check, example, tmp_path, monkeypatch, capsys)
    assert [f for f in found if f[0] == check_id] == []


@pytest.mark.parametrize("check_id", sorted(c.id for c in CATALOG.checks.values() if c.severities))
def test_every_declared_severity_is_emitted_by_a_hit_example(check_id, tmp_path, monkeypatch, capsys):
    check = CATALOG.checks[check_id]
    emitted = set()
    for index, example in enumerate(check.hits):
        where = tmp_path / str(index)
        where.mkdir()
        emitted |= {s for rule, s, _ in _run(check, example, where, monkeypatch, capsys) if rule == check_id}
    assert emitted == check.declared_severities()


# ----------------------------------------------------------------------------- the catalog itself


def test_every_check_is_documented_and_its_prefix_belongs_to_its_command():
    for check in CATALOG.checks.values():
        assert CATALOG.prefixes[check.prefix].command == check.command
        assert check.severity in SEVERITIES
        for key in ("summary", "why", "example", "use_instead", "fix_safety"):
            assert getattr(check, key).strip(), (check.id, key)
        assert check.hits and check.near_misses


def test_every_nginx_check_is_one_function_and_has_gixy_style_fixtures():
    from llmdoctor.nginx.rules import CHECKS

    ids = CATALOG.ids_for("nginx")
    assert set(CHECKS) == ids
    assert all(not re.fullmatch(r"ngx\d+", f.__name__) for f in CHECKS.values())  # named for what they find
    names = [p.stem for p in (FIXTURES / "nginx" / "rules").glob("*.conf")]
    for check_id in ids:
        stem = check_id.lower()
        assert any(n.startswith(stem) and "hit" in n for n in names), check_id
        assert any(n == f"{stem}_near_miss" for n in names), check_id


def test_scan_rules_in_the_catalog_are_the_scan_engine_s():
    from llmdoctor.scan.catalog import load_catalog

    assert set(load_catalog().rules) == CATALOG.ids_for("scan")


@pytest.mark.parametrize(("text", "key"), [
    ("id: NGX001\ncommand: scan\n", "command"),
    ("id: ZZZ001\ncommand: scan\n", "id"),
])
def test_a_check_whose_prefix_or_command_is_wrong_names_file_and_key(tmp_path, text, key):
    from llmdoctor.catalog import shipped_rules_dir
    from llmdoctor.errors import UserError

    (tmp_path / "prefixes.yaml").write_bytes((shipped_rules_dir() / "prefixes.yaml").read_bytes())
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(UserError) as err:
        load_checks(tmp_path)
    assert "bad.yaml" in str(err.value) and f"'{key}'" in str(err.value)


# ----------------------------------------------------------------------------- rules and explain


def test_explain_works_for_every_check_id(capsys):
    for check_id in sorted(CATALOG.checks):
        assert main(["explain", check_id.lower()]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"# {check_id} ") and "## Why it matters" in out and "## Fix safety" in out
        assert main(["explain", check_id, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["command"] == CATALOG.checks[check_id].command


def test_rules_lists_every_check_of_every_command(cli):
    listed = json.loads(cli("rules", "--format", "json").stdout)["rules"]
    assert {r["id"] for r in listed} == set(CATALOG.checks)
    assert {r["command"] for r in listed} == set(CATALOG.commands())
    text = cli("rules").stdout
    assert all(check_id in text for check_id in CATALOG.checks)
    nginx = cli("rules", "--command", "nginx", "--format", "json")
    assert {r["id"] for r in json.loads(nginx.stdout)["rules"]} == CATALOG.ids_for("nginx")
    by_prefix = cli("rules", "ngx")
    assert "NGX001" in by_prefix.stdout and "LLM001" not in by_prefix.stdout
    bad = cli("rules", "--command", "haproxy")
    assert bad.returncode == 2 and "choose one of scan, nginx" in bad.stderr


def test_explain_an_nginx_check_from_the_installed_command(cli):
    result = cli("explain", "NGX002")
    assert result.returncode == 0
    assert "`llmdoctor nginx`" in result.stdout and "```nginx" in result.stdout  # piped: plain Markdown
    wrong = cli("explain", "NGX02")
    assert wrong.returncode == 2 and "did you mean NGX002?" in wrong.stderr
