"""`llmdoctor.gpu` against a faithful fake of nvidia-ml-py's pynvml (tests/fake_pynvml.py)."""

import copy

import fake_pynvml as nvml
import pytest

from llmdoctor.gpu import NvmlUnavailable, collect, describe_error, plan
from llmdoctor.kv.budget import KVShape, vllm_layout
from llmdoctor.kv.presets import PRESETS

GIB = 1024**3
MIB = 1024**2

TWO_GPUS = {
    "driver": "550.54.15",
    "cuda": 12040,
    "process_names": {"4242": "python3 -m vllm.entrypoints.openai.api_server"},
    "gpus": [
        {"uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3", "total": 81559 * MIB, "reserved": 512 * MIB,
         "used": 70 * GIB, "utilization": [97, 60], "mig": [0, 0],
         "processes": [{"pid": 4242, "used": 70 * GIB}, {"pid": 777, "used": None}]},
        {"uuid": "GPU-bbbb", "name": "NVIDIA H100 80GB HBM3", "total": 81559 * MIB, "reserved": 512 * MIB,
         "used": 1 * GIB, "utilization": [0, 0], "mig": [0, 0], "processes": []},
    ],
}


def run(scenario):
    nvml.configure(copy.deepcopy(scenario))
    return collect(nvml)


def test_several_gpus_memory_v2_and_processes():
    snap = run(TWO_GPUS)
    assert snap.driver_version == "550.54.15" and snap.cuda_driver_version == "12.4"
    first, second = snap.gpus
    assert (first.index, first.uuid, first.memory_api) == (0, "GPU-aaaa", "v2")
    assert first.reserved == 512 * MIB and first.used == 70 * GIB
    assert first.free == 81559 * MIB - 512 * MIB - 70 * GIB  # headroom from `free`, not total - used
    assert (first.utilization_gpu, first.utilization_memory) == (97, 60)
    assert [(p.pid, p.used_memory, p.name) for p in first.processes] == [
        (4242, 70 * GIB, "python3 -m vllm.entrypoints.openai.api_server"),
        (777, None, None),  # memory not available, name in another PID namespace
    ]
    assert any("per-process memory" in n for n in snap.notes)
    assert second.processes == []
    assert nvml.calls == ["nvmlInit", "nvmlShutdown"]


def test_v2_missing_falls_back_to_v1():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["no_v2"] = True
    gpu = run(scenario).gpus[0]
    assert gpu.memory_api == "v1" and gpu.reserved is None
    assert gpu.used == 70 * GIB + 512 * MIB  # v1 `used` includes the reserved memory
    assert gpu.free == 81559 * MIB - 512 * MIB - 70 * GIB  # free is the same either way


def test_processes_v3_missing_falls_back_to_v2():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["gpus"][0]["no_v3"] = True
    assert [p.pid for p in run(scenario).gpus[0].processes] == [4242, 777]


def test_process_list_not_permitted_is_a_note_not_a_failure():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["gpus"][1]["processes_error"] = "NO_PERMISSION"
    snap = run(scenario)
    assert snap.gpus[1].processes is None
    assert any("GPU 1: the process list is not available" in n for n in snap.notes)


def test_mig_devices():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["gpus"][1].update({
        "mig": [1, 1], "utilization": "NOT_SUPPORTED", "max_mig_devices": 7,
        "mig_devices": {"0": {"uuid": "MIG-0000", "total": 40 * GIB, "used": 5 * GIB},
                        "3": {"uuid": "MIG-0003", "total": 20 * GIB, "used": 0}},
    })
    gpu = run(scenario).gpus[1]
    assert gpu.mig_mode == 1 and gpu.utilization_gpu is None
    assert [(m.index, m.uuid, m.free) for m in gpu.mig_devices] == [(0, "MIG-0000", 35 * GIB),
                                                                     (3, "MIG-0003", 20 * GIB)]


def test_not_mig_capable():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["gpus"][0]["mig"] = "NOT_SUPPORTED"
    assert run(scenario).gpus[0].mig_mode is None


@pytest.mark.parametrize("code, needle", [
    ("LIBRARY_NOT_FOUND", "no NVIDIA driver found"),
    ("DRIVER_NOT_LOADED", "kernel driver is not loaded"),
    ("NO_PERMISSION", "Insufficient Permissions"),
    ("LIB_RM_VERSION_MISMATCH", "different versions"),
    ("NOT_SUPPORTED", "not supported"),
])
def test_init_errors_each_have_their_own_message(code, needle):
    scenario = {**TWO_GPUS, "init_error": code}
    with pytest.raises(NvmlUnavailable) as err:
        run(scenario)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_gpu_lost():
    scenario = copy.deepcopy(TWO_GPUS)
    scenario["gpus"][1]["lost"] = True
    with pytest.raises(NvmlUnavailable) as err:
        run(scenario)
    assert "GPU 1" in str(err.value) and "fallen off the bus" in str(err.value)


def test_error_messages_are_distinct():
    messages = {describe_error(nvml.NVMLError(code), nvml, "x") for code in (
        nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED, nvml.NVML_ERROR_NO_PERMISSION,
        nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, nvml.NVML_ERROR_GPU_IS_LOST)}
    assert len(messages) == 6


def test_fake_matches_real_pynvml_names():
    real = pytest.importorskip("pynvml")
    for name in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
                 "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses",
                 "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetMigMode",
                 "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
                 "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetProcessName",
                 "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetUUID", "nvmlDeviceGetName",
                 "NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded", "NVMLError_NoPermission",
                 "NVMLError_NotSupported", "NVMLError_LibRmVersionMismatch", "NVMLError_GpuIsLost",
                 "NVMLError_FunctionNotFound", "NVMLError_NotFound", "NVMLLibraryMismatchError",
                 "NVML_DEVICE_MIG_ENABLE"):
        assert hasattr(real, name) and hasattr(nvml, name), name
    assert real.nvmlMemory_v2 == nvml.nvmlMemory_v2
    for struct in ("c_nvmlMemory_t", "c_nvmlMemory_v2_t", "c_nvmlUtilization_t"):
        assert [f[0] for f in getattr(real, struct)._fields_] == [f[0] for f in getattr(nvml, struct)._fields_]
    for code in ("LIBRARY_NOT_FOUND", "DRIVER_NOT_LOADED", "NO_PERMISSION", "NOT_SUPPORTED",
                 "LIB_RM_VERSION_MISMATCH", "GPU_IS_LOST", "FUNCTION_NOT_FOUND"):
        assert getattr(real, "NVML_ERROR_" + code) == getattr(nvml, "NVML_ERROR_" + code)


def test_plan_vllm_start_and_kv():
    snap = run(TWO_GPUS)
    arch = PRESETS["llama-3.1-8b"].arch()
    layout = vllm_layout(KVShape(arch, 2), 16, arch.windows)
    weights = 8_030_261_248 * 2
    busy, idle = plan(snap, layout, weights, 2 * GIB, 0.9, 8192, 8192)
    assert not busy.starts  # 70 GiB used elsewhere: free < total × 0.9
    assert idle.starts
    kv = int(81559 * MIB * 0.9) - weights - 2 * GIB
    assert idle.kv_memory == kv
    assert idle.kv_cache_tokens == kv // (16 * 4096) // 32 * 16
    assert idle.max_concurrency == pytest.approx((kv // (16 * 4096) // 32) / 512)
