"""`llmdoctor kv-budget` end to end, as the on-call engineer runs it."""

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES

GIB = 1024**3


def _json(result):
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def test_json_keys_llama_70b_tp4(cli):
    r = cli("kv-budget", "--model", "llama-3.1-70b", "--tp", "4", "--bs", "16", "--seq", "4096",
            "--format", "json")
    assert r.returncode == 0
    data = _json(r)
    # 8 kv heads / tp 4 = 2 per GPU: 2 × 2 × 128 × 2 B × 80 layers = 81,920 B per token per GPU
    assert data["kv_bytes_per_token"] == 81_920
    assert data["kv_bytes_per_token_per_layer"] == 1_024
    assert data["kv_bytes_total"] == 16 * 4096 * 81_920  # 4096 is a whole number of blocks: 5 GiB
    assert data["weights_bytes"] == 70_553_706_496 * 2
    assert "kv_cache_tokens" not in data  # no memory figure given


def test_kv_mem_gives_vllm_figures_and_grid(cli):
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--bs", "4", "--seq", "32768", "--kv-mem", "16GiB",
            "--format", "json")
    assert r.returncode == 0
    data = _json(r)
    # 16 GiB / (16 × 128 KiB per block) = 8192 blocks = 131,072 tokens; 8192 / 2048 blocks per request = 4x
    assert data["kv_cache_tokens"] == 131_072
    assert data["max_concurrency"] == 4.0
    assert data["fits"] is True and data["headroom_bytes"] == 0
    assert data["max_batch"] == 4 and data["max_seq"] == 32_768
    assert data["vllm_log"] == ["GPU KV cache size: 131,072 tokens",
                                "Maximum concurrency for 32,768 tokens per request: 4.00x"]
    grid = data["grid"]
    row = grid["cells"][grid["batches"].index(4)]
    assert row[grid["seqs"].index(32768)] == "tight" and row[grid["seqs"].index(65536)] == "no"


def test_does_not_fit_exits_1_with_text_grid(cli):
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--bs", "64", "--seq", "32768", "--kv-mem", "40GiB")
    assert r.returncode == 1
    assert "does not fit" in r.stdout
    assert "GPU KV cache size: 327,680 tokens" in r.stdout  # 40 GiB / 2 MiB = 20,480 blocks × 16
    assert "+ fits, ~ tight" in r.stdout and "x" in r.stdout


def test_gpu_mem_follows_vllm_budget(cli):
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--seq", "8192", "--gpu-mem", "80GiB", "--utilization",
            "0.9", "--overhead", "2GiB", "--format", "json")
    data = _json(r)
    expected = int(80 * GIB * 0.9) - 8_030_261_248 * 2 - 2 * GIB
    assert data["kv_memory_bytes"] == expected
    assert data["memory"]["weights_per_gpu"] == 8_030_261_248 * 2


def test_weights_alone_too_big(cli):
    r = cli("kv-budget", "--model", "llama-3.1-405b", "--gpu-mem", "80GB")
    assert r.returncode == 1 and "does not fit" in r.stdout


def test_sliding_window_savings_reported(cli):
    r = cli("kv-budget", "--model", "gemma-2-9b", "--seq", "8192", "--format", "json")
    data = _json(r)
    # 21 sliding layers × (8192 − 4096) tokens × 8192 B saved
    assert data["sliding_window_savings_bytes"] == 21 * 4096 * 8192
    assert data["architecture"]["sliding_layers"] == 21


def test_config_file_and_kv_dtype(cli):
    r = cli("kv-budget", "--model-config", str(FIXTURES / "models" / "deepseek-v3"), "--kv-dtype", "fp8",
            "--tp", "8", "--format", "json")
    data = _json(r)
    assert data["kv_bytes_per_token"] == 576 * 61  # MLA latent, 1 byte, not sharded
    assert data["settings"]["dtype"] == "fp8"


def test_list_models(cli):
    r = cli("kv-budget", "--list-models")
    assert r.returncode == 0
    for name in ("llama-3.1-405b", "deepseek-v3", "gemma-3-27b", "phi-3-mini"):
        assert name in r.stdout
    data = _json(cli("kv-budget", "--list-models", "--format", "json"))
    assert len(data["models"]) == 12


@pytest.mark.parametrize("args, needle", [
    (("--model", "llama-3-70b"), "did you mean llama-3.1-70b"),
    (("--model", "llama-3.1-8b", "--kv-mem", "0"), "--kv-mem: the size must be positive"),
    (("--model", "llama-3.1-8b", "--kv-mem", "lots"), "--kv-mem: cannot read 'lots'"),
    (("--model", "llama-3.1-8b", "--gpu-mem", "80G"), "--gpu-mem: unknown unit"),
    (("--model", "llama-3.1-8b", "--utilization", "1.5", "--gpu-mem", "80GB"), "--utilization"),
    (("--model", "llama-3.1-8b", "--kv-mem", "1GiB", "--gpu-mem", "80GB"), "either --kv-mem or --gpu-mem"),
    (("--model", "llama-3.1-8b", "--tp", "3"), "do not split evenly"),
    (("--model", "llama-3.1-8b", "--kv-dtype", "fp4"), "--kv-dtype"),
    (("--model-config", "/no/such/dir"), "does not exist"),
    (("--model", "llama-3.1-8b", "--format", "jsn"), "--format 'jsn': choose one of text, json"),
])
def test_bad_input_exit_2(cli, args, needle):
    r = cli("kv-budget", *args)
    assert r.returncode == 2
    assert needle.lower() in r.stderr.lower()
    assert "Traceback" not in r.stderr


def test_bad_config_names_key(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 4096, "num_attention_heads": 32}))
    r = cli("kv-budget", "--model-config", str(tmp_path))
    assert r.returncode == 2 and "num_hidden_layers" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "config.json").write_text("{ not json")
    r = cli("kv-budget", "--model-config", str(tmp_path / "config.json"))
    assert r.returncode == 2 and "invalid JSON" in r.stderr


@pytest.mark.parametrize("key, value, needle", [
    ("n_shared_experts", "one", "`n_shared_experts` must be a non-negative integer, got 'one'"),
    ("first_k_dense_replace", -1, "`first_k_dense_replace` must be a non-negative integer, got -1"),
    ("max_position_embeddings", "big", "`max_position_embeddings` must be a positive integer, got 'big'"),
    ("sliding_window_pattern", "6", "`sliding_window_pattern` must be a positive integer, got '6'"),
    ("max_window_layers", 2.5, "`max_window_layers` must be a non-negative integer, got 2.5"),
])
def test_bad_optional_config_value_is_named_not_a_traceback(cli, tmp_path, key, value, needle):
    from llmdoctor.kv.presets import PRESETS

    base = "deepseek-v3" if key in ("n_shared_experts", "first_k_dense_replace") else "qwen2.5-7b"
    cfg = {**PRESETS[base].config, "use_sliding_window": True, key: value}
    if key == "sliding_window_pattern":
        cfg = {**PRESETS["gemma-3-27b"].config["text_config"], key: value}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = cli("kv-budget", "--model-config", str(tmp_path / "config.json"))
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr and "config.json" in r.stderr
    assert "Traceback" not in r.stderr


def test_kv_heads_that_do_not_split_across_tp_exit_2(cli, tmp_path):
    # 24 query heads split across 4 GPUs, but 6 kv heads do not (vLLM's QKVParallelLinear asserts it);
    # 6 kv heads across 2 GPUs do: 3 per GPU
    cfg = {"num_hidden_layers": 2, "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 6,
           "intermediate_size": 8192, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = cli("kv-budget", "--model-config", str(tmp_path), "--tp", "4")
    assert r.returncode == 2 and "--tp 4: the 6 kv heads do not split evenly across 4 GPUs" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("kv-budget", "--model-config", str(tmp_path), "--tp", "2", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["kv_heads_per_gpu"] == 3


def test_kv_budget_imports_no_heavy_library():
    code = (
        "import sys\n"
        "from llmdoctor.cli import main\n"
        "rc = main(['kv-budget', '--model', 'llama-3.1-8b', '--kv-mem', '40GiB', '--format', 'json'])\n"
        "heavy = sorted(m for m in ('libcst', 'httpx', 'tiktoken', 'pynvml') if m in sys.modules)\n"
        "print('HEAVY', heavy, rc, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    assert "HEAVY [] 0" in proc.stderr, proc.stderr


def test_warnings_for_too_long_seq_and_no_memory(cli):
    data = _json(cli("kv-budget", "--model", "phi-3-mini", "--seq", "8192", "--format", "json"))
    assert any("max_position_embeddings (4,096)" in w for w in data["warnings"])
    r = cli("kv-budget", "--model", "llama-3.1-405b", "--gpu-mem", "80GB")
    assert "KV002 ValueError: No available memory for the cache" in r.stdout
    assert [f["rule"] for f in data["findings"]] == ["KV004"]


def test_earlier_vllm_note_for_a_single_sliding_group(cli):
    r = cli("kv-budget", "--model", "mistral-7b", "--bs", "4", "--seq", "32768", "--kv-mem", "10GiB")
    assert r.returncode == 0
    # every layer slides (window 4096): one group of 32 layers; 10 GiB // (16 × 4,096 B) // 32 = 5,120 blocks.
    # current vLLM: a request needs cdiv(min(4096 - 1 + 8192, 32768), 16) + 1 = 769 blocks:
    # int(5,120 / 769 × 32,768) = 218,169 tokens; earlier releases: 5,120 // 1 group × 16 = 81,920 tokens
    assert "GPU KV cache size: 218,169 tokens" in r.stdout
    assert "earlier vLLM V1 logs  GPU KV cache size: 81,920 tokens (1 group)" in r.stdout


def test_kv_budget_help_documents_the_exit_codes(cli):
    r = cli("kv-budget", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "Exit 0" in text and "; 1 " in text and "; 2 " in text


def test_vllm_refuses_to_start_when_one_request_does_not_fit(cli):
    # Mistral-7B: every layer slides (window 4096). One request of 32,768 tokens needs, per vLLM's
    # check_enough_kv_cache_memory, per layer cdiv(min(4096 - 1 + 8192, 32768), 16) + 1 = 769 blocks of
    # 16 × 4,096 B: 769 × 65,536 × 32 layers = 1,612,709,888 B = 1.50 GiB > 1 GiB, although the request itself
    # holds only 4,096 tokens per layer (0.50 GiB) and so "fits"
    r = cli("kv-budget", "--model", "mistral-7b", "--seq", "32768", "--kv-mem", "1GiB", "--format", "json")
    assert r.returncode == 1
    data = _json(r)
    assert data["fits"] is True and data["kv_bytes_total"] == 4096 * 131_072
    assert data["vllm_starts"] is False
    assert data["vllm_log"] == [
        ("ValueError: To serve at least one request with the models's max seq len (32768), (1.50 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (1.00 GiB).")]
    text = cli("kv-budget", "--model", "mistral-7b", "--seq", "32768", "--kv-mem", "1GiB")
    assert text.returncode == 1
    assert "fits, but vLLM refuses to start" in text.stdout and "vLLM would fail" in text.stdout
    assert "GPU KV cache size" not in text.stdout


def test_vllm_has_no_memory_for_the_cache_when_weights_exceed_the_budget(cli):
    # Llama-3.1-70B bf16 = 141.1 GB of weights on one 80 GB GPU: 72 GB − 141.1 GB − 2 GiB < 0
    r = cli("kv-budget", "--model", "llama-3.1-70b", "--gpu-mem", "80GB", "--format", "json")
    assert r.returncode == 1
    data = _json(r)
    assert data["kv_memory_bytes"] < 0 and data["vllm_starts"] is False
    assert data["vllm_log"][0].startswith("ValueError: No available memory for the cache blocks.")


def test_vllm_starts_with_exactly_one_request_of_memory(cli):
    # Llama-3.1-8B, seq 4096: 256 blocks × 16 × 131,072 B = 512 MiB for one request; exactly that is enough
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--seq", "4096", "--kv-mem", "512MiB", "--format", "json")
    assert r.returncode == 0
    data = _json(r)
    assert data["vllm_starts"] is True and data["max_concurrency"] == 1.0
    assert data["vllm_log"][0] == "GPU KV cache size: 4,096 tokens"


def test_config_from_an_endless_device_is_refused(cli):
    r = cli("kv-budget", "--model-config", "/dev/zero", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--model-config: /dev/zero holds more than 16 MiB: too large for a config.json" in r.stderr


def test_a_batch_that_fits_only_at_steady_state_sliding_windows_is_flagged(cli):
    # mistral-7b: every layer slides (window 4096), 128 KiB per token. At 32,768 tokens a sequence holds
    # 4,096 tokens per layer once decoding (16 x 4,096 x 128 KiB = 8 GiB: fits 10 GiB), but vLLM counts
    # min(4095 + 8192, 32768) = 12,287 tokens -> (ceil(12287 / 16) + 1) x 16 x 128 KiB = 1,612,709,888 B per
    # request: 10 GiB / that = 6.66 requests at once.
    r = cli("kv-budget", "--model", "mistral-7b", "--bs", "16", "--seq", "32768", "--kv-mem", "10GiB",
            "--format", "json")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["fits"]
    assert round(data["max_concurrency"], 2) == round(10 * 2**30 / 1_612_709_888, 2) == 6.66
    assert any("at most 6 requests of 32,768 tokens" in w for w in data["warnings"])
    short = json.loads(cli("kv-budget", "--model", "mistral-7b", "--bs", "16", "--seq", "4096", "--kv-mem",
                           "10GiB", "--format", "json").stdout)
    assert short["warnings"] == []  # at 4,096 tokens the request never outgrows its window


def test_fp8_block_scales_come_from_the_config(cli, tmp_path):
    # the fixture's quantization_config: fp8, weight_block_size [128, 128] (derivation of the figures in
    # tests/test_kv_arithmetic.py::test_fp8_weights_keep_embeddings_norms_and_routers_in_16_bits)
    r = cli("kv-budget", "--model-config", str(FIXTURES / "models" / "deepseek-v3"), "--tp", "8", "--format", "json")
    data = _json(r)
    assert (data["weights_bytes"], data["weights_bytes_per_gpu"]) == (673_150_611_808, 85_140_130_848)
    config = json.loads((FIXTURES / "models" / "deepseek-v3" / "config.json").read_text())
    for bad in ([128], [128, 0], ["128", "128"], "128x128", [True, 128]):
        config["quantization_config"]["weight_block_size"] = bad
        (tmp_path / "config.json").write_text(json.dumps(config))
        r = cli("kv-budget", "--model-config", str(tmp_path / "config.json"), "--tp", "8")
        assert r.returncode == 2, bad
        assert "config.json: `quantization_config.weight_block_size` must be two positive integers" in r.stderr
        assert "Traceback" not in r.stderr
    del config["quantization_config"]["weight_block_size"]  # per-tensor fp8: one scale per matrix
    (tmp_path / "config.json").write_text(json.dumps(config))
    data = _json(cli("kv-budget", "--model-config", str(tmp_path / "config.json"), "--tp", "8", "--format", "json"))
    assert data["weights_bytes"] == 672_987_439_008
