"""A local Hugging Face hub cache laid out as huggingface_hub lays it out (models--org--name/refs, snapshots)."""

from __future__ import annotations

import json
import lzma
from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
QWEN3 = FIXTURES / "tokenizers" / "qwen3"

# Qwen/Qwen3-8B config.json (the keys the arithmetic reads)
QWEN3_8B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "sliding_window": None, "use_sliding_window": False, "max_window_layers": 36,
}


@cache
def qwen3_tokenizer_json() -> bytes:
    return lzma.decompress((QWEN3 / "tokenizer.json.xz").read_bytes())


def add_snapshot(hub: Path, repo_id: str, commit: str, files: dict[str, bytes | str | dict],
                 refs: tuple[str, ...] = ("main",)) -> Path:
    base = hub / ("models--" + repo_id.replace("/", "--"))
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, dict):
            content = json.dumps(content)
        data = content.encode() if isinstance(content, str) else content
        (snap / name).write_bytes(data)
    (base / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (base / "refs" / ref).write_text(commit)
    return snap


def qwen3_files(with_config: bool = True) -> dict:
    files = {"tokenizer.json": qwen3_tokenizer_json(),
             "tokenizer_config.json": (QWEN3 / "tokenizer_config.json").read_bytes()}
    if with_config:
        files["config.json"] = QWEN3_8B_CONFIG
    return files
