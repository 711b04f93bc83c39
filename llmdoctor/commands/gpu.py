"""`llmdoctor gpu`: options and rendering only; NVML is read in `llmdoctor.gpu` (pynvml imported lazily)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("gpu")(gpu)


def gpu(
    model: str = typer.Option(None, "--model", "-m", help="A built-in model: will vLLM start here, and with "
                              "how much KV cache?"),
    config: str = typer.Option(None, "--config", "-c", help="Or a Hugging Face config.json (or its folder)."),
    seq: int = typer.Option(None, "--seq", min=1, help="vLLM --max-model-len (default: as vLLM, the model's "
                            "max_position_embeddings, else 4096)."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor-parallel GPUs (weights and KV heads split)."),
    utilization: float = typer.Option(0.9, "--utilization", help="vLLM --gpu-memory-utilization (0 < U ≤ 1)."),
    dtype: str = typer.Option("auto", "--dtype", help="Weights dtype: auto (config), fp32, fp16, bf16, fp8."),
    kv_dtype: str = typer.Option("auto", "--kv-dtype", help="KV cache dtype: auto, fp8, int8, fp16, bf16, fp32."),
    block_size: int = typer.Option(16, "--block-size", min=1, help="Tokens per KV block (vLLM default 16)."),
    overhead: str = typer.Option("2GiB", "--overhead", help="Activation peak + CUDA context vLLM keeps out of "
                                 "the KV cache (an assumption; vLLM measures it)."),
    max_batched_tokens: int = typer.Option(8192, "--max-batched-tokens", min=1,
                                           help="vLLM --max-num-batched-tokens."),
    fmt: str = typer.Option("text", "--format", help="Output format: text or json."),
) -> None:
    """GPU memory, processes and MIG from NVML; with --model, whether vLLM starts and its KV cache.

    Exit 0 read (with --model: vLLM starts with room for a request); 1 it would not; 2 NVML unavailable.
    """
    import json
    import sys

    from llmdoctor.errors import UserError
    from llmdoctor.gpu import NvmlUnavailable, collect

    if fmt not in ("text", "json"):
        raise UserError(f"--format {fmt!r}: choose one of text, json")
    if not 0 < utilization <= 1:
        raise UserError(f"--utilization must be in (0, 1], got {utilization}")
    budget = _budget(model, config, seq, tp, dtype, kv_dtype, block_size, max_batched_tokens) \
        if (model or config) else None
    if budget is not None:
        seq = budget.seq
    from llmdoctor.sizes import parse_size

    extra = parse_size(overhead, "--overhead")
    try:
        snapshot = collect()
    except NvmlUnavailable as err:
        raise UserError(str(err)) from None  # one line on stderr; `{"error": ...}` too with --format json
    placements = None
    if budget is not None:
        from llmdoctor.gpu import plan

        placements = plan(snapshot, budget.layout(), budget.weights_per_gpu, extra, utilization, seq,
                          max_batched_tokens)
    if fmt == "json":
        data = snapshot.to_dict()
        if placements is not None:
            data["vllm"] = {
                "model": budget.arch.name, "seq": seq, "tp": tp, "utilization": utilization,
                "weights_per_gpu": budget.weights_per_gpu, "overhead": extra,
                "placements": [_placement_dict(p) for p in placements],
            }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        _render_text(snapshot, placements, budget, utilization, sys.stdout)
    if placements is not None and _usable(placements) < tp:
        raise typer.Exit(1)


def _usable(placements) -> int:
    """Devices where vLLM starts with room for one request of --seq tokens."""
    return sum(1 for p in placements if p.starts and p.max_concurrency >= 1)


def _budget(model, config, seq, tp, dtype, kv_dtype, block_size, max_batched_tokens):
    from llmdoctor.kv.budget import Budget
    from llmdoctor.kv.model import make_shape, resolve_dtypes, resolve_model, weights_block

    arch, source, raw = resolve_model(model, config)
    weights_dtype, cache_dtype = resolve_dtypes(arch, raw, dtype, kv_dtype)
    shape = make_shape(arch, cache_dtype, tp)
    if seq is None:  # vLLM's default --max-model-len: the model's own context length
        seq = arch.max_position or 4096
    return Budget(arch, shape, weights_dtype, cache_dtype, 1, seq, block_size, arch.windows, max_batched_tokens,
                  fp8_block=weights_block(raw, source, weights_dtype))


def _placement_dict(p) -> dict:
    from dataclasses import asdict

    data = asdict(p)
    data["max_concurrency"] = round(p.max_concurrency, 4)
    return data


def _render_text(snapshot, placements, budget, utilization, out) -> None:
    from rich.markup import escape

    from llmdoctor.report.render import make_console
    from llmdoctor.sizes import format_size

    console = make_console(out)
    console.print(f"driver {escape(snapshot.driver_version)}, CUDA {snapshot.cuda_driver_version or 'unknown'}, "
                  f"{len(snapshot.gpus)} GPU{'s' if len(snapshot.gpus) != 1 else ''}")
    for g in snapshot.gpus:
        util = "n/a" if g.utilization_gpu is None else f"{g.utilization_gpu}% (memory {g.utilization_memory}%)"
        console.print(f"[bold]GPU {g.index}[/] {escape(g.name)} {g.uuid}")
        reserved = "" if g.reserved is None else f", reserved {format_size(g.reserved)}"
        console.print(f"  memory total {format_size(g.total)}, used {format_size(g.used)}{reserved}, "
                      f"[bold]free {format_size(g.free)}[/] (NVML {g.memory_api}); utilization {util}")
        if g.mig_mode is not None:
            pending = "" if g.mig_pending == g.mig_mode else f" (pending: {'on' if g.mig_pending else 'off'})"
            console.print(f"  MIG {'on' if g.mig_mode else 'off'}{pending}")
        for m in g.mig_devices:
            console.print(f"    MIG {m.index} {m.uuid}: total {format_size(m.total)}, free {format_size(m.free)}")
        if g.processes is None:
            console.print("  processes: not available")
        for p in g.processes or []:
            used = "n/a" if p.used_memory is None else format_size(p.used_memory)
            console.print(f"  pid {p.pid} {escape(p.name or '(name not visible)')}: {used}")
    for note in snapshot.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    if placements is None:
        return
    console.print(f"[bold]vLLM with {escape(budget.arch.name)}[/], --max-model-len {budget.seq:,}, "
                  f"--gpu-memory-utilization {utilization}, tp={budget.shape.tp}: weights "
                  f"{format_size(budget.weights_per_gpu)} per GPU")
    for p in placements:
        if not p.starts:
            gib = 1024**3
            console.print(f"  {p.device}: [bold red]will not start[/]: free {format_size(p.free)} < "
                          f"total × {utilization} = {format_size(p.requested)}; vLLM would say \"Free memory "
                          f"on device ({p.free / gib:.2f}/{p.total / gib:.2f} GiB) on startup is less than "
                          f"desired GPU memory utilization ({utilization}, {p.requested / gib:.2f} GiB)\"")
        elif p.kv_memory <= 0:
            console.print(f"  {p.device}: [bold red]no room for a KV cache[/]: weights + overhead exceed "
                          f"{format_size(p.requested)}")
        else:
            verdict = "[green]ok[/]" if p.max_concurrency >= 1 else "[bold red]cannot hold one request[/]"
            console.print(f"  {p.device}: {verdict}, KV memory {format_size(p.kv_memory)}: "
                          f"GPU KV cache size: {p.kv_cache_tokens:,} tokens; Maximum concurrency for "
                          f"{budget.seq:,} tokens per request: {p.max_concurrency:.2f}x")
    usable, tp = _usable(placements), budget.shape.tp
    if usable < tp:
        console.print(f"[bold red]not enough GPUs[/]: tp={tp} needs {tp} devices where vLLM starts with room for "
                      f"one request; {usable} of the {len(placements)} here qualify")
