"""`llmdoctor kv-budget`: options and rendering only; the arithmetic lives in `llmdoctor.kv`."""

from __future__ import annotations

import typer

from llmdoctor.commands import model_options as opt
from llmdoctor.commands.options import PLAIN_FORMATS, format_option


def register(app: typer.Typer) -> None:
    app.command("kv-budget")(kv_budget)


ENGINES = ("vllm", "sglang")


def kv_budget(
    model: str = opt.MODEL,
    model_config: str = opt.MODEL_CONFIG,
    legacy_config: str = opt.LEGACY_CONFIG,
    revision: str = opt.REVISION,
    url: str = typer.Option(None, "--url", metavar="URL", help="The inference server to ask (vLLM, SGLang, TGI) "
                            "when no model is given; default: the first answering on 127.0.0.1 ports 8000, "
                            "30000, 8080 (or those in LLMDOCTOR_URLS)."),
    api_key: str = typer.Option(None, "--api-key", envvar=["LLMDOCTOR_API_KEY", "VLLM_API_KEY", "OPENAI_API_KEY"],
                                show_envvar=False, help="Bearer key for a server started with --api-key "
                                "(or LLMDOCTOR_API_KEY / VLLM_API_KEY / OPENAI_API_KEY)."),
    timeout: float = typer.Option(2.0, "--timeout", metavar="SECONDS", help="Wait this long for each server answer."),
    bs: int = typer.Option(1, "--bs", min=1, max=opt.MAX_BATCH, help="Concurrent sequences (batch size)."),
    seq: str = typer.Option("4096", "--max-model-len", "--seq", metavar="TOKENS|auto",
                            help="Tokens per sequence, prompt + output (vLLM --max-model-len; --seq for short); "
                                 "auto: as vLLM computes it (the longest that fits; a server: its own)."),
    dtype: str = opt.DTYPE,
    kv_dtype: str = opt.KV_DTYPE,
    tp: str = opt.TP,
    pp: int = typer.Option(None, "--pp", min=1, max=opt.MAX_GPUS, help="Pipeline-parallel stages, with vLLM's layer split (needs "
                           "--gpu-mem); with --tp auto and no --pp, stages are added only when needed."),
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
    engine: str = typer.Option("vllm", "--engine", metavar="vllm|sglang", help="Whose accounting."),
    mem_fraction_static: float = typer.Option(None, "--mem-fraction-static", help="SGLang's --mem-fraction-static "
                                              "(default: SGLang's own for --gpu-mem)."),
    page_size: int = typer.Option(1, "--page-size", min=1, max=2**16, help="SGLang --page-size."),
    list_models: bool = typer.Option(False, "--list-models", help="List the built-in models and exit."),
    fmt: str = format_option(*PLAIN_FORMATS),
) -> None:
    """KV-cache memory for a model, batch and sequence length, computed the way vLLM (or SGLang) does.

    With no model: asks the running server (vLLM, SGLang, TGI) whether the batch fits now; else the one model
    in the local Hugging Face cache; else lists every built-in model.
    Exit 0 computed / fits; 1 does not fit, or the engine would not start; 2 bad input or no answer.
    """
    import sys

    from llmdoctor.errors import UserError

    if list_models:
        _list_models(fmt)
        return
    if engine not in ENGINES:
        raise UserError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    length = opt.length(seq)
    tp_size = opt.parallel_size(tp)
    from llmdoctor.limits import check_seconds

    check_seconds(timeout)  # inf or 1e400 would never time out against a silent server
    model_config = opt.model_config_path(model_config, legacy_config)
    if url and (model or model_config):
        raise UserError("give --url (ask the running server) or --model/--model-config (compute offline), not both")
    if not model and not model_config:
        model = _discover(url, api_key, timeout, bs, length, fmt)
        if model is None:
            return
    if kv_mem is not None and gpu_mem is not None:
        raise UserError("give either --kv-mem or --gpu-mem, not both")
    opt.check_utilization(utilization)
    if mem_fraction_static is not None and not 0 < mem_fraction_static < 1:
        raise UserError(f"--mem-fraction-static must be in (0, 1), got {mem_fraction_static}")
    if tp_size is None or (pp or 1) > 1:
        if engine == "sglang":
            raise UserError("--engine sglang: the GPU planner (--tp auto, --pp) follows vLLM; give --tp N")
        _plan(model, model_config, revision, bs, length, dtype, kv_dtype, tp_size, pp, block_size, gpu_mem,
              utilization, overhead, max_batched_tokens, no_sliding_window, fmt)
        return
    from llmdoctor.kv.budget import kv_memory_from_gpu
    from llmdoctor.kv.report import render_text, to_dict

    budget, source = opt.make_budget(
        model=model, model_config=model_config, seq=length or 1, tp=tp_size, dtype=dtype, kv_dtype=kv_dtype,
        block_size=block_size, max_batched_tokens=max_batched_tokens, batch=bs,
        sliding_window=not no_sliding_window, revision=revision)
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
    if engine == "sglang":
        _sglang(budget, source, bs, length, kv_mem, gpu_mem, overhead, mem_fraction_static, page_size, fmt)
        return
    if length is None:
        if budget.kv_memory is None:
            raise UserError("--max-model-len auto: give --kv-mem or --gpu-mem; vLLM picks the length that fits "
                            "that memory")
        derived = budget.arch.max_position or 4096
        auto = budget.layout().auto_max_model_len(max(0, budget.kv_memory), derived, max_batched_tokens)
        if auto == 0:
            raise UserError("--max-model-len auto: not even one token fits this KV memory; vLLM refuses to start")
        budget.seq = auto
        budget.memory_source["max_model_len_auto"] = auto
        budget.memory_source["how"] += f"; --max-model-len auto = {auto:,} (of the model's {derived:,})"
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(to_dict(budget, source), indent=2) + "\n")
    else:
        render_text(budget, source, sys.stdout)
    if budget.kv_memory is not None and not (budget.fits(bs, budget.seq) and budget.vllm_starts()):
        raise typer.Exit(1)


def _emit(view, fmt: str) -> None:
    import sys

    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(view.data, indent=2) + "\n")
    else:
        from llmdoctor.report.render import make_console

        console = make_console(sys.stdout)
        for line in view.lines:
            console.print(line, soft_wrap=True)  # commands stay on one line, to copy
    if view.exit_code:
        raise typer.Exit(view.exit_code)


def _discover(url, api_key, timeout, bs, length, fmt) -> str | None:
    """Ask the server; else the one model in the HF cache (returned); else every preset (None: answered)."""
    from llmdoctor.kv import flows, hf_cache, live

    server = live.discover(url, api_key, timeout)
    if server is not None:
        if length is None:
            if not server.max_model_len:
                from llmdoctor.errors import UserError

                raise UserError("--max-model-len auto: the server does not say its max_model_len; give a number")
            length = server.max_model_len
        _emit(flows.live_view(server, bs, length), fmt)
        return None
    candidates = _cached_models()
    if len(candidates) == 1:
        import sys

        sys.stderr.write(f"llmdoctor: no server answered on {', '.join(live.probe_urls())}; the Hugging Face "
                         f"cache holds one model, {candidates[0]}: computing for it\n")
        return candidates[0]
    _emit(flows.presets_view(bs, length or 4096, candidates, live.probe_urls(), str(hf_cache.hub_cache_dir())),
          fmt)
    return None


def _cached_models() -> list[str]:
    """The cached repos whose main snapshot holds a decoder config llmdoctor can read."""
    from llmdoctor.errors import UserError
    from llmdoctor.kv import hf_cache
    from llmdoctor.kv.arch import arch_from_config, load_config_file

    found = []
    for repo in hf_cache.cached_repos():
        snapshot = hf_cache.find_snapshot(repo)
        path = snapshot.file("config.json") if snapshot else None
        if path is None:
            continue
        try:
            arch_from_config(load_config_file(path)[0], str(path))
        except UserError:
            continue
        found.append(repo)
    return found


def _plan(model, model_config, revision, bs, length, dtype, kv_dtype, tp_size, pp, block_size, gpu_mem,
          utilization, overhead, max_batched_tokens, no_sliding_window, fmt) -> None:
    """--tp auto / --pp: the GPU planner (llmdoctor.kv.planner)."""
    from llmdoctor.errors import UserError
    from llmdoctor.kv import flows
    from llmdoctor.kv import planner as plans
    from llmdoctor.kv.model import resolve, resolve_dtypes, weights_block

    if gpu_mem is None:
        raise UserError("--tp auto and --pp plan GPUs: give --gpu-mem SIZE, one GPU's memory (e.g. 80GiB)")
    found = resolve(model, model_config, revision)
    arch, raw = found.arch, found.config
    weights_dtype, cache_dtype = resolve_dtypes(arch, raw, dtype, kv_dtype)
    block = weights_block(raw, found.source, weights_dtype)
    windows = (None,) * arch.layers if no_sliding_window else arch.windows
    target = length if length is not None else (arch.max_position or 4096)
    req = plans.Request(arch, weights_dtype, cache_dtype, bs, target, block_size, max_batched_tokens, windows, block)
    gpus = plans.Gpus(opt.memory_size(gpu_mem, "--gpu-mem"), utilization, opt.memory_size(overhead, "--overhead"))
    if tp_size is None:
        search = plans.smallest_plan(req, gpus, pp)
    else:
        problem = plans.tp_problem(arch, tp_size, block)
        if problem:
            raise UserError(f"--tp {tp_size}: vLLM refuses it: {problem}")
        plan = plans.make_plan(req, gpus, tp_size, pp or 1)
        search = plans.Search([(tp_size, pp or 1, plan)], plan if plan.ok else None)
    view = flows.plan_view(req, gpus, search, found.serve_name, resolve_dtypes(arch, raw, "auto", "auto"), gpu_mem)
    view.data.update({"model": arch.name, "source": found.source, "dtype": weights_dtype, "kv_dtype": cache_dtype})
    view.lines.insert(0, f"[bold]{flows.escape(arch.name)}[/] ({flows.escape(found.source)}): {arch.layers} layers; "
                         f"weights {weights_dtype}, KV cache {cache_dtype}")
    _emit(view, fmt)


def _sglang(budget, source, bs, length, kv_mem, gpu_mem, overhead, fraction, page_size, fmt) -> None:
    """--engine sglang: SGLang's token pool (llmdoctor.kv.sglang)."""
    from llmdoctor.errors import UserError
    from llmdoctor.kv import flows

    if kv_mem is None and gpu_mem is None:
        raise UserError("--engine sglang: give --gpu-mem SIZE (SGLang sizes its pool from it) or --kv-mem")
    arch = budget.arch
    seq = length or (arch.max_position or 4096)
    view = flows.sglang_view(arch, budget.kv_dtype, budget.shape.tp, bs, seq, budget.weights_per_gpu,
                             opt.memory_size(kv_mem, "--kv-mem") if kv_mem else None,
                             opt.memory_size(gpu_mem, "--gpu-mem") if gpu_mem else None,
                             opt.memory_size(overhead, "--overhead"), fraction, page_size)
    view.data.update({"model": arch.name, "source": source, "tp": budget.shape.tp, "batch": bs, "seq": seq,
                      "weights_bytes_per_gpu": budget.weights_per_gpu})
    view.lines.insert(0, f"[bold]{flows.escape(arch.name)}[/] ({flows.escape(source)}): {arch.layers} layers, "
                         f"tp={budget.shape.tp}; weights {budget.dtype} ({budget.weights_per_gpu / 1024**3:.2f} GiB "
                         f"per GPU), KV cache {budget.kv_dtype}")
    _emit(view, fmt)


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
