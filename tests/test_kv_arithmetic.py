"""KV and weights arithmetic for every preset, derived by hand, and vLLM's block accounting."""

import pytest

from llmdoctor.kv.arch import arch_from_config
from llmdoctor.kv.budget import Budget, KVShape, sequence_bytes, vllm_layout
from llmdoctor.kv.presets import PRESETS

GIB = 1024**3

# bytes per token, all layers, one GPU, full attention, 16-bit KV cache (tp=1):
#   2 (K and V) × kv_heads × head_dim × 2 bytes × layers; MLA: (kv_lora_rank + qk_rope_head_dim) × 2 × layers
PER_TOKEN_BF16 = {
    "llama-2-7b": 2 * 32 * 128 * 2 * 32,      # MHA: 32 kv heads            = 524,288 (512 KiB)
    "llama-3.1-8b": 2 * 8 * 128 * 2 * 32,     # GQA 8 kv heads, 32 layers   = 131,072 (128 KiB)
    "llama-3.1-70b": 2 * 8 * 128 * 2 * 80,    # 80 layers                   = 327,680 (320 KiB)
    "llama-3.1-405b": 2 * 8 * 128 * 2 * 126,  # 126 layers                  = 516,096 (504 KiB)
    "mistral-7b": 2 * 8 * 128 * 2 * 32,       #                             = 131,072
    "mixtral-8x7b": 2 * 8 * 128 * 2 * 32,     # experts do not touch the KV = 131,072
    "qwen2.5-7b": 2 * 4 * 128 * 2 * 28,       # 4 kv heads, 28 layers       = 57,344 (56 KiB)
    "qwen2.5-72b": 2 * 8 * 128 * 2 * 80,      #                             = 327,680
    "deepseek-v3": (512 + 64) * 2 * 61,       # MLA latent, no factor 2     = 70,272 (68.6 KiB)
    "gemma-2-9b": 2 * 8 * 256 * 2 * 42,       # head_dim 256 from config    = 344,064 (336 KiB)
    "gemma-3-27b": 2 * 16 * 128 * 2 * 62,     # 16 kv heads × 128           = 507,904 (496 KiB)
    "phi-3-mini": 2 * 32 * 96 * 2 * 32,       # head_dim 3072/32 = 96       = 393,216 (384 KiB)
}


def test_every_preset_has_a_hand_derived_figure():
    assert set(PER_TOKEN_BF16) == set(PRESETS)


@pytest.mark.parametrize("name", sorted(PER_TOKEN_BF16))
def test_per_token_bytes(name):
    assert KVShape(PRESETS[name].arch(), 2).bytes_per_token == PER_TOKEN_BF16[name]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_parameter_count_matches_published_total(name):
    """Published totals are given to 3 significant figures (6.74B, 70.6B, 671B...): a 0.5% tolerance
    covers that rounding; our count is within 0.08% for every preset (see the exact totals below)."""
    preset = PRESETS[name]
    assert preset.arch().param_count() == pytest.approx(preset.published_params, rel=0.005)


@pytest.mark.parametrize("name, exact", [
    # safetensors totals on the Hugging Face Hub (model cards): our count reproduces them exactly
    ("llama-2-7b", 6_738_415_616),
    ("llama-3.1-8b", 8_030_261_248),
    ("llama-3.1-70b", 70_553_706_496),
    ("llama-3.1-405b", 405_853_388_800),
    ("mistral-7b", 7_241_732_096),
    ("mixtral-8x7b", 46_702_792_704),
    ("qwen2.5-7b", 7_615_616_512),
    ("qwen2.5-72b", 72_706_203_648),
    ("gemma-2-9b", 9_241_705_984),
    ("phi-3-mini", 3_821_079_552),
])
def test_parameter_count_exact(name, exact):
    assert PRESETS[name].arch().param_count() == exact


def test_llama_2_7b_parameters_by_hand():
    # embeddings 32000 × 4096 twice (untied) = 262,144,000
    # per layer: attention 4 × 4096² = 67,108,864; MLP 3 × 4096 × 11008 = 135,266,304; 2 norms = 8,192
    # 32 layers × 202,383,360 = 6,476,267,520; + final norm 4,096 → 6,738,415,616
    assert PRESETS["llama-2-7b"].arch().param_count() == 262_144_000 + 32 * 202_383_360 + 4096


def test_tensor_parallel_shards_and_replicates_kv_heads():
    arch = PRESETS["llama-3.1-70b"].arch()  # 8 kv heads
    assert KVShape(arch, 2, tp=4).kv_heads_per_gpu == 2
    assert KVShape(arch, 2, tp=4).bytes_per_token == 2 * 2 * 128 * 2 * 80  # 81,920
    assert KVShape(arch, 2, tp=16).kv_heads_per_gpu == 1  # replicated, never 0.5
    assert KVShape(arch, 2, tp=16).replicated


def test_mla_is_not_sharded_by_tensor_parallel():
    arch = PRESETS["deepseek-v3"].arch()
    assert KVShape(arch, 2, tp=8).bytes_per_token == KVShape(arch, 2, tp=1).bytes_per_token == 70_272


def test_fp8_kv_halves_the_cache():
    arch = PRESETS["llama-3.1-8b"].arch()
    assert KVShape(arch, 1).bytes_per_token == 65_536


def test_sliding_windows_cap_the_layers_that_slide():
    # gemma-2-9b: 21 of 42 layers slide with a 4096 window; 8192 B per token per layer
    arch = PRESETS["gemma-2-9b"].arch()
    assert arch.sliding_layers == 21 and arch.windows[0] == 4096 and arch.windows[1] is None
    shape = KVShape(arch, 2)
    # seq 8192: full layers 21 × 8192 tokens, sliding layers 21 × 4096 tokens
    assert sequence_bytes(shape, 8192, 16, arch.windows) == (21 * 8192 + 21 * 4096) * 8192
    # gemma-3-27b: every 6th layer is global (layers 5, 11, ..., 59): 10 global, 52 local of window 1024
    g3 = PRESETS["gemma-3-27b"].arch()
    assert [i for i, w in enumerate(g3.windows) if w is None] == list(range(5, 62, 6))
    assert sequence_bytes(KVShape(g3, 2), 32768, 16, g3.windows) == (10 * 32768 + 52 * 1024) * 8192


def test_block_rounding_per_sequence():
    arch = PRESETS["llama-3.1-8b"].arch()
    # 1000 tokens occupy ceil(1000 / 16) = 63 blocks = 1008 token slots
    assert sequence_bytes(KVShape(arch, 2), 1000, 16, arch.windows) == 1008 * 131_072


def test_memory_is_linear_in_batch_times_sequence():
    arch = PRESETS["llama-3.1-8b"].arch()
    small = Budget(arch, KVShape(arch, 2), "bf16", "bf16", 8, 4096, 16, arch.windows, 8192)
    large = Budget(arch, KVShape(arch, 2), "bf16", "bf16", 16, 8192, 16, arch.windows, 8192)
    assert large.total_bytes == 4 * small.total_bytes  # doubling both is 4x, not 8x


# ---------------------------------------------------------------------- vLLM's own log lines

QWEN3_14B = {  # Qwen/Qwen3-14B config.json (architecture keys)
    "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 40,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def test_reproduces_published_vllm_v1_log_qwen3_14b():
    """LMCache issue #1739 (vLLM V1, Qwen3-14B, bf16 KV, block 16):
        Available KV cache memory: 6.51 GiB
        GPU KV cache size: 42,656 tokens
        Maximum concurrency for 32,768 tokens per request: 1.30x
    page = 16 × 2 × 8 × 128 × 2 = 65,536 B; 40 layers → 2,621,440 B per block;
    6.51 GiB // 2,621,440 = 2,666 blocks → 42,656 tokens; 2,666 / cdiv(32768, 16) = 2,666 / 2,048 = 1.30."""
    arch = arch_from_config(QWEN3_14B, "Qwen3-14B")
    layout = vllm_layout(KVShape(arch, 2), 16, arch.windows)
    assert layout.page_bytes == 65_536 and layout.group_size == 40 and len(layout.groups) == 1
    memory = int(6.51 * GIB)
    assert layout.num_blocks(memory) == 2_666
    assert layout.cache_tokens(memory, 32_768, 8192) == 42_656  # int(2666 / 2048 × 32768)
    assert layout.cache_tokens_by_groups(memory) == 42_656  # 2666 × 16, as earlier V1 releases
    assert f"{layout.max_concurrency(memory, 32_768, 8192):.2f}" == "1.30"
    # vLLM prints the memory to 2 decimals: anything in 6.505..6.515 GiB gives 2,664..2,668 blocks
    assert layout.num_blocks(int(6.505 * GIB)) <= 2_666 <= layout.num_blocks(int(6.515 * GIB))


def test_reproduces_published_vllm_v0_block_counts_llama_3_1_8b():
    """vLLM issue #10517 (Llama-3.1-8B-Instruct, RTX 3090): `kv_cache_size=3.81GiB` → `GPU blocks: 1952`,
    `Maximum concurrency for 20000 tokens per request: 1.56x`; `kv_cache_size=2.89GiB` → 1478 blocks,
    "maximum number of tokens that can be stored in KV cache (23648)", 0.82x at 29000 tokens.
    One block = 16 tokens × 131,072 B = 2 MiB, so 3.81 GiB (printed to 2 decimals: 3.805..3.815) holds
    1948..1953 blocks and 2.89 GiB holds 1477..1482."""
    arch = PRESETS["llama-3.1-8b"].arch()
    layout = vllm_layout(KVShape(arch, 2), 16, arch.windows)
    assert layout.page_bytes * layout.group_size == 2 * 1024**2
    assert layout.num_blocks(int(3.805 * GIB)) <= 1952 <= layout.num_blocks(int(3.815 * GIB))
    assert layout.num_blocks(int(2.885 * GIB)) <= 1478 <= layout.num_blocks(int(2.895 * GIB))
    exact_3_81 = 1952 * 2 * 1024**2
    assert layout.cache_tokens(exact_3_81, 20_000, 8192) == 1952 * 16
    assert f"{layout.max_concurrency(exact_3_81, 20_000, 8192):.2f}" == "1.56"
    exact_2_89 = 1478 * 2 * 1024**2
    assert layout.cache_tokens(exact_2_89, 29_000, 8192) == 23_641  # int(1478 / 1813 × 29000)
    assert layout.cache_tokens_by_groups(exact_2_89) == 23_648  # the V0 figure: blocks × 16
    assert f"{layout.max_concurrency(exact_2_89, 29_000, 8192):.2f}" == "0.82"


def test_vllm_groups_hybrid_models_like_kv_cache_utils():
    # gemma-3-27b: 10 full + 52 sliding; 52 ≥ 1.5 × 10 so group_size = 10: one full group and
    # cdiv(52, 10) = 6 sliding groups (8 padding slots); tokens = num_blocks // 7 groups × 16
    g3 = PRESETS["gemma-3-27b"].arch()
    layout = vllm_layout(KVShape(g3, 2), 16, g3.windows)
    assert layout.group_size == 10 and len(layout.groups) == 7
    assert sorted(g.layers for g in layout.groups if g.window) == [8, 8, 9, 9, 9, 9]
    memory = 40 * GIB
    blocks = memory // (16 * 8192) // 10  # page 131,072 B → 32,768 blocks
    assert layout.num_blocks(memory) == blocks == 32_768
    assert layout.cache_tokens_by_groups(memory) == blocks // 7 * 16 == 74_896  # earlier V1 releases
    # one 32,768-token request: full group cdiv(32768, 16) = 2048 blocks; each sliding group
    # cdiv(min(1024 - 1 + 8192, 32768), 16) + 1 = cdiv(9215, 16) + 1 = 576 + 1 = 577 blocks;
    # 2048 + 6 × 577 = 5510
    assert layout.blocks_per_request(32_768, 8192) == 5510
    assert layout.max_concurrency(memory, 32_768, 8192) == pytest.approx(32_768 / 5510)
    # current vLLM: int(max_concurrency × max_model_len) = int(32768 / 5510 × 32768) = 194,871
    assert layout.cache_tokens(memory, 32_768, 8192) == 194_871
    # gemma-2-9b: 21 + 21 → group_size 21, two groups
    g2 = PRESETS["gemma-2-9b"].arch()
    layout2 = vllm_layout(KVShape(g2, 2), 16, g2.windows)
    assert layout2.group_size == 21 and len(layout2.groups) == 2


def test_vllm_uniform_sliding_model_is_one_group():
    # mistral-7b: every layer slides (4096): one group of 32 layers; a request needs
    # cdiv(min(4095 + 8192, 32768), 16) + 1 = cdiv(12287, 16) + 1 = 768 + 1 = 769 blocks
    arch = PRESETS["mistral-7b"].arch()
    layout = vllm_layout(KVShape(arch, 2), 16, arch.windows)
    assert layout.group_size == 32 and len(layout.groups) == 1
    assert layout.blocks_per_request(32_768, 8192) == 769


def test_mla_page_has_no_factor_two():
    # deepseek-v3 block 64 (FlashMLA): page = 64 × 576 × 2 = 73,728 B per layer
    arch = PRESETS["deepseek-v3"].arch()
    assert vllm_layout(KVShape(arch, 2, tp=8), 64, arch.windows).page_bytes == 73_728


def test_longest_seq_and_largest_batch():
    arch = PRESETS["llama-3.1-8b"].arch()
    b = Budget(arch, KVShape(arch, 2), "bf16", "bf16", 4, 8192, 16, arch.windows, 8192, kv_memory=16 * GIB)
    # 16 GiB / 128 KiB = 131,072 tokens: 16 sequences of 8192, or 4 sequences of 32,768
    assert b.largest_batch() == 16
    assert b.longest_seq() == 32_768
    mistral = PRESETS["mistral-7b"].arch()
    m = Budget(mistral, KVShape(mistral, 2), "bf16", "bf16", 1, 8192, 16, mistral.windows, 8192,
               kv_memory=16 * GIB)
    assert m.longest_seq() is None  # every layer slides: the cache stops growing at the window


# ------------------------------------------------------------------ weights as vLLM loads them

def test_fp8_weights_keep_embeddings_norms_and_routers_in_16_bits():
    """DeepSeek-V3 (block-wise fp8, 128 × 128 scales), tensor parallel 8, derived matrix by matrix from the
    config (vLLM's deepseek_v2.py: q_a_proj and kv_a_proj_with_mqa are ReplicatedLinear, the router a
    replicated, unquantized gate with a float32 e_score_correction_bias)."""
    from llmdoctor.kv.budget import cdiv, weights_memory

    arch = PRESETS["deepseek-v3"].arch()
    h, layers, dense, moe_layers = 7168, 61, 3, 58

    def fp8(rows, cols, count=1):  # 1 byte per weight + a float32 scale per 128 × 128 block
        return count * (rows * cols + 4 * cdiv(rows, 128) * cdiv(cols, 128))

    replicated = layers * (fp8(1536, h) + fp8(512 + 64, h))  # q_a_proj, kv_a_proj_with_mqa
    split = layers * (fp8(128 * 192, 1536) + fp8(128 * 256, 512) + fp8(h, 128 * 128))  # q_b, kv_b, o
    split += dense * (fp8(18432, h, 2) + fp8(h, 18432))  # gate/up, down
    split += moe_layers * 256 * (fp8(2048, h, 2) + fp8(h, 2048))  # routed experts
    split += moe_layers * (fp8(2048, h, 2) + fp8(h, 2048))  # the shared expert
    split += 2 * 129280 * h * 2  # embed_tokens + lm_head, bf16 (129,280 is a multiple of 64)
    router = moe_layers * (256 * h * 2 + 256 * 4)  # bf16 gate + float32 bias
    norms = (layers * (2 * h + 1536 + 512) + h) * 2  # 2 RMSNorms per layer, q_a / kv_a layernorms, final
    total, per_gpu = weights_memory(arch, "fp8", tp=8, block=(128, 128))
    assert total == split + replicated + router + norms
    assert per_gpu == cdiv(split, 8) + replicated + router + norms
    assert total == 673_150_611_808  # 626.9 GiB
    assert per_gpu == 85_140_130_848  # 79.3 GiB on each of 8 GPUs: 0.9 GiB more than an even split (78.4 GiB)


def test_16_bit_weights_are_params_times_two_with_routers_and_norms_whole_on_each_gpu():
    from llmdoctor.kv.budget import cdiv, weights_memory

    llama = PRESETS["llama-3.1-70b"].arch()
    total, per_gpu = weights_memory(llama, "bf16", tp=4)
    norms = (80 * 2 * 8192 + 8192) * 2
    assert total == llama.param_count() * 2 == 141_107_412_992
    assert per_gpu == cdiv(total - norms, 4) + norms
    mixtral = PRESETS["mixtral-8x7b"].arch()
    total, per_gpu = weights_memory(mixtral, "bf16", tp=2)
    router = 32 * 4096 * 8 * 2  # ReplicatedLinear gate, 8 experts
    norms = (32 * 2 * 4096 + 4096) * 2
    assert total == mixtral.param_count() * 2
    assert per_gpu == cdiv(total - router - norms, 2) + router + norms
    qwen = PRESETS["qwen2.5-7b"].arch()  # 4 kv heads on 8 GPUs: each holds one k and one v head
    total, per_gpu = weights_memory(qwen, "bf16", tp=8)
    kv = 28 * 2 * (4 * 128) * 3584 * 2  # 28 layers, k and v, 4 heads × 128, hidden 3584, bf16
    small = (qwen.param_count() - qwen.embedding_params() - sum(m.params for m in qwen.linear_matrices())) * 2
    assert small == (28 * (2 * 3584 + 3584 + 2 * 512) + 3584) * 2  # norms and the q/k/v biases, kept whole
    assert total == qwen.param_count() * 2
    assert per_gpu == cdiv(total - kv - small, 8) + kv // 4 + small
