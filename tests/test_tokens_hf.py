"""`tokens --tokenizer`: counts with an open model's own tokenizer.json and chat template, checked against the
`tokenizers` package directly on the shipped Qwen3 tokenizer (fixtures/tokenizers/qwen3, Apache-2.0)."""

from __future__ import annotations

import hashlib
import json

import pytest
from support.engines import vllm_server
from support.hfcache import QWEN3_8B_CONFIG, add_snapshot, qwen3_files, qwen3_tokenizer_json

from llmdoctor.tokens import hf

COMMIT = "c" * 40
HELLO = [{"role": "system", "content": "You are a helpful assistant."},
         {"role": "user", "content": "Combien de tokens? 毕老师！1 + 1 = 2"}]


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3")
    for name, data in qwen3_files().items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return folder


@pytest.fixture(scope="module")
def direct():
    from tokenizers import Tokenizer

    return Tokenizer.from_str(qwen3_tokenizer_json().decode())


def test_shipped_tokenizer_is_the_published_file():
    data = qwen3_tokenizer_json()
    assert len(data) == 11_422_654
    assert hashlib.sha256(data).hexdigest() == "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def test_text_counts_equal_tokenizers(qwen3_dir, direct):
    tok = hf.load(str(qwen3_dir))
    for text in ("Hello, world!", "def f(x):\n    return x ** 2\n", "毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ", " " * 50, ""):
        assert tok.count(text) == len(direct.encode(text, add_special_tokens=False).ids)


def test_chat_template_rendered_as_transformers(qwen3_dir, direct):
    tok = hf.load(str(qwen3_dir))
    prompt = tok.render(HELLO)
    # Qwen3's template: ChatML turns, then the assistant turn opened for the reply
    assert prompt == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                      "<|im_start|>user\nCombien de tokens? 毕老师！1 + 1 = 2<|im_end|>\n"
                      "<|im_start|>assistant\n")
    assert tok.count(prompt) == len(direct.encode(prompt, add_special_tokens=False).ids)
    # chat_template_kwargs reach the template: enable_thinking=False closes an empty think block
    assert tok.render(HELLO, extra={"enable_thinking": False}).endswith("<|im_start|>assistant\n<think>\n\n"
                                                                         "</think>\n\n")


def test_tools_and_list_content_as_vllm(qwen3_dir):
    tok = hf.load(str(qwen3_dir))
    tools = [{"type": "function", "function": {"name": "météo", "description": "Le temps",
                                               "parameters": {"type": "object", "properties": {}}}}]
    prompt = tok.render([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text",
                                                                                        "text": "b"}]}], tools)
    assert "# Tools" in prompt and '"name": "météo"' in prompt  # tojson keeps non-ASCII, as transformers does
    assert "<|im_start|>user\na\nb<|im_end|>" in prompt  # text parts joined with "\n" (vLLM, string templates)


def test_template_errors_and_sandbox(tmp_path):
    (tmp_path / "tokenizer.json").write_bytes(qwen3_tokenizer_json())
    for template, needle in (("{{ raise_exception('System role not supported') }}", "System role not supported"),
                             ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "SecurityError")):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
        hf._LOADED.clear()
        with pytest.raises(hf.TemplateFailure, match=needle):
            hf.load(str(tmp_path)).render(HELLO)


def test_end_to_end_with_the_hf_cache_and_a_live_budget(cli, tmp_path, direct):
    hub = tmp_path / "hf" / "hub"
    add_snapshot(hub, "Qwen/Qwen3-8B", COMMIT, qwen3_files())
    request = {"model": "Qwen/Qwen3-8B", "messages": HELLO, "max_tokens": 40_900}
    (tmp_path / "request.json").write_text(json.dumps(request))
    expected = len(direct.encode(hf.load(str(hub / "models--Qwen--Qwen3-8B" / "snapshots" / COMMIT))
                                 .render(HELLO), add_special_tokens=False).ids)
    env = {"HF_HOME": str(tmp_path / "hf")}
    # the server's max_model_len (40,960) is the budget; the request reserves max_tokens 40,900 for the answer
    with vllm_server("Qwen/Qwen3-8B", 40_960) as server:
        r = cli("tokens", "--url", server.url, "--format", "json", str(tmp_path / "request.json"), env=env,
                cwd=tmp_path)
    assert "Traceback" not in r.stderr
    data = json.loads(r.stdout)
    item = data["files"][0]
    assert item["tokens"] == expected and item["context"] == 40_960 and item["reserve"] == 40_900
    assert item["fits"] is (expected + 40_900 <= 40_960)
    assert r.returncode == (0 if item["fits"] else 1)
    assert "max_model_len of Qwen/Qwen3-8B at" in item["context_source"]
    r = cli("tokens", "--tokenizer", "Qwen/Qwen3-14B", str(tmp_path / "request.json"), env=env)
    assert r.returncode == 2 and "not in the local Hugging Face cache" in r.stderr


def test_cached_config_and_tokenizer_share_the_snapshot(tmp_path):
    from llmdoctor.kv import hf_cache

    add_snapshot(tmp_path, "Qwen/Qwen3-8B", COMMIT, {"config.json": QWEN3_8B_CONFIG})
    snap = hf_cache.find_snapshot("Qwen/Qwen3-8B", None, tmp_path)
    assert snap is not None and snap.file("config.json") and snap.file("tokenizer.json") is None
