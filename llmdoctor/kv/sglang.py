"""SGLang's KV accounting, where it differs from vLLM's: a token pool sized from `--mem-fraction-static`.

From SGLang's source (python/sglang/srt/):
- `model_executor/model_runner_kv_cache_mixin.py: get_cell_size_per_token`: bytes per token of all layers
  on one GPU = kv_heads_per_gpu × (head_dim + v_head_dim) × layers × dtype bytes, kv_heads_per_gpu =
  max(1, kv_heads // tp) (`ModelConfig.get_num_kv_heads`); MLA: (kv_lora_rank + qk_rope_head_dim) ×
  layers × dtype bytes.
- `profile_max_num_token`: rest = free after loading − free before loading × (1 − mem_fraction_static),
  in GiB; max_total_num_tokens = int(rest × 2^30) // cell_size, then rounded down to a multiple of
  `--page-size` (default 1). Offline, free before loading is the GPU's memory less what the CUDA context
  and NCCL take (`--overhead`), and free after loading is that less the weights.
- `mem_cache/memory_pool.py`: it logs `KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB`
  (MLA: `KV size`), each buffer holding N + page_size tokens, GB = 2^30 bytes.
- `server_args.py: _handle_gpu_memory_settings`: the default mem_fraction_static is
  round((gpu_mem − reserved) / gpu_mem, 3), gpu_mem the GPU's memory in MiB, reserved = 512 +
  max(chunked_prefill_size, 2048) × 1.5 + cuda_graph_max_bs × 2 + tp × pp / 8 × 1024, at least 10 GiB on
  GPUs over 60 GiB; chunked_prefill_size and cuda_graph_max_bs by the GPU's memory (tables below).
A request holds its tokens one by one (page size 1): a batch needs batch × seq tokens of the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdoctor.kv.arch import ModelArch
from llmdoctor.kv.budget import DTYPE_BYTES

GIB = 1 << 30
MIB = 1 << 20


def cell_size(arch: ModelArch, kv_dtype: str, tp: int) -> int:
    size = DTYPE_BYTES[kv_dtype]
    if arch.mla:
        return (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * arch.layers * size
    kv_heads = max(1, arch.kv_heads // tp)
    return kv_heads * (arch.head_dim + arch.head_dim) * arch.layers * size


def default_mem_fraction_static(gpu_total: int, tp: int = 1, pp: int = 1) -> float:
    """SGLang's default for a GPU of `gpu_total` bytes (no DP attention, speculative decoding or piecewise
    CUDA graphs, which each reserve more)."""
    gpu_mem = gpu_total / MIB
    if gpu_mem < 20 * 1024:
        chunked, graph_bs = 2048, 8
    elif gpu_mem < 35 * 1024:
        chunked, graph_bs = 2048, 24 if tp < 4 else 80
    elif gpu_mem < 60 * 1024:
        chunked, graph_bs = 4096, 32 if tp < 4 else 160
    elif gpu_mem < 160 * 1024:
        chunked, graph_bs = 8192, 256 if tp < 4 else 512
    else:
        chunked, graph_bs = 16384, 512
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mem - reserved) / gpu_mem, 3)


@dataclass(frozen=True)
class Pool:
    cell_size: int  # bytes per token, all layers, one GPU
    rest: int  # bytes SGLang gives the pool
    max_total_num_tokens: int
    page_size: int

    def kv_log_line(self, arch: ModelArch, kv_dtype: str, tp: int) -> str:
        """SGLang's startup line for this pool."""
        tokens = self.max_total_num_tokens + self.page_size
        if arch.mla:
            size = tokens * self.cell_size / GIB
            return f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, KV size: {size:.2f} GB"
        half = tokens * self.cell_size / 2 / GIB
        return (f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, K size: {half:.2f} GB, "
                f"V size: {half:.2f} GB")

    def fits(self, batch: int, seq: int) -> bool:
        return batch * seq <= self.max_total_num_tokens


def token_pool(arch: ModelArch, kv_dtype: str, tp: int, free_before_load: int, weights_per_gpu: int,
               mem_fraction_static: float, page_size: int = 1) -> Pool:
    """profile_max_num_token with the free memory before loading and the weights one GPU loads."""
    cell = cell_size(arch, kv_dtype, tp)
    free_after_load = free_before_load - weights_per_gpu
    rest_gib = free_after_load / GIB - free_before_load / GIB * (1 - mem_fraction_static)
    tokens = max(0, int(rest_gib * GIB) // cell)
    tokens = tokens // page_size * page_size
    return Pool(cell, int(rest_gib * GIB), tokens, page_size)
