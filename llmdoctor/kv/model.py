"""Pick the model (a built-in preset or a config.json) and check the options that depend on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmdoctor.errors import UserError
from llmdoctor.kv.arch import ModelArch, arch_from_config, load_config_file
from llmdoctor.kv.budget import DTYPE_BYTES, KVShape, model_dtype
from llmdoctor.kv.presets import get_preset

WEIGHT_DTYPES = ("auto", "fp32", "fp16", "bf16", "fp8")
KV_DTYPES = ("auto", "fp32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True)
class ResolvedModel:
    arch: ModelArch
    source: str  # where it came from, for reports
    config: dict  # the raw config.json
    serve_name: str  # what to pass to `vllm serve` (a Hub id or a path)


def resolve_model(model: str | None, config: str | None) -> tuple[ModelArch, str, dict]:
    """(architecture, where it came from, the raw config) for `--model NAME` or `--model-config PATH`."""
    found = resolve(model, config)
    return found.arch, found.source, found.config


def resolve(model: str | None, config: str | None, revision: str | None = None) -> ResolvedModel:
    """`--model` is a built-in name, a local folder or config.json, or `org/name` in the local Hugging Face
    cache (at `--revision`); `--model-config` is a path. Never the network."""
    if model and config:
        raise UserError("give either --model or --model-config, not both")
    if config:
        return _from_path(config, "--model-config")
    if not model:
        raise UserError("give --model NAME (see --list-models) or --model-config PATH to a Hugging Face config.json")
    from llmdoctor.kv.presets import PRESETS

    key = model.strip().lower()
    if key in PRESETS and revision is None:
        preset = PRESETS[key]
        return ResolvedModel(preset.arch(), f"preset, from {preset.source} config.json", preset.config,
                             preset.source)
    if Path(model).expanduser().exists():
        return _from_path(model, "--model")
    from llmdoctor.kv import hf_cache

    if "/" in model and hf_cache.looks_like_repo_id(model):
        snapshot = hf_cache.require_snapshot(model, revision, "--model", "config.json")
        path = snapshot.file("config.json")
        assert path is not None
        data, _ = load_config_file(path)
        return ResolvedModel(arch_from_config(data, snapshot.shown, name=model), snapshot.shown, data, model)
    get_preset(model)  # an unknown short name: the did-you-mean message
    raise AssertionError("unreachable")


def _from_path(path: str, option: str) -> ResolvedModel:
    data, shown_path = load_config_file(Path(path).expanduser(), option)
    from llmdoctor.report.model import display_path

    shown = display_path(shown_path)
    folder = Path(path).expanduser()
    serve = str(folder if folder.is_dir() else folder.parent)
    return ResolvedModel(arch_from_config(data, shown), shown, data, serve)


def weights_block(config: dict, source: str, weights_dtype: str) -> tuple[int, int] | None:
    """The scale block of block-wise fp8 weights (`quantization_config.weight_block_size`, DeepSeek-V3:
    128 × 128), or None (other weights, or one scale per matrix)."""
    quant = config.get("quantization_config")
    block = quant.get("weight_block_size") if isinstance(quant, dict) else None
    if weights_dtype != "fp8" or block is None:
        return None
    if not (isinstance(block, list) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise UserError(f"{source}: `quantization_config.weight_block_size` must be two positive integers "
                        f"such as [128, 128], got {block!r}")
    return block[0], block[1]


def resolve_dtypes(arch: ModelArch, config: dict, dtype: str, kv_dtype: str) -> tuple[str, str]:
    if dtype not in WEIGHT_DTYPES:
        raise UserError(f"--dtype: {dtype!r} is not one of {', '.join(WEIGHT_DTYPES)}")
    if kv_dtype not in KV_DTYPES:
        raise UserError(f"--kv-dtype: {kv_dtype!r} is not one of {', '.join(KV_DTYPES)}")
    weights = model_dtype(arch, config) if dtype == "auto" else dtype
    if kv_dtype == "auto":  # vLLM: kv_cache_dtype auto = the model's activation dtype (never fp8 weights)
        kv_dtype = weights if weights != "fp8" else _activation_dtype(arch)
    return weights, kv_dtype


def _activation_dtype(arch: ModelArch) -> str:
    return {"float16": "fp16"}.get(arch.torch_dtype or "", "bf16")


def make_shape(arch: ModelArch, kv_dtype: str, tp: int) -> KVShape:
    if tp < 1:
        raise UserError(f"--tp must be at least 1, got {tp}")
    if arch.heads % tp:
        raise UserError(f"--tp {tp}: the {arch.heads} attention heads do not split evenly across {tp} GPUs")
    if not arch.mla and arch.kv_heads < tp and tp % arch.kv_heads:
        raise UserError(f"--tp {tp}: {arch.kv_heads} kv heads cannot be replicated evenly across {tp} GPUs")
    if not arch.mla and arch.kv_heads >= tp and arch.kv_heads % tp:  # vLLM QKVParallelLinear: divide()
        raise UserError(f"--tp {tp}: the {arch.kv_heads} kv heads do not split evenly across {tp} GPUs")
    return KVShape(arch, DTYPE_BYTES[kv_dtype], tp)
