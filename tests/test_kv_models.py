"""Any model offline: --model org/name from the local Hugging Face cache (HF_HOME / HF_HUB_CACHE, revisions),
a path, the one cached model when nothing is named, the preset table when nothing is found, and the configs
llmdoctor refuses (hybrid state-space models, unknown architectures) rather than guess."""

from __future__ import annotations

import json

import pytest
from support.hfcache import QWEN3_8B_CONFIG, add_snapshot
from support.servers import free_port

from llmdoctor.errors import UserError
from llmdoctor.kv import hf_cache
from llmdoctor.kv.arch import arch_from_config

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def offline_env(tmp_path, **extra):
    return {"HF_HOME": str(tmp_path / "hf"), "LLMDOCTOR_URLS": f"http://127.0.0.1:{free_port()}", **extra}


def test_hub_cache_dir_follows_huggingface_hub():
    assert hf_cache.hub_cache_dir({"HF_HUB_CACHE": "/x/hub", "HF_HOME": "/y"}).as_posix() == "/x/hub"
    assert hf_cache.hub_cache_dir({"HUGGINGFACE_HUB_CACHE": "/old"}).as_posix() == "/old"
    assert hf_cache.hub_cache_dir({"HF_HOME": "/y"}).as_posix() == "/y/hub"
    assert hf_cache.hub_cache_dir({"XDG_CACHE_HOME": "/c"}).as_posix() == "/c/huggingface/hub"


def test_model_from_hf_cache_by_revision(cli, tmp_path):
    hub = tmp_path / "hf" / "hub"
    add_snapshot(hub, "Qwen/Qwen3-8B", COMMIT_A, {"config.json": QWEN3_8B_CONFIG})
    # a later revision with 16 kv heads: the revision decides which config is read
    add_snapshot(hub, "Qwen/Qwen3-8B", COMMIT_B, {"config.json": {**QWEN3_8B_CONFIG, "num_key_value_heads": 16}},
                 refs=("v2",))
    env = offline_env(tmp_path)
    r = cli("kv-budget", "--model", "Qwen/Qwen3-8B", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    # 2 × 8 kv heads × 128 × 2 B = 4,096 B per token per layer, × 36 layers
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 4096 * 36
    assert json.loads(r.stdout)["source"] == "Qwen/Qwen3-8B (HF cache, main = aaaaaaaaaaaa)"
    for revision in ("v2", COMMIT_B):
        r = cli("kv-budget", "--model", "Qwen/Qwen3-8B", "--revision", revision, "--format", "json", env=env)
        assert json.loads(r.stdout)["kv_bytes_per_token"] == 2 * 16 * 128 * 2 * 36  # 8,192 B per layer
    r = cli("kv-budget", "--model", "Qwen/Qwen3-8B", "--revision", "v3", env=env)
    assert r.returncode == 2 and "revision 'v3' is not in the local Hugging Face cache" in r.stderr
    assert "main, v2" in r.stderr


def test_hf_hub_cache_wins_over_hf_home(cli, tmp_path):
    add_snapshot(tmp_path / "elsewhere", "Qwen/Qwen3-8B", COMMIT_A, {"config.json": QWEN3_8B_CONFIG})
    r = cli("kv-budget", "--model", "Qwen/Qwen3-8B", env=offline_env(tmp_path,
                                                                      HF_HUB_CACHE=str(tmp_path / "elsewhere")))
    assert r.returncode == 0 and "Qwen/Qwen3-8B (HF cache" in r.stdout


def test_uncached_model_never_downloads(cli, tmp_path):
    r = cli("kv-budget", "--model", "meta-llama/Llama-3.3-70B-Instruct", env=offline_env(tmp_path))
    assert r.returncode == 2
    assert "not in the local Hugging Face cache" in r.stderr and "never downloads" in r.stderr
    assert "hf download meta-llama/Llama-3.3-70B-Instruct config.json" in r.stderr


def test_model_folder_path(cli, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    r = cli("kv-budget", "--model", str(folder), "--format", "json", env=offline_env(tmp_path))
    assert r.returncode == 0 and json.loads(r.stdout)["kv_bytes_per_token"] == 4096 * 36


def test_no_model_uses_the_one_cached_model(cli, tmp_path):
    hub = tmp_path / "hf" / "hub"
    add_snapshot(hub, "Qwen/Qwen3-8B", COMMIT_A, {"config.json": QWEN3_8B_CONFIG})
    add_snapshot(hub, "sentence-transformers/all-MiniLM-L6-v2", COMMIT_B,
                 {"config.json": {"model_type": "bert", "architectures": ["BertModel"]}})  # not a decoder
    r = cli("kv-budget", "--bs", "16", "--seq", "4096", "--format", "json", env=offline_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"] == "Qwen/Qwen3-8B"
    assert "the Hugging Face cache holds one model, Qwen/Qwen3-8B" in r.stderr


def test_nothing_found_lists_every_preset(cli, tmp_path):
    r = cli("kv-budget", "--bs", "16", "--seq", "4096", "--format", "json", env=offline_env(tmp_path))
    assert r.returncode == 0
    data = json.loads(r.stdout)
    assert data["mode"] == "presets" and len(data["models"]) == 12
    row = {m["name"]: m for m in data["models"]}["llama-3.1-8b"]
    assert row["kv_bytes_batch"] == 16 * 4096 * 131_072  # 128 KiB per token: 8 GiB
    assert row["gpus_80gib"] == 1
    assert {m["name"]: m for m in data["models"]}["llama-3.1-70b"]["gpus_80gib"] == 4
    text = cli("kv-budget", "--bs", "16", "--seq", "4096", env=offline_env(tmp_path))
    assert "--model org/name" in text.stdout and "llama-3.1-405b" in text.stdout


HYBRIDS = {
    "jamba": {"model_type": "jamba", "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16},
    "qwen3_next": {"model_type": "qwen3_next", "full_attention_interval": 4, "linear_num_value_heads": 32,
                   "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]},
    "granite4": {"model_type": "granitemoehybrid", "layer_types": ["mamba", "mamba", "attention", "mamba"]},
    "falcon_h1": {"model_type": "falcon_h1", "mamba_d_ssm": 1536, "mamba_n_heads": 24},
    "nemotron_h": {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M-M*-"},
}


@pytest.mark.parametrize("name", sorted(HYBRIDS))
def test_hybrid_state_space_models_are_refused(name):
    config = {"hidden_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 32, "intermediate_size": 14336,
              "vocab_size": 65536, **HYBRIDS[name]}
    with pytest.raises(UserError, match="hybrid model whose state-space / linear-attention layers"):
        arch_from_config(config, "config.json")


def test_near_miss_plain_models_are_not_hybrids():
    for config in ({**QWEN3_8B_CONFIG}, {**QWEN3_8B_CONFIG, "model_type": "gemma3_text",
                   "layer_types": ["sliding_attention"] * 35 + ["full_attention"], "sliding_window": 1024}):
        assert arch_from_config(config, "x").layers == 36


def test_unknown_architecture_says_what_is_missing():
    with pytest.raises(UserError, match=r"missing key `num_attention_heads` / `n_head` for model_type 'rwkv7x' "
                                        r"\(Rwkv7ForCausalLM\)"):
        arch_from_config({"model_type": "rwkv7x", "architectures": ["Rwkv7ForCausalLM"], "num_hidden_layers": 24,
                          "hidden_size": 2048}, "config.json")


def test_encoder_decoder_refused():
    with pytest.raises(UserError, match="encoder-decoder"):
        arch_from_config({**QWEN3_8B_CONFIG, "model_type": "t5", "is_encoder_decoder": True}, "config.json")
