"""`llmdoctor kv-budget --bs 16 --seq 4096` with no model: it asks the running server (fake vLLM, SGLang and TGI
servers answering in each engine's own formats: tests/support/engines.py says where each shape comes from)."""

from __future__ import annotations

import json

import pytest
from support.engines import (
    VLLM_LATEST_CACHE_FIELDS,
    VLLM_V1_CACHE_FIELDS,
    sglang_server,
    tgi_server,
    vllm_server,
)
from support.servers import free_port

from llmdoctor.kv import promtext


def ask(cli, url, *args, env=None):
    base = {"HF_HOME": "/nonexistent-hf-home", "LLMDOCTOR_URLS": url}
    return cli("kv-budget", "--bs", "16", "--seq", "4096", *args, env={**base, **(env or {})})


def ask_json(cli, url, *args, env=None):
    r = ask(cli, url, "--format", "json", *args, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r, json.loads(r.stdout)


# vLLM 0.10 line, Llama-3.1-8B: 27,056 blocks × 16 = 432,896 tokens; 16 × 4096 = 16 × 256 blocks = 65,536 tokens
# = 15.1%; 40% in use leaves 0.6 × 432,896 = 259,737 tokens: it fits now.
# vLLM's formula for its "Maximum concurrency" at max_model_len 32,768: 27,056 / (32,768 / 16) = 13.21x.
def test_vllm_fits_now_and_its_concurrency(cli):
    with vllm_server(usage=0.40, running=3, waiting=0) as server:
        r = ask(cli, server.url)
    assert r.returncode == 0, r.stderr
    assert ("16 × 4,096 needs 65,536 tokens = 15.1% of this server's KV cache (432,896 tokens in 27,056 blocks "
            "of 16); right now 40.0% is in use and 3 requests are running: it fits now") in r.stdout
    assert "vLLM's formula (blocks / blocks per request): Maximum concurrency for 32,768 tokens per request: " \
           "13.21x" in r.stdout
    assert "serving meta-llama/Llama-3.1-8B-Instruct (max_model_len 32,768)" in r.stdout


def test_vllm_latest_publishes_its_own_figures(cli):
    with vllm_server(version="v1-latest", cache=VLLM_LATEST_CACHE_FIELDS, usage=0.0) as server:
        r, data = ask_json(cli, server.url)
    assert r.returncode == 0
    assert data["server"]["kv_cache_tokens"] == 432_896  # the kv_cache_size_tokens label
    assert data["max_concurrency"] == 13.2109375 and data["max_concurrency_source"] == "vllm"
    assert data["verdict"] == "fits now" and data["server"]["usage"] == 0.0


def test_vllm_busy_fits_only_when_idle(cli):
    # 95% in use: 0.05 × 432,896 = 21,645 tokens free < 65,536
    with vllm_server(usage=0.95, running=40, waiting=7) as server:
        r = ask(cli, server.url)
    assert r.returncode == 0
    assert "right now 95.0% is in use and 40 requests are running (7 waiting): it fits only when idle" in r.stdout


def test_vllm_never_fits_exit_1(cli):
    # 128 × 4096 = 524,288 tokens > 432,896
    with vllm_server() as server:
        r = cli("kv-budget", "--bs", "128", "--seq", "4096", "--url", server.url, env={"HF_HOME": "/nonexistent"})
    assert r.returncode == 1
    assert "121.1% of this server's KV cache" in r.stdout and "it never fits" in r.stdout


def test_longer_than_max_model_len_never(cli):
    with vllm_server(max_model_len=2048) as server:
        r, data = ask_json(cli, server.url)
    assert r.returncode == 1 and data["verdict"] == "never"
    assert "longer than this server's max_model_len 2,048" in data["reason"]


def test_vllm_v0_old_metric_names(cli):
    # V0 (0.6): labels model_name only, vllm:gpu_cache_usage_perc; 1,952 blocks × 16 = 31,232 tokens
    with vllm_server(version="v0", usage=0.25) as server:
        _r, data = ask_json(cli, server.url)
    assert data["server"]["kv_cache_tokens"] == 31_232
    assert data["verdict"] == "never"  # 65,536 > 31,232
    assert "vllm:gpu_cache_usage_perc" in data["server"]["sources"]
    assert any("renamed vllm:kv_cache_usage_perc in 0.9" in n for n in data["server"]["notes"])


def test_vllm_early_v1_without_block_count_says_so_exit_2(cli):
    cache = {**VLLM_V1_CACHE_FIELDS, "num_gpu_blocks": None}
    with vllm_server(version="v1-0.8", cache=cache) as server:
        r, data = ask_json(cli, server.url)
    assert r.returncode == 2 and data["verdict"] == "unknown"
    assert any("num_gpu_blocks=None" in n for n in data["server"]["notes"])


def test_vllm_data_parallel_engines(cli):
    # 2 engines × 432,896 tokens; 8 requests each = 32,768 tokens; engine 1 is 95% full: only when idle
    with vllm_server(engines=2, usage_by_engine=[0.1, 0.95]) as server:
        _r, data = ask_json(cli, server.url)
    assert data["server"]["engines"] == 2 and data["server"]["kv_cache_tokens"] == 2 * 432_896
    assert data["verdict"] == "only when idle"


def test_vllm_needing_a_key(cli):
    with vllm_server(key="s3cret", usage=0.1) as server:
        r, data = ask_json(cli, server.url)
        assert r.returncode == 0
        # /v1/models refused (401), /metrics open: the model comes from the metrics' model_name label
        assert data["server"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert data["server"]["max_model_len"] is None
        assert any("needs an API key" in n for n in data["server"]["notes"])
        _r2, data2 = ask_json(cli, server.url, env={"VLLM_API_KEY": "s3cret"})
        assert data2["server"]["max_model_len"] == 32768
        assert ("/v1/models", "Bearer s3cret") in server.requests


def test_slow_server_times_out_exit_2(cli):
    with vllm_server(delay=1.5) as server:
        r = ask(cli, server.url, "--timeout", "0.3")
    assert r.returncode == 2
    assert "no answer within 0.3 s (--timeout)" in r.stderr


def test_url_with_nothing_listening_exit_2(cli):
    r = cli("kv-budget", "--url", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and "nothing answers at" in r.stderr


def test_sglang_with_metrics(cli):
    # SGLang pool 411,651 tokens (its log line), 10% in use: 65,536 tokens = 15.9% of it, fits now
    with sglang_server(max_total=411_651, usage=0.10, running=2) as server:
        r, data = ask_json(cli, server.url)
    assert r.returncode == 0
    assert data["server"]["engine"] == "sglang" and data["server"]["kv_cache_tokens"] == 411_651
    assert round(data["share"], 4) == round(65_536 / 411_651, 4) and data["verdict"] == "fits now"
    assert data["server"]["settings"]["mem_fraction_static"] == "0.836"


def test_sglang_without_metrics_fits_when_idle(cli):
    with sglang_server(max_total=411_651, metrics=False) as server:
        r, data = ask_json(cli, server.url)
    assert r.returncode == 0
    assert data["verdict"] == "fits when idle; current use unknown"
    assert any("--enable-metrics" in n for n in data["server"]["notes"])


def test_old_sglang_guarding_metrics_needs_the_key(cli):
    with sglang_server(key="k", metrics_open=False) as server:
        r = ask(cli, server.url)
        assert r.returncode == 2 and "needs an API key" in r.stderr
        r2 = ask(cli, server.url, "--api-key", "k")
    assert r2.returncode == 0 and "SGLang" in r2.stdout


@pytest.mark.parametrize("version, reserved", [("3.3.7", 150_000), ("2.0.4", 150_000)])
def test_tgi(cli, version, reserved):
    # TGI: 200,000 tokens in the batch budget; the running batch reserves 150,000: 50,000 free < 65,536
    with tgi_server(version=version, max_batch_total=200_000, reserved=reserved, batch=5) as server:
        _r, data = ask_json(cli, server.url)
    assert data["server"]["engine"] == "tgi" and data["server"]["kv_cache_tokens"] == 200_000
    assert data["verdict"] == "only when idle" and data["server"]["running"] == 5
    assert data["server"]["max_model_len"] == 4096


def test_prometheus_parser_escapes_and_specials():
    text = ('# HELP x doc\n# TYPE x gauge\nx{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 1.0\n'
            'y NaN\nz +Inf 1700000000\n# EOF\n')
    samples = promtext.parse(text)
    assert samples[0].labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert samples[1].value != samples[1].value and samples[2].value == float("inf")
    with pytest.raises(promtext.MetricsFormatError):
        promtext.parse('x{a="unterminated} 1\n')
