"""`llmdoctor kv-budget`: options and rendering only; the arithmetic lives in `llmdoctor.kv`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("kv-budget")(kv_budget)


def kv_budget(
    model: str = typer.Option(None, "--model", "-m", help="A built-in model (see --list-models)."),
    config: str = typer.Option(None, "--config", "-c", help="A Hugging Face config.json, or a folder holding one."),
    bs: int = typer.Option(1, "--bs", min=1, help="Concurrent sequences (batch size)."),
    seq: int = typer.Option(4096, "--seq", min=1, help="Tokens per sequence (prompt + output)."),
    dtype: str = typer.Option("auto", "--dtype", help="Weights dtype: auto (config), fp32, fp16, bf16, fp8."),
    kv_dtype: str = typer.Option("auto", "--kv-dtype", help="KV cache dtype: auto (= model dtype), fp8, int8, "
                                 "fp16, bf16, fp32."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor-parallel GPUs."),
    block_size: int = typer.Option(16, "--block-size", min=1, help="Tokens per KV block (vLLM default 16)."),
    kv_mem: str = typer.Option(None, "--kv-mem", help="Memory for the KV cache per GPU (e.g. 40GiB); vLLM "
                               "logs it as 'Available KV cache memory'."),
    gpu_mem: str = typer.Option(None, "--gpu-mem", help="Total memory of one GPU (e.g. 80GB); the KV memory is "
                                "then total × utilization − weights − overhead."),
    utilization: float = typer.Option(0.9, "--utilization", help="vLLM --gpu-memory-utilization (0 < U ≤ 1)."),
    overhead: str = typer.Option("2GiB", "--overhead", help="With --gpu-mem: activation peak + CUDA context "
                                 "vLLM keeps out of the KV cache (an assumption; vLLM measures it)."),
    max_batched_tokens: int = typer.Option(8192, "--max-batched-tokens", min=1, help="vLLM "
                                           "--max-num-batched-tokens (matters for sliding-window layers)."),
    no_sliding_window: bool = typer.Option(False, "--no-sliding-window", help="Treat every layer as full "
                                           "attention (vLLM --disable-sliding-window)."),
    list_models: bool = typer.Option(False, "--list-models", help="List the built-in models and exit."),
    fmt: str = typer.Option("text", "--format", help="Output format: text or json."),
) -> None:
    """KV-cache memory for a model, batch and sequence length, computed the way vLLM does.

    Exit 0 computed / fits the given memory; 1 does not fit, or vLLM would not start; 2 bad input.
    """
    import sys

    from llmdoctor.errors import UserError

    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose one of text, json")
    if list_models:
        _list_models(fmt)
        return
    from llmdoctor.kv.budget import Budget, kv_memory_from_gpu
    from llmdoctor.kv.model import make_shape, resolve_dtypes, resolve_model, weights_block
    from llmdoctor.kv.report import render_text, to_dict
    from llmdoctor.sizes import parse_size

    arch, source, raw = resolve_model(model, config)
    weights_dtype, cache_dtype = resolve_dtypes(arch, raw, dtype, kv_dtype)
    shape = make_shape(arch, cache_dtype, tp)
    windows = (None,) * arch.layers if no_sliding_window else arch.windows
    budget = Budget(arch, shape, weights_dtype, cache_dtype, bs, seq, block_size, windows, max_batched_tokens,
                    fp8_block=weights_block(raw, source, weights_dtype))
    if kv_mem is not None and gpu_mem is not None:
        raise UserError("give either --kv-mem or --gpu-mem, not both")
    if not 0 < utilization <= 1:
        raise UserError(f"--utilization must be in (0, 1], got {utilization}")
    if kv_mem is not None:
        budget.kv_memory = parse_size(kv_mem, "--kv-mem")
        budget.memory_source = {"how": "given with --kv-mem", "kv_mem": budget.kv_memory}
    elif gpu_mem is not None:
        total = parse_size(gpu_mem, "--gpu-mem")
        extra = parse_size(overhead, "--overhead")
        budget.kv_memory = kv_memory_from_gpu(total, utilization, budget.weights_per_gpu, extra)
        budget.memory_source = {
            "how": f"{gpu_mem} × {utilization} − weights − {overhead} overhead",
            "gpu_mem": total, "utilization": utilization, "weights_per_gpu": budget.weights_per_gpu,
            "overhead": extra,
        }
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(to_dict(budget, source), indent=2) + "\n")
    else:
        render_text(budget, source, sys.stdout)
    if budget.kv_memory is not None and not (budget.fits(bs, seq) and budget.vllm_starts()):
        raise typer.Exit(1)


def _list_models(fmt: str) -> None:
    import sys

    from llmdoctor.kv.presets import PRESETS

    rows = []
    for preset in PRESETS.values():
        a = preset.arch()
        rows.append({"name": preset.name, "source": preset.source, "layers": a.layers, "kv_heads": a.kv_heads,
                     "head_dim": a.head_dim, "mla": a.mla is not None,
                     "sliding_layers": a.sliding_layers, "parameters": a.param_count()})
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps({"models": rows}, indent=2) + "\n")
        return
    for r in rows:
        attention = "MLA" if r["mla"] else f"{r['kv_heads']} kv heads × {r['head_dim']}"
        sliding = f", {r['sliding_layers']} sliding layers" if r["sliding_layers"] else ""
        sys.stdout.write(f"{r['name']:<16} {r['parameters'] / 1e9:>7.2f}B  {r['layers']:>3} layers, "
                         f"{attention}{sliding}  ({r['source']})\n")
