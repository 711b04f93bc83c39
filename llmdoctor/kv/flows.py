"""The kv-budget answers beyond one model on one GPU: the live server, the local cache, every preset, the GPU
planner and SGLang's pool. Each `*_view` returns (the JSON document, the text lines, the exit code)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmdoctor.sizes import format_size

if TYPE_CHECKING:
    from llmdoctor.kv import planner as plans

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}


@dataclass
class View:
    data: dict
    lines: list[str]  # rich markup, already escaped where it holds outside text
    exit_code: int = 0


def escape(text: object) -> str:
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped

    return escape(str(text))


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


# ---------------------------------------------------------------------------------------------- live server


def live_view(server, batch: int, seq: int) -> View:
    from llmdoctor.kv.live import answer

    a = answer(server, batch, seq)
    name = ENGINE_NAMES[server.engine]
    head = f"[bold]{name}[/] at {escape(server.url)}"
    if server.model:
        head += f" serving [bold]{escape(server.model)}[/]"
    if server.max_model_len:
        head += f" (max_model_len {server.max_model_len:,})"
    lines = [head]
    cap = a.capacity_tokens
    if cap is not None:
        blocks = server.total("blocks")
        block = server.engines[0].block_size or 1
        where = f"{cap:,} tokens in {blocks:,} blocks of {block}" if blocks is not None and block > 1 \
            else f"{cap:,} tokens"
        sentence = (f"{batch} × {seq:,} needs {a.need_tokens:,} tokens = {_pct(a.share or 0)} of this server's "
                    f"KV cache ({where})")
    else:
        sentence = f"{batch} × {seq:,} needs {a.need_tokens:,} tokens; the size of this server's KV cache is unknown"
    usage, running, waiting = server.usage, server.total("running"), server.total("waiting")
    if usage is not None or running is not None:
        now = []
        if usage is not None:
            now.append(f"{_pct(usage)} is in use")
        if running is not None:
            queued = f" ({waiting} waiting)" if waiting else ""
            now.append(f"{running} request{'s' if running != 1 else ''} {'is' if running == 1 else 'are'} "
                       f"running{queued}")
        sentence += "; right now " + " and ".join(now)
    colour = {"fits now": "green", "only when idle": "yellow", "never": "bold red"}.get(a.verdict, "yellow")
    said = {"only when idle": "fits only when idle", "never": "never fits"}.get(a.verdict, a.verdict)
    lines.append(f"{sentence}: it [{colour}]{said}[/] ({escape(a.reason)})")
    if a.concurrency_at_max_len is not None and server.max_model_len:
        origin = "vLLM's own figure" if a.concurrency_from == "vllm" else "vLLM's formula (blocks / blocks per request)"
        lines.append(f"{origin}: Maximum concurrency for {server.max_model_len:,} tokens per request: "
                     f"{a.concurrency_at_max_len:.2f}x")
    if a.concurrency_at_seq is not None:
        lines.append(f"at {seq:,} tokens per request: {a.concurrency_at_seq:.2f} requests fit the cache at once")
    if len(server.engines) > 1:
        lines.append(f"{len(server.engines)} data-parallel engines, each with its own cache: requests are spread "
                     f"over them ({-(-batch // len(server.engines))} each)")
    if server.settings:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(server.settings.items()))
        lines.append(f"[dim]server settings: {escape(shown)}[/]")
    lines.append(f"[dim]read from: {escape(', '.join(dict.fromkeys(server.sources)))}[/]")
    lines += [f"[yellow]note:[/] {escape(n)}" for n in server.notes]
    data = {
        "mode": "live",
        "server": {"engine": server.engine, "url": server.url, "model": server.model,
                   "max_model_len": server.max_model_len, "version": server.version,
                   "kv_cache_tokens": cap, "blocks": server.total("blocks"),
                   "block_size": server.engines[0].block_size if server.engines else None,
                   "usage": usage, "running": running, "waiting": waiting, "engines": len(server.engines),
                   "settings": server.settings, "sources": list(dict.fromkeys(server.sources)),
                   "notes": server.notes},
        "batch": batch, "seq": seq, "need_tokens": a.need_tokens, "share": a.share, "verdict": a.verdict,
        "reason": a.reason, "max_concurrency": a.concurrency_at_max_len,
        "max_concurrency_source": a.concurrency_from, "concurrency_at_seq": a.concurrency_at_seq,
    }
    return View(data, lines, a.exit_code)


# ---------------------------------------------------------------------------------------------- presets


def presets_view(batch: int, seq: int, cached: list[str], tried_urls: list[str], cache_dir: str) -> View:
    """Every built-in model for this batch and length, and how to name one (nothing was found to ask)."""
    from llmdoctor.kv import planner as plans
    from llmdoctor.kv.budget import DTYPE_BYTES, KVShape, sequence_bytes, weights_memory
    from llmdoctor.kv.model import resolve_dtypes, weights_block
    from llmdoctor.kv.presets import PRESETS

    rows = []
    for preset in PRESETS.values():
        arch = preset.arch()
        dtype, kv_dtype = resolve_dtypes(arch, preset.config, "auto", "auto")
        shape = KVShape(arch, DTYPE_BYTES[kv_dtype], 1)
        kv = batch * sequence_bytes(shape, seq, 16, arch.windows)
        block = weights_block(preset.config, preset.name, dtype)
        weights = weights_memory(arch, dtype, 1, block)[0]
        req = plans.Request(arch, dtype, kv_dtype, batch, seq, fp8_block=block)
        search = plans.smallest_plan(req, plans.Gpus(80 * 1024**3))
        chosen = search.chosen
        gpus = "none" if chosen is None else (f"{chosen.tp}" if chosen.pp == 1 else f"{chosen.tp}×{chosen.pp}")
        rows.append({"name": preset.name, "source": preset.source, "parameters": arch.param_count(),
                     "dtype": dtype, "kv_bytes_per_token": shape.bytes_per_token, "kv_bytes_batch": kv,
                     "weights_bytes": weights, "gpus_80gib": None if chosen is None else chosen.gpus,
                     "layout_80gib": gpus})
    lines = [(f"no server answered ({escape(', '.join(tried_urls))}) and no single model is in the Hugging Face "
             f"cache ({escape(cache_dir)}): every built-in model for {batch} × {seq:,}, one GPU's view at tp=1; "
             "GPUs = the smallest tensor×pipeline layout on 80 GiB GPUs (vLLM, utilization 0.9, 2 GiB overhead)"),
             (f"{'model':<15} {'params':>8} {'KV/token':>10} {'KV ' + str(batch) + '×' + f'{seq:,}':>12} "
             f"{'weights':>10} {'GPUs':>5}")]
    for r in rows:
        lines.append(f"{r['name']:<15} {r['parameters'] / 1e9:>7.1f}B {r['kv_bytes_per_token'] / 1024:>7.0f} KiB "
                     f"{r['kv_bytes_batch'] / 1024**3:>8.2f} GiB {r['weights_bytes'] / 1024**3:>6.1f} GiB "
                     f"{r['layout_80gib']:>5}")
    if cached:
        lines.append(f"in the Hugging Face cache: {escape(', '.join(cached))}")
    lines.append("name one: --model NAME (a row above), --model org/name (from the local Hugging Face cache), "
                 "--model PATH or --model-config config.json; --url http://HOST:PORT asks a running server")
    data = {"mode": "presets", "batch": batch, "seq": seq, "tried_urls": tried_urls, "hf_cache": cache_dir,
            "cached_models": cached, "models": rows}
    return View(data, lines, 0)


# ---------------------------------------------------------------------------------------------- the planner


def plan_view(req: plans.Request, gpus: plans.Gpus, search: plans.Search, serve_name: str,
              auto_dtypes: tuple[str, str], total_text: str) -> View:
    from llmdoctor.kv import planner as plans

    lines = []
    tried = []
    for tp, pp, outcome in search.tried:
        label = f"tp={tp}" + (f" pp={pp}" if pp > 1 else "")
        if isinstance(outcome, str):
            tried.append({"tp": tp, "pp": pp, "refused": outcome})
            lines.append(f"  {label}: vLLM refuses it: {escape(outcome)}")
            continue
        tried.append(_plan_dict(outcome))
        if outcome.ok:
            continue
        if outcome.kv_memory <= 0:
            why = (f"weights {format_size(outcome.weights_per_gpu)} per GPU leave no KV memory in "
                   f"{total_text} × {gpus.utilization}")
        elif not outcome.starts:
            why = f"one request of {req.seq:,} tokens needs {format_size(outcome.request_memory)} of KV"
        else:
            why = (f"{outcome.num_blocks:,} blocks hold {outcome.max_concurrency:.2f} requests of "
                   f"{req.seq:,} tokens, not {req.batch}")
        lines.append(f"  {label}: does not fit: {why}")
    chosen = search.chosen
    data: dict = {"mode": "plan", "gpu_mem": gpus.total, "utilization": gpus.utilization,
                  "overhead": gpus.overhead, "batch": req.batch, "seq": req.seq, "tried": tried,
                  "chosen": None if chosen is None else _plan_dict(chosen)}
    if chosen is None:
        head = (f"[bold red]no layout up to {plans.TP_LIMIT} GPUs per stage and {plans.PP_LIMIT} stages fits[/] "
                f"{req.batch} × {req.seq:,} on {total_text} GPUs")
        return View(data, [head, *lines], 1)
    flags, exact = plans.vllm_flags(req, chosen, gpus, serve_name, auto_dtypes)
    layout = f"tp={chosen.tp}" + (f" × pp={chosen.pp}" if chosen.pp > 1 else "")
    head = [(f"[bold]{chosen.gpus} GPU{'s' if chosen.gpus != 1 else ''} of {total_text}[/] ({layout}) run "
            f"{req.batch} × {req.seq:,}: weights {format_size(chosen.weights_per_gpu)} per GPU, KV memory "
            f"{format_size(chosen.kv_memory)} per GPU")]
    if chosen.pp > 1:
        split = ", ".join(f"{s.layers[1] - s.layers[0]}" for s in chosen.stages)
        head.append(f"pipeline stages hold {split} layers (vLLM get_pp_indices); the smallest stage cache sets "
                    "every worker's block count")
    head += [(f"vLLM would log: GPU KV cache size: {chosen.cache_tokens:,} tokens; Maximum concurrency for "
             f"{req.seq:,} tokens per request: {chosen.max_concurrency:.2f}x"),
             f"--max-model-len auto would pick {chosen.auto_max_model_len:,} tokens here",
             f"start it with: {escape(flags)}",
             f"or reserve exactly this batch ({chosen.kv_cache_memory_bytes:,} bytes of KV per GPU"
             + ("" if chosen.exact_fits else ", [red]more than the GPU holds with the weights[/]")
             + f"): {escape(exact)}"]
    data["vllm_command"], data["vllm_command_exact"] = flags, exact
    return View(data, head + (["tried first:", *lines] if lines else []), 0)


def _plan_dict(p: plans.Plan) -> dict:
    return {"tp": p.tp, "pp": p.pp, "gpus": p.gpus, "weights_per_gpu": p.weights_per_gpu,
            "kv_memory_per_gpu": p.kv_memory, "num_blocks": p.num_blocks, "kv_cache_tokens": p.cache_tokens,
            "max_concurrency": round(p.max_concurrency, 4), "starts": p.starts, "fits": p.fits,
            "auto_max_model_len": p.auto_max_model_len, "kv_cache_memory_bytes": p.kv_cache_memory_bytes,
            "stages": [{"layers": list(s.layers), "weights_per_gpu": s.weights, "kv_memory_per_gpu": s.kv_memory,
                        "num_blocks": s.num_blocks} for s in p.stages]}


# ---------------------------------------------------------------------------------------------- SGLang


def sglang_view(arch, kv_dtype: str, tp: int, batch: int, seq: int, weights_per_gpu: int,
                kv_memory: int | None, gpu_total: int | None, overhead: int, fraction: float | None,
                page_size: int) -> View:
    from llmdoctor.kv import sglang

    if kv_memory is not None:
        cell = sglang.cell_size(arch, kv_dtype, tp)
        tokens = kv_memory // cell // page_size * page_size
        pool = sglang.Pool(cell, kv_memory, tokens, page_size)
        how = f"--kv-mem {format_size(kv_memory)}"
        used_fraction = fraction
    else:
        assert gpu_total is not None
        used_fraction = fraction if fraction is not None else sglang.default_mem_fraction_static(gpu_total, tp)
        free_before = gpu_total - overhead
        pool = sglang.token_pool(arch, kv_dtype, tp, free_before, weights_per_gpu, used_fraction, page_size)
        source = "given" if fraction is not None else "SGLang's default for this GPU"
        how = (f"({format_size(gpu_total)} − {format_size(overhead)} before loading) × mem_fraction_static "
               f"{used_fraction} ({source}) − weights {format_size(weights_per_gpu)}")
    fits = pool.max_total_num_tokens > 0 and pool.fits(batch, seq)
    need = batch * seq
    lines = [(f"SGLang token pool: {pool.cell_size:,} B per token on each GPU (all layers); pool "
             f"{format_size(max(0, pool.rest))} = {escape(how)}")]
    if pool.max_total_num_tokens <= 0:
        lines.append("[bold red]SGLang would not start[/]: RuntimeError: Not enough memory. Please try to "
                     "increase --mem-fraction-static.")
    else:
        lines.append(f"SGLang would log: {pool.kv_log_line(arch, kv_dtype, tp)}")
        verdict = "[green]fits[/]" if fits else "[bold red]does not fit[/]"
        lines.append(f"{batch} × {seq:,} needs {need:,} tokens = {_pct(need / pool.max_total_num_tokens)} of the "
                     f"pool: {verdict}; at most {pool.max_total_num_tokens // seq:,} requests of {seq:,} tokens")
    if any(w is not None for w in arch.windows):
        lines.append("[yellow]note:[/] SGLang's default pool keeps every layer's full KV; its hybrid sliding-"
                     "window pool (--swa-full-tokens-ratio) is not modelled")
    data = {"engine": "sglang", "cell_size": pool.cell_size, "pool_bytes": pool.rest,
            "max_total_num_tokens": pool.max_total_num_tokens, "page_size": page_size,
            "mem_fraction_static": used_fraction, "need_tokens": need, "fits": fits,
            "sglang_log": pool.kv_log_line(arch, kv_dtype, tp) if pool.max_total_num_tokens > 0 else None}
    return View(data, lines, 0 if fits else 1)
