"""End-to-end tests of the installed `llmdoctor tokens` command."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmdoctor.tokens.encodings import bundled_copy

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "tokens"
OFFLINE_ENV = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
               "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "NO_PROXY": ""}


def _json(result) -> dict:
    return json.loads(result.stdout)


def _clean_failure(result, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.stdout + result.stderr, (fragment, result.stdout, result.stderr)


def test_counts_a_file_offline_with_an_empty_tiktoken_cache(cli, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    prompt = tmp_path / "p.txt"
    prompt.write_text("hello world", encoding="utf-8")
    result = cli("tokens", str(prompt), "--encoding", "cl100k_base", "--format", "json",
                 env={"TIKTOKEN_CACHE_DIR": str(cache), **OFFLINE_ENV})
    assert result.returncode == 0, result.stderr
    data = _json(result)
    assert data["total"] == 2  # [15339, 1917], the cookbook's example
    assert data["encodings"]["cl100k_base"]["sha256"].startswith("223921b7")
    assert list(cache.iterdir()) == []


def test_text_table_and_exit_0_when_everything_fits(cli):
    result = cli("tokens", "prompts", "--model", "gpt-4o", cwd=FIXTURES)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["path", "tokens", "budget", "fits"]
    assert any(line.startswith("prompts/cjk.txt") and line.rstrip().endswith("yes") for line in lines)
    source = "https://platform.openai.com/docs/models/gpt-4o"
    assert f"budget 108,800 = context 128,000 ({source}) - reserve 19,200" in result.stdout
    assert "Total:" in lines[-1] and "(o200k_base)" in lines[-1]


def test_over_budget_exits_1_and_lists_it_first(cli, tmp_path):
    (tmp_path / "small.txt").write_text(" hello" * 10)
    (tmp_path / "big.txt").write_text(" hello" * 100)
    result = cli("tokens", ".", "--context", "50", "--reserve", "0", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1
    data = _json(result)
    assert [f["path"] for f in data["files"]] == ["big.txt", "small.txt"]
    assert data["files"][0]["fits"] is False and data["files"][0]["over_by"] == 50
    assert data["files"][1]["fits"] is True
    assert data["total"] == 110


def test_exactly_at_the_limit_fits(cli, tmp_path):
    (tmp_path / "p.txt").write_text(" hello" * 850)
    assert cli("tokens", "p.txt", "--context", "1000", cwd=tmp_path).returncode == 0  # 850 + 150 = 1000
    assert cli("tokens", "p.txt", "--context", "999", cwd=tmp_path).returncode == 1   # 850 + 150 > 999


def test_request_takes_model_and_max_tokens_from_the_body(cli):
    result = cli("tokens", "requests/multipart.json", "--format", "json", cwd=FIXTURES)
    assert result.returncode == 0, result.stderr
    item = _json(result)["files"][0]
    assert item["kind"] == "chat" and item["model"] == "gpt-4o-mini" and item["encoding"] == "o200k_base"
    assert item["context"] == 128000 and item["reserve"] == 19200  # 300 max_completion_tokens < 15%
    assert item["estimate"] is True and any("image_url" in note for note in item["notes"])


def test_request_max_tokens_reserves_when_larger(cli, tmp_path):
    body = {"model": "gpt-4", "max_tokens": 8000, "messages": [{"role": "user", "content": "Hi"}]}
    (tmp_path / "r.json").write_text(json.dumps(body))
    result = cli("tokens", "r.json", "--format", "json", cwd=tmp_path)
    item = _json(result)["files"][0]
    # 3 + "user" 1 + "Hi" 1 + 3 = 8 tokens; reserve 8000 > ceil(8192 × 0.15) = 1229; 8 + 8000 ≤ 8192
    assert (item["tokens"], item["reserve"], item["budget"], item["fits"]) == (8, 8000, 192, True)
    assert result.returncode == 0


def test_model_option_overrides_the_body(cli):
    result = cli("tokens", "requests/cookbook_chat.json", "--model", "gpt-4", "--format", "json",
                 cwd=FIXTURES)
    item = _json(result)["files"][0]
    assert item["tokens"] == 129 and item["encoding"] == "cl100k_base" and item["context"] == 8192


def test_stdin_text_and_stdin_request(cli):
    text = cli("tokens", "-", "--encoding", "cl100k_base", "--format", "json", input="hello world")
    item = _json(text)["files"][0]
    assert (item["path"], item["tokens"], item["kind"]) == ("<stdin>", 2, "text")
    body = (FIXTURES / "requests/cookbook_chat.json").read_text()
    request = cli("tokens", "-", "--format", "json", input=body)
    assert _json(request)["files"][0]["kind"] == "chat" and _json(request)["total"] == 124


def test_glob_and_directory_walk(cli):
    result = cli("tokens", ".", "--glob", "prompts/**/*.txt", "--format", "json", cwd=FIXTURES)
    paths = sorted(f["path"] for f in _json(result)["files"])
    assert paths == ["prompts/cjk.txt", "prompts/emoji.txt", "prompts/support/code.py.txt",
                     "prompts/system.txt", "prompts/whitespace.txt"]


def test_as_text_counts_a_request_file_as_plain_text(cli):
    result = cli("tokens", "requests/cookbook_chat.json", "--as", "text", "--format", "json", cwd=FIXTURES)
    item = _json(result)["files"][0]
    assert item["kind"] == "text" and item["tokens"] > 124


def test_custom_encoding_file(cli, tmp_path):
    copy = tmp_path / "o200k_base.tiktoken"
    copy.write_bytes(gzip.decompress(bundled_copy("o200k_base.tiktoken").read_bytes()))
    ok = cli("tokens", "-", "--encoding-file", str(copy), "--format", "json", input="hello world")
    assert ok.returncode == 0 and _json(ok)["encodings"]["o200k_base"]["path"] == str(copy)
    copy.write_bytes(copy.read_bytes()[:-20] + b"\n")
    _clean_failure(cli("tokens", "-", "--encoding-file", str(copy), input="hello"),
                   "does not match the 446a9538")


# ------------------------------------------------------------------------- bad input: exit 2, no traceback


def test_missing_file_is_reported_and_the_others_still_counted(cli):
    result = cli("tokens", "prompts/system.txt", "nope.txt", "--format", "json", cwd=FIXTURES)
    _clean_failure(result)
    data = _json(result)
    assert data["errors"] == [{"path": "nope.txt", "line": None, "reason": "no such file or directory"}]
    assert data["files"][0]["path"] == "prompts/system.txt" and data["files"][0]["tokens"] > 0


def test_malformed_request_names_the_json_line(cli):
    result = cli("tokens", "requests/malformed.json", "requests/cookbook_chat.json", cwd=FIXTURES)
    _clean_failure(result, "requests/malformed.json:5: error: malformed JSON: Expecting ',' delimiter")
    assert "requests/cookbook_chat.json" in result.stdout


def test_binary_file_named_on_the_command_line(cli):
    _clean_failure(cli("tokens", "binary.bin", cwd=FIXTURES), "binary.bin: error: binary file")


def test_non_utf8_file(cli, tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"line one\ncaf\xe9\n")
    _clean_failure(cli("tokens", "latin1.txt", cwd=tmp_path), "latin1.txt:2: error: not UTF-8 text")


def test_unknown_encoding_suggests(cli):
    _clean_failure(cli("tokens", "-", "--encoding", "o200k_bas", input="x"), "did you mean 'o200k_base'")


def test_unknown_model_option_suggests(cli):
    _clean_failure(cli("tokens", "-", "--model", "gpt4o-mini", input="x"), "did you mean 'gpt-4o-mini'")


def test_unknown_model_in_a_request_is_that_files_error(cli):
    result = cli("tokens", "requests/unknown_model.json", "prompts/system.txt", cwd=FIXTURES)
    _clean_failure(result, "requests/unknown_model.json: error: unknown model 'gpt4o-mini'", "'gpt-4o-mini'")
    assert "prompts/system.txt" in result.stdout


def test_encoding_without_an_offline_copy(cli):
    _clean_failure(cli("tokens", "-", "--encoding", "p50k_base", input="x"),
                   "no offline copy of the p50k_base encoding", "--encoding-file")


@pytest.mark.parametrize(("args", "message"), [
    (["--reserve", "1.5"], "--reserve is a fraction"),
    (["--context", "0"], "--context must be a positive"),
    (["--format", "xml"], "--format 'xml': choose one of text, json"),
    (["--as", "yaml"], "--as must be one of"),
    (["--encoding-file", "/no/such.tiktoken"], "no such file"),
    (["--encoding-file", "/"], "--encoding-file /: is a directory, not a .tiktoken file"),
])
def test_bad_options(cli, args, message):
    _clean_failure(cli("tokens", "-", *args, input="x"), message)


def test_no_paths(cli):
    _clean_failure(cli("tokens"), "give files, directories or -")


def test_does_not_import_libcst_or_httpx():
    code = ("import sys; from llmdoctor.cli import main;"
            "code = main(['tokens', sys.argv[1], '--format', 'json']);"
            "bad = [m for m in ('libcst', 'httpx', 'pynvml', 'crossplane') if m in sys.modules];"
            "print(bad); sys.exit(code if not bad else 9)")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "prompts/system.txt")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("[]")


def test_folder_with_nothing_to_count(cli, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "a.md").write_text("hi")
    _clean_failure(cli("tokens", "prompts", "--glob", "*.txt", cwd=tmp_path),
                   "prompts: error: no text files matching --glob *.txt in this folder")


def test_text_tiktoken_cannot_encode_is_reported_not_crashed(cli, tmp_path):
    """tiktoken's regex engine overflows on a 1,000,000-space run (openai/tiktoken#15): a clean error."""
    (tmp_path / "huge.txt").write_text(" " * 1_000_000 + "x")
    (tmp_path / "ok.txt").write_text("hello world")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": " " * 1_000_000 + "x"}]}
    (tmp_path / "huge.json").write_text(json.dumps(body))
    result = cli("tokens", "huge.txt", "huge.json", "ok.txt", "--format", "json", cwd=tmp_path)
    _clean_failure(result)
    data = _json(result)
    assert [f["path"] for f in data["files"]] == ["ok.txt"]
    assert sorted(e["path"] for e in data["errors"]) == ["huge.json", "huge.txt"]
    assert all("run of 1,000,000 × ' '" in e["reason"] for e in data["errors"])


def test_as_request_on_plain_text_is_an_error(cli):
    _clean_failure(cli("tokens", "prompts/system.txt", "--as", "request", cwd=FIXTURES),
                   "prompts/system.txt:1: error: malformed JSON: Expecting value")


def test_glob_alone_walks_the_working_directory(cli):
    result = cli("tokens", "--glob", "cjk.txt", "--format", "json", cwd=FIXTURES)
    assert result.returncode == 0, result.stderr
    assert [f["path"] for f in _json(result)["files"]] == ["prompts/cjk.txt"]


def test_total_line_when_nothing_could_be_counted(cli, tmp_path):
    result = cli("tokens", "nope.txt", cwd=tmp_path)
    assert result.returncode == 2
    assert "Total: 0 tokens in 0 inputs; 1 could not be counted." in result.stdout


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_binary_device_is_refused_without_reading_it_all(cli, tmp_path):
    result = cli("tokens", "/dev/zero", "a.txt", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "/dev/zero: error: binary file (contains NUL bytes): not counted" in result.stdout
