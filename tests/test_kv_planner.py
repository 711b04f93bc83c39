"""How many GPUs, checked by hand for a dense GQA model, a MoE and an MLA model on 80 GiB GPUs, and SGLang's
token pool against its own startup log line. The arithmetic is written out beside each assertion."""

from __future__ import annotations

import json

import pytest

from llmdoctor.kv import planner as plans
from llmdoctor.kv import sglang
from llmdoctor.kv.arch import arch_from_config
from llmdoctor.kv.model import resolve_dtypes, weights_block
from llmdoctor.kv.presets import PRESETS

GIB = 1024**3
BUDGET_80 = int(80 * GIB * 0.9)  # 77,309,411,328 B: total × gpu_memory_utilization
OVERHEAD = 2 * GIB


def request(name, batch=16, seq=4096):
    preset = PRESETS[name]
    arch = preset.arch()
    dtype, kv_dtype = resolve_dtypes(arch, preset.config, "auto", "auto")
    return plans.Request(arch, dtype, kv_dtype, batch, seq, fp8_block=weights_block(preset.config, name, dtype))


def test_pp_partitions_as_vllm_get_pp_indices():
    # 61 // 3 = 20 each, the remainder 1 goes to the stage before the last
    assert plans.pp_partitions(61, 3) == [(0, 20), (20, 41), (41, 61)]
    assert plans.pp_partitions(61, 2) == [(0, 31), (31, 61)]
    assert plans.pp_partitions(126, 4) == [(0, 31), (31, 63), (63, 95), (95, 126)]  # 126 = 4 × 31 + 2
    assert plans.pp_partitions(80, 4) == [(0, 20), (20, 40), (40, 60), (60, 80)]


def test_dense_gqa_llama_70b_needs_tp4():
    search = plans.smallest_plan(request("llama-3.1-70b"), plans.Gpus(80 * GIB))
    # weights per GPU: everything splits but the norms (80 × 2 × 8,192 + 8,192 = 1,318,912 params, whole on each
    # GPU): (70,553,706,496 − 1,318,912) × 2 B / tp + 1,318,912 × 2 B
    per_gpu = {tp: (70_553_706_496 - 1_318_912) * 2 // tp + 1_318_912 * 2 for tp in (1, 2, 4)}
    tried = {(tp, pp): outcome for tp, pp, outcome in search.tried}
    assert tried[(1, 1)].weights_per_gpu == per_gpu[1] and tried[(1, 1)].kv_memory < 0  # 141 GB of weights
    # tp 2: 8 kv heads / 2 = 4 per GPU; a block of one layer 16 × 2 × 4 × 128 × 2 B = 32,768 B
    kv2 = BUDGET_80 - per_gpu[2] - OVERHEAD
    assert kv2 == 4_606_902_272 and tried[(2, 1)].num_blocks == kv2 // 32_768 // 80 == 1_757
    assert not tried[(2, 1)].fits  # 16 requests × 4,096 / 16 = 4,096 blocks > 1,757
    assert tried[(3, 1)] == "the 64 attention heads do not divide by 3"
    chosen = search.chosen
    assert (chosen.tp, chosen.pp) == (4, 1)
    kv4 = BUDGET_80 - per_gpu[4] - OVERHEAD  # 39,883,096,064 B; block 16 × 2 × 2 × 128 × 2 = 16,384 B
    assert chosen.kv_memory == kv4 and chosen.num_blocks == kv4 // 16_384 // 80 == 30_428
    assert chosen.cache_tokens == 30_428 * 16 and round(chosen.max_concurrency, 2) == round(30_428 / 256, 2)
    assert chosen.kv_cache_memory_bytes == 16 * 256 * 16_384 * 80 == 5 * GIB  # exactly the batch's blocks
    assert chosen.auto_max_model_len == 131_072  # the model's whole context fits one request
    flags, exact = plans.vllm_flags(request("llama-3.1-70b"), chosen, plans.Gpus(80 * GIB),
                                    "meta-llama/Llama-3.1-70B", ("bf16", "bf16"))
    assert flags == ("vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4 --max-model-len 4096 "
                     "--gpu-memory-utilization 0.9")
    assert exact.endswith("--kv-cache-memory-bytes 5368709120")


def test_moe_mixtral_needs_tp2():
    chosen = plans.smallest_plan(request("mixtral-8x7b"), plans.Gpus(80 * GIB)).chosen
    # norms 32 × 2 × 4,096 + 4,096 = 266,240 and routers 32 × 4,096 × 8 = 1,048,576 stay whole on each GPU
    whole = 266_240 + 1_048_576
    per_gpu = (46_702_792_704 - whole) * 2 // 2 + whole * 2
    assert (chosen.tp, chosen.pp) == (2, 1) and chosen.weights_per_gpu == per_gpu == 46_704_107_520
    kv = BUDGET_80 - per_gpu - OVERHEAD  # 28,457,820,160 B; block 16 × 2 × 4 × 128 × 2 B = 32,768 B × 32 layers
    assert chosen.num_blocks == kv // 32_768 // 32 == 27_139


def test_mla_deepseek_v3_needs_pipeline_stages():
    search = plans.smallest_plan(request("deepseek-v3"), plans.Gpus(80 * GIB))
    tried = {(tp, pp): outcome for tp, pp, outcome in search.tried}
    # tp 8 alone: 85.14 GB (79.3 GiB) of fp8 weights per GPU (docs/kv.md) > 72 GiB: no room for a cache
    assert tried[(8, 1)].kv_memory < 0
    chosen = search.chosen
    assert (chosen.tp, chosen.pp, chosen.gpus) == (4, 3, 12)
    assert all(not isinstance(o, plans.Plan) or not o.ok for (tp, pp), o in tried.items() if tp * pp < 12)
    # MLA: one latent of (512 + 64) × 2 B = 1,152 B per token per layer, never split by tp: a block is 18,432 B;
    # stages of 20, 21 and 20 layers; every worker keeps the smallest block count
    blocks = [s.kv_memory // 18_432 // (s.layers[1] - s.layers[0]) for s in chosen.stages]
    assert [s.layers for s in chosen.stages] == [(0, 20), (20, 41), (41, 61)]
    assert [s.num_blocks for s in chosen.stages] == blocks and chosen.num_blocks == min(blocks)
    assert chosen.stages[1].weights > chosen.stages[0].weights  # 21 MoE layers outweigh the embedding


def test_vllm_refuses_sizes_that_do_not_divide():
    arch = PRESETS["qwen2.5-7b"].arch()  # 28 heads, 4 kv heads, intermediate 18,944
    assert plans.tp_problem(arch, 3) == "the 28 attention heads do not divide by 3"
    assert plans.tp_problem(arch, 7) == "7 GPUs cannot replicate 4 kv heads evenly"  # vLLM: divide(tp, kv_heads)
    assert plans.tp_problem(arch, 8) == "the 28 attention heads do not divide by 8"
    v3 = PRESETS["deepseek-v3"].arch()
    # fp8 blocks of 128: the dense layers' 18,432 / 32 = 576 per GPU is not a whole number of blocks
    assert plans.tp_problem(v3, 32, (128, 128)) == ("intermediate_size 18432 / 32 = 576 is not a multiple of "
                                                     "the fp8 weight block 128")
    assert plans.tp_problem(v3, 16, (128, 128)) is None  # 1,152 = 9 × 128 and 2,048 / 16 = 128


def test_kv_budget_tp_auto_end_to_end(cli):
    r = cli("kv-budget", "--model", "llama-3.1-70b", "--tp", "auto", "--gpu-mem", "80GiB", "--bs", "16",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["chosen"]["tp"] == 4 and data["chosen"]["num_blocks"] == 30_428
    assert data["vllm_command"].startswith("vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4")
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--tp", "auto")
    assert r.returncode == 2 and "--gpu-mem" in r.stderr


def test_max_model_len_auto_as_vllm():
    # Llama-3.1-8B, 24 GiB GPU: 24 GiB × 0.9 − 16,060,522,496 B − 2 GiB = 4,985,196,134 B of KV; a block of
    # all 32 layers is 16 × 131,072 B = 2 MiB: 2,377 blocks → the longest single request is 2,377 × 16 tokens
    arch = PRESETS["llama-3.1-8b"].arch()
    plan = plans.make_plan(plans.Request(arch, "bf16", "bf16", 1, 4096), plans.Gpus(24 * GIB), 1)
    kv = int(24 * GIB * 0.9) - 16_060_522_496 - 2 * GIB
    assert plan.kv_memory == kv and plan.auto_max_model_len == kv // (2 * 1024**2) * 16 == 38_016


# ------------------------------------------------------------------------------------------------ SGLang

QWEN3_235B = {"model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94, "num_attention_heads": 64,
              "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
              "num_experts": 128, "vocab_size": 151936, "torch_dtype": "bfloat16"}


def test_sglang_log_line_of_vllm_issue_21348():
    # vllm-project/vllm#21348: Qwen3-235B-A22B-FP8, SGLang --tp 4 on H100s logged
    # "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB".
    # 4 kv heads / tp 4 = 1 per GPU: 1 × (128 + 128) × 94 layers × 2 B = 48,128 B per token; each buffer holds
    # #tokens + page_size tokens: (367,404 + 1) × 48,128 / 2 / 2^30 = 8.234 GB for K, the same for V.
    arch = arch_from_config(QWEN3_235B, "Qwen3-235B-A22B")
    assert sglang.cell_size(arch, "bf16", 4) == 48_128
    pool = sglang.Pool(48_128, 0, 367_404, 1)
    assert pool.kv_log_line(arch, "bf16", 4) == "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"


def test_sglang_mla_cell_and_line():
    arch = PRESETS["deepseek-v3"].arch()
    assert sglang.cell_size(arch, "bf16", 8) == (512 + 64) * 61 * 2  # MLA latent, never split by tp
    line = sglang.Pool(70_272, 0, 100_000, 1).kv_log_line(arch, "bf16", 8)
    assert line == f"KV Cache is allocated. #tokens: 100000, KV size: {100_001 * 70_272 / GIB:.2f} GB"


@pytest.mark.parametrize("mib, tp, expected", [
    # reserved = 512 + max(chunked, 2048) × 1.5 + cuda_graph_max_bs × 2 + tp × pp / 8 × 1024 (MiB), at least
    # 10 GiB above 60 GiB; fraction = round((gpu − reserved) / gpu, 3)
    (81_559, 1, 0.835),  # H100 80GB: 512 + 12,288 + 512 + 128 = 13,440
    (81_920, 1, 0.836),
    (40_960, 1, 0.833),  # A100 40GB: 512 + 6,144 + 64 + 128 = 6,848
    (81_559, 8, 0.818),  # tp 8: graph bs 512 → 512 + 12,288 + 1,024 + 1,024 = 14,848
    (24_576, 1, 0.847),  # 24 GB: 512 + 3,072 + 48 + 128 = 3,760
])
def test_sglang_default_mem_fraction_static(mib, tp, expected):
    assert sglang.default_mem_fraction_static(mib * 2**20, tp) == expected


def test_sglang_pool_end_to_end(cli):
    # Llama-3.1-8B on 80 GiB: free before loading 80 − 2 = 78 GiB; fraction 0.836 (SGLang's default here);
    # rest = (78 GiB − 16,060,522,496 B) − 78 GiB × 0.164; #tokens = int(rest) // 131,072
    free = 78 * GIB
    rest_gib = (free - 16_060_522_496) / GIB - free / GIB * (1 - 0.836)
    tokens = int(rest_gib * GIB) // 131_072
    r = cli("kv-budget", "--model", "llama-3.1-8b", "--engine", "sglang", "--gpu-mem", "80GiB", "--bs", "16",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["max_total_num_tokens"] == tokens == 411_651 and data["fits"] is True
    assert data["sglang_log"] == (f"KV Cache is allocated. #tokens: {tokens}, K size: "
                                  f"{(tokens + 1) * 131_072 / 2 / GIB:.2f} GB, V size: "
                                  f"{(tokens + 1) * 131_072 / 2 / GIB:.2f} GB")
    r = cli("kv-budget", "--model", "llama-3.1-70b", "--engine", "sglang", "--gpu-mem", "80GiB",
            "--mem-fraction-static", "0.9", "--format", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["max_total_num_tokens"] == 0  # 141 GB of weights
