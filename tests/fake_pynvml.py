"""A stand-in for nvidia-ml-py's `pynvml`, faithful where llmdoctor touches it.

Names, signatures, struct fields, error codes and the generated `NVMLError_*` class hierarchy are copied from
the real pynvml.py (nvidia-ml-py 12/13): `NVMLError(value)` maps to the subclass for its code, structs are
ctypes Structures with the same `_fields_`, `nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2)` calls
the `_v2` entry point (FunctionNotFound on drivers without it), `usedGpuMemory` is None when the driver says
NVML_VALUE_NOT_AVAILABLE, and `nvmlDeviceGetComputeRunningProcesses` raises NVMLLibraryMismatchError when the
driver lacks the _v3 call.

The machine it pretends to be comes from `configure(scenario)` or, in a subprocess, from the JSON file named
by $FAKE_PYNVML_SCENARIO (the file is copied next to a `pynvml.py` that imports this module).
"""

from __future__ import annotations

import json
import os
import string
import sys
from ctypes import Structure, c_uint, c_ulonglong
from types import SimpleNamespace

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1
nvmlMemory_v2 = 0x02000028
NVML_VALUE_NOT_AVAILABLE_ulonglong = c_ulonglong(-1)


class NVMLLibraryMismatchError(Exception):
    pass


class NVMLError(Exception):
    _valClassMapping: dict = {}  # noqa: RUF012 - as in pynvml
    _errcode_to_string = {  # noqa: RUF012 - as in pynvml
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other):
        return self.value == other.value

    __hash__ = Exception.__hash__


def _extractNVMLErrorsAsClasses():
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val):
            def new(typ, *args):
                return NVMLError.__new__(typ, val)
            return new

        new_error_class = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        new_error_class.__module__ = __name__
        setattr(this_module, class_name, new_error_class)
        NVMLError._valClassMapping[err_val] = new_error_class


_extractNVMLErrorsAsClasses()


class c_nvmlMemory_t(Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlMemory_v2_t(Structure):
    _fields_ = [("version", c_uint), ("total", c_ulonglong), ("reserved", c_ulonglong),
                ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlUtilization_t(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


# ---------------------------------------------------------------------- the pretend machine

GIB = 1024**3
DEFAULT_SCENARIO: dict = {
    "driver": "550.54.15",
    "cuda": 12040,
    "gpus": [{"uuid": "GPU-00000000-1111-2222-3333-444444444444", "name": "NVIDIA H100 80GB HBM3",
              "total": 81559 * 1024**2, "reserved": 512 * 1024**2, "used": 4 * GIB,
              "utilization": [3, 1], "processes": [], "mig": [0, 0]}],
}
_scenario: dict = DEFAULT_SCENARIO
_initialised = False
calls: list[str] = []


def configure(scenario: dict) -> None:
    global _scenario, _initialised
    _scenario, _initialised = scenario, False
    calls.clear()


if os.environ.get("FAKE_PYNVML_SCENARIO"):
    with open(os.environ["FAKE_PYNVML_SCENARIO"], encoding="utf-8") as _f:
        _scenario = json.load(_f)


def _raise(code_name: str):
    raise NVMLError(globals()["NVML_ERROR_" + code_name])


def _check(key: str, holder: dict | None = None) -> None:
    error = (holder if holder is not None else _scenario).get(key)
    if error:
        _raise(error)


class c_nvmlDevice_t:  # an opaque handle, as in the real module
    def __init__(self, spec: dict):
        self.spec = spec


def _device(handle: c_nvmlDevice_t) -> dict:
    if not _initialised:
        _raise("UNINITIALIZED")
    if handle.spec.get("lost"):
        _raise("GPU_IS_LOST")
    return handle.spec


def nvmlInit():
    global _initialised
    calls.append("nvmlInit")
    _check("init_error")
    _initialised = True


def nvmlShutdown():
    global _initialised
    calls.append("nvmlShutdown")
    _initialised = False


def nvmlSystemGetDriverVersion():
    return _scenario.get("driver", "550.54.15")


def nvmlSystemGetCudaDriverVersion():
    return _scenario.get("cuda", 12040)


def nvmlDeviceGetCount():
    if not _initialised:
        _raise("UNINITIALIZED")
    return len(_scenario["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    gpus = _scenario["gpus"]
    if not 0 <= index < len(gpus):
        _raise("INVALID_ARGUMENT")
    return c_nvmlDevice_t(gpus[index])


def nvmlDeviceGetName(handle):
    return _device(handle)["name"]


def nvmlDeviceGetUUID(handle):
    return _device(handle)["uuid"]


def nvmlDeviceGetMemoryInfo(handle, version=None):
    spec = _device(handle)
    reserved = spec.get("reserved", 0)
    free = spec["total"] - reserved - spec["used"]
    if not version:
        # v1: `used` includes the memory the driver reserves
        return c_nvmlMemory_t(total=spec["total"], free=free, used=spec["used"] + reserved)
    if spec.get("no_v2", _scenario.get("no_v2")):
        _raise("FUNCTION_NOT_FOUND")  # _nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
    return c_nvmlMemory_v2_t(version=version, total=spec["total"], reserved=reserved, free=free,
                             used=spec["used"])


def nvmlDeviceGetUtilizationRates(handle):
    util = _device(handle).get("utilization", [0, 0])
    if util == "NOT_SUPPORTED":
        _raise("NOT_SUPPORTED")
    return c_nvmlUtilization_t(gpu=util[0], memory=util[1])


def _process_objects(spec: dict) -> list:
    procs = []
    for p in spec.get("processes", []):
        used = p.get("used")
        procs.append(SimpleNamespace(pid=p["pid"], usedGpuMemory=None if used is None else used,
                                     gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF))
    return procs


def nvmlDeviceGetComputeRunningProcesses_v2(handle):
    spec = _device(handle)
    _check("processes_error", spec)
    return _process_objects(spec)


def nvmlDeviceGetComputeRunningProcesses_v3(handle):
    spec = _device(handle)
    if spec.get("no_v3"):
        _raise("FUNCTION_NOT_FOUND")
    _check("processes_error", spec)
    return _process_objects(spec)


def nvmlDeviceGetComputeRunningProcesses(handle):
    try:
        return nvmlDeviceGetComputeRunningProcesses_v3(handle)
    except NVMLError_FunctionNotFound:  # noqa: F821 - generated above, as in pynvml's throwOnVersionMismatch
        raise NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not match "
                                       "the NVML lib version.") from None


def nvmlSystemGetProcessName(pid):
    names = _scenario.get("process_names", {})
    if str(pid) not in names:
        _raise("NOT_FOUND")
    return names[str(pid)]


def nvmlDeviceGetMigMode(device):
    mig = _device(device).get("mig", "NOT_SUPPORTED")
    if mig == "NOT_SUPPORTED":
        _raise("NOT_SUPPORTED")
    return [mig[0], mig[1]]


def nvmlDeviceGetMaxMigDeviceCount(device):
    return _device(device).get("max_mig_devices", 7)


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    slots = _device(device).get("mig_devices", {})
    if str(index) not in slots:
        _raise("NOT_FOUND")
    spec = {"processes": [], **slots[str(index)]}
    return c_nvmlDevice_t(spec)
