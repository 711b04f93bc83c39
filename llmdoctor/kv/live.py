"""Ask the running inference server what it serves and how full its KV cache is: vLLM, SGLang or TGI.

What each engine publishes (read from its source; docs/kv.md has the versions and the tests use each shape):

vLLM (`vllm/entrypoints/openai/protocol.py` ModelCard, newer `vllm/entrypoints/serve/engine/protocol.py`):
  GET /v1/models -> {"data": [{"id", "root", "max_model_len", "owned_by": "vllm", ...}]}. With --api-key the
  /v1 paths answer 401 {"error": "Unauthorized"}; /metrics stays open (api_server.py `authentication`).
  GET /metrics (Prometheus, `vllm/v1/metrics/loggers.py`; V0 `vllm/engine/metrics.py`):
  - `vllm:cache_config_info` is a gauge set to 1 whose labels are every CacheConfig field as `str(value)`
    (`CacheConfig.metrics_info`): block_size, num_gpu_blocks ("None" until profiled in early V1),
    gpu_memory_utilization, cache_dtype, sliding_window...; recent releases add kv_cache_size_tokens and
    kv_cache_max_concurrency (vLLM's own group-aware "GPU KV cache size" and "Maximum concurrency"); V1
    adds an `engine` label per data-parallel engine.
  - `vllm:kv_cache_usage_perc` (a fraction, 1 = full; before 0.9 `vllm:gpu_cache_usage_perc`, V0 too),
    `vllm:num_requests_running`, `vllm:num_requests_waiting` (labels model_name, and engine in V1).
SGLang (`python/sglang/srt/entrypoints/http_server.py`, `metrics/collector.py`):
  GET /v1/models -> ModelCard(id=served_model_name, root, max_model_len=context_len, owned_by "sglang").
  GET /get_server_info -> the ServerArgs fields (mem_fraction_static, context_length, page_size, tp_size,
  kv_cache_dtype, ...) + scheduler info (max_total_num_tokens, max_req_input_len) + internal_states + version.
  GET /metrics only with --enable-metrics: `sglang:token_usage` (fraction of the token pool in use),
  `sglang:num_used_tokens`, `sglang:num_running_reqs`, `sglang:num_queue_reqs`, newer
  `sglang:max_total_num_tokens`. With --api-key every path but /health (newer: and /metrics) needs the key.
TGI (`router/src/server.rs`, `backends/v3/src/{lib,backend,queue}.rs`):
  GET /info -> {model_id, max_input_tokens (<= 2.0: max_input_length), max_total_tokens, version, router,
  and up to 2.2 max_batch_total_tokens}; GET /v1/models -> {"data": [{"id": model_id, ...}]};
  GET /metrics: `tgi_batch_max_total_tokens` (2.3+), `tgi_batch_current_max_tokens` (tokens the running
  batch reserves), `tgi_batch_current_size`, `tgi_queue_size`. These routes never need the key.
"""

from __future__ import annotations

import json
import math
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from llmdoctor.errors import UserError
from llmdoctor.kv import promtext

DEFAULT_TIMEOUT = 2.0  # seconds per request: a local server answers these in milliseconds
DEFAULT_URLS = ("http://127.0.0.1:8000", "http://127.0.0.1:30000", "http://127.0.0.1:8080")  # vLLM, SGLang, TGI
_MAX_BODY = 16 * 2**20


class Unreachable(Exception):
    """Nothing listens there (connection refused, unknown host): try the next place."""


@dataclass
class Response:
    status: int
    body: bytes

    def json(self) -> object | None:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # a server's garbage (too deep, huge ints)
            return None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Client:
    """GET requests to one server with a short timeout; the key, if any, as `Authorization: Bearer`."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"--url {base_url!r}: give the server's address, e.g. http://127.0.0.1:8000")
        self.scheme, self.host = parts.scheme, parts.hostname
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UserError(f"--url {base_url!r}: the port is not a number") from None
        self.prefix = parts.path.rstrip("/")
        for tail in ("/v1/models", "/v1", "/metrics"):  # a pasted endpoint: keep the server's root
            self.prefix = self.prefix.removesuffix(tail)
        self.url = f"{parts.scheme}://{parts.netloc}{self.prefix}"
        self.api_key = api_key
        self.timeout = timeout

    def get(self, path: str) -> Response:
        import http.client

        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        headers = {"Accept": "application/json, text/plain;q=0.9", "User-Agent": "llmdoctor"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            conn.request("GET", self.prefix + path, headers=headers)
            reply = conn.getresponse()
            body = reply.read(_MAX_BODY + 1)
            return Response(reply.status, body[:_MAX_BODY])
        except (ConnectionRefusedError, socket.gaierror) as err:
            raise Unreachable(f"{self.url}: {err.strerror or err}") from None
        except TimeoutError:
            raise UserError(f"{self.url}{path}: no answer within {self.timeout:g} s (--timeout); the server is "
                            "up but busy or stuck: retry with a longer --timeout") from None
        except (OSError, http.client.HTTPException) as err:
            raise UserError(f"{self.url}{path}: {type(err).__name__}: {err}") from None
        finally:
            conn.close()


# ---------------------------------------------------------------------------------------------- the facts


@dataclass
class EngineCache:
    """One engine's KV cache (vLLM data parallelism runs several, each with its own)."""

    capacity_tokens: int | None = None
    blocks: int | None = None
    block_size: int | None = None
    usage: float | None = None  # fraction in use, 0..1
    running: int | None = None
    waiting: int | None = None
    max_concurrency: float | None = None  # vLLM's own figure at max_model_len, when published


@dataclass
class Server:
    engine: str  # "vllm", "sglang", "tgi"
    url: str
    model: str | None = None
    max_model_len: int | None = None
    engines: list[EngineCache] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # what the server says of its configuration
    version: str | None = None
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # the endpoints and metric names read

    @property
    def capacity_tokens(self) -> int | None:
        caps = [e.capacity_tokens for e in self.engines]
        return sum(caps) if caps and all(c is not None for c in caps) else None  # type: ignore[misc]

    @property
    def usage(self) -> float | None:
        if not self.engines or any(e.usage is None or e.capacity_tokens is None for e in self.engines):
            return None
        used = sum(e.usage * e.capacity_tokens for e in self.engines)  # type: ignore[operator]
        return used / self.capacity_tokens if self.capacity_tokens else None

    def total(self, what: str) -> int | None:
        values = [getattr(e, what) for e in self.engines]
        return sum(values) if values and all(v is not None for v in values) else None


def _as_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 0 else None


def _as_float(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def models(client: Client, server_notes: list[str]) -> tuple[str | None, int | None, str | None, int]:
    """(model id, max_model_len, owned_by, status) from /v1/models."""
    reply = client.get("/v1/models")
    if reply.status == 401:
        server_notes.append("/v1/models needs an API key (401): pass --api-key or set OPENAI_API_KEY / "
                            "VLLM_API_KEY; the model and its max_model_len come from elsewhere")
        return None, None, None, 401
    data = reply.json() if reply.status == 200 else None
    cards = data.get("data") if isinstance(data, dict) else None
    if not isinstance(cards, list) or not cards or not isinstance(cards[0], dict):
        return None, None, None, reply.status
    base = [c for c in cards if isinstance(c, dict) and c.get("max_model_len") is not None] or cards
    card = base[0]
    if len(base) > 1:
        server_notes.append(f"the server lists {len(base)} models; answering for the first, {card.get('id')}")
    length = card.get("max_model_len")
    return (str(card.get("id")) if card.get("id") is not None else None,
            length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None,
            str(card.get("owned_by")) if card.get("owned_by") is not None else None, reply.status)


def _metrics(client: Client) -> tuple[list[promtext.Sample] | None, int]:
    reply = client.get("/metrics")
    if reply.status != 200:
        return None, reply.status
    try:
        return promtext.parse(reply.text), 200
    except promtext.MetricsFormatError as err:
        raise UserError(f"{client.url}/metrics: not Prometheus text ({err})") from None


def _by_engine(samples: list[promtext.Sample]) -> dict[str, float]:
    found: dict[str, float] = {}
    for s in samples:
        key = s.labels.get("engine", "0") or "0"
        found[key] = found.get(key, 0.0) + s.value
    return found


def _read_vllm(server: Server, samples: list[promtext.Sample]) -> None:
    info = promtext.select(samples, "vllm:cache_config_info")
    usage = promtext.select(samples, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    running = promtext.select(samples, "vllm:num_requests_running")
    waiting = promtext.select(samples, "vllm:num_requests_waiting")
    server.sources += [found[0] for found in (info, usage, running, waiting) if found]
    per_engine: dict[str, EngineCache] = {}
    if info:
        for s in info[1]:
            key = s.labels.get("engine", "0") or "0"
            cache = per_engine.setdefault(key, EngineCache())
            cache.block_size = _as_int(s.labels.get("block_size"))
            cache.blocks = _as_int(s.labels.get("num_gpu_blocks"))
            tokens = _as_int(s.labels.get("kv_cache_size_tokens"))
            cache.capacity_tokens = tokens if tokens is not None else (
                cache.blocks * cache.block_size if cache.blocks is not None and cache.block_size else None)
            cache.max_concurrency = _as_float(s.labels.get("kv_cache_max_concurrency"))
            for label in ("gpu_memory_utilization", "cache_dtype", "block_size", "sliding_window",
                          "enable_prefix_caching", "kv_cache_memory_bytes", "num_gpu_blocks_override"):
                value = s.labels.get(label)
                if value not in (None, "None", ""):
                    server.settings[label] = value  # type: ignore[assignment]
        if any(c.blocks is None for c in per_engine.values()):
            server.notes.append("vllm:cache_config_info has num_gpu_blocks=None (this vLLM publishes it before "
                                "profiling the cache): the capacity is unknown; read 'GPU KV cache size' from "
                                "the server log and pass it with --kv-mem, or upgrade vLLM")
    else:
        server.notes.append("/metrics has no vllm:cache_config_info: the capacity is unknown")
    for found, attr in ((usage, "usage"), (running, "running"), (waiting, "waiting")):
        if not found:
            continue
        for key, value in _by_engine(found[1]).items():
            cache = per_engine.setdefault(key, EngineCache())
            setattr(cache, attr, value if attr == "usage" else int(value))
    if usage and usage[0] == "vllm:gpu_cache_usage_perc":
        server.notes.append("this vLLM publishes the older vllm:gpu_cache_usage_perc (renamed "
                            "vllm:kv_cache_usage_perc in 0.9)")
    server.engines = [per_engine[k] for k in sorted(per_engine, key=lambda k: (len(k), k))]
    if server.model is None:
        names = {s.labels.get("model_name") for s in samples if s.name.startswith("vllm:") and
                 s.labels.get("model_name")}
        if len(names) == 1:
            server.model = names.pop()
            server.sources.append("model_name label")


def _read_sglang(server: Server, client: Client, samples: list[promtext.Sample] | None) -> None:
    reply = client.get("/get_server_info")
    info = reply.json() if reply.status == 200 else None
    cache = EngineCache(block_size=1)
    if isinstance(info, dict):
        server.sources.append("/get_server_info")
        cache.capacity_tokens = _as_int(str(info.get("max_total_num_tokens"))) \
            if info.get("max_total_num_tokens") is not None else None
        page = info.get("page_size")
        if isinstance(page, int) and page > 0:
            cache.block_size = page
        for key in ("mem_fraction_static", "context_length", "tp_size", "dp_size", "kv_cache_dtype",
                    "page_size", "max_running_requests", "chunked_prefill_size"):
            if info.get(key) is not None:
                server.settings[key] = str(info[key])
        version = info.get("version")
        server.version = str(version) if version is not None else None
        if server.model is None and info.get("served_model_name"):
            server.model = str(info["served_model_name"])
        if server.max_model_len is None and isinstance(info.get("context_length"), int):
            server.max_model_len = info["context_length"]
    elif reply.status == 401:
        server.notes.append("/get_server_info needs the API key (401): pass --api-key")
    if samples:
        total = promtext.select(samples, "sglang:max_total_num_tokens")
        usage = promtext.select(samples, "sglang:token_usage")
        running = promtext.select(samples, "sglang:num_running_reqs")
        waiting = promtext.select(samples, "sglang:num_queue_reqs")
        server.sources += [found[0] for found in (total, usage, running, waiting) if found]
        if total and cache.capacity_tokens is None:
            cache.capacity_tokens = int(max(s.value for s in total[1]))
        if usage:
            cache.usage = max(s.value for s in usage[1])  # every TP rank reports the same pool
        if running:
            cache.running = int(max(s.value for s in running[1]))
        if waiting:
            cache.waiting = int(max(s.value for s in waiting[1]))
    else:
        server.notes.append("SGLang serves /metrics only with --enable-metrics: the current use is unknown")
    server.engines = [cache]


def _read_tgi(server: Server, client: Client, samples: list[promtext.Sample] | None) -> None:
    reply = client.get("/info")
    info = reply.json() if reply.status == 200 else None
    cache = EngineCache(block_size=1)
    if isinstance(info, dict):
        server.sources.append("/info")
        server.model = server.model or (str(info["model_id"]) if info.get("model_id") else None)
        if isinstance(info.get("max_total_tokens"), int):
            server.max_model_len = info["max_total_tokens"]
        if isinstance(info.get("max_batch_total_tokens"), int):
            cache.capacity_tokens = info["max_batch_total_tokens"]
        server.version = str(info["version"]) if info.get("version") else None
        for key in ("max_input_tokens", "max_input_length", "max_total_tokens", "max_concurrent_requests",
                    "max_batch_total_tokens"):
            if info.get(key) is not None:
                server.settings[key] = str(info[key])
    if samples:
        total = promtext.select(samples, "tgi_batch_max_total_tokens")
        reserved = promtext.select(samples, "tgi_batch_current_max_tokens")
        running = promtext.select(samples, "tgi_batch_current_size")
        waiting = promtext.select(samples, "tgi_queue_size")
        server.sources += [found[0] for found in (total, reserved, running, waiting) if found]
        if total:
            cache.capacity_tokens = int(total[1][0].value)
        if reserved and cache.capacity_tokens:
            cache.usage = min(1.0, reserved[1][0].value / cache.capacity_tokens)
        if running:
            cache.running = int(running[1][0].value)
        if waiting:
            cache.waiting = int(waiting[1][0].value)
    server.engines = [cache]


def ask(base_url: str, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Server:
    """What the server at `base_url` serves; Unreachable when nothing listens there."""
    client = Client(base_url, api_key, timeout)
    notes: list[str] = []
    model, length, owner, models_status = models(client, notes)
    samples, metrics_status = _metrics(client)
    names = {s.name.split(":")[0] if ":" in s.name else s.name.split("_")[0] for s in samples or []}
    if "vllm" in names or owner == "vllm":
        engine = "vllm"
    elif "sglang" in names or owner == "sglang":
        engine = "sglang"
    elif "tgi" in names:
        engine = "tgi"
    else:
        tgi = client.get("/info")
        data = tgi.json() if tgi.status == 200 else None
        if isinstance(data, dict) and "max_total_tokens" in data:
            engine = "tgi"
        elif models_status == 401 or metrics_status == 401:
            raise UserError(f"{client.url}: the server needs an API key (401): pass --api-key, or set "
                            "OPENAI_API_KEY / VLLM_API_KEY")
        elif models_status == 200 and model:
            raise UserError(f"{client.url}: an OpenAI-compatible server serving {model}, but not one llmdoctor "
                            "knows how to read the KV cache of (vLLM, SGLang, TGI); pass the model with --model")
        else:
            raise UserError(f"{client.url}: answered, but not as vLLM, SGLang or TGI (/v1/models {models_status}, "
                            f"/metrics {metrics_status})")
    server = Server(engine, client.url, model, length, notes=notes)
    if model is not None:
        server.sources.append("/v1/models")
    if engine == "vllm":
        if samples is None:
            hint = " (401: pass --api-key)" if metrics_status == 401 else ""
            raise UserError(f"{client.url}/metrics answered {metrics_status}{hint}: vLLM's cache configuration "
                            "and load are published there")
        _read_vllm(server, samples)
    elif engine == "sglang":
        _read_sglang(server, client, samples)
    else:
        _read_tgi(server, client, samples)
    return server


def probe_urls(environ: dict[str, str] | None = None) -> list[str]:
    """Where to look when no --url is given: `LLMDOCTOR_URLS` (comma-separated), else the engines' usual ports."""
    import os

    env = os.environ if environ is None else environ
    listed = [u.strip() for u in env.get("LLMDOCTOR_URLS", "").split(",") if u.strip()]
    return listed or list(DEFAULT_URLS)


def discover(url: str | None, api_key: str | None, timeout: float) -> Server | None:
    """The server at `url`; with no url, the first that answers where `probe_urls` says to look."""
    if url:
        try:
            return ask(url, api_key, timeout)
        except Unreachable as err:
            raise UserError(f"--url: nothing answers at {err}") from None
    for candidate in probe_urls():
        try:
            return ask(candidate, api_key, timeout)
        except Unreachable:
            continue
    return None


# ---------------------------------------------------------------------------------------------- the answer


@dataclass
class LiveAnswer:
    server: Server
    batch: int
    seq: int
    need_tokens: int  # what the batch holds in the cache, in the engine's units (whole blocks for vLLM)
    capacity_tokens: int | None
    share: float | None  # need / capacity
    verdict: str  # "fits now" / "only when idle" / "never" / "fits when idle; current use unknown" / "unknown"
    reason: str
    concurrency_at_max_len: float | None = None
    concurrency_at_seq: float | None = None
    concurrency_from: str | None = None  # "vllm" (published) or "formula"

    @property
    def exit_code(self) -> int:
        """1 the batch never fits; 2 the server does not say enough to answer; 0 otherwise."""
        return {"never": 1, "unknown": 2}.get(self.verdict, 0)


def answer(server: Server, batch: int, seq: int) -> LiveAnswer:
    """Does `batch` sequences of `seq` tokens fit this server's KV cache now, only when idle, or never?"""
    engines = server.engines or [EngineCache()]
    block = engines[0].block_size or 1
    per_request = -(-seq // block) * block
    need = batch * per_request
    capacity = server.capacity_tokens
    share = need / capacity if capacity else None
    usage = server.usage
    result = LiveAnswer(server, batch, seq, need, capacity, share, "unknown", "")
    blocks = server.total("blocks")
    if blocks is not None and server.engine == "vllm":
        length = server.max_model_len
        published = [e.max_concurrency for e in engines]
        if all(p is not None for p in published):
            result.concurrency_at_max_len, result.concurrency_from = sum(published), "vllm"  # type: ignore[arg-type]
        elif length:
            result.concurrency_at_max_len = blocks / -(-length // block)
            result.concurrency_from = "formula"
        result.concurrency_at_seq = blocks / -(-seq // block)
    if server.max_model_len and seq > server.max_model_len:
        result.verdict = "never"
        result.reason = (f"each request of {seq:,} tokens is longer than this server's max_model_len "
                         f"{server.max_model_len:,}: the server rejects it")
        return result
    if capacity is None:
        result.reason = "the server does not say how large its KV cache is"
        return result
    share_per_engine = -(-batch // len(engines))  # requests spread evenly over data-parallel engines
    if any(e.capacity_tokens is not None and share_per_engine * per_request > e.capacity_tokens for e in engines):
        result.verdict = "never"
        result.reason = "more than the whole cache"
        return result
    if usage is None:
        result.verdict = "fits when idle; current use unknown"
        result.reason = "the server does not publish how much of its cache is in use"
        return result
    free_now = all(share_per_engine * per_request <= (1 - (e.usage or 0.0)) * (e.capacity_tokens or 0)
                   for e in engines)
    result.verdict = "fits now" if free_now else "only when idle"
    result.reason = "in the free part of the cache" if free_now else "not in what is free right now"
    return result
