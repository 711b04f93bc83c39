"""`llmdoctor gpu`: options and rendering only; NVML is read in `llmdoctor.gpu` (pynvml imported lazily)."""

from __future__ import annotations

import typer

from llmdoctor.commands import model_options as opt
from llmdoctor.commands.options import PLAIN_FORMATS, format_option


def register(app: typer.Typer) -> None:
    app.command("gpu")(gpu)


def gpu(
    model: str = opt.MODEL,
    model_config: str = opt.MODEL_CONFIG,
    legacy_config: str = opt.LEGACY_CONFIG,
    seq: int = typer.Option(None, "--max-model-len", "--seq", min=1, metavar="TOKENS",
                            help="vLLM --max-model-len (default: as vLLM, the model's max_position_embeddings, "
                                 "else 4096; --seq for short)."),
    tp: str = opt.TP,
    bs: int = typer.Option(1, "--bs", min=1, max=opt.MAX_BATCH, help="With --tp auto: requests that must run at once."),
    utilization: float = opt.UTILIZATION,
    dtype: str = opt.DTYPE,
    kv_dtype: str = opt.KV_DTYPE,
    block_size: int = opt.BLOCK_SIZE,
    overhead: str = opt.OVERHEAD,
    max_batched_tokens: int = opt.MAX_BATCHED_TOKENS,
    fmt: str = format_option(*PLAIN_FORMATS),
) -> None:
    """GPU memory, processes and MIG from NVML; with --model, whether vLLM starts and its KV cache.

    Exit 0 read (with --model: vLLM starts with room for a request); 1 it would not; 2 NVML unavailable.
    """
    import json
    import sys

    from llmdoctor.errors import UserError
    from llmdoctor.gpu import NvmlUnavailable, collect

    opt.check_utilization(utilization)
    model_config = opt.model_config_path(model_config, legacy_config)
    tp_size = opt.parallel_size(tp)
    if tp_size is None:
        if not (model or model_config):
            raise UserError("--tp auto plans GPUs for a model: give --model or --model-config")
        _auto(model, model_config, seq, bs, utilization, dtype, kv_dtype, block_size, overhead, max_batched_tokens,
              fmt)
        return
    tp = tp_size
    budget = None
    if model or model_config:
        budget, _ = opt.make_budget(model=model, model_config=model_config, seq=seq, tp=tp, dtype=dtype,
                                    kv_dtype=kv_dtype, block_size=block_size, max_batched_tokens=max_batched_tokens)
        seq = budget.seq
    extra = opt.memory_size(overhead, "--overhead")
    try:
        snapshot = collect()
    except NvmlUnavailable as err:
        raise UserError(str(err)) from None  # one line on stderr; `{"error": ...}` too with --format json
    placements = None
    if budget is not None:
        from llmdoctor.gpu import plan

        placements = plan(snapshot, budget.layout(), budget.weights_per_gpu, extra, utilization, seq,
                          max_batched_tokens)
    from llmdoctor.gpu import problems, usable

    if fmt == "json":
        data = snapshot.to_dict()
        if placements is not None:
            data["vllm"] = {
                "model": budget.arch.name, "seq": seq, "tp": tp, "utilization": utilization,
                "weights_per_gpu": budget.weights_per_gpu, "overhead": extra,
                "placements": [_placement_dict(p) for p in placements],
            }
        data["findings"] = problems(placements, tp, utilization) if placements is not None else []
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        _render_text(snapshot, placements, budget, utilization, sys.stdout)
    if placements is not None and usable(placements) < tp:
        raise typer.Exit(1)


def _auto(model, model_config, seq, bs, utilization, dtype, kv_dtype, block_size, overhead, max_batched_tokens,
          fmt) -> None:
    """`--tp auto`: kv-budget's planner on the devices NVML sees (the smallest of those where vLLM starts)."""
    import json
    import sys

    from llmdoctor.errors import UserError
    from llmdoctor.gpu import NvmlUnavailable, collect, placements
    from llmdoctor.kv import flows
    from llmdoctor.kv import planner as plans
    from llmdoctor.kv.model import resolve, resolve_dtypes, weights_block
    from llmdoctor.sizes import format_size

    found = resolve(model, model_config)
    arch, raw = found.arch, found.config
    weights_dtype, cache_dtype = resolve_dtypes(arch, raw, dtype, kv_dtype)
    length = seq if seq is not None else (arch.max_position or 4096)
    try:
        snapshot = collect()
    except NvmlUnavailable as err:
        raise UserError(str(err)) from None
    places = placements(snapshot)
    usable_places = [p for p in places if p[3] >= p[2] * utilization]
    req = plans.Request(arch, weights_dtype, cache_dtype, bs, length, block_size, max_batched_tokens,
                        None, weights_block(raw, found.source, weights_dtype))
    if not usable_places:
        view = flows.View({"mode": "plan", "devices": len(places), "usable": 0, "chosen": None},
                          [(f"[bold red]no device here has free memory ≥ total × {utilization}[/]: vLLM starts on "
                            f"none of the {len(places)} seen")], 1)
    else:
        total = min(p[2] for p in usable_places)
        gpus = plans.Gpus(total, utilization, opt.memory_size(overhead, "--overhead"))
        search = plans.smallest_plan(req, gpus, 1, max_gpus=len(usable_places))
        view = flows.plan_view(req, gpus, search, found.serve_name, resolve_dtypes(arch, raw, "auto", "auto"),
                               format_size(total))
        view.data.update({"devices": len(places), "usable": len(usable_places)})
        view.lines.insert(0, f"{len(usable_places)} of the {len(places)} devices here can start vLLM (free ≥ "
                             f"total × {utilization}); planning {flows.escape(arch.name)} on them")
    if fmt == "json":
        sys.stdout.write(json.dumps({**snapshot.to_dict(), "plan": view.data}, indent=2) + "\n")
    else:
        from llmdoctor.report.render import make_console

        console = make_console(sys.stdout)
        for line in view.lines:
            console.print(line, soft_wrap=True)
    if view.exit_code:
        raise typer.Exit(view.exit_code)


def _placement_dict(p) -> dict:
    from dataclasses import asdict

    data = asdict(p)
    data["max_concurrency"] = round(p.max_concurrency, 4)
    return data


def _render_text(snapshot, placements, budget, utilization, out) -> None:
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped
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
            console.print(f"  {p.device}: [bold red]will not start[/] (GPU001): free {format_size(p.free)} < "
                          f"total × {utilization} = {format_size(p.requested)}; vLLM would say \"Free memory "
                          f"on device ({p.free / gib:.2f}/{p.total / gib:.2f} GiB) on startup is less than "
                          f"desired GPU memory utilization ({utilization}, {p.requested / gib:.2f} GiB)\"")
        elif p.kv_memory <= 0:
            console.print(f"  {p.device}: [bold red]no room for a KV cache[/] (GPU002): weights + overhead exceed "
                          f"{format_size(p.requested)}")
        else:
            verdict = "[green]ok[/]" if p.max_concurrency >= 1 else "[bold red]cannot hold one request[/] (GPU002)"
            console.print(f"  {p.device}: {verdict}, KV memory {format_size(p.kv_memory)}: "
                          f"GPU KV cache size: {p.kv_cache_tokens:,} tokens; Maximum concurrency for "
                          f"{budget.seq:,} tokens per request: {p.max_concurrency:.2f}x")
    from llmdoctor.gpu import usable as usable_devices

    usable, tp = usable_devices(placements), budget.shape.tp
    if usable < tp:
        console.print(f"[bold red]not enough GPUs[/] (GPU003): tp={tp} needs {tp} devices where vLLM starts with room for "
                      f"one request; {usable} of the {len(placements)} here qualify")
