"""config.json loading: one published config per architecture family reads back as its preset."""

import json

import pytest
from conftest import FIXTURES

from llmdoctor.errors import UserError
from llmdoctor.kv.arch import arch_from_config, load_config_file
from llmdoctor.kv.budget import model_dtype
from llmdoctor.kv.presets import PRESETS, get_preset

FAMILIES = {  # fixture folder → preset; one per family: Llama, Qwen2, Mistral, Mixtral, Gemma2, Gemma3, DSV3, Phi-3
    "llama-3.1-8b": "llama-3.1-8b",
    "qwen2.5-7b": "qwen2.5-7b",
    "mistral-7b": "mistral-7b",
    "mixtral-8x7b": "mixtral-8x7b",
    "gemma-2-9b": "gemma-2-9b",
    "gemma-3-27b": "gemma-3-27b",
    "deepseek-v3": "deepseek-v3",
    "phi-3-mini": "phi-3-mini",
}


@pytest.mark.parametrize("folder", sorted(FAMILIES))
def test_config_round_trip_matches_preset(folder):
    data, path = load_config_file(FIXTURES / "models" / folder)  # a folder holding config.json
    from_file = arch_from_config(data, path, name=FAMILIES[folder])
    preset = PRESETS[FAMILIES[folder]]
    assert from_file == preset.arch()
    assert model_dtype(from_file, data) == model_dtype(preset.arch(), preset.config)


def test_family_details_read_from_config():
    def load(folder):
        data, path = load_config_file(FIXTURES / "models" / folder / "config.json")
        return arch_from_config(data, path), data

    gemma3, _ = load("gemma-3-27b")  # nested text_config; top-level torch_dtype still read
    assert (gemma3.layers, gemma3.heads, gemma3.kv_heads, gemma3.head_dim) == (62, 32, 16, 128)
    assert gemma3.torch_dtype == "bfloat16" and gemma3.sliding_layers == 52
    phi3, _ = load("phi-3-mini")
    assert phi3.head_dim == 96  # derived: 3072 / 32
    qwen, _ = load("qwen2.5-7b")
    assert qwen.sliding_layers == 0 and qwen.qkv_bias  # use_sliding_window false
    dsv3, data = load("deepseek-v3")
    assert dsv3.mla.kv_lora_rank == 512 and dsv3.mla.qk_rope_head_dim == 64 and dsv3.layers == 61
    assert model_dtype(dsv3, data) == "fp8"  # published weights are fp8 (quantization_config)
    mixtral, _ = load("mixtral-8x7b")
    assert mixtral.moe.num_experts == 8 and mixtral.sliding_layers == 0  # sliding_window null


def test_qwen2_sliding_window_layers_from_max_window_layers():
    cfg = {**PRESETS["qwen2.5-7b"].config, "use_sliding_window": True, "sliding_window": 4096,
           "max_window_layers": 20}
    arch = arch_from_config(cfg, "x")
    assert [i for i, w in enumerate(arch.windows) if w] == list(range(20, 28))


def test_layer_types_win():
    cfg = {**PRESETS["llama-3.1-8b"].config, "num_hidden_layers": 4, "sliding_window": 512,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}
    assert arch_from_config(cfg, "x").windows == (512, None, 512, None)


def _write(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    return path


def test_missing_key_is_named(tmp_path):
    cfg = dict(PRESETS["llama-3.1-8b"].config)
    del cfg["num_hidden_layers"]
    data, path = load_config_file(_write(tmp_path, json.dumps(cfg)))
    with pytest.raises(UserError, match="missing key `num_hidden_layers`"):
        arch_from_config(data, path)


def test_malformed_json_names_line(tmp_path):
    with pytest.raises(UserError, match=r"config.json:3:\d+: invalid JSON"):
        load_config_file(_write(tmp_path, '{\n  "hidden_size": 4096,\n  oops\n}'))


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_config_file(tmp_path / "nope")


def test_bad_value_type(tmp_path):
    cfg = {**PRESETS["llama-3.1-8b"].config, "num_attention_heads": "32"}
    with pytest.raises(UserError, match="`num_attention_heads` must be a positive integer"):
        arch_from_config(cfg, "x")


def test_unknown_model_suggests_close_names():
    with pytest.raises(UserError) as err:
        get_preset("llama-3-70b")
    assert "llama-3.1-70b" in str(err.value) and "--list-models" in str(err.value)


def test_float32_checkpoints_are_served_in_16_bits():
    # gemma-2-9b publishes float32 weights; vLLM --dtype auto serves float32 checkpoints in 16 bits
    assert model_dtype(PRESETS["gemma-2-9b"].arch(), PRESETS["gemma-2-9b"].config) == "bf16"
    no_dtype = dict(PRESETS["llama-2-7b"].config)
    del no_dtype["torch_dtype"]
    assert model_dtype(arch_from_config(no_dtype, "x"), no_dtype) == "bf16"
