"""What the GPUs hold right now, read through NVML (nvidia-ml-py, module `pynvml`), and whether vLLM starts.

NVML facts (design.md §5): memory from `nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)` (total, reserved,
free, used), falling back to v1 (no `reserved`; its `used` includes it) when the driver lacks the v2 call;
headroom comes from `free`, not total − used. `usedGpuMemory` of a process may be None (not available).
NVML ignores CUDA_VISIBLE_DEVICES: GPUs are identified by UUID. In containers other processes' PIDs and names
may be invisible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

from llmdoctor.sizes import GIB


class NvmlUnavailable(Exception):
    """NVML could not be used: the one-line message says what was looked for and what to check."""


@dataclass
class Process:
    pid: int
    used_memory: int | None  # None: NVML cannot report it (WDDM, some containers)
    name: str | None


@dataclass
class MigDevice:
    index: int
    uuid: str
    total: int
    used: int
    free: int


@dataclass
class Gpu:
    index: int
    uuid: str
    name: str
    total: int
    used: int
    free: int
    reserved: int | None  # None with the v1 memory call
    memory_api: str  # "v2" or "v1"
    utilization_gpu: int | None = None  # percent; None when not supported (e.g. MIG)
    utilization_memory: int | None = None
    processes: list[Process] | None = None  # None: the driver would not list them
    mig_mode: int | None = None  # 1 enabled, 0 disabled, None not MIG-capable
    mig_pending: int | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)


@dataclass
class Snapshot:
    driver_version: str
    cuda_driver_version: str | None
    gpus: list[Gpu]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------- errors


def _is(err: BaseException, nvml: ModuleType, name: str) -> bool:
    cls = getattr(nvml, f"NVMLError_{name}", None)
    return cls is not None and isinstance(err, cls)


def describe_error(err: BaseException, nvml: ModuleType, where: str) -> str:
    """One plain line per NVML error class: what happened and what to check."""
    if _is(err, nvml, "LibraryNotFound"):
        return ("no NVIDIA driver found: NVML (libnvidia-ml.so.1) is not installed on this machine, or this "
                "container was started without GPU access (docker run --gpus all / NVIDIA Container Toolkit); "
                "check that `nvidia-smi` runs")
    if _is(err, nvml, "DriverNotLoaded"):
        return ("the NVIDIA kernel driver is not loaded (NVML: Driver Not Loaded): check `lsmod | grep nvidia` "
                "and `dmesg` for why the module failed to load")
    if _is(err, nvml, "NoPermission"):
        return (f"NVML refused {where} (Insufficient Permissions): this user cannot open /dev/nvidiactl and "
                "/dev/nvidia*; run as a user with access to them or pass the devices to the container")
    if _is(err, nvml, "LibRmVersionMismatch"):
        return ("the NVIDIA user-space library and the loaded kernel module have different versions (NVML: "
                "RM version mismatch), usually after a driver upgrade without a reboot: reboot or reload the "
                "nvidia kernel modules")
    if _is(err, nvml, "GpuIsLost"):
        return (f"{where}: the GPU has fallen off the bus (NVML: GPU is lost); check `dmesg` for Xid 79 and "
                "reset the GPU or reboot the node")
    if _is(err, nvml, "NotSupported"):
        return f"{where} is not supported by this GPU or driver (NVML: Not Supported)"
    return f"NVML error during {where}: {err}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------------- collection


def load_nvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("the nvidia-ml-py package (module pynvml) is not installed; "
                              "`pip install nvidia-ml-py`") from None
    return pynvml


def collect(nvml: ModuleType | None = None) -> Snapshot:
    """Read every GPU; NvmlUnavailable (with the plain message) when NVML cannot answer."""
    nvml = nvml or load_nvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        raise NvmlUnavailable(describe_error(err, nvml, "initialisation")) from None
    try:
        return _collect(nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _collect(nvml: ModuleType) -> Snapshot:
    notes: list[str] = []
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as err:
        raise NvmlUnavailable(describe_error(err, nvml, "reading the driver version")) from None
    try:
        cuda_raw = nvml.nvmlSystemGetCudaDriverVersion()
        cuda = f"{cuda_raw // 1000}.{cuda_raw % 1000 // 10}"
    except nvml.NVMLError:
        cuda = None
    gpus = []
    for index in range(count):
        where = f"GPU {index}"
        try:
            gpus.append(_read_gpu(nvml, index, notes))
        except nvml.NVMLError as err:
            raise NvmlUnavailable(describe_error(err, nvml, where)) from None
    return Snapshot(driver, cuda, gpus, notes)


def _memory(nvml: ModuleType, handle: Any) -> tuple[Any, str]:
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version), "v2"
        except nvml.NVMLError as err:
            if not (_is(err, nvml, "FunctionNotFound") or _is(err, nvml, "NotSupported")
                    or _is(err, nvml, "ArgumentVersionMismatch")):
                raise
    return nvml.nvmlDeviceGetMemoryInfo(handle), "v1"


def _read_gpu(nvml: ModuleType, index: int, notes: list[str]) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory, api = _memory(nvml, handle)
    gpu = Gpu(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=_text(nvml.nvmlDeviceGetName(handle)),
        total=memory.total, used=memory.used, free=memory.free,
        reserved=memory.reserved if api == "v2" else None, memory_api=api,
    )
    try:
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        gpu.utilization_gpu, gpu.utilization_memory = rates.gpu, rates.memory
    except nvml.NVMLError as err:
        if not _is(err, nvml, "NotSupported"):
            raise
    gpu.processes = _processes(nvml, handle, index, notes)
    try:
        gpu.mig_mode, gpu.mig_pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError as err:
        if not _is(err, nvml, "NotSupported"):
            raise
    if gpu.mig_mode == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        gpu.mig_devices = _mig_devices(nvml, handle)
    return gpu


def _processes(nvml: ModuleType, handle: Any, index: int, notes: list[str]) -> list[Process] | None:
    try:
        try:
            raw = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except getattr(nvml, "NVMLLibraryMismatchError", ()):  # driver without the _v3 call
            raw = nvml.nvmlDeviceGetComputeRunningProcesses_v2(handle)
    except nvml.NVMLError as err:
        if _is(err, nvml, "NotSupported") or _is(err, nvml, "NoPermission"):
            notes.append(f"GPU {index}: the process list is not available ({err})")
            return None
        raise
    processes = []
    for info in raw:
        try:
            name: str | None = _text(nvml.nvmlSystemGetProcessName(info.pid))
        except nvml.NVMLError:
            name = None  # another PID namespace (container) or no permission
        processes.append(Process(info.pid, info.usedGpuMemory, name))
    if any(p.used_memory is None for p in processes):
        notes.append(f"GPU {index}: NVML does not report per-process memory here (shown as n/a)")
    return processes


def _mig_devices(nvml: ModuleType, handle: Any) -> list[MigDevice]:
    devices = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError as err:
            if _is(err, nvml, "NotFound") or _is(err, nvml, "InvalidArgument"):
                continue  # an empty slot
            raise
        memory = nvml.nvmlDeviceGetMemoryInfo(mig)
        devices.append(MigDevice(slot, _text(nvml.nvmlDeviceGetUUID(mig)), memory.total, memory.used,
                                 memory.free))
    return devices


# ---------------------------------------------------------------------- will vLLM start here?


@dataclass
class Placement:
    """One GPU (or MIG device) as a place to run vLLM with the given model."""

    device: str  # "GPU 0" or "GPU 0 MIG 1"
    uuid: str
    total: int
    free: int
    requested: int  # total × utilization
    starts: bool  # vLLM V1 gpu_worker raises "Free memory on device ... on startup is less than desired
    # GPU memory utilization" when free < total × gpu_memory_utilization
    kv_memory: int
    kv_cache_tokens: int
    max_concurrency: float


def placements(snapshot: Snapshot) -> list[tuple[str, str, int, int]]:
    """(device, uuid, total, free) for each place vLLM can run: a GPU, or each MIG device of a MIG GPU."""
    found = []
    for gpu in snapshot.gpus:
        if gpu.mig_mode == 1:
            found += [(f"GPU {gpu.index} MIG {m.index}", m.uuid, m.total, m.free) for m in gpu.mig_devices]
        else:
            found.append((f"GPU {gpu.index}", gpu.uuid, gpu.total, gpu.free))
    return found


def plan(snapshot: Snapshot, layout: Any, weights_per_gpu: int, overhead: int, utilization: float,
         seq: int, max_num_batched_tokens: int) -> list[Placement]:
    """vLLM's startup check and KV budget on each place: `layout` is a `llmdoctor.kv.budget.VllmLayout`."""
    result = []
    for device, uuid, total, free in placements(snapshot):
        requested = int(total * utilization)
        kv_memory = requested - weights_per_gpu - overhead
        result.append(Placement(
            device, uuid, total, free, requested, free >= total * utilization, kv_memory,
            layout.cache_tokens(kv_memory, seq, max_num_batched_tokens) if kv_memory > 0 else 0,
            layout.max_concurrency(kv_memory, seq, max_num_batched_tokens) if kv_memory > 0 else 0.0,
        ))
    return result


def usable(placements: list[Placement]) -> int:
    """Devices where vLLM starts with room for one request of the max model length."""
    return sum(1 for p in placements if p.starts and p.max_concurrency >= 1)


def problems(placements: list[Placement], tp: int, utilization: float) -> list[dict]:
    """GPU001/GPU002 per device, GPU003 when fewer than `tp` devices qualify (rules/gpu00N.yaml)."""
    found = []
    for p in placements:
        if not p.starts:
            found.append({"rule": "GPU001", "severity": "warning", "device": p.device, "message": (
                f"{p.device}: vLLM will not start: free {p.free / GIB:.2f} GiB < total × {utilization} = "
                f"{p.requested / GIB:.2f} GiB")})
        elif p.kv_memory <= 0 or p.max_concurrency < 1:
            room = ("no room for a KV cache: weights + overhead exceed total × utilization" if p.kv_memory <= 0
                    else f"the KV cache ({p.kv_cache_tokens:,} tokens) cannot hold one request")
            found.append({"rule": "GPU002", "severity": "warning", "device": p.device,
                          "message": f"{p.device}: {room}"})
    count = usable(placements)
    if count < tp:
        found.append({"rule": "GPU003", "severity": "error", "message": (
            f"tp={tp} needs {tp} devices where vLLM starts with room for one request; {count} of the "
            f"{len(placements)} here qualify")})
    return found
