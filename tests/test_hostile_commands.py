"""Hostile input to nginx, kv-budget, tokens and probe (issue 12, items 7-11): each reproduction generated here;
each must be exit 2 (or the normal verdict) with a message naming the file/key/option, the other inputs'
results intact, and no hang. Run in this process (`cli.main`) unless the point is a real pipe or the CLI."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from llmdoctor.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROXIED = "http {\n  server {\n    location / {\n      proxy_pass http://app;\n    }\n  }\n}\n"


def run(args: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


# ----------------------------------------------------------------------------- 7. nginx


def test_an_include_chain_400_files_deep_is_an_error_not_a_recursion_error(tmp_path, capsys):
    for index in range(400):
        (tmp_path / f"c{index}.conf").write_text(f"include c{index + 1}.conf;\n")
    (tmp_path / "c400.conf").write_text(PROXIED)
    code, out, _ = run(["nginx", str(tmp_path / "c0.conf"), "--format", "json"], capsys)
    (error,) = json.loads(out)["errors"]
    assert code == 2 and "includes nested more than 50 files deep" in error["reason"]


def test_blocks_nested_5000_deep_are_a_syntax_error_naming_the_line(tmp_path, capsys):
    (tmp_path / "deep.conf").write_text("location / {\n" * 5000 + "}\n" * 5000)
    code, out, _ = run(["nginx", str(tmp_path / "deep.conf"), "--format", "json"], capsys)
    (error,) = json.loads(out)["errors"]
    assert code == 2 and error["line"] == 101 and "nested more than 100 levels" in error["reason"]


def test_a_config_that_is_a_fifo_is_an_error_at_once(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.conf")
    (tmp_path / "ok.conf").write_text(PROXIED)
    code, out, _ = run(["nginx", str(tmp_path / "pipe.conf"), str(tmp_path / "ok.conf"), "--format", "json"], capsys)
    report = json.loads(out)
    assert code == 2 and [e["reason"] for e in report["errors"]] == [
        "is a named pipe (FIFO) that no process writes to: nothing to read"]
    assert {f["rule"] for f in report["findings"]} >= {"NGX001"}  # the other input still checked


def test_an_included_fifo_is_named_as_such_not_file_not_found(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.conf")
    (tmp_path / "main.conf").write_text("include pipe.conf;\n" + PROXIED)
    code, out, _ = run(["nginx", str(tmp_path / "main.conf"), "--format", "json"], capsys)
    (error,) = json.loads(out)["errors"]
    assert code == 2 and error["line"] == 1 and "is a named pipe (FIFO), not a config file" in error["reason"]


def test_a_real_pipe_with_a_writer_is_still_read(cli, tmp_path):
    """`llmdoctor nginx <(cat conf)`: the non-blocking check must not turn a live pipe into an error."""
    fifo = tmp_path / "live.conf"
    os.mkfifo(fifo)
    import subprocess

    writer = subprocess.Popen(["sh", "-c", f"printf '%s' '{PROXIED}' > '{fifo}'"])
    try:
        result = cli("nginx", str(fifo), "--format", "json", timeout=60)
    finally:
        writer.wait(timeout=60)
    assert result.returncode == 1 and "NGX001" in result.stdout


# ----------------------------------------------------------------------------- 8. kv-budget


def _model_config(tmp_path: Path, **changes) -> str:
    config = json.loads((FIXTURES / "models" / "llama-3.1-8b" / "config.json").read_text())
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize(("changes", "key"), [
    ({"num_hidden_layers": 2**64}, "num_hidden_layers"),
    ({"num_hidden_layers": 2**40}, "num_hidden_layers"),
    ({"num_hidden_layers": 100_000_000}, "num_hidden_layers"),
    ({"vocab_size": 10**30}, "vocab_size"),
    ({"n_routed_experts": 10**60, "moe_intermediate_size": 7}, "n_routed_experts"),
])
def test_config_numbers_past_any_model_name_the_key(tmp_path, capsys, changes, key):
    code, _, err = run(["kv-budget", "--model-config", _model_config(tmp_path, **changes)], capsys)
    assert code == 2 and f"`{key}`" in err and "more than any model has" in err and len(err) < 400


@pytest.mark.parametrize("text", ['{"num_hidden_layers": ' + "9" * 5000 + "}", "[" * 100_000,
                                  '{"n_routed_experts": 1' + "0" * 400 + "}"])
def test_unreadable_config_json_is_exit_2_naming_the_file(tmp_path, capsys, text):
    (tmp_path / "config.json").write_text(text)
    code, _, err = run(["kv-budget", "--model-config", str(tmp_path / "config.json")], capsys)
    assert code == 2 and "config.json" in err and len(err) < 400


@pytest.mark.parametrize(("args", "needle"), [
    (["--kv-mem", "1" + "0" * 400], "--kv-mem"),
    (["--kv-mem", "9" * 5000], "--kv-mem"),
    (["--gpu-mem", "1" + "0" * 30 + "GB"], "--gpu-mem"),
    (["--bs", "100000000000"], "--bs"),
    (["--max-model-len", "9" * 50], "--max-model-len"),
    (["--tp", "9" * 5000], "--tp"),
    (["--timeout", "inf"], "--timeout"),
])
def test_kv_options_are_bounded(capsys, args, needle):
    code, _, err = run(["kv-budget", "--model", "llama-3.1-8b", *args], capsys)
    assert code == 2 and needle in err and len(err) < 1200


# ----------------------------------------------------------------------------- 9. tokens


def test_a_request_nested_100000_deep_is_one_error_and_the_others_are_counted(tmp_path, capsys):
    (tmp_path / "deep.json").write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (tmp_path / "digits.json").write_text('{"messages": [], "max_tokens": ' + "9" * 5000 + "}")
    (tmp_path / "ok.txt").write_text("hello world")
    os.mkfifo(tmp_path / "pipe.txt")
    paths = [str(tmp_path / name) for name in ("deep.json", "digits.json", "ok.txt", "pipe.txt")]
    code, out, _ = run(["tokens", *paths, "--format", "json"], capsys)
    report = json.loads(out)
    assert code == 2 and [f["tokens"] for f in report["files"]] == [2]
    reasons = {Path(e["path"]).name: e["reason"] for e in report["errors"]}
    assert "nested too deeply" in reasons["deep.json"]
    assert "an integer of 5,000 digits" in reasons["digits.json"]
    assert "named pipe (FIFO) that no process writes to" in reasons["pipe.txt"]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_long_texts_counted_in_chunks_give_the_whole_text_s_count(encoding):
    """The chunk boundaries are piece boundaries of tiktoken's own split: the counts add up exactly."""
    import random

    from llmdoctor.tokens import chunks
    from llmdoctor.tokens.encodings import load_encoding

    enc = load_encoding(encoding, None, allow_custom=False).encoding
    rng = random.Random(4)
    for alphabet in ("abcXYZ0123456789 \n\t/.,'!-_é中½²\u3000", "abcXYZ'!/ .\t", "ab12/\n"):
        for _ in range(8):
            text = "".join(rng.choice(alphabet) for _ in range(rng.choice([200, 800])))
            parts = list(chunks.chunks(text, enc._pat_str, chunk_chars=rng.choice([8, 30])))
            assert "".join(parts) == text and len(parts) > 1
            assert sum(len(enc.encode_ordinary(p)) for p in parts) == len(enc.encode_ordinary(text))
    big = "".join(rng.choice("abcdefXYZ0123 ,.\n") for _ in range(chunks.CHUNK_CHARS + 5000))
    assert chunks.count(enc, big) == len(enc.encode_ordinary(big))


def test_one_piece_too_long_to_count_is_reported_not_counted(tmp_path, capsys):
    (tmp_path / "run.txt").write_text("abcdefghij" * 500_000)  # 5 M letters: one piece for tiktoken
    (tmp_path / "ok.txt").write_text("hello world")
    code, out, _ = run(["tokens", str(tmp_path / "run.txt"), str(tmp_path / "ok.txt"), "--format", "json"], capsys)
    report = json.loads(out)
    (error,) = report["errors"]
    assert code == 2 and "a run of 5,000,000 characters" in error["reason"] and len(report["files"]) == 1


# ----------------------------------------------------------------------------- 10. probe


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "0", "-1", "86401"])
def test_probe_timeouts_that_never_end_are_refused(capsys, value):
    code, _, err = run(["probe", f"http://127.0.0.1:{_closed_port()}/", "--timeout", value], capsys)
    assert code == 2 and "--timeout must be more than 0 and at most 86,400 seconds" in err


@pytest.mark.parametrize("body", ["[" * 100_000, '{"n": ' + "9" * 5000 + "}"])
def test_probe_json_bodies_are_bounded(tmp_path, capsys, body):
    (tmp_path / "body.json").write_text(body)
    code, out, err = run(["probe", f"http://127.0.0.1:{_closed_port()}/", "--json", f"@{tmp_path / 'body.json'}",
                          "--format", "json"], capsys)
    assert code == 2 and "--json: not valid JSON" in err and len(err) < 400
    assert "error" in json.loads(out)


def test_probe_body_from_a_fifo_nobody_writes_is_an_error(tmp_path, capsys):
    os.mkfifo(tmp_path / "body.json")
    code, _, err = run(["probe", "http://127.0.0.1:9/", "--json", f"@{tmp_path / 'body.json'}"], capsys)
    assert code == 2 and "FIFO" in err


# ----------------------------------------------------------------------------- 11. terminal escapes


def test_a_server_header_with_escape_sequences_is_printed_escaped(capsys):
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # the http.server API
            self.send_response(200)
            self.send_header("Server", "\x1b]0;PWN\x07\x1b[2J")
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _ in range(6):
                self.wfile.write(b"data: x\n\n")
                self.wfile.flush()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        _, out, _ = run(["probe", f"http://127.0.0.1:{server.server_port}/", "--timeout", "10"], capsys)
    finally:
        thread.join(timeout=10)
        server.server_close()
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;PWN\\x07\\x1b[2J" in out


def test_control_characters_in_names_and_messages_are_escaped_everywhere(tmp_path, capsys):
    name = tmp_path / "esc\x1b]0;PWN\x07.txt"
    name.write_text("hello")
    _, out, _ = run(["tokens", str(name)], capsys)
    assert "\x1b" not in out and "esc\\x1b]0;PWN\\x07.txt" in out
    config = _model_config(tmp_path, _name_or_path="\x1b]0;PWN\x07\x1b[2J")
    _, out, _ = run(["kv-budget", "--model-config", config], capsys)
    assert "\x1b" not in out and "\\x1b]0;PWN" in out
    _, out, err = run(["nginx", str(tmp_path / "missing\x1b[2J.conf")], capsys)
    assert "\x1b" not in out + err and "missing\\x1b[2J.conf" in out
