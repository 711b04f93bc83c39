"""The precision corpus's label files are well formed, and findings match labels by (rule, path, line, text).

Fast (no corpus needed): bench/precision/run.py does the measuring; this only guards its data and matching.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PRECISION = Path(__file__).resolve().parents[1] / "bench" / "precision"
sys.path.insert(0, str(PRECISION))

import corpus


def test_every_label_file_parses_and_names_a_corpus_project() -> None:
    projects = {project.name for project in corpus.load_corpus().projects}
    files = sorted(corpus.LABELS_DIR.glob("*.yaml"))
    assert files
    for path in files:
        assert path.stem in projects, f"{path.name}: no such project in corpus.yaml"
        labels = corpus.load_labels(path.stem)
        assert all(label.verdict != "miss" or label.via for label in labels), f"{path.name}: a miss without via"


def test_every_set_is_present() -> None:
    sets = [project.set for project in corpus.load_corpus().projects]
    assert sets.count("dev") >= 6 and sets.count("holdout") >= 2 and sets.count("holdout2") >= 3
    assert sets.count("holdout3") >= 3 and sets.count("holdout4") >= 3
    assert sets.count("holdout5") >= 3 and sets.count("holdout6") >= 3 and sets.count("holdout7") >= 3
    assert sets.count("holdout8") >= 3
    assert sets.count("holdout9") >= 3
    assert sets.count("holdout10") >= 3
    assert sets.count("holdout11") >= 3
    assert sets.count("holdout12") >= 3
    assert sets.count("holdout13") >= 3
    assert sets.count("holdout14") >= 3
    assert sets.count("holdout15") >= 3
    assert sets.count("holdout16") >= 3
    assert sets.count("holdout17") >= 3
    assert sets.count("holdout18") >= 3
    assert sets.count("holdout19") >= 3 and sets.count("holdout20") >= 3 and sets.count("holdout21") >= 3
    assert sets.count("holdout22") >= 3 and sets.count("holdout23") >= 3
    assert sets.count("holdout24") >= 3 and sets.count("holdout25") >= 3 and sets.count("holdout26") >= 3
    assert sets.count("holdout27") >= 3 and sets.count("holdout28") >= 3 and sets.count("holdout29") >= 3
    assert sets.count("holdout30") >= 3 and sets.count("holdout31") >= 3
    assert sets.count("holdout32") >= 3
    assert sets.count("holdout33") >= 3
    assert sets.count("holdout34") >= 3


def test_declared_control_plane_names_corpus_projects_and_valid_patterns() -> None:
    from llmdoctor.scan.config import control_plane_pattern

    projects = {project.name for project in corpus.load_corpus().projects}
    declared = corpus.load_declared()
    assert declared
    for name, patterns in declared.items():
        assert name in projects, f"declared.yaml: no project {name} in corpus.yaml"
        assert 1 <= len(patterns) <= 3, f"declared.yaml: {name} declares {len(patterns)} patterns"
        for pattern in patterns:
            control_plane_pattern(pattern)


@pytest.mark.parametrize("text", ["declared: [a]\n", "declared:\n  app: admin.py\n", "declared:\n  app: [3]\n"])
def test_a_malformed_declared_file_is_named(tmp_path: Path, text: str) -> None:
    path = tmp_path / "declared.yaml"
    path.write_text(text)
    with pytest.raises(corpus.LabelError, match="declared.yaml"):
        corpus.load_declared(path)


def _label(**overrides: object) -> dict:
    entry = {"rule": "LLM003", "path": "app.py", "line": 2, "text": "requests.get(url)", "verdict": "real"}
    entry.update(overrides)
    return entry


def test_match_by_key_and_text() -> None:
    source = {("app.py", 2): "requests.get(url)", ("app.py", 5): "open(path)", ("app.py", 9): "x = 1"}
    labels = corpus.parse_labels({"labels": [
        _label(),
        _label(rule="LLM004", line=5, text="open(path)", verdict=False),
        _label(rule="LLM004", line=9, text="moved away", verdict="miss", via=["app.py:8 f"]),
        _label(rule="LLM006", line=2, verdict="miss", via=["app.py:1 handler"]),
    ]}, "t.yaml")
    findings = [
        corpus.Finding("LLM003", "app.py", 2),
        corpus.Finding("LLM004", "app.py", 5),
        corpus.Finding("LLM004", "app.py", 9),  # its label drifted: unjudged
        corpus.Finding("LLM001", "app.py", 2),  # no label
    ]
    result = corpus.match(findings, labels, lambda path, line: source.get((path, line)))
    assert [(f.rule, label.verdict) for f, label in result.judged] == [("LLM003", "real"), ("LLM004", "false")]
    assert [f.rule for f in result.todo] == ["LLM004", "LLM001"]
    assert [label.rule for label in result.found] == ["LLM003"]
    assert [label.rule for label in result.lost] == ["LLM006"]
    assert [label.line for label, _ in result.drifted] == [9]


@pytest.mark.parametrize(("entry", "message"), [
    (_label(verdict="maybe"), "verdict must be one of"),
    (_label(context="batch"), "context must be one of"),
    (_label(line=0), "positive integer"),
    (_label(colour="red"), "unknown keys"),
    ({"rule": "LLM003"}, "missing path, line, text, verdict"),
])
def test_bad_labels_are_named(entry: dict, message: str) -> None:
    with pytest.raises(corpus.LabelError, match=message):
        corpus.parse_labels({"labels": [entry]}, "t.yaml")


def test_duplicate_key_is_named() -> None:
    with pytest.raises(corpus.LabelError, match="same"):
        corpus.parse_labels({"labels": [_label(), _label(verdict="false")]}, "t.yaml")


def test_test_modules() -> None:
    assert corpus.is_test_module("tests/test_api.py")
    assert corpus.is_test_module("pkg/conftest.py")
    assert corpus.is_test_module("src/pkg/foo_test.py")
    assert not corpus.is_test_module("app/contest.py")


def test_the_ruff_cross_check_leaves_out_files_ruff_cannot_parse(tmp_path: Path) -> None:
    """petsitter ships a trick template (`class <Name>Trick(Trick):`) no Python parses: ruff reports it as
    `invalid-syntax` findings, which are none of the checks the cross-check compares."""
    import json

    import run

    fake = tmp_path / "ruff"
    items = [{"code": "invalid-syntax", "filename": str(tmp_path / "template.py"), "location": {"row": 9},
              "message": "Expected a statement"},
             {"code": "ASYNC230", "filename": str(tmp_path / "server.py"), "location": {"row": 869},
              "message": "Async functions should not open files with blocking methods like `open`"}]
    fake.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(items))})\n")
    fake.chmod(0o755)
    found = run.ruff_check([str(fake)], tmp_path)
    assert [(finding.code, finding.path, finding.line, finding.rule) for finding in found] == [
        ("ASYNC230", "server.py", 869, "LLM004")]
