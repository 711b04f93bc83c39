"""KV-cache and weights arithmetic (design.md §5), and vLLM's own block accounting.

vLLM figures follow vllm/v1/core/kv_cache_utils.py and vllm/v1/kv_cache_interface.py (vLLM V1 engine):
- page (one block of one layer) = block_size × num_kv_heads × (head_size + head_size_v) × dtype bytes;
  MLA: block_size × (kv_lora_rank + qk_rope_head_dim) × dtype bytes (one latent, no K/V pair).
- per-GPU kv heads = max(1, kv_heads // tp) (vllm ModelConfig.get_num_kv_heads); MLA is never sharded.
- layers with the same spec form one group; a hybrid model (full + sliding layers) is split into groups of
  `group_size` layers (`_get_kv_cache_groups_uniform_page_size`).
- num_blocks = kv_memory // page // group_size (`get_num_blocks`);
  "Maximum concurrency" = num_blocks / Σ_groups blocks one request of max_model_len needs, where a full
  group needs cdiv(L, block) and a sliding group cdiv(min(window - 1 + max_num_batched_tokens, L), block) + 1
  (`get_max_concurrency_for_kv_cache_config`, `SlidingWindowSpec.max_memory_usage_bytes`);
  "GPU KV cache size" = int(max_concurrency × max_model_len) tokens in current vLLM (`_report_kv_cache_config`);
  earlier V1 releases logged num_blocks // num_groups × block_size. Both agree for models without sliding
  layers whenever max_model_len is a multiple of block_size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdoctor.kv.arch import ModelArch

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def model_dtype(arch: ModelArch, config: dict | None = None) -> str:
    """Default weights dtype, as vLLM's `--dtype auto` picks it: fp8 for fp8-quantized checkpoints, else the
    config's `torch_dtype`; a float32 (or unspecified) checkpoint is served in 16 bits (vLLM >= 0.10.1: bf16;
    older releases fp16, the same 2 bytes)."""
    quant = (config or {}).get("quantization_config")
    if isinstance(quant, dict) and quant.get("quant_method") == "fp8":
        return "fp8"
    dtype = _TORCH_DTYPES.get(arch.torch_dtype or "", "bf16")
    return "bf16" if dtype == "fp32" else dtype


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


VOCAB_PADDING = 64  # vLLM's VocabParallelEmbedding / ParallelLMHead pad the vocabulary to a multiple of 64


def weights_memory(arch: ModelArch, dtype: str, tp: int, block: tuple[int, int] | None = None,
                   vocab_matrices: int | None = None) -> tuple[int, int]:
    """(bytes of all weights, bytes on each tensor-parallel GPU) as vLLM loads them.

    Every weight is stored in `dtype`, except with fp8 weights (a checkpoint's `quant_method: fp8`, or
    `--quantization fp8`): only the projection and MLP matrices take 1 byte, plus a float32 scale per
    `block` (block-wise checkpoints) or per matrix; embeddings, the LM head, norms and MoE routers stay in
    16 bits. MoE router biases are float32. Embeddings and the LM head are split by vocabulary (padded to a
    multiple of 64), matrices by rows or columns (k and v into at most one part per kv head: with fewer kv
    heads than GPUs, each GPU holds one head); DeepSeek's latent down-projections, the routers, the norms
    and the biases (a few MB at most) are counted whole on every GPU. `vocab_matrices`: how many vocab × hidden
    matrices this GPU's stage holds (default: 1 when tied, else 2; with pipeline parallelism the first stage
    holds the embedding and the last the LM head)."""
    fp8 = dtype == "fp8"
    plain = 2 if fp8 else DTYPE_BYTES[dtype]  # what is not quantized
    total = split = whole = 0  # all bytes; bytes split evenly across the GPUs; bytes on each GPU besides
    for matrix in arch.linear_matrices():
        size = matrix.params * (1 if fp8 else plain)
        if fp8:
            scales = cdiv(matrix.rows, block[0]) * cdiv(matrix.cols, block[1]) if block else 1
            size += 4 * scales * matrix.count
        total += size
        if matrix.replicated:
            whole += size
        elif matrix.heads is not None and matrix.heads < tp:
            whole += cdiv(size, matrix.heads)
        else:
            split += size
    vocab = cdiv(arch.vocab, VOCAB_PADDING) * VOCAB_PADDING
    if vocab_matrices is None:
        vocab_matrices = 1 if arch.tie_embeddings else 2
    embeddings = vocab * arch.hidden * vocab_matrices * plain
    router, router_bias = arch.router_params()
    norms_and_biases = (arch.param_count() - arch.embedding_params() - router - router_bias
                        - sum(matrix.params for matrix in arch.linear_matrices()))
    small = (router + norms_and_biases) * plain + router_bias * 4
    return total + embeddings + small, cdiv(split + embeddings, tp) + whole + small


@dataclass(frozen=True)
class KVShape:
    """What one GPU stores per token per layer."""

    arch: ModelArch
    kv_dtype_bytes: int
    tp: int = 1

    @property
    def kv_heads_per_gpu(self) -> int:
        if self.arch.mla:
            return 1
        return max(1, self.arch.kv_heads // self.tp)

    @property
    def replicated(self) -> bool:
        return not self.arch.mla and self.arch.kv_heads < self.tp

    @property
    def bytes_per_token_layer(self) -> int:
        if self.arch.mla:  # one latent of kv_lora_rank + qk_rope_head_dim elements, no factor 2
            return (self.arch.mla.kv_lora_rank + self.arch.mla.qk_rope_head_dim) * self.kv_dtype_bytes
        return 2 * self.kv_heads_per_gpu * self.arch.head_dim * self.kv_dtype_bytes

    @property
    def bytes_per_token(self) -> int:
        """All layers, full attention, one GPU."""
        return self.bytes_per_token_layer * self.arch.layers


def sequence_bytes(shape: KVShape, seq: int, block_size: int, windows: tuple[int | None, ...]) -> int:
    """KV bytes one sequence of `seq` tokens holds on one GPU: blocks per layer, sliding layers capped."""
    blocks = 0
    for window in windows:
        tokens = seq if window is None else min(seq, window)
        blocks += cdiv(tokens, block_size)
    return blocks * block_size * shape.bytes_per_token_layer


# ---------------------------------------------------------------------- vLLM's accounting


@dataclass(frozen=True)
class VllmGroup:
    window: int | None  # None = full attention
    layers: int  # real layers in the group (group_size minus padding)


@dataclass(frozen=True)
class VllmLayout:
    page_bytes: int
    group_size: int
    groups: tuple[VllmGroup, ...]
    block_size: int

    def num_blocks(self, kv_memory: int) -> int:
        return max(0, kv_memory // self.page_bytes // self.group_size)

    def cache_tokens(self, kv_memory: int, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Current vLLM: int(max_concurrency × max_model_len), the same float operations as vLLM."""
        return int(self.max_concurrency(kv_memory, max_model_len, max_num_batched_tokens) * max_model_len)

    def cache_tokens_by_groups(self, kv_memory: int) -> int:
        """Earlier V1 releases: num_blocks // num_groups × block_size (differs only for hybrid models)."""
        return self.num_blocks(kv_memory) // len(self.groups) * self.block_size

    def _request_blocks(self, group: VllmGroup, max_model_len: int, max_num_batched_tokens: int) -> int:
        if group.window is None:
            return cdiv(max_model_len, self.block_size)
        tokens = min(group.window - 1 + max_num_batched_tokens, max_model_len)
        return cdiv(tokens, self.block_size) + 1

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        return sum(self._request_blocks(g, max_model_len, max_num_batched_tokens) for g in self.groups)

    def request_memory(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """What vLLM's `check_enough_kv_cache_memory` needs for one request of max_model_len: the sum over
        layers of `max_memory_usage_bytes`; with less KV memory (or none) vLLM refuses to start."""
        return self.page_bytes * sum(g.layers * self._request_blocks(g, max_model_len, max_num_batched_tokens)
                                     for g in self.groups)

    def max_concurrency(self, kv_memory: int, max_model_len: int, max_num_batched_tokens: int) -> float:
        return self.num_blocks(kv_memory) / self.blocks_per_request(max_model_len, max_num_batched_tokens)

    def auto_max_model_len(self, kv_memory: int, derived_max: int, max_num_batched_tokens: int) -> int:
        """`--max-model-len auto` (-1): the largest length up to the model's own (`derived_max`) whose one
        request fits the KV memory, by the same binary search as vLLM's `_auto_fit_max_model_len`
        (vllm/v1/core/kv_cache_utils.py); 0 when not even one token fits."""
        def fits(length: int) -> bool:
            return self.request_memory(length, max_num_batched_tokens) <= kv_memory

        if derived_max < 1 or not fits(1):
            return 0
        low, high, best = 1, derived_max, 1
        while low <= high:
            mid = (low + high) // 2
            if fits(mid):
                best, low = mid, mid + 1
            else:
                high = mid - 1
        return best


def vllm_layout(shape: KVShape, block_size: int, windows: tuple[int | None, ...]) -> VllmLayout:
    page = block_size * shape.bytes_per_token_layer
    by_type: dict[int | None, int] = {}
    for window in windows:
        by_type[window] = by_type.get(window, 0) + 1
    if len(by_type) == 1:  # uniform spec: one group holding every layer
        (window, count), = by_type.items()
        return VllmLayout(page, count, (VllmGroup(window, count),), block_size)
    smallest, largest = min(by_type.values()), max(by_type.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups: list[VllmGroup] = []
    for window, count in by_type.items():
        n_groups = cdiv(count, group_size)
        for i in range(n_groups):
            groups.append(VllmGroup(window, len(range(i, count, n_groups))))
    return VllmLayout(page, group_size, tuple(groups), block_size)


# ---------------------------------------------------------------------- the whole budget


@dataclass
class Budget:
    arch: ModelArch
    shape: KVShape
    dtype: str
    kv_dtype: str
    batch: int
    seq: int
    block_size: int
    windows: tuple[int | None, ...]
    max_num_batched_tokens: int
    kv_memory: int | None = None
    memory_source: dict = field(default_factory=dict)
    fp8_block: tuple[int, int] | None = None  # block-wise fp8 weights: the scale block (weight_block_size)

    @property
    def weights_bytes(self) -> int:
        return weights_memory(self.arch, self.dtype, self.shape.tp, self.fp8_block)[0]

    @property
    def weights_per_gpu(self) -> int:
        return weights_memory(self.arch, self.dtype, self.shape.tp, self.fp8_block)[1]

    def sequence_bytes(self, seq: int | None = None) -> int:
        return sequence_bytes(self.shape, self.seq if seq is None else seq, self.block_size, self.windows)

    @property
    def total_bytes(self) -> int:
        return self.batch * self.sequence_bytes()

    @property
    def total_without_windows(self) -> int:
        return self.batch * cdiv(self.seq, self.block_size) * self.block_size * self.shape.bytes_per_token

    @property
    def window_savings(self) -> int:
        return self.total_without_windows - self.total_bytes

    def fits(self, batch: int, seq: int) -> bool:
        return self.kv_memory is not None and batch * self.sequence_bytes(seq) <= self.kv_memory

    def status(self, batch: int, seq: int, tight: float = 0.9) -> str:
        """fits / tight (over `tight` of the memory) / no."""
        assert self.kv_memory is not None
        need = batch * self.sequence_bytes(seq)
        if need > self.kv_memory:
            return "no"
        return "tight" if need > tight * self.kv_memory else "fits"

    def largest_batch(self) -> int:
        assert self.kv_memory is not None
        return self.kv_memory // self.sequence_bytes()

    def longest_seq(self, limit: int = 1 << 24) -> int | None:
        """Longest sequence at this batch (a multiple of the block size); None when KV never limits it."""
        assert self.kv_memory is not None
        if self.batch * self.sequence_bytes(limit) <= self.kv_memory:
            return None
        low, high = 0, limit // self.block_size  # in blocks
        while low < high:
            mid = (low + high + 1) // 2
            if self.batch * self.sequence_bytes(mid * self.block_size) <= self.kv_memory:
                low = mid
            else:
                high = mid - 1
        return low * self.block_size

    def layout(self) -> VllmLayout:
        return vllm_layout(self.shape, self.block_size, self.windows)

    def cache_tokens(self) -> int:
        assert self.kv_memory is not None
        return self.layout().cache_tokens(self.kv_memory, self.seq, self.max_num_batched_tokens)

    def cache_tokens_by_groups(self) -> int:
        assert self.kv_memory is not None
        return self.layout().cache_tokens_by_groups(self.kv_memory)

    def max_concurrency(self) -> float:
        assert self.kv_memory is not None
        return self.layout().max_concurrency(self.kv_memory, self.seq, self.max_num_batched_tokens)

    def vllm_request_memory(self) -> int:
        return self.layout().request_memory(self.seq, self.max_num_batched_tokens)

    def vllm_starts(self) -> bool:
        """vLLM V1 starts only with KV memory left and room for one request of --seq tokens."""
        assert self.kv_memory is not None
        return 0 < self.kv_memory and self.vllm_request_memory() <= self.kv_memory


def kv_memory_from_gpu(total: int, utilization: float, weights_per_gpu: int, overhead: int) -> int:
    """vLLM's budget: total × gpu_memory_utilization − weights − (activation peak + non-torch memory)."""
    return int(total * utilization) - weights_per_gpu - overhead
