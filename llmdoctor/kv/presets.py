"""Built-in models: the architecture keys of each model's published Hugging Face config.json.

Each entry is the subset of the published config that the arithmetic reads, copied from the model's
`config.json` on the Hugging Face Hub (repo named in `source`), so a preset goes through exactly the same
loader as `--config`. `published_params` is the total the model card / safetensors index states (language
model only), used by the tests to check the weights arithmetic.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from llmdoctor.errors import UserError
from llmdoctor.kv.arch import ModelArch, arch_from_config

_LLAMA3 = {"model_type": "llama", "vocab_size": 128256, "tie_word_embeddings": False,
           "num_key_value_heads": 8, "torch_dtype": "bfloat16", "max_position_embeddings": 131072}


@dataclass(frozen=True)
class Preset:
    name: str
    source: str  # Hugging Face repo whose config.json the keys come from
    published_params: float
    config: dict
    note: str = ""

    def arch(self) -> ModelArch:
        return arch_from_config(self.config, f"preset {self.name}", name=self.name)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("llama-2-7b", "meta-llama/Llama-2-7b-hf", 6.74e9, {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
        "tie_word_embeddings": False, "torch_dtype": "float16", "max_position_embeddings": 4096}),
    Preset("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 8.03e9, {
        **_LLAMA3, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32}),
    Preset("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 70.6e9, {
        **_LLAMA3, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64}),
    Preset("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 406e9, {
        **_LLAMA3, "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
        "num_attention_heads": 128}),
    Preset("mistral-7b", "mistralai/Mistral-7B-v0.1", 7.24e9, {
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 32768}),
    Preset("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 46.7e9, {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
        "num_experts_per_tok": 2, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "max_position_embeddings": 32768}),
    Preset("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 7.61e9, {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 32768}),
    Preset("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 72.7e9, {
        "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064,
        "use_sliding_window": False, "sliding_window": 131072,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 32768}),
    Preset("deepseek-v3", "deepseek-ai/DeepSeek-V3", 671e9, {
        "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": 128, "vocab_size": 129280, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
        "topk_method": "noaux_tc", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "max_position_embeddings": 163840,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}},
        note="671B main model; the Hub's 685B adds the 14B multi-token-prediction module"),
    Preset("gemma-2-9b", "google/gemma-2-9b", 9.24e9, {
        "model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000,
        "sliding_window": 4096, "tie_word_embeddings": True, "torch_dtype": "float32",
        "max_position_embeddings": 8192}),
    Preset("gemma-3-27b", "google/gemma-3-27b-it", 27.0e9, {
        "model_type": "gemma3", "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
            "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
            "vocab_size": 262208, "sliding_window": 1024, "sliding_window_pattern": 6}},
        note="language model only (Gemma 3 report: 1,416M embedding + 25,600M non-embedding); "
             "the 417M SigLIP vision tower is not counted"),
    Preset("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct", 3.82e9, {
        "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064, "sliding_window": 2047,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 4096}),
)}


def get_preset(name: str) -> Preset:
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    close = difflib.get_close_matches(key, PRESETS, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UserError(f"--model: unknown model {name!r}.{hint} `llmdoctor kv-budget --list-models` lists the "
                    "built-in models; any other model: its Hub id (org/name) from the local Hugging Face cache, "
                    "its folder, or its config.json with --model-config")
