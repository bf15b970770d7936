"""NVML telemetry source: basic counters for every GPU plus GPM metrics on Hopper and newer.

NVML is initialised lazily, in :meth:`NvmlSource.open` (``nvmlInit`` wakes a sleeping GPU,
so nothing here runs at import). Per GPU, two GPM sample buffers and one metrics request
struct are allocated once; each tick takes one sample into ``cur``, computes the metrics
between ``prev`` and ``cur`` and swaps the two. A GPU without GPM support reports its GPM
fields as null and ``gpm: false`` -- never 0. A call that answers NOT_SUPPORTED once is not
asked again.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Set, Tuple

from dsv4tui.agent.host.gpu_source import Source, SourceUnavailable, blank_gpu, clock_event_names
from dsv4tui.agent.host.procs import process_title

# (frame field, pynvml GPM metric id name, rounding digits)
GPM_METRICS: Tuple[Tuple[str, str, int], ...] = (
    ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 2),
    ("hmma_active", "NVML_GPM_METRIC_HMMA_TENSOR_UTIL", 2),
    ("imma_active", "NVML_GPM_METRIC_IMMA_TENSOR_UTIL", 2),
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL", 2),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", 2),
    ("dram_active", "NVML_GPM_METRIC_DRAM_BW_UTIL", 2),
    ("fp32_active", "NVML_GPM_METRIC_FP32_UTIL", 2),
    ("fp16_active", "NVML_GPM_METRIC_FP16_UTIL", 2),
    ("pcie_rx_mib_s", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", 1),
    ("pcie_tx_mib_s", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", 1),
    ("nvlink_rx_mib_s", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 1),
    ("nvlink_tx_mib_s", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 1),
)

# Fallback ids (nvml.h) for a bundled pynvml too old to name them.
_GPM_IDS = {
    "NVML_GPM_METRIC_SM_UTIL": 2, "NVML_GPM_METRIC_SM_OCCUPANCY": 3,
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": 5, "NVML_GPM_METRIC_HMMA_TENSOR_UTIL": 7,
    "NVML_GPM_METRIC_IMMA_TENSOR_UTIL": 9, "NVML_GPM_METRIC_DRAM_BW_UTIL": 10,
    "NVML_GPM_METRIC_FP32_UTIL": 12, "NVML_GPM_METRIC_FP16_UTIL": 13,
    "NVML_GPM_METRIC_PCIE_TX_PER_SEC": 20, "NVML_GPM_METRIC_PCIE_RX_PER_SEC": 21,
    "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC": 60, "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC": 61,
}

_MIB = 1024 * 1024
_PSTATE_UNKNOWN = 32


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _Gpu:
    """Per-GPU state kept across ticks."""

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.name: Optional[str] = None
        self.uuid: Optional[str] = None
        self.sm_clock_max: Optional[int] = None
        self.unsupported: Set[str] = set()
        self.lost = False
        self.error = "GPU is lost"
        # GPM
        self.gpm = False
        self.prev: Any = None
        self.cur: Any = None
        self.have_prev = False
        self.request: Any = None


class NvmlSource(Source):
    name = "nvml"

    def __init__(self, nvml: Any = None) -> None:
        self._nv = nvml  # the pynvml module; imported in open() unless given (tests)
        self._gpus: List[_Gpu] = []
        self._open = False
        self._proc_names: Dict[int, str] = {}
        self._reasons_fn: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self, interval: float) -> None:
        if self._nv is None:
            try:
                import pynvml  # bundled nvidia-ml-py
            except ImportError as exc:
                raise SourceUnavailable(
                    "pynvml not importable (%s)" % exc,
                    no_driver=not os.path.exists("/proc/driver/nvidia/version")) from None
            self._nv = pynvml
        nv = self._nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            no_driver = code in (nv.NVML_ERROR_LIBRARY_NOT_FOUND, nv.NVML_ERROR_DRIVER_NOT_LOADED)
            raise SourceUnavailable("nvmlInit: %s" % exc, no_driver=no_driver) from None
        self._open = True
        try:
            self.driver = _text(nv.nvmlSystemGetDriverVersion())
            count = nv.nvmlDeviceGetCount()
            if count < 1:
                raise SourceUnavailable("NVML sees no GPU", no_gpu=True)
            self._reasons_fn = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                                or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
            for i in range(count):
                try:
                    self._gpus.append(self._open_gpu(i))
                except nv.NVMLError as exc:  # one bad GPU ("fallen off the bus"): report it
                    broken = _Gpu(i, None)
                    broken.lost = True
                    broken.error = str(exc) or "NVML error"
                    self._gpus.append(broken)
        except nv.NVMLError as exc:
            self.close()
            raise SourceUnavailable("NVML: %s" % exc) from None
        except SourceUnavailable:
            self.close()
            raise

    def _open_gpu(self, index: int) -> _Gpu:
        nv = self._nv
        gpu = _Gpu(index, nv.nvmlDeviceGetHandleByIndex(index))
        h = gpu.handle
        gpu.name = self._call(gpu, "name", nv.nvmlDeviceGetName, h)
        if gpu.name is not None:
            gpu.name = _text(gpu.name)
        gpu.uuid = self._call(gpu, "uuid", nv.nvmlDeviceGetUUID, h)
        if gpu.uuid is not None:
            gpu.uuid = _text(gpu.uuid)
        gpu.sm_clock_max = self._call(gpu, "max_clock", nv.nvmlDeviceGetMaxClockInfo, h,
                                      nv.NVML_CLOCK_SM)
        self._open_gpm(gpu)
        return gpu

    def _open_gpm(self, gpu: _Gpu) -> None:
        nv = self._nv
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            return  # bundled pynvml predates GPM
        try:
            if not nv.nvmlGpmQueryDeviceSupport(gpu.handle).isSupportedDevice:
                return
            gpu.prev = nv.nvmlGpmSampleAlloc()
            gpu.cur = nv.nvmlGpmSampleAlloc()
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            for j, (_field, const, _nd) in enumerate(GPM_METRICS):
                request.metrics[j].metricId = getattr(nv, const, _GPM_IDS[const])
            gpu.request = request
            nv.nvmlGpmSampleGet(gpu.handle, gpu.prev)  # the baseline for the first tick
            gpu.have_prev = True
            gpu.gpm = True
        except nv.NVMLError:
            self._free_gpm(gpu)

    def _free_gpm(self, gpu: _Gpu) -> None:
        for sample in (gpu.prev, gpu.cur):
            if sample is not None:
                try:
                    self._nv.nvmlGpmSampleFree(sample)
                except Exception:
                    pass
        gpu.prev = gpu.cur = gpu.request = None
        gpu.gpm = gpu.have_prev = False

    def close(self) -> None:
        if not self._open:
            return
        for gpu in self._gpus:
            self._free_gpm(gpu)
        self._gpus = []
        self._open = False
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass

    # -- sampling ----------------------------------------------------------------------------
    def _call(self, gpu: _Gpu, key: str, fn: Any, *args: Any) -> Any:
        """One NVML read: None when unsupported (remembered) or failing this time."""
        if key in gpu.unsupported:
            return None
        nv = self._nv
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND):
                gpu.unsupported.add(key)
            elif code == nv.NVML_ERROR_GPU_IS_LOST:
                gpu.lost = True
            return None

    def sample(self) -> Optional[List[Dict[str, Any]]]:
        return [self._sample_gpu(gpu) for gpu in self._gpus]

    def _sample_gpu(self, gpu: _Gpu) -> Dict[str, Any]:
        nv = self._nv
        h = gpu.handle
        rec = blank_gpu(gpu.index)
        rec["name"] = gpu.name
        rec["uuid"] = gpu.uuid
        rec["sm_clock_max_mhz"] = gpu.sm_clock_max
        if gpu.lost:
            rec["error"] = gpu.error
            return rec
        call = self._call
        util = call(gpu, "util", nv.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            rec["util_gpu"] = util.gpu
            rec["util_mem"] = util.memory
        mem = call(gpu, "mem", nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            rec["mem_used_mib"] = mem.used // _MIB
            rec["mem_total_mib"] = mem.total // _MIB
        power = call(gpu, "power", nv.nvmlDeviceGetPowerUsage, h)
        if power is not None:
            rec["power_w"] = round(power / 1000.0, 1)
        limit = call(gpu, "power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        if limit is not None:
            rec["power_limit_w"] = round(limit / 1000.0, 1)
        temp = call(gpu, "temp", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        if temp is None and "temp" in gpu.unsupported and hasattr(nv, "nvmlDeviceGetTemperatureV"):
            temp = call(gpu, "temp_v", nv.nvmlDeviceGetTemperatureV, h, nv.NVML_TEMPERATURE_GPU)
        rec["temp_c"] = temp
        rec["sm_clock_mhz"] = call(gpu, "sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        rec["mem_clock_mhz"] = call(gpu, "mem_clock", nv.nvmlDeviceGetClockInfo, h,
                                    nv.NVML_CLOCK_MEM)
        pstate = call(gpu, "pstate", nv.nvmlDeviceGetPerformanceState, h)
        if pstate is not None and 0 <= pstate < _PSTATE_UNKNOWN:
            rec["pstate"] = "P%d" % pstate
        if self._reasons_fn is not None:
            rec["clock_event_reasons"] = clock_event_names(call(gpu, "reasons", self._reasons_fn, h))
        if gpu.gpm:
            self._sample_gpm(gpu, rec)
        if gpu.lost:
            rec = blank_gpu(gpu.index)
            rec.update(name=gpu.name, uuid=gpu.uuid, error=gpu.error)
        return rec

    def _sample_gpm(self, gpu: _Gpu, rec: Dict[str, Any]) -> None:
        nv = self._nv
        rec["gpm"] = True
        try:
            nv.nvmlGpmSampleGet(gpu.handle, gpu.cur)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_GPU_IS_LOST:
                gpu.lost = True
            gpu.have_prev = False
            return
        if gpu.have_prev:
            request = gpu.request
            request.sample1 = gpu.prev
            request.sample2 = gpu.cur
            try:
                nv.nvmlGpmMetricsGet(request)
            except nv.NVMLError:
                request = None
            if request is not None:
                success = nv.NVML_SUCCESS
                for j, (field, _const, ndigits) in enumerate(GPM_METRICS):
                    metric = request.metrics[j]
                    if metric.nvmlReturn == success:
                        value = metric.value
                        if not (math.isnan(value) or math.isinf(value)):
                            rec[field] = round(value, ndigits)
        gpu.prev, gpu.cur = gpu.cur, gpu.prev
        gpu.have_prev = True

    # -- processes ---------------------------------------------------------------------------
    def processes(self) -> Optional[List[Dict[str, Any]]]:
        nv = self._nv
        out: List[Dict[str, Any]] = []
        seen = set()
        for gpu in self._gpus:
            if gpu.lost or gpu.handle is None:
                continue
            procs = None
            for fn_name in ("nvmlDeviceGetComputeRunningProcesses",
                            "nvmlDeviceGetComputeRunningProcesses_v2"):
                fn = getattr(nv, fn_name, None)
                if fn is None:
                    continue
                try:
                    procs = fn(gpu.handle)
                    break
                except Exception:  # NVMLError, or NVMLLibraryMismatchError on old drivers
                    continue
            for p in procs or ():
                pid = int(p.pid)
                seen.add(pid)
                used = getattr(p, "usedGpuMemory", None)
                out.append({"gpu": gpu.index, "pid": pid, "name": self._process_name(pid),
                            "mem_mib": None if used is None else int(used) // _MIB})
        for pid in list(self._proc_names):
            if pid not in seen:
                del self._proc_names[pid]
        return out

    def _process_name(self, pid: int) -> str:
        name = self._proc_names.get(pid)
        if name is None:
            name = process_title(pid)
            if name is None:
                try:
                    name = os.path.basename(_text(self._nv.nvmlSystemGetProcessName(pid)))
                except Exception:
                    name = "?"
            self._proc_names[pid] = name
        return name
