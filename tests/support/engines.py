"""Fake vLLM, SGLang and TGI servers answering in each engine's exact formats, on 127.0.0.1.

The bodies are built the way each engine builds them (the file each shape comes from is named beside it):
- vLLM `/v1/models`: `ModelList(data=[ModelCard(...)])` (vllm/entrypoints/openai/protocol.py) serialised by
  pydantic: `{"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "vllm", "root",
  "parent", "max_model_len", "permission": [...]}]}`.
- vLLM `/metrics`: a prometheus_client registry holding the gauges vLLM registers, with the same names,
  documentation, label names and multiprocess modes, rendered by `generate_latest` as vLLM's
  `make_asgi_app` does; `vllm:cache_config_info` carries `str(value)` of every CacheConfig field
  (`CacheConfig.metrics_info`), plus `engine` in V1 (vllm/v1/metrics/loggers.py; V0 vllm/engine/metrics.py).
- SGLang: `/v1/models` ModelCard(id, root, max_model_len) with owned_by "sglang"; `/get_server_info` =
  ServerArgs fields + scheduler info + internal_states + version (python/sglang/srt/entrypoints/http_server.py);
  `/metrics` gauges from python/sglang/srt/metrics/collector.py.
- TGI: `/info` (router/src/lib.rs `Info`), `/v1/models` (server.rs `openai_get_model_info`), `/metrics` as the
  Rust metrics-exporter-prometheus renders gauges (`# HELP`, `# TYPE name gauge`, `name value`).

Auth as the engines do it: vLLM guards only paths starting with /v1 (api_server.py `authentication`);
SGLang guards everything but /health (older releases) or /health and /metrics (newer); TGI never guards these.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VLLM_V1_CACHE_FIELDS = {  # CacheConfig fields of the 0.10 line (vllm/config.py, later vllm/config/cache.py)
    "block_size": 16, "gpu_memory_utilization": 0.9, "swap_space": 4, "cache_dtype": "auto",
    "is_attention_free": False, "num_gpu_blocks_override": None, "sliding_window": None,
    "enable_prefix_caching": True, "prefix_caching_hash_algo": "sha256", "cpu_offload_gb": 0,
    "calculate_kv_scales": False, "kv_sharing_fast_prefill": False, "mamba_cache_dtype": "auto",
    "mamba_ssm_cache_dtype": "auto", "num_gpu_blocks": 27_056, "num_cpu_blocks": None,
    "kv_cache_memory_bytes": None,
}
VLLM_LATEST_CACHE_FIELDS = {  # recent vllm/config/cache.py: the group-aware capacity joins the labels
    **VLLM_V1_CACHE_FIELDS, "effective_attention_block_size": 16, "kv_cache_size_tokens": 432_896,
    "kv_cache_max_concurrency": 13.2109375,
}
VLLM_V0_CACHE_FIELDS = {  # vllm/config.py CacheConfig (V0 engine, 0.6)
    "block_size": 16, "gpu_memory_utilization": 0.9, "swap_space_bytes": 4294967296,
    "num_gpu_blocks_override": None, "cache_dtype": "auto", "is_attention_free": False,
    "sliding_window": None, "enable_prefix_caching": False, "cpu_offload_gb": 0, "num_gpu_blocks": 1952,
    "num_cpu_blocks": 2048,
}


def model_card(model: str, max_model_len: int | None, owned_by: str = "vllm") -> dict:
    now = int(time.time())
    card = {"id": model, "object": "model", "created": now, "owned_by": owned_by, "root": model,
            "parent": None, "max_model_len": max_model_len}
    if owned_by == "vllm":
        card["permission"] = [{
            "id": "modelperm-0f1e2d3c4b5a", "object": "model_permission", "created": now,
            "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
            "organization": "*", "group": None, "is_blocking": False}]
    return {"object": "list", "data": [card]}


def vllm_metrics(model: str, *, version: str = "v1", cache: dict | None = None, usage: float = 0.0,
                 running: int = 0, waiting: int = 0, engines: int = 1,
                 usage_by_engine: list[float] | None = None) -> bytes:
    """/metrics of a vLLM server. version: "v1" (0.10+: kv_cache_usage_perc and the deprecated
    gpu_cache_usage_perc), "v1-0.8" (only gpu_cache_usage_perc; cache_config_info before the blocks are
    known), "v0" (labels model_name only, num_requests_swapped)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()
    v0 = version == "v0"
    labelnames = ["model_name"] if v0 else ["model_name", "engine"]
    fields = dict(cache or (VLLM_V0_CACHE_FIELDS if v0 else VLLM_V1_CACHE_FIELDS))
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                 labelnames=list(fields) + ([] if v0 else ["engine"]), registry=registry)
    gauges = {
        "running": Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                         labelnames=labelnames, registry=registry),
        "waiting": Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                         labelnames=labelnames, registry=registry),
    }
    if v0:
        gauges["swapped"] = Gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.",
                                  labelnames=labelnames, registry=registry)
    usage_names = {"v1": ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"],
                   "v1-latest": ["vllm:kv_cache_usage_perc"],
                   "v1-0.8": ["vllm:gpu_cache_usage_perc"], "v0": ["vllm:gpu_cache_usage_perc"]}[version]
    usage_gauges = [Gauge(name, "KV-cache usage. 1 means 100 percent usage.", labelnames=labelnames,
                          registry=registry) for name in usage_names]
    per_engine_usage = usage_by_engine or [usage] * engines
    for index in range(1 if v0 else engines):
        key = [model] if v0 else [model, str(index)]
        labels = {k: str(v) for k, v in fields.items()}
        if not v0:
            labels["engine"] = str(index)
        info.labels(**labels).set(1)
        gauges["running"].labels(*key).set(running / (1 if v0 else engines))
        gauges["waiting"].labels(*key).set(waiting / (1 if v0 else engines))
        if v0:
            gauges["swapped"].labels(*key).set(0)
        for g in usage_gauges:
            g.labels(*key).set(per_engine_usage[index])
    return generate_latest(registry)


def sglang_metrics(model: str, *, max_total: int | None, usage: float, running: int, waiting: int,
                   tp: int = 1) -> bytes:
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()
    labels = ["model_name", "tp_rank"]
    defs = [("sglang:num_running_reqs", "The number of running requests.", running),
            ("sglang:num_used_tokens", "The number of used tokens.", int(usage * (max_total or 0))),
            ("sglang:token_usage", "The token usage.", usage),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", waiting)]
    if max_total is not None:
        defs.append(("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
                     max_total))
    for name, doc, value in defs:
        gauge = Gauge(name, doc, labelnames=labels, registry=registry)
        for rank in range(tp):
            gauge.labels(model, str(rank)).set(value)
    return generate_latest(registry)


def sglang_server_info(model: str, *, max_total: int, context_length: int) -> dict:
    return {
        "model_path": model, "tokenizer_path": model, "served_model_name": model, "context_length": None,
        "dtype": "auto", "kv_cache_dtype": "auto", "mem_fraction_static": 0.836, "max_running_requests": None,
        "max_total_tokens": None, "chunked_prefill_size": 8192, "page_size": 1, "tp_size": 1, "dp_size": 1,
        "host": "127.0.0.1", "port": 30000, "api_key": None, "enable_metrics": True,
        "max_total_num_tokens": max_total, "max_req_input_len": context_length - 5,
        "internal_states": [{"attention_backend": "fa3", "last_gen_throughput": 0.0}], "version": "0.5.3",
    }


def tgi_info(model: str, *, version: str = "3.3.7", max_total_tokens: int = 4096,
             max_batch_total_tokens: int | None = None) -> dict:
    info = {"model_id": model, "model_sha": "e1945c40cd546c78e41f1151f4db032b271faeaa",
            "model_pipeline_tag": "text-generation", "max_concurrent_requests": 128, "max_best_of": 2,
            "max_stop_sequences": 4, "max_total_tokens": max_total_tokens, "validation_workers": 2,
            "max_client_batch_size": 4, "router": "text-generation-router", "version": version, "sha": None,
            "docker_label": None}
    if max_batch_total_tokens is None:
        info["max_input_tokens"] = max_total_tokens - 1
    else:  # 2.0: the batch budget was in /info, the input limit named max_input_length
        info.update({"model_dtype": "torch.float16", "model_device_type": "cuda",
                     "max_input_length": max_total_tokens - 1, "waiting_served_ratio": 0.3,
                     "max_batch_total_tokens": max_batch_total_tokens, "max_waiting_tokens": 20,
                     "max_batch_size": None})
    return info


def tgi_metrics(*, max_batch_total: int | None, reserved: int, batch: int, queue: int) -> bytes:
    lines = []
    gauges = [("tgi_batch_current_size", "Current batch size", batch),
              ("tgi_queue_size", "Current queue size", queue),
              ("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", reserved)]
    if max_batch_total is not None:
        gauges.append(("tgi_batch_max_total_tokens", "Maximum amount of tokens in total.", max_batch_total))
    for name, doc, value in gauges:
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name} {value}", ""]
    return "\n".join(lines).encode()


class EngineServer:
    """A threaded HTTP server answering `routes` ({path: (status, content_type, body bytes)}).

    `key`: the Bearer key; `guarded(path)` says which paths need it. `delay`: seconds before every answer.
    """

    def __init__(self, routes: dict, *, key: str | None = None, guarded=None, delay: float = 0.0) -> None:
        self.routes, self.key, self.delay = routes, key, delay
        self.guarded = guarded or (lambda path: True)
        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append((self.path, self.headers.get("Authorization")))
                if outer.delay:
                    time.sleep(outer.delay)
                if outer.key and outer.guarded(self.path) and \
                        self.headers.get("Authorization") != f"Bearer {outer.key}":
                    self._send(401, "application/json", json.dumps({"error": "Unauthorized"}).encode())
                    return
                status, ctype, body = outer.routes.get(self.path, (404, "application/json",
                                                                   b'{"detail":"Not Found"}'))
                self._send(status, ctype, body)

            def _send(self, status: int, ctype: str, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


JSON = "application/json"
PROM = "text/plain; version=0.0.4; charset=utf-8"


def vllm_server(model: str = "meta-llama/Llama-3.1-8B-Instruct", max_model_len: int = 32768, *,
                key: str | None = None, delay: float = 0.0, **metrics) -> EngineServer:
    routes = {"/v1/models": (200, JSON, json.dumps(model_card(model, max_model_len)).encode()),
              "/metrics": (200, PROM, vllm_metrics(model, **metrics))}
    return EngineServer(routes, key=key, guarded=lambda p: p.startswith("/v1"), delay=delay)


def sglang_server(model: str = "Qwen/Qwen2.5-7B-Instruct", context_length: int = 32768, *,
                  max_total: int = 1_000_000, usage: float = 0.0, running: int = 0, waiting: int = 0,
                  metrics: bool = True, metric_max_total: bool = True, key: str | None = None,
                  metrics_open: bool = True) -> EngineServer:
    card = model_card(model, context_length, owned_by="sglang")
    routes = {"/v1/models": (200, JSON, json.dumps(card).encode()),
              "/get_server_info": (200, JSON, json.dumps(sglang_server_info(model, max_total=max_total,
                                                                           context_length=context_length)).encode())}
    if metrics:
        routes["/metrics"] = (200, PROM, sglang_metrics(model, max_total=max_total if metric_max_total else None,
                                                        usage=usage, running=running, waiting=waiting))

    def guarded(path: str) -> bool:
        return not (path.startswith("/health") or (metrics_open and path.startswith("/metrics")))

    return EngineServer(routes, key=key, guarded=guarded)


def tgi_server(model: str = "HuggingFaceH4/zephyr-7b-beta", *, version: str = "3.3.7",
               max_total_tokens: int = 4096, max_batch_total: int = 200_000, reserved: int = 0,
               batch: int = 0, queue: int = 0) -> EngineServer:
    old = version.startswith("2.0")
    info = tgi_info(model, version=version, max_total_tokens=max_total_tokens,
                    max_batch_total_tokens=max_batch_total if old else None)
    routes = {"/info": (200, JSON, json.dumps(info).encode()),
              "/metrics": (200, "text/plain", tgi_metrics(max_batch_total=None if old else max_batch_total,
                                                           reserved=reserved, batch=batch, queue=queue))}
    if not old:
        routes["/v1/models"] = (200, JSON, json.dumps({"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": model}]}).encode())
    return EngineServer(routes)
