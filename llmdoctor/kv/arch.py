"""A model's architecture as the KV and weights arithmetic needs it, read from a Hugging Face config.json.

Key names and defaults follow the `transformers` config classes (design.md §5): kv heads from
`num_key_value_heads` (then `num_kv_heads`, `n_head_kv`, `multi_query_group_num`, else the query heads);
`head_dim` from the config when given (Gemma, Qwen3 set it explicitly), else hidden_size / num_attention_heads.
Which layers slide: `layer_types` when present; Qwen2 `use_sliding_window` + `max_window_layers` (layers at or
above that index slide); Gemma-2 every even layer; Gemma-3 all but every `sliding_window_pattern`-th layer;
otherwise a non-null `sliding_window` applies to every layer (Mistral v0.1, Phi-3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmdoctor.errors import UserError


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds one latent per token per layer."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


@dataclass(frozen=True)
class MoE:
    num_experts: int
    expert_intermediate: int
    shared_experts: int = 0  # DeepSeek: n_shared_experts of width moe_intermediate_size
    first_dense_layers: int = 0  # DeepSeek first_k_dense_replace
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias


@dataclass(frozen=True)
class Matrix:
    """A linear layer's weight matrix (rows × cols), `count` times; `replicated`: vLLM keeps a whole copy on
    every tensor-parallel rank (DeepSeek's latent down-projections), else it splits it across them, into at
    most `heads` parts (k and v: with fewer kv heads than ranks, each rank holds one head)."""

    rows: int
    cols: int
    count: int = 1
    replicated: bool = False
    heads: int | None = None

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.count


@dataclass(frozen=True)
class ModelArch:
    name: str
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_embeddings: bool
    windows: tuple[int | None, ...]  # per layer: sliding window in tokens, None = full attention
    torch_dtype: str | None = None
    mla: MLA | None = None
    moe: MoE | None = None
    qkv_bias: bool = False  # Qwen2: q, k, v projections carry a bias
    attention_bias: bool = False  # Llama `attention_bias`: q, k, v and o carry a bias
    norms_per_layer: int = 2  # RMSNorm vectors of width hidden per layer (Gemma-2/3: 4)
    qk_norm: bool = False  # Gemma-3 / Qwen3: RMSNorm of width head_dim on q and k
    max_position: int | None = None

    @property
    def sliding_layers(self) -> int:
        return sum(1 for w in self.windows if w is not None)

    # ------------------------------------------------------------------ parameters (weights)

    def attention_params(self) -> int:
        h = self.hidden
        if self.mla:
            m = self.mla
            qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.heads * qk_head
            else:
                q = h * self.heads * qk_head
            kv = (h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
                  + m.kv_lora_rank * self.heads * (m.qk_nope_head_dim + m.v_head_dim))
            o = self.heads * m.v_head_dim * h
            return q + kv + o
        q_out = self.heads * self.head_dim
        kv_out = self.kv_heads * self.head_dim
        params = h * q_out + 2 * h * kv_out + q_out * h
        if self.qkv_bias or self.attention_bias:
            params += q_out + 2 * kv_out
        if self.attention_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def mlp_params(self, layer: int) -> int:
        """Gated MLP (gate, up, down); MoE layers: experts + shared experts + router."""
        h = self.hidden
        moe = self.moe
        if moe is None or layer < moe.first_dense_layers:
            return 3 * h * self.intermediate
        params = moe.num_experts * 3 * h * moe.expert_intermediate
        params += moe.shared_experts * 3 * h * moe.expert_intermediate
        params += h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        return params

    def linear_matrices(self) -> list[Matrix]:
        """The projection and MLP weight matrices of every layer: what fp8 quantization stores in 1 byte
        (embeddings, norms, biases and MoE routers stay in 16 bits). vLLM's DeepSeek-V2/V3 keeps q_a_proj and
        kv_a_proj_with_mqa (ReplicatedLinear) whole on each rank; every other matrix is split."""
        h = self.hidden
        if self.mla:
            m = self.mla
            qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                attention = [Matrix(m.q_lora_rank, h, replicated=True), Matrix(self.heads * qk_head, m.q_lora_rank)]
            else:
                attention = [Matrix(self.heads * qk_head, h)]
            attention += [Matrix(m.kv_lora_rank + m.qk_rope_head_dim, h, replicated=True),
                          Matrix(self.heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
                          Matrix(h, self.heads * m.v_head_dim)]
        else:
            q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
            attention = [Matrix(q_out, h), Matrix(kv_out, h, 2, heads=self.kv_heads), Matrix(h, q_out)]
        matrices = [Matrix(a.rows, a.cols, a.count * self.layers, a.replicated, a.heads) for a in attention]
        moe = self.moe
        dense_layers = self.layers if moe is None else min(moe.first_dense_layers, self.layers)
        if dense_layers:
            matrices += [Matrix(self.intermediate, h, 2 * dense_layers), Matrix(h, self.intermediate, dense_layers)]
        moe_layers = self.layers - dense_layers
        if moe is not None and moe_layers:
            width = moe.expert_intermediate
            matrices += [Matrix(width, h, 2 * moe.num_experts * moe_layers),
                         Matrix(h, width, moe.num_experts * moe_layers)]
            if moe.shared_experts:  # one MLP of width n_shared × moe_intermediate_size
                shared = moe.shared_experts * width
                matrices += [Matrix(shared, h, 2 * moe_layers), Matrix(h, shared, moe_layers)]
        return matrices

    def router_params(self) -> tuple[int, int]:
        """(router weights, router biases) of the MoE layers: kept whole on each rank, never quantized."""
        moe = self.moe
        if moe is None:
            return 0, 0
        layers = self.layers - min(moe.first_dense_layers, self.layers)
        return layers * self.hidden * moe.num_experts, (layers * moe.num_experts if moe.router_bias else 0)

    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2)

    def param_count(self) -> int:
        embeddings = self.embedding_params()
        per_layer = sum(self.attention_params() + self.mlp_params(i) + self.norms_per_layer * self.hidden
                        for i in range(self.layers))
        return embeddings + per_layer + self.hidden  # + final norm


# ---------------------------------------------------------------------- config.json loading

_MAX_CONFIG_BYTES = 16 * 2**20  # a config.json is a few KB
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3", "gemma3_text")


def load_config_file(path: str | Path, option: str = "--model-config") -> tuple[dict, str]:
    """The parsed config.json (a folder holding one is accepted) and the path to name in messages."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise UserError(f"{option}: {p} does not exist; give a Hugging Face config.json or a folder holding one")
    from llmdoctor.limits import InputProblem, load_json, read_bounded

    try:  # bounded: a device such as /dev/zero never ends, a FIFO nobody writes to never starts
        raw = read_bounded(p, _MAX_CONFIG_BYTES, streams=True, what="a config.json")
    except InputProblem as problem:
        raise UserError(f"{option}: {p} {problem.reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{option}: {p} is not UTF-8 text") from None
    data = load_json(text, f"{option}: {p}")  # nesting and integer digits bounded (llmdoctor/limits.py)
    if not isinstance(data, dict):
        raise UserError(f"{option}: {p}: expected a JSON object at the top level")
    return data, str(p)


def _merged(config: dict) -> dict:
    """Multimodal configs keep the language model in `text_config`; its keys win over the top level."""
    text = config.get("text_config")
    if isinstance(text, dict):
        return {**{k: v for k, v in config.items() if k != "text_config"}, **text}
    return config


# The largest value a real model's config has for each key, with room to spare (the largest published: 126
# layers, hidden 25,600 / 53,248 for MoE experts' intermediate, 256 experts, vocab 262,144, 10M positions): a
# number past it is a typo or a hostile file, and arithmetic on it costs unbounded time and memory (100,000,000
# layers took 87 s and 800 MB; 2**64 overflowed). docs/reliability.md lists them.
CONFIG_MAXIMA = {
    "num_hidden_layers": 4096, "n_layer": 4096, "num_layers": 4096, "max_window_layers": 4096,
    "first_k_dense_replace": 4096, "sliding_window_pattern": 4096,
    "hidden_size": 2**20, "n_embd": 2**20, "d_model": 2**20,
    "num_attention_heads": 2**16, "n_head": 2**16, "num_key_value_heads": 2**16, "num_kv_heads": 2**16,
    "n_head_kv": 2**16, "multi_query_group_num": 2**16, "head_dim": 2**16,
    "intermediate_size": 2**24, "ffn_hidden_size": 2**24, "n_inner": 2**24, "moe_intermediate_size": 2**24,
    "vocab_size": 2**24,
    "kv_lora_rank": 2**16, "qk_rope_head_dim": 2**16, "qk_nope_head_dim": 2**16, "v_head_dim": 2**16,
    "q_lora_rank": 2**16,
    "num_local_experts": 2**16, "n_routed_experts": 2**16, "num_experts": 2**16, "n_shared_experts": 2**16,
    "sliding_window": 2**40, "max_position_embeddings": 2**40,
}
DEFAULT_MAXIMUM = 2**40


def _bounded(source: str, key: str, value: int) -> int:
    maximum = CONFIG_MAXIMA.get(key, DEFAULT_MAXIMUM)
    if value > maximum:
        from llmdoctor.limits import brief

        raise UserError(f"{source}: `{key}` is {brief(value, 30)}, more than any model has (at most {maximum:,} "
                        "is read): check the config")
    return value


def _int(cfg: dict, source: str, *keys: str, required: bool = True) -> int | None:
    """The first of `keys` present, a positive integer at most CONFIG_MAXIMA[key]; UserError naming the key (and
    the architecture)."""
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            from llmdoctor.limits import brief

            raise UserError(f"{source}: `{key}` must be a positive integer, got {brief(value, 40)}")
        return _bounded(source, key, value)
    if required:
        names = " / ".join(f"`{k}`" for k in keys)
        raise UserError(f"{source}: missing key {names} for {describe_architecture(cfg)}; llmdoctor reads "
                        "decoder-only transformer configs (num_hidden_layers, hidden_size, num_attention_heads, "
                        "intermediate_size, vocab_size) and does not guess the rest")
    return None


def describe_architecture(cfg: dict) -> str:
    """`model_type 'x' (XForCausalLM)` for messages; the config's own words."""
    model_type = cfg.get("model_type")
    arches = cfg.get("architectures")
    names = ", ".join(str(a) for a in arches) if isinstance(arches, list) and arches else None
    if model_type and names:
        return f"model_type {str(model_type)!r} ({names})"
    if model_type or names:
        return f"model_type {str(model_type)!r}" if model_type else names or ""
    return "this config (no model_type or architectures)"


# State-space, linear-attention and convolution layers keep a per-request state that vLLM allocates in its
# own cache spec (MambaSpec: conv and SSM state per request, pages padded to the attention page size); a
# number that counts only the attention layers would be wrong, so such configs are refused.
_STATE_MODEL_TYPES = frozenset({
    "jamba", "mamba", "mamba2", "falcon_mamba", "falcon_h1", "qwen3_next", "granitemoehybrid", "bamba",
    "nemotron_h", "zamba", "zamba2", "lfm2", "minimax", "minimax_m1", "plamo2", "rwkv", "recurrent_gemma",
    "xlstm", "kimi_linear",
})
_STATE_KEYS = ("hybrid_override_pattern", "attn_layer_period", "attn_layer_indices", "attn_type_list",
               "full_attention_interval", "layers_block_type", "block_types")
_STATE_KEY_PREFIXES = ("mamba_", "ssm_", "linear_num_", "linear_key_", "linear_value_", "linear_conv",
                       "conv_L_cache")
_ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "attention"})


def state_layer_evidence(cfg: dict) -> list[str]:
    """What in a config says some layers keep a recurrent state instead of (or beside) a KV cache."""
    evidence = []
    model_type = str(cfg.get("model_type", ""))
    if model_type in _STATE_MODEL_TYPES:
        evidence.append(f"model_type {model_type!r}")
    evidence += [f"`{key}`" for key in _STATE_KEYS if cfg.get(key) is not None]
    prefixed = sorted(k for k in cfg if k.startswith(_STATE_KEY_PREFIXES))
    if prefixed:
        evidence.append(", ".join(f"`{k}`" for k in prefixed[:3]) + (" ..." if len(prefixed) > 3 else ""))
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list):
        other = sorted({str(t) for t in layer_types} - _ATTENTION_LAYER_TYPES)
        if other:
            evidence.append(f"`layer_types` {', '.join(repr(t) for t in other)}")
    return evidence


def refuse_unsupported(cfg: dict, source: str) -> None:
    """UserError for configs whose memory vLLM does not count as a plain KV cache."""
    evidence = state_layer_evidence(cfg)
    if evidence:
        raise UserError(
            f"{source}: {describe_architecture(cfg)} is a hybrid model whose state-space / linear-attention "
            f"layers keep a per-request state ({'; '.join(evidence)}); vLLM allocates it in a separate cache "
            "spec and pads its pages to the attention page, which llmdoctor does not model, so it gives no "
            "number rather than a wrong one. Ask the running server instead (`llmdoctor kv-budget --url "
            "http://HOST:PORT`), or read 'GPU KV cache size' and 'Maximum concurrency' from the vLLM log")
    if cfg.get("is_encoder_decoder"):
        raise UserError(f"{source}: {describe_architecture(cfg)} is an encoder-decoder model (its cross-attention "
                        "cache depends on the encoder input length); llmdoctor models decoder-only models")


def _count(cfg: dict, source: str, key: str) -> int:
    """An optional non-negative integer (0 when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        from llmdoctor.limits import brief

        raise UserError(f"{source}: `{key}` must be a non-negative integer, got {brief(value, 40)}")
    return _bounded(source, key, value)


def _windows(cfg: dict, layers: int, source: str) -> tuple[int | None, ...]:
    model_type = str(cfg.get("model_type", ""))
    window = _int(cfg, source, "sliding_window", required=False)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != layers:
            raise UserError(f"{source}: `layer_types` has {len(layer_types)} entries for {layers} layers")
        if window is None and any(t == "sliding_attention" for t in layer_types):
            raise UserError(f"{source}: `layer_types` names sliding layers but `sliding_window` is missing")
        return tuple(window if t == "sliding_attention" else None for t in layer_types)
    if window is None:
        return (None,) * layers
    if "use_sliding_window" in cfg:  # Qwen2 family
        if not cfg.get("use_sliding_window"):
            return (None,) * layers
        start = _count(cfg, source, "max_window_layers")
        return tuple(window if i >= start else None for i in range(layers))
    if model_type == "gemma2":
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    if model_type.startswith("gemma3") or "sliding_window_pattern" in cfg:
        pattern = _int(cfg, source, "sliding_window_pattern", required=False) or 6
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    return (window,) * layers


def arch_from_config(config: dict, source: str, name: str | None = None) -> ModelArch:
    """Read the architecture from a config.json dict; UserError naming the missing or bad key."""
    cfg = _merged(config)
    refuse_unsupported(cfg, source)
    model_type = str(cfg.get("model_type", ""))
    layers = _int(cfg, source, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(cfg, source, "hidden_size", "n_embd", "d_model")
    heads = _int(cfg, source, "num_attention_heads", "n_head")
    kv_heads = _int(cfg, source, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                    required=False) or heads
    head_dim = _int(cfg, source, "head_dim", required=False)
    if head_dim is None:
        if hidden % heads:
            raise UserError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; "
                            "the config must give `head_dim`")
        head_dim = hidden // heads
    intermediate = _int(cfg, source, "intermediate_size", "ffn_hidden_size", "n_inner")
    vocab = _int(cfg, source, "vocab_size")
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type in _TIED_BY_DEFAULT
    mla = None
    if cfg.get("kv_lora_rank"):
        mla = MLA(
            kv_lora_rank=_int(cfg, source, "kv_lora_rank"),
            qk_rope_head_dim=_int(cfg, source, "qk_rope_head_dim"),
            qk_nope_head_dim=_int(cfg, source, "qk_nope_head_dim"),
            v_head_dim=_int(cfg, source, "v_head_dim"),
            q_lora_rank=_int(cfg, source, "q_lora_rank", required=False),
        )
    moe = None
    experts = _int(cfg, source, "num_local_experts", "n_routed_experts", "num_experts", required=False)
    if experts:
        moe = MoE(
            num_experts=experts,
            expert_intermediate=_int(cfg, source, "moe_intermediate_size", required=False) or intermediate,
            shared_experts=_count(cfg, source, "n_shared_experts"),
            first_dense_layers=_count(cfg, source, "first_k_dense_replace"),
            router_bias=cfg.get("topk_method") == "noaux_tc",
        )
    gemma = model_type.startswith(("gemma2", "gemma3"))
    dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    return ModelArch(
        name=name or str(cfg.get("_name_or_path") or model_type or source),
        model_type=model_type,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=vocab,
        tie_embeddings=bool(tie),
        windows=_windows(cfg, layers, source),
        torch_dtype=dtype if isinstance(dtype, str) else None,
        mla=mla,
        moe=moe,
        qkv_bias=model_type == "qwen2",
        attention_bias=bool(cfg.get("attention_bias")) and model_type != "qwen2",
        norms_per_layer=4 if gemma else 2,
        qk_norm=model_type.startswith(("gemma3", "qwen3")),
        max_position=_int(cfg, source, "max_position_embeddings", required=False),
    )
