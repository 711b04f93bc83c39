"""The options `kv-budget` and `gpu` share (the model, its config, vLLM's settings) and their checks, in one
place: both commands read a model the same way and compute its budget with the same code.
"""

from __future__ import annotations

import typer

from llmdoctor.commands.options import note
from llmdoctor.errors import UserError

MODEL = typer.Option(None, "--model", "-m", metavar="NAME", help="A built-in model (see kv-budget --list-models), a "
                     "Hub id (org/name) in the local Hugging Face cache, or a model folder; never downloaded.")
REVISION = typer.Option(None, "--revision", help="With --model org/name: the cached branch, tag or commit "
                        "(default main).")
MODEL_CONFIG = typer.Option(None, "--model-config", metavar="PATH",
                            help="Or a Hugging Face config.json (or the folder holding one).")
# the old spelling: `--config` means llmdoctor's own config file everywhere else
LEGACY_CONFIG = typer.Option(None, "--config", "-c", hidden=True)
DTYPE = typer.Option("auto", "--dtype", help="Weights dtype: auto (config), fp32, fp16, bf16, fp8.")
KV_DTYPE = typer.Option("auto", "--kv-dtype", help="KV cache dtype: auto (= model dtype), fp8, int8, fp16, bf16, fp32.")
TP = typer.Option("1", "--tp", metavar="N|auto", help="Tensor-parallel GPUs (weights and KV heads split), or auto: "
                  "the fewest vLLM accepts where the batch fits.")
# bounds: past them no deployment exists and the arithmetic only costs time (docs/reliability.md)
MAX_TOKENS = 2**31  # tokens per sequence or batch step (the longest context windows: ~10M)
MAX_GPUS = 4096
MAX_BATCH = 2**24  # concurrent sequences
BLOCK_SIZE = typer.Option(16, "--block-size", min=1, max=2**16, help="Tokens per KV block (vLLM default 16).")
UTILIZATION = typer.Option(0.9, "--utilization", help="vLLM --gpu-memory-utilization (0 < U ≤ 1).")
OVERHEAD = typer.Option("2GiB", "--overhead", metavar="SIZE", help="Activation peak + CUDA context vLLM keeps out "
                        "of the KV cache (an assumption; vLLM measures it).")
MAX_BATCHED_TOKENS = typer.Option(8192, "--max-batched-tokens", min=1, max=MAX_TOKENS, help="vLLM --max-num-batched-tokens "
                                  "(matters for sliding-window layers).")


def model_config_path(model_config: str | None, legacy_config: str | None) -> str | None:
    if legacy_config is not None:
        if model_config is not None:
            raise UserError("give --model-config once (--config is its old name)")
        note("--config is now --model-config (a Hugging Face config.json); --config still works here")
        return legacy_config
    return model_config


def check_utilization(utilization: float) -> None:
    if not 0 < utilization <= 1:
        raise UserError(f"--utilization must be in (0, 1], got {utilization}")


def memory_size(text: str, option: str) -> int:
    """A memory size for a GPU/KV option: below 1 MiB it is a mistake (`--gpu-mem 80`), not a budget."""
    from llmdoctor.sizes import MIB, parse_size

    value = parse_size(text, option)
    if value < MIB:
        number = text.strip()
        hint = f"; did you mean {number}GiB or {number}GB?" if number.replace(".", "", 1).isdigit() else ""
        raise UserError(f"{option} {text}: {value:,} bytes is less than 1 MiB{hint} (a bare number is bytes)")
    return value


def parallel_size(text: str, option: str = "--tp") -> int | None:
    """A GPU count, or None for `auto`."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = int(text) if len(text.strip()) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise UserError(f"{option}: {text.strip()[:40]!r} is not a number of GPUs or `auto`") from None
    if not 1 <= value <= MAX_GPUS:
        raise UserError(f"{option}: must be between 1 and {MAX_GPUS:,}, got {value:,}")
    return value


def length(text: str, option: str = "--max-model-len") -> int | None:
    """A positive number of tokens, or None for `auto` (vLLM's --max-model-len auto)."""
    if text.strip().lower() == "auto":
        return None
    digits = text.replace("_", "").replace(",", "").strip()
    try:
        value = int(digits) if len(digits) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise UserError(f"{option}: {text.strip()[:40]!r} is not a number of tokens or `auto`") from None
    if not 1 <= value <= MAX_TOKENS:
        raise UserError(f"{option}: must be between 1 and {MAX_TOKENS:,} tokens, got {value:,}")
    return value


def make_budget(*, model, model_config, seq, tp, dtype, kv_dtype, block_size, max_batched_tokens, batch=1,
                sliding_window=True, revision=None):
    """The Budget of a model (preset, Hub id in the HF cache, folder or config.json) for vLLM's settings;
    `seq` None = the model's context length, as vLLM's default --max-model-len."""
    from llmdoctor.kv.budget import Budget
    from llmdoctor.kv.model import make_shape, resolve, resolve_dtypes, weights_block

    found = resolve(model, model_config, revision)
    arch, source, raw = found.arch, found.source, found.config
    weights_dtype, cache_dtype = resolve_dtypes(arch, raw, dtype, kv_dtype)
    shape = make_shape(arch, cache_dtype, tp)
    if seq is None:
        seq = arch.max_position or 4096
    windows = arch.windows if sliding_window else (None,) * arch.layers
    budget = Budget(arch, shape, weights_dtype, cache_dtype, batch, seq, block_size, windows, max_batched_tokens,
                    fp8_block=weights_block(raw, source, weights_dtype))
    return budget, source
