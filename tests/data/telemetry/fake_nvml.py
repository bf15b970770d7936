"""A fake ``libnvidia-ml`` for tests and benchmarks on machines without an NVIDIA GPU.

This is NOT real hardware data. It replaces only the C library under the real pynvml
(nvidia-ml-py): :func:`installed` points ``pynvml.nvmlLib`` at a :class:`FakeNvmlLib`, so every
pynvml wrapper -- ctypes structs, ``byref`` out-parameters, the ``NVMLError_*`` classes, the
GPM sample handles and ``c_nvmlGpmMetricsGet_t`` -- runs its real code, and only the C
functions are Python. GPM counters are integrated from per-GPU rates so that metrics between
two samples behave like the real ones (a rate held for the whole window reads as that rate).

The workload presets below copy the H200 numbers measured in
``shared/reference/gpu-telemetry.md`` (2026-11-29, driver 580.159); feeding them through this
fake checks the parser end to end, it does not measure anything.

Loaded by file path (``load_fake_nvml()`` in the tests, ``benchmarks/telemetry_cost.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pynvml

SUCCESS = pynvml.NVML_SUCCESS
NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
INSUFFICIENT_SIZE = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND

M = pynvml  # metric ids: M.NVML_GPM_METRIC_*
H200_MIB = 143771
MIB = 1024 * 1024

# GPM metric id -> rate. Percent metrics 0-100, throughput metrics MiB/s.
IDLE_GPM = {M.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.0, M.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 0.0,
            M.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: 0.0, M.NVML_GPM_METRIC_SM_UTIL: 0.0,
            M.NVML_GPM_METRIC_SM_OCCUPANCY: 0.0, M.NVML_GPM_METRIC_DRAM_BW_UTIL: 0.0,
            M.NVML_GPM_METRIC_FP32_UTIL: 0.0, M.NVML_GPM_METRIC_FP16_UTIL: 0.0,
            M.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 3.0, M.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 5.0,
            M.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 0.0,
            M.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 0.0}

# name -> (util_gpu, power W, GPM overrides) after the reference table.
WORKLOADS: dict[str, tuple[int, float, dict[int, float]]] = {
    "idle": (0, 76.0, {}),
    "bf16_matmul": (99, 690.0, {M.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 93.2,
                                M.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 93.2,
                                M.NVML_GPM_METRIC_SM_UTIL: 96.0,
                                M.NVML_GPM_METRIC_SM_OCCUPANCY: 14.2,
                                M.NVML_GPM_METRIC_DRAM_BW_UTIL: 17.2}),
    "fp32_elementwise": (99, 520.0, {M.NVML_GPM_METRIC_SM_UTIL: 98.6,
                                     M.NVML_GPM_METRIC_SM_OCCUPANCY: 84.2,
                                     M.NVML_GPM_METRIC_DRAM_BW_UTIL: 87.2,
                                     M.NVML_GPM_METRIC_FP32_UTIL: 1.6}),
    "fp32_matmul_no_tf32": (100, 610.0, {M.NVML_GPM_METRIC_SM_UTIL: 96.6,
                                         M.NVML_GPM_METRIC_SM_OCCUPANCY: 12.1,
                                         M.NVML_GPM_METRIC_DRAM_BW_UTIL: 4.7,
                                         M.NVML_GPM_METRIC_FP32_UTIL: 76.3}),
    # Illustrative, NOT measured: the campaign's symptom (util ~100 %, tensor pipe < 1 %: an
    # MoE running on CUDA cores). Used for the panel's fixtures only.
    "moe_cuda_cores": (99, 430.0, {M.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.8,
                                   M.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 0.8,
                                   M.NVML_GPM_METRIC_SM_UTIL: 92.0,
                                   M.NVML_GPM_METRIC_SM_OCCUPANCY: 31.0,
                                   M.NVML_GPM_METRIC_DRAM_BW_UTIL: 35.0,
                                   M.NVML_GPM_METRIC_FP32_UTIL: 41.0,
                                   M.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 18000.0,
                                   M.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 18000.0}),
}


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-6a7f0c1e-0000-4000-8000-000000000000"
    mem_total_mib: int = H200_MIB
    mem_used_mib: int = 0
    util_gpu: int = 0
    util_mem: int = 0
    power_mw: int = 76_000
    power_limit_mw: int = 700_000
    temp_c: int = 36
    sm_clock: int = 345
    mem_clock: int = 3201
    max_sm_clock: int = 1980
    pstate: int = 0
    reasons: int = 0x1  # gpu_idle
    gpm_supported: bool = True
    gpm_unsupported: set[int] = field(default_factory=set)  # metric ids answering NOT_SUPPORTED
    gpm_rates: dict[int, float] = field(default_factory=lambda: dict(IDLE_GPM))
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, bytes)
    lost: bool = False
    # integration state
    _cum: dict[int, float] = field(default_factory=dict)
    _t: float | None = None

    def advance(self, t: float) -> None:
        if self._t is not None and t > self._t:
            dt = t - self._t
            for mid, rate in self.gpm_rates.items():
                self._cum[mid] = self._cum.get(mid, 0.0) + rate * dt
        self._t = t if self._t is None else max(self._t, t)


def h200_gpus(n: int = 8) -> list[FakeGpu]:
    return [FakeGpu(uuid=f"GPU-6a7f0c1e-{i:04x}-4000-8000-{i:012x}") for i in range(n)]


def _ret(name: str) -> Callable[[Callable[..., int | None]], Callable[..., int]]:
    """Wrap a fake C function: count the call, honour injected failures."""

    def deco(fn: Callable[..., int | None]) -> Callable[..., int]:
        def wrapper(self: FakeNvmlLib, *args: Any) -> int:
            self.calls[name] += 1
            if name in self.fail:
                return self.fail[name]
            return fn(self, *args) or SUCCESS

        wrapper.__name__ = name
        return wrapper

    return deco


def _out(ref: Any) -> Any:
    """The object behind a ctypes ``byref`` argument."""
    return ref._obj


class FakeNvmlLib:
    """Attributes named like the C entry points that pynvml looks up."""

    def __init__(self, gpus: list[FakeGpu] | None = None, driver: str = "580.159",
                 clock: Callable[[], float] = time.monotonic, init_error: int | None = None,
                 fail: dict[str, int] | None = None) -> None:
        self.gpus = h200_gpus() if gpus is None else gpus
        self.driver = driver
        self.clock = clock
        self.init_error = init_error
        self.fail: dict[str, int] = dict(fail or {})
        self.handle_errors: dict[int, int] = {}  # GPU index -> error of GetHandleByIndex
        self.calls: Counter[str] = Counter()
        self.initialised = 0
        self._devices = [pynvml.struct_c_nvmlDevice_t() for _ in self.gpus]
        self._by_addr = {ctypes.addressof(d): i for i, d in enumerate(self._devices)}
        self._samples: dict[int, Any] = {}  # address -> struct (kept alive)
        self._sample_data: dict[int, tuple[int, float, dict[int, float]]] = {}
        self.samples_allocated = 0
        self.samples_freed = 0
        self.process_names: dict[int, str] = {}

    # -- helpers -------------------------------------------------------------------------
    def set_workload(self, index: int, workload: str) -> None:
        util, power_w, gpm = WORKLOADS[workload]
        gpu = self.gpus[index]
        gpu.advance(self.clock())
        gpu.util_gpu = util
        gpu.util_mem = int(gpm.get(M.NVML_GPM_METRIC_DRAM_BW_UTIL, 0.0) * 0.9)
        gpu.power_mw = int(power_w * 1000)
        gpu.sm_clock = gpu.max_sm_clock if util else 345
        gpu.reasons = 0 if util else 0x1
        gpu.temp_c = 36 + util // 3
        rates = dict(IDLE_GPM)
        rates.update(gpm)
        gpu.gpm_rates = rates

    def _gpu(self, handle: Any) -> tuple[int, FakeGpu] | None:
        try:
            i = self._by_addr[ctypes.addressof(handle.contents)]
        except (KeyError, ValueError):
            return None
        return i, self.gpus[i]

    # -- system --------------------------------------------------------------------------
    @_ret("nvmlInitWithFlags")
    def nvmlInitWithFlags(self, flags: Any) -> int | None:
        if self.init_error is not None:
            return self.init_error
        self.initialised += 1
        return None

    @_ret("nvmlShutdown")
    def nvmlShutdown(self) -> int | None:
        self.initialised -= 1
        return None

    @_ret("nvmlSystemGetDriverVersion")
    def nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int | None:
        buf.value = self.driver.encode()
        return None

    @_ret("nvmlSystemGetProcessName")
    def nvmlSystemGetProcessName(self, pid: Any, buf: Any, size: Any) -> int | None:
        name = self.process_names.get(pid.value)
        if name is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        buf.value = name.encode()
        return None

    @_ret("nvmlDeviceGetCount_v2")
    def nvmlDeviceGetCount_v2(self, count: Any) -> int | None:
        _out(count).value = len(self.gpus)
        return None

    @_ret("nvmlDeviceGetHandleByIndex_v2")
    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int | None:
        i = index.value
        if not 0 <= i < len(self.gpus):
            return INVALID_ARGUMENT
        if i in self.handle_errors:
            return self.handle_errors[i]
        _out(device).contents = self._devices[i]
        return None

    # -- per device ----------------------------------------------------------------------
    def _device(self, handle: Any) -> FakeGpu | int:
        found = self._gpu(handle)
        if found is None:
            return INVALID_ARGUMENT
        gpu = found[1]
        if gpu.lost:
            return GPU_IS_LOST
        return gpu

    @_ret("nvmlDeviceGetName")
    def nvmlDeviceGetName(self, handle: Any, buf: Any, size: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        buf.value = gpu.name.encode()
        return None

    @_ret("nvmlDeviceGetUUID")
    def nvmlDeviceGetUUID(self, handle: Any, buf: Any, size: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        buf.value = gpu.uuid.encode()
        return None

    @_ret("nvmlDeviceGetUtilizationRates")
    def nvmlDeviceGetUtilizationRates(self, handle: Any, util: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        _out(util).gpu = gpu.util_gpu
        _out(util).memory = gpu.util_mem
        return None

    @_ret("nvmlDeviceGetMemoryInfo")
    def nvmlDeviceGetMemoryInfo(self, handle: Any, mem: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        m = _out(mem)
        m.total = gpu.mem_total_mib * MIB
        m.used = gpu.mem_used_mib * MIB
        m.free = m.total - m.used
        return None

    @_ret("nvmlDeviceGetPowerUsage")
    def nvmlDeviceGetPowerUsage(self, handle: Any, mw: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        _out(mw).value = gpu.power_mw
        return None

    @_ret("nvmlDeviceGetEnforcedPowerLimit")
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, mw: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        _out(mw).value = gpu.power_limit_mw
        return None

    @_ret("nvmlDeviceGetTemperature")
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, temp: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        if sensor.value != pynvml.NVML_TEMPERATURE_GPU:
            return INVALID_ARGUMENT
        _out(temp).value = gpu.temp_c
        return None

    @_ret("nvmlDeviceGetClockInfo")
    def nvmlDeviceGetClockInfo(self, handle: Any, kind: Any, mhz: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        values = {pynvml.NVML_CLOCK_SM: gpu.sm_clock, pynvml.NVML_CLOCK_MEM: gpu.mem_clock}
        if kind.value not in values:
            return NOT_SUPPORTED
        _out(mhz).value = values[kind.value]
        return None

    @_ret("nvmlDeviceGetMaxClockInfo")
    def nvmlDeviceGetMaxClockInfo(self, handle: Any, kind: Any, mhz: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        if kind.value != pynvml.NVML_CLOCK_SM:
            return NOT_SUPPORTED
        _out(mhz).value = gpu.max_sm_clock
        return None

    @_ret("nvmlDeviceGetPerformanceState")
    def nvmlDeviceGetPerformanceState(self, handle: Any, pstate: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        _out(pstate).value = gpu.pstate
        return None

    @_ret("nvmlDeviceGetCurrentClocksEventReasons")
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, mask: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        _out(mask).value = gpu.reasons
        return None

    @_ret("nvmlDeviceGetComputeRunningProcesses_v3")
    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any,
                                                infos: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        n = len(gpu.processes)
        if infos is None:  # first call: the size
            if n == 0:
                return None
            _out(count).value = n
            return INSUFFICIENT_SIZE
        if _out(count).value < n:
            _out(count).value = n
            return INSUFFICIENT_SIZE
        for k, (pid, used) in enumerate(gpu.processes):
            infos[k].pid = pid
            infos[k].usedGpuMemory = (pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
                                      if used is None else used)
        _out(count).value = n
        return None

    # -- GPM -----------------------------------------------------------------------------
    @_ret("nvmlGpmQueryDeviceSupport")
    def nvmlGpmQueryDeviceSupport(self, handle: Any, support: Any) -> int | None:
        gpu = self._device(handle)
        if isinstance(gpu, int):
            return gpu
        if _out(support).version != pynvml.NVML_GPM_SUPPORT_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        _out(support).isSupportedDevice = 1 if gpu.gpm_supported else 0
        return None

    @_ret("nvmlGpmSampleAlloc")
    def nvmlGpmSampleAlloc(self, sample: Any) -> int | None:
        struct = pynvml.struct_c_nvmlGpmSample_t()
        _out(sample).contents = struct
        self._samples[ctypes.addressof(struct)] = struct
        self.samples_allocated += 1
        return None

    @_ret("nvmlGpmSampleFree")
    def nvmlGpmSampleFree(self, sample: Any) -> int | None:
        addr = ctypes.addressof(sample.contents)
        if addr not in self._samples:
            return INVALID_ARGUMENT
        del self._samples[addr]
        self._sample_data.pop(addr, None)
        self.samples_freed += 1
        return None

    @_ret("nvmlGpmSampleGet")
    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> int | None:
        found = self._gpu(handle)
        if found is None:
            return INVALID_ARGUMENT
        i, gpu = found
        if gpu.lost:
            return GPU_IS_LOST
        if not gpu.gpm_supported:
            return NOT_SUPPORTED
        addr = ctypes.addressof(sample.contents)
        if addr not in self._samples:
            return INVALID_ARGUMENT
        t = self.clock()
        gpu.advance(t)
        self._sample_data[addr] = (i, t, dict(gpu._cum))
        return None

    @_ret("nvmlGpmMetricsGet")
    def nvmlGpmMetricsGet(self, request: Any) -> int | None:
        req = _out(request)
        if req.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        try:
            i1, t1, c1 = self._sample_data[ctypes.addressof(req.sample1.contents)]
            i2, t2, c2 = self._sample_data[ctypes.addressof(req.sample2.contents)]
        except (KeyError, ValueError):
            return INVALID_ARGUMENT
        if i1 != i2 or t2 <= t1:
            return INVALID_ARGUMENT
        gpu = self.gpus[i1]
        dt = t2 - t1
        for j in range(req.numMetrics):
            metric = req.metrics[j]
            mid = metric.metricId
            if mid in gpu.gpm_unsupported or mid not in gpu.gpm_rates:
                metric.nvmlReturn = NOT_SUPPORTED
                metric.value = 0.0
                continue
            metric.nvmlReturn = SUCCESS
            metric.value = (c2.get(mid, 0.0) - c1.get(mid, 0.0)) / dt
        return None


@contextlib.contextmanager
def installed(lib: FakeNvmlLib) -> Iterator[Any]:
    """Put ``lib`` under the real pynvml module for the duration; yields pynvml."""
    saved = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache),
             pynvml._nvmlLib_refcount)
    pynvml.nvmlLib = lib
    pynvml._nvmlGetFunctionPointer_cache.clear()
    try:
        yield pynvml
    finally:
        pynvml.nvmlLib = saved[0]
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlGetFunctionPointer_cache.update(saved[1])
        pynvml._nvmlLib_refcount = saved[2]


class FakeClock:
    """A settable monotonic clock for deterministic GPM windows."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt
