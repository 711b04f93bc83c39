"""`llmdoctor gpu` end to end: the real NVML here (no driver on this machine) and a fake pynvml on PYTHONPATH."""

import json
import os
import shutil
from pathlib import Path

import pytest
from test_gpu import TWO_GPUS

HERE = Path(__file__).resolve().parent


def _real_nvml_available() -> bool:
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.fixture
def fake_gpu(tmp_path, cli):
    """Run `llmdoctor gpu` with tests/fake_pynvml.py installed as `pynvml` and a scenario of our choosing."""
    shutil.copy(HERE / "fake_pynvml.py", tmp_path / "pynvml.py")

    def run(scenario, *args):
        path = tmp_path / "scenario.json"
        path.write_text(json.dumps(scenario))
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
               "FAKE_PYNVML_SCENARIO": str(path)}
        return cli("gpu", *args, env=env)

    return run


@pytest.mark.skipif(_real_nvml_available(), reason="this machine has an NVIDIA driver")
def test_no_driver_one_line_exit_2(cli):
    r = cli("gpu")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no NVIDIA driver found" in r.stderr and "nvidia-smi" in r.stderr
    assert "Traceback" not in r.stderr
    j = cli("gpu", "--format", "json")
    assert j.returncode == 2
    assert "no NVIDIA driver found" in json.loads(j.stdout)["error"]


def test_text_report(fake_gpu):
    r = fake_gpu(TWO_GPUS)
    assert r.returncode == 0, r.stderr
    assert "driver 550.54.15, CUDA 12.4, 2 GPUs" in r.stdout
    assert "GPU 0 NVIDIA H100 80GB HBM3 GPU-aaaa" in r.stdout
    assert "pid 4242 python3 -m vllm.entrypoints.openai.api_server: 70.00 GiB" in r.stdout
    assert "pid 777 (name not visible): n/a" in r.stdout
    assert "(NVML v2)" in r.stdout


def test_json_report(fake_gpu):
    data = json.loads(fake_gpu(TWO_GPUS, "--format", "json").stdout)
    assert [g["uuid"] for g in data["gpus"]] == ["GPU-aaaa", "GPU-bbbb"]
    g0 = data["gpus"][0]
    assert g0["memory_api"] == "v2" and g0["reserved"] == 512 * 1024**2
    assert g0["processes"][1] == {"pid": 777, "used_memory": None, "name": None}


def test_model_check_tp1_one_gpu_free(fake_gpu):
    r = fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b", "--seq", "8192", "--format", "json")
    assert r.returncode == 0  # GPU 1 is free enough for tp=1
    placements = json.loads(r.stdout)["vllm"]["placements"]
    assert [p["starts"] for p in placements] == [False, True]
    assert placements[1]["kv_cache_tokens"] > 0 and placements[1]["max_concurrency"] > 1


def test_model_check_tp2_fails_exit_1(fake_gpu):
    r = fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b", "--tp", "2")
    assert r.returncode == 1
    assert "GPU 0: will not start" in r.stdout
    # 81559 MiB = 79.65 GiB; free = 79.65 − 0.5 − 70 = 9.15 GiB; 0.9 × 79.65 = 71.68 GiB
    assert "Free memory on device (9.15/79.65 GiB) on startup is less than desired GPU memory utilization " \
           "(0.9, 71.68 GiB)" in r.stdout
    # the exit code is explained in the text, not left to the reader
    assert "not enough GPUs (GPU003): tp=2 needs 2 devices where vLLM starts with room for one request; 1 of the 2 here " \
           "qualify" in r.stdout


def test_model_check_tp1_with_a_usable_gpu_has_no_shortage_line(fake_gpu):
    r = fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b")
    assert r.returncode == 0 and "not enough GPUs" not in r.stdout


@pytest.mark.parametrize("code, needle", [
    ("DRIVER_NOT_LOADED", "kernel driver is not loaded"),
    ("NO_PERMISSION", "Insufficient Permissions"),
    ("LIB_RM_VERSION_MISMATCH", "different versions"),
])
def test_nvml_errors_exit_2(fake_gpu, code, needle):
    r = fake_gpu({**TWO_GPUS, "init_error": code})
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    r = fake_gpu({**TWO_GPUS, "init_error": code}, "--format", "json")
    assert needle in json.loads(r.stdout)["error"]


def test_gpu_lost_exit_2(fake_gpu):
    scenario = json.loads(json.dumps(TWO_GPUS))
    scenario["gpus"][0]["lost"] = True
    r = fake_gpu(scenario)
    assert r.returncode == 2 and "GPU 0" in r.stderr and "fallen off the bus" in r.stderr


def test_bad_model_exit_2(fake_gpu):
    r = fake_gpu(TWO_GPUS, "--model", "gpt-5")
    assert r.returncode == 2 and "unknown model" in r.stderr and "Traceback" not in r.stderr


def test_gpu_help_documents_the_exit_codes(cli):
    r = cli("gpu", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "Exit 0" in text and "; 1 " in text and "; 2 " in text


def test_format_typo_is_named(cli):
    r = cli("gpu", "--format", "yaml")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr == "llmdoctor: error: --format 'yaml': choose one of text, json\n"


def test_model_check_defaults_to_the_models_context_length_as_vllm_does(fake_gpu):
    # vLLM's --max-model-len defaults to max_position_embeddings (131,072 for Llama-3.1), and it refuses to start
    # when one such request does not fit: "will it start" must be asked at that length unless --seq says otherwise
    r = fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b", "--format", "json")
    data = json.loads(r.stdout)["vllm"]
    assert data["seq"] == 131_072
    explicit = json.loads(fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b", "--seq", "131072", "--format", "json")
                          .stdout)["vllm"]
    assert data["placements"] == explicit["placements"]
    text = fake_gpu(TWO_GPUS, "--model", "llama-3.1-8b")
    assert "--max-model-len 131,072" in text.stdout
