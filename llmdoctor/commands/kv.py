"""`llmdoctor kv-budget`: options and rendering only; the arithmetic lives in `llmdoctor.kv`."""

from __future__ import annotations

import typer

from llmdoctor.commands import model_options as opt
from llmdoctor.commands.options import PLAIN_FORMATS, format_option


def register(app: typer.Typer) -> None:
    app.command("kv-budget")(kv_budget)


def kv_budget(
    model: str = opt.MODEL,
    model_config: str = opt.MODEL_CONFIG,
    legacy_config: str = opt.LEGACY_CONFIG,
    bs: int = typer.Option(1, "--bs", min=1, help="Concurrent sequences (batch size)."),
    seq: int = typer.Option(4096, "--max-model-len", "--seq", min=1, metavar="TOKENS",
                            help="Tokens per sequence, prompt + output (vLLM --max-model-len; --seq for short)."),
    dtype: str = opt.DTYPE,
    kv_dtype: str = opt.KV_DTYPE,
    tp: int = opt.TP,
    block_size: int = opt.BLOCK_SIZE,
    kv_mem: str = typer.Option(None, "--kv-mem", metavar="SIZE", help="Memory for the KV cache per GPU (e.g. "
                               "40GiB); vLLM logs it as 'Available KV cache memory'."),
    gpu_mem: str = typer.Option(None, "--gpu-mem", metavar="SIZE", help="Total memory of one GPU (e.g. 80GB); the "
                                "KV memory is then total × utilization − weights − overhead."),
    utilization: float = opt.UTILIZATION,
    overhead: str = opt.OVERHEAD,
    max_batched_tokens: int = opt.MAX_BATCHED_TOKENS,
    no_sliding_window: bool = typer.Option(False, "--no-sliding-window", help="Treat every layer as full "
                                           "attention (vLLM --disable-sliding-window)."),
    list_models: bool = typer.Option(False, "--list-models", help="List the built-in models and exit."),
    fmt: str = format_option(*PLAIN_FORMATS),
) -> None:
    """KV-cache memory for a model, batch and sequence length, computed the way vLLM does.

    Exit 0 computed / fits the given memory; 1 does not fit, or vLLM would not start; 2 bad input.
    """
    import sys

    from llmdoctor.errors import UserError

    if list_models:
        _list_models(fmt)
        return
    from llmdoctor.kv.budget import kv_memory_from_gpu
    from llmdoctor.kv.report import render_text, to_dict

    if kv_mem is not None and gpu_mem is not None:
        raise UserError("give either --kv-mem or --gpu-mem, not both")
    opt.check_utilization(utilization)
    budget, source = opt.make_budget(
        model=model, model_config=opt.model_config_path(model_config, legacy_config), seq=seq, tp=tp,
        dtype=dtype, kv_dtype=kv_dtype, block_size=block_size, max_batched_tokens=max_batched_tokens, batch=bs,
        sliding_window=not no_sliding_window)
    if kv_mem is not None:
        budget.kv_memory = opt.memory_size(kv_mem, "--kv-mem")
        budget.memory_source = {"how": "given with --kv-mem", "kv_mem": budget.kv_memory}
    elif gpu_mem is not None:
        total = opt.memory_size(gpu_mem, "--gpu-mem")
        extra = opt.memory_size(overhead, "--overhead")
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
    if budget.kv_memory is not None and not (budget.fits(bs, budget.seq) and budget.vllm_starts()):
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
