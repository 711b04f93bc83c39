"""What `kv-budget` prints: one JSON document, or rich text with a fits / tight / does-not-fit grid."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TextIO

from llmdoctor.kv.budget import Budget
from llmdoctor.sizes import format_size

GRID_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
GRID_SEQS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
TIGHT = 0.9  # a cell is "tight" when the KV cache would be more than 90% full


def vllm_log_lines(b: Budget) -> list[str]:
    """What vLLM V1 logs at startup, or the error it refuses to start with (`check_enough_kv_cache_memory`)."""
    assert b.kv_memory is not None
    if b.kv_memory <= 0:
        return [("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.")]
    if not b.vllm_starts():
        gib = 1024**3
        return [(f"ValueError: To serve at least one request with the models's max seq len ({b.seq}), "
                f"({b.vllm_request_memory() / gib:.2f} GiB KV cache is needed, which is larger than the "
                f"available KV cache memory ({b.kv_memory / gib:.2f} GiB).")]
    return [
        f"GPU KV cache size: {b.cache_tokens():,} tokens",
        f"Maximum concurrency for {b.seq:,} tokens per request: {b.max_concurrency():.2f}x",
    ]


def older_vllm_note(b: Budget) -> str | None:
    """What earlier vLLM V1 releases log (they computed the token figure per group), when it differs."""
    if not b.vllm_starts():
        return None
    legacy = b.cache_tokens_by_groups()
    if legacy == b.cache_tokens():
        return None
    groups = len(b.layout().groups)
    return (f"GPU KV cache size: {legacy:,} tokens "
            f"({groups} group{'s' if groups != 1 else ''})")


@dataclass(frozen=True)
class Problem:
    """A check of `kv-budget` that found something (rules/kv00N.yaml; `llmdoctor explain KV001`)."""

    rule: str
    severity: str
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "message": self.message}


def problems(b: Budget) -> list[Problem]:
    found = []
    if b.kv_memory is not None and not b.fits(b.batch, b.seq):
        found.append(Problem("KV001", "error", (
            f"the KV cache for {b.batch} × {b.seq:,} tokens needs {format_size(b.total_bytes)} per GPU, more than "
            f"the {format_size(max(0, b.kv_memory))} of KV memory: at most {max(0, b.largest_batch()):,} such "
            "sequences run at once")))
    if b.kv_memory is not None and not b.vllm_starts():
        found.append(Problem("KV002", "error", vllm_log_lines(b)[0].removeprefix("ValueError: ")))
    if b.kv_memory is not None and b.kv_memory > 0 and b.vllm_starts() and b.fits(b.batch, b.seq) \
            and any(w is not None for w in b.windows) and b.batch > int(b.max_concurrency()):
        found.append(Problem("KV003", "warning", (
            f"the batch fits once every sequence holds only its sliding windows, but vLLM counts "
            f"window − 1 + --max-batched-tokens ({b.max_num_batched_tokens:,}) tokens per sliding "
            f"layer for each request (what a prefill chunk can hold: its 'Maximum concurrency' "
            f"figure, and the admission gate of recent releases): at most {int(b.max_concurrency())} "
            f"requests of {b.seq:,} tokens run at once, the others wait")))
    if b.arch.max_position and b.seq > b.arch.max_position:
        found.append(Problem("KV004", "warning", (
            f"--max-model-len {b.seq:,} is longer than the model's max_position_embeddings "
            f"({b.arch.max_position:,}); vLLM refuses such a --max-model-len")))
    return found


def warnings(b: Budget) -> list[str]:
    return [p.message for p in problems(b) if p.severity == "warning"]


def grid_axes(b: Budget) -> tuple[list[int], list[int]]:
    return sorted({*GRID_BATCHES, b.batch}), sorted({*GRID_SEQS, b.seq})


def to_dict(b: Budget, source: str) -> dict:
    a, s = b.arch, b.shape
    windows = sorted({w for w in b.windows if w is not None})
    data: dict = {
        "model": a.name,
        "source": source,
        "architecture": {
            "layers": a.layers, "hidden_size": a.hidden, "attention_heads": a.heads, "kv_heads": a.kv_heads,
            "head_dim": a.head_dim, "vocab_size": a.vocab, "tie_word_embeddings": a.tie_embeddings,
            "mla": None if a.mla is None else {"kv_lora_rank": a.mla.kv_lora_rank,
                                               "qk_rope_head_dim": a.mla.qk_rope_head_dim},
            "moe_experts": None if a.moe is None else a.moe.num_experts,
            "sliding_layers": sum(1 for w in b.windows if w is not None), "sliding_windows": windows,
            "parameters": a.param_count(),
        },
        "settings": {"batch": b.batch, "seq": b.seq, "dtype": b.dtype, "kv_dtype": b.kv_dtype, "tp": s.tp,
                     "block_size": b.block_size, "max_num_batched_tokens": b.max_num_batched_tokens},
        "kv_heads_per_gpu": s.kv_heads_per_gpu,
        "kv_heads_replicated": s.replicated,
        "kv_bytes_per_token_per_layer": s.bytes_per_token_layer,
        "kv_bytes_per_token": s.bytes_per_token,
        "kv_bytes_per_sequence": b.sequence_bytes(),
        "kv_bytes_total": b.total_bytes,
        "kv_bytes_total_without_windows": b.total_without_windows,
        "sliding_window_savings_bytes": b.window_savings,
        "weights_bytes": b.weights_bytes,
        "weights_bytes_per_gpu": b.weights_per_gpu,
        "warnings": warnings(b),
        "findings": [p.to_dict() for p in problems(b)],
    }
    if b.kv_memory is not None:
        batches, seqs = grid_axes(b)
        data.update({
            "memory": b.memory_source,
            "kv_memory_bytes": b.kv_memory,
            "fits": b.fits(b.batch, b.seq),
            "headroom_bytes": b.kv_memory - b.total_bytes,
            "max_batch": max(0, b.largest_batch()),
            "max_seq": b.longest_seq(),
            "kv_cache_tokens": b.cache_tokens(),
            "kv_cache_tokens_earlier_vllm": b.cache_tokens_by_groups(),
            "max_concurrency": round(b.max_concurrency(), 4),
            "vllm_starts": b.vllm_starts(),
            "vllm_log": vllm_log_lines(b),
            "grid": {"batches": batches, "seqs": seqs, "tight_above": TIGHT,
                     "cells": [[b.status(bs, sq, TIGHT) for sq in seqs] for bs in batches]},
        })
    return data


_CELL = {"fits": ("[green]+[/]", "+"), "tight": ("[yellow]~[/]", "~"), "no": ("[red]x[/]", "x")}


WIDTH = 80  # every line fits an 80-column terminal, wrapped between values, never inside one
LABEL = 22
_VALUE = re.compile(r"-?\d[\d,.]*(?:x| (?:GiB|GB|MiB|KiB|B|tokens))(?: \(-?\d[\d,.]* GB\))?")


def wrap(text: str, width: int = WIDTH, indent: int = 0, hanging: str = "  ") -> list[str]:
    """`text` in lines of at most `width` columns, the first `indent` columns left to the caller; a size or
    a count (`16.06 GiB (17.24 GB)`, `131,072 tokens`) is never split."""
    import textwrap

    glued = _VALUE.sub(lambda m: m.group(0).replace(" ", "\u00a0"), text)
    lines = textwrap.wrap(glued, width=width - indent, break_long_words=False, break_on_hyphens=False,
                          subsequent_indent=hanging) or [""]
    return [line.replace("\u00a0", " ") for line in lines]


def render_text(b: Budget, source: str, out: TextIO) -> None:
    from llmdoctor.limits import escape_markup as escape  # control characters from outside shown escaped
    from llmdoctor.report.render import make_console

    console = make_console(out)

    def row(label: str, text: str, style: str = "") -> None:
        for index, line in enumerate(wrap(text, indent=LABEL, hanging="")):
            shown = f"[{style}]{escape(line)}[/]" if style else escape(line)
            console.print(f"[dim]{escape(label if index == 0 else ''):<{LABEL}}[/]{shown}")

    def para(text: str, prefix: str = "", style: str = "") -> None:
        for index, line in enumerate(wrap(prefix + text)):
            if index == 0 and prefix and style:
                console.print(f"[{style}]{escape(prefix.rstrip())}[/] {escape(line[len(prefix):])}")
            else:
                console.print(escape(line))

    a, s = b.arch, b.shape
    if a.mla:
        kind = f"MLA latent {a.mla.kv_lora_rank}+{a.mla.qk_rope_head_dim}, not sharded by TP"
    else:
        kind = f"{a.kv_heads} kv heads × head_dim {a.head_dim}"
        if s.tp > 1:
            kind += f", {s.kv_heads_per_gpu} per GPU at tp={s.tp}" + (" (replicated)" if s.replicated else "")
    para(f"{a.name} ({source}): {a.layers} layers, {kind}; weights {b.dtype}, KV cache {b.kv_dtype}")
    if any(w is not None for w in b.windows):
        windows = sorted({w for w in b.windows if w is not None})
        para(f"sliding window {', '.join(f'{w:,}' for w in windows)} tokens on "
             f"{sum(1 for w in b.windows if w is not None)} of {a.layers} layers")
    row("KV per token", f"{s.bytes_per_token_layer:,} B per layer, {s.bytes_per_token:,} B all layers "
                        f"({format_size(s.bytes_per_token)}) per GPU")
    row(f"KV for {b.batch} × {b.seq:,}", f"{format_size(b.total_bytes)} per GPU (block size {b.block_size})")
    if b.window_savings:
        row("sliding windows save", format_size(b.window_savings))
    stored = (f"{b.dtype} matrices with float32 scales; embeddings, norms and routers in 16 bits"
              if b.dtype == "fp8" else b.dtype)
    row("weights", f"{format_size(b.weights_bytes)} ({a.param_count() / 1e9:,.2f}B params, {stored}), "
                   f"{format_size(b.weights_per_gpu)} per GPU")
    if b.kv_memory is not None:
        row("KV memory", f"{format_size(b.kv_memory)} per GPU ({b.memory_source['how']})")
        headroom = b.kv_memory - b.total_bytes
        if headroom < 0:
            row("verdict", f"does not fit (KV001), headroom {format_size(headroom)}", "bold red")
        elif not b.vllm_starts():
            row("verdict", f"fits, but vLLM refuses to start (KV002, below), headroom {format_size(headroom)}",
                "bold red")
        else:
            row("verdict", f"fits, headroom {format_size(headroom)}", "green")
        row("largest batch", f"{max(0, b.largest_batch()):,} at seq {b.seq:,}")
        longest = b.longest_seq()
        row("longest seq", "not limited by KV memory (every layer slides)" if longest is None
            else f"{longest:,} tokens at batch {b.batch}")
        for line in vllm_log_lines(b):
            if b.vllm_starts():
                row("vLLM would log", line)
            else:
                row("vLLM would fail", f"KV002 {line}", "bold red")
        note = older_vllm_note(b)
        if note:
            row("earlier vLLM V1 logs", note)
    for problem in problems(b):
        if problem.severity == "warning":
            para(problem.message, prefix=f"warning: {problem.rule} ", style="yellow")
    if b.kv_memory is not None:
        _render_grid(b, console)


def _render_grid(b: Budget, console) -> None:
    from rich.table import Table

    colour = console.is_terminal and not console.no_color
    batches, seqs = grid_axes(b)
    grid = Table(title="batch × sequence length: + fits, ~ tight (>90% of KV memory), x does not fit",
                 title_justify="left", box=None, pad_edge=False)
    grid.add_column("batch", justify="right")
    for sq in seqs:
        label = f"{sq // 1024}K" if sq % 1024 == 0 else str(sq)
        grid.add_column(f"[bold]{label}[/]" if sq == b.seq else label, justify="center")
    for bs in batches:
        cells = [_CELL[b.status(bs, sq, TIGHT)][0 if colour else 1] for sq in seqs]
        grid.add_row(f"[bold]{bs}[/]" if bs == b.batch else str(bs), *cells)
    console.print(grid)
