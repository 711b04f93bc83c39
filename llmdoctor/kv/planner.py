"""How many GPUs: the smallest tensor (and pipeline) parallel layout vLLM accepts where weights and the KV
cache for a batch fit, and the flags to start it with.

What vLLM checks and computes, read from its source:
- tensor parallel: `ModelConfig.verify_with_parallel_config` requires the attention heads to divide by the
  tensor-parallel size; `QKVParallelLinear` splits the kv heads (`divide(kv_heads, tp)`) or, with fewer kv
  heads than GPUs, replicates them (`divide(tp, kv_heads)`); `MergedColumnParallelLinear` and `FusedMoE`
  split the MLP widths (`divide(intermediate, tp)`); block-wise fp8 weights also need each GPU's share of a
  width to be a multiple of the scale block (`validate_fp8_block_shape`).
- pipeline parallel: `vllm/distributed/utils.py: get_pp_indices` gives each stage num_layers // pp layers and
  the remainder one each to the stages before the last; the first stage holds the embedding, the last the
  LM head (with tied embeddings the last stage keeps its own copy).
- every worker sizes its own KV cache and vLLM keeps the smallest block count of all
  (`get_kv_cache_configs`), so the most loaded stage decides.
- the KV memory per GPU: total × gpu_memory_utilization − weights − overhead (design.md §5); with
  `--kv-cache-memory-bytes` vLLM uses exactly that many bytes and ignores the utilization.
SGLang (`--engine sglang`) sizes its pool as `llmdoctor.kv.sglang` describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from llmdoctor.kv.arch import ModelArch
from llmdoctor.kv.budget import DTYPE_BYTES, KVShape, VllmLayout, vllm_layout, weights_memory

_KV_CACHE_DTYPE_FLAG = {"fp8": "fp8", "int8": "int8_per_token_head", "fp16": "float16", "bf16": "bfloat16"}
TP_LIMIT = 8  # tensor parallelism stays inside one node of up to 8 GPUs; beyond that the planner adds stages
PP_LIMIT = 8


def pp_partitions(layers: int, pp: int) -> list[tuple[int, int]]:
    """(start, end) layer ranges per stage, as vLLM's get_pp_indices (without VLLM_PP_LAYER_PARTITION)."""
    per = layers // pp
    sizes = [per] * pp
    for i in range(2, layers % pp + 2):
        sizes[-i] += 1
    ranges, start = [], 0
    for size in sizes:
        ranges.append((start, start + size))
        start += size
    return ranges


def tp_problem(arch: ModelArch, tp: int, fp8_block: tuple[int, int] | None = None) -> str | None:
    """Why vLLM refuses this tensor-parallel size, or None when it accepts it."""
    if arch.heads % tp:
        return f"the {arch.heads} attention heads do not divide by {tp}"
    if not arch.mla:
        if arch.kv_heads >= tp and arch.kv_heads % tp:
            return f"the {arch.kv_heads} kv heads do not divide by {tp}"
        if arch.kv_heads < tp and tp % arch.kv_heads:
            return f"{tp} GPUs cannot replicate {arch.kv_heads} kv heads evenly"
    widths = []
    if arch.moe is None or arch.moe.first_dense_layers:
        widths.append(("intermediate_size", arch.intermediate))
    if arch.moe is not None:
        widths.append(("moe_intermediate_size", arch.moe.expert_intermediate))
    for name, width in widths:
        if width % tp:
            return f"{name} {width} does not divide by {tp}"
        if fp8_block and (width // tp) % fp8_block[0]:
            return (f"{name} {width} / {tp} = {width // tp} is not a multiple of the fp8 weight block "
                    f"{fp8_block[0]}")
    return None


@dataclass(frozen=True)
class Request:
    """What is to be served: the model, its dtypes, and the batch that must run at once."""

    arch: ModelArch
    dtype: str
    kv_dtype: str
    batch: int
    seq: int
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    windows: tuple[int | None, ...] | None = None  # None: the model's own
    fp8_block: tuple[int, int] | None = None

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        return self.arch.windows if self.windows is None else self.windows


@dataclass(frozen=True)
class Gpus:
    """The GPUs to plan for and how the engine budgets them."""

    total: int  # bytes of one GPU
    utilization: float = 0.9
    overhead: int = 2 * 1024**3  # activation peak + non-torch memory vLLM keeps out of the KV cache


@dataclass
class Stage:
    index: int
    layers: tuple[int, int]
    weights: int  # bytes on each GPU of this stage
    kv_memory: int
    layout: VllmLayout
    num_blocks: int


@dataclass
class Plan:
    tp: int
    pp: int
    stages: list[Stage]
    num_blocks: int  # what every worker ends up with (the smallest stage's)
    blocks_per_request: int  # for one request of `seq` tokens
    request_memory: int  # bytes one request of `seq` needs on the most loaded stage
    fits: bool  # the batch runs at once
    starts: bool  # vLLM starts with --max-model-len seq
    auto_max_model_len: int  # what `--max-model-len auto` would pick
    kv_cache_memory_bytes: int  # exactly the batch: the --kv-cache-memory-bytes alternative
    exact_fits: bool  # weights + overhead + those bytes fit in one GPU
    problems: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def weights_per_gpu(self) -> int:
        return max(s.weights for s in self.stages)

    @property
    def kv_memory(self) -> int:
        return min(s.kv_memory for s in self.stages)

    @property
    def cache_tokens(self) -> int:
        return self.num_blocks * self.stages[0].layout.block_size

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request if self.blocks_per_request else 0.0

    @property
    def ok(self) -> bool:
        return self.fits and self.starts


def stage_arch(arch: ModelArch, start: int, end: int) -> ModelArch:
    moe = arch.moe
    if moe is not None:
        moe = replace(moe, first_dense_layers=max(0, min(moe.first_dense_layers, end) - start))
    return replace(arch, layers=end - start, windows=arch.windows[start:end], moe=moe)


def make_plan(req: Request, gpus: Gpus, tp: int, pp: int = 1) -> Plan:
    """vLLM's figures for one layout (the tp/pp sizes are assumed valid: see tp_problem)."""
    arch, windows = req.arch, req.layer_windows
    shape = KVShape(arch, DTYPE_BYTES[req.kv_dtype], tp)
    stages = []
    for index, (start, end) in enumerate(pp_partitions(arch.layers, pp)):
        part = stage_arch(arch, start, end)
        vocab_matrices = (1 if arch.tie_embeddings else 2) if pp == 1 else int(index == 0) + int(index == pp - 1)
        weights = weights_memory(part, req.dtype, tp, req.fp8_block, vocab_matrices)[1]
        kv_memory = int(gpus.total * gpus.utilization) - weights - gpus.overhead
        layout = vllm_layout(shape, req.block_size, windows[start:end])
        stages.append(Stage(index, (start, end), weights, kv_memory, layout, layout.num_blocks(kv_memory)))
    num_blocks = min(s.num_blocks for s in stages)
    first = stages[0].layout
    per_request = first.blocks_per_request(req.seq, req.max_num_batched_tokens)
    request_memory = max(s.layout.request_memory(req.seq, req.max_num_batched_tokens) for s in stages)
    starts = all(0 < s.kv_memory and s.layout.request_memory(req.seq, req.max_num_batched_tokens) <= s.kv_memory
                 for s in stages)
    fits = starts and req.batch * per_request <= num_blocks
    derived = arch.max_position or req.seq
    auto = min(s.layout.auto_max_model_len(max(0, s.kv_memory), derived, req.max_num_batched_tokens)
               for s in stages)
    blocks_needed = req.batch * per_request
    exact = max(blocks_needed * s.layout.page_bytes * s.layout.group_size for s in stages)
    exact_fits = all(s.weights + gpus.overhead + exact <= gpus.total for s in stages)
    return Plan(tp, pp, stages, num_blocks, per_request, request_memory, fits, starts, auto, exact, exact_fits)


@dataclass
class Search:
    """Every layout tried, smallest first, and the one chosen (None: nothing up to the limits fits)."""

    tried: list[tuple[int, int, Plan | str]]  # (tp, pp, the plan or why vLLM refuses that size)
    chosen: Plan | None


def smallest_plan(req: Request, gpus: Gpus, pp: int | None = None, max_gpus: int | None = None) -> Search:
    """The smallest tensor-parallel size (up to TP_LIMIT) where vLLM accepts the size, starts and runs the
    batch; when none does and `pp` is not fixed, pipeline stages are added (the fewest GPUs, then the fewest
    stages). `max_gpus`: the GPUs there are (e.g. what NVML sees)."""
    tried: list[tuple[int, int, Plan | str]] = []
    rounds = [[pp]] if pp else [[1], list(range(2, PP_LIMIT + 1))]
    for stage_counts in rounds:
        layouts = sorted((tp * stages, stages, tp) for stages in stage_counts if stages <= req.arch.layers
                         for tp in range(1, TP_LIMIT + 1) if max_gpus is None or tp * stages <= max_gpus)
        for _, stages, tp in layouts:
            problem = tp_problem(req.arch, tp, req.fp8_block)
            if problem:
                tried.append((tp, stages, problem))
                continue
            plan = make_plan(req, gpus, tp, stages)
            tried.append((tp, stages, plan))
            if plan.ok:
                return Search(tried, plan)
    return Search(tried, None)


def vllm_flags(req: Request, plan: Plan, gpus: Gpus, serve_name: str, auto_dtypes: tuple[str, str]) -> tuple[str, str]:
    """(the command with --gpu-memory-utilization, the alternative --kv-cache-memory-bytes for exactly the
    batch). `auto_dtypes`: the (weights, KV) dtypes vLLM's `auto` picks; flags only where they differ."""
    model_dtype, auto_kv = auto_dtypes
    parts = [f"vllm serve {serve_name}", f"--tensor-parallel-size {plan.tp}"]
    if plan.pp > 1:
        parts.append(f"--pipeline-parallel-size {plan.pp}")
    parts.append(f"--max-model-len {req.seq}")
    if req.dtype != model_dtype:
        parts.append("--quantization fp8" if req.dtype == "fp8" else
                     f"--dtype { {'fp16': 'float16', 'bf16': 'bfloat16', 'fp32': 'float32'}[req.dtype]}")
    flag = _KV_CACHE_DTYPE_FLAG.get(req.kv_dtype)
    if flag and req.kv_dtype != auto_kv:
        parts.append(f"--kv-cache-dtype {flag}")
    if req.block_size != 16:
        parts.append(f"--block-size {req.block_size}")
    if req.max_num_batched_tokens != 8192:
        parts.append(f"--max-num-batched-tokens {req.max_num_batched_tokens}")
    base = " ".join(parts)
    return (f"{base} --gpu-memory-utilization {gpus.utilization}",
            f"{base} --kv-cache-memory-bytes {plan.kv_cache_memory_bytes}")

