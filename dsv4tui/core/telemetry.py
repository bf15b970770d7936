"""Console side of GPU telemetry: the frame model, per-GPU history rings, stale detection.

The agent's ``telemetry`` command sends one ``frame`` event per tick (see
``dsv4tui/agent/host/telemetry.py``). Here it becomes a :class:`Frame` of :class:`GpuSample`;
:class:`HostTelemetry` keeps the latest frame of one host, a :class:`TelemetryHistory` of
ring buffers (one per GPU and metric, >= 10 minutes at 1 Hz) and, per GPU, when it was last
seen, so a GPU whose frames stop for three intervals reads as stale with its age.

Pure Python: no textual here (widgets/gpu_panel.py draws it), nothing opens connections.
Ages use the console's monotonic clock at receipt, never the host's wall clock (the two
machines' clocks need not agree).
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

STALE_TICKS = 3
HISTORY_S = 720.0  # 12 minutes: >= 10 minutes at 1 Hz with room for the sparkline width
MAX_GAP_FILL = 3600  # at most this many "no data" slots are inserted for one gap

SOURCES = ("nvml", "nvidia-smi", "simulated")

# Metrics that get a history ring (numbers only).
HISTORY_METRICS = (
    "util_gpu", "util_mem", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz",
    "tensor_active", "hmma_active", "imma_active", "sm_active", "sm_occupancy", "dram_active",
    "fp32_active", "fp16_active", "pcie_rx_mib_s", "pcie_tx_mib_s", "nvlink_rx_mib_s",
    "nvlink_tx_mib_s",
)
GPM_METRICS = (
    "tensor_active", "hmma_active", "imma_active", "sm_active", "sm_occupancy", "dram_active",
    "fp32_active", "fp16_active", "pcie_rx_mib_s", "pcie_tx_mib_s", "nvlink_rx_mib_s",
    "nvlink_tx_mib_s",
)
# `dsv4tui gpus --json`: the per-GPU keys, in this order (the shape).
CLI_GPU_KEYS = (
    "index", "name", "util_gpu", "mem_used_mib", "mem_total_mib", "power_w", "power_limit_w",
    "temp_c", "sm_clock_mhz", "tensor_active", "sm_active", "dram_active",
)


class FrameError(ValueError):
    """An event that is not a usable frame."""


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU in one frame. Every metric may be None: not readable here (shown "n/a")."""

    index: int
    name: str | None = None
    uuid: str | None = None
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pstate: str | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    gpm: bool = False
    tensor_active: float | None = None
    hmma_active: float | None = None
    imma_active: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    dram_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    pcie_rx_mib_s: float | None = None
    pcie_tx_mib_s: float | None = None
    nvlink_rx_mib_s: float | None = None
    nvlink_tx_mib_s: float | None = None
    error: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuSample:
        index = d.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise FrameError(f"GPU without a valid index: {index!r}")
        kwargs: dict[str, Any] = {"index": index}
        for f in fields(cls):
            if f.name == "index" or f.name not in d:
                continue
            value = d[f.name]
            if f.name in ("name", "uuid", "pstate", "error"):
                kwargs[f.name] = _str(value)
            elif f.name == "gpm":
                kwargs[f.name] = value is True
            elif f.name == "clock_event_reasons":
                kwargs[f.name] = (tuple(str(r) for r in value)
                                  if isinstance(value, (list, tuple)) else None)
            else:
                kwargs[f.name] = _num(value)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def value(self, metric: str) -> float | None:
        v = getattr(self, metric, None)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    @property
    def mem_frac(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return self.mem_used_mib / self.mem_total_mib

    @property
    def power_frac(self) -> float | None:
        if self.power_w is None or not self.power_limit_w:
            return None
        return self.power_w / self.power_limit_w

    @property
    def cuda_core_bound(self) -> bool:
        """Busy but the tensor pipe idle: the campaign's "MoE runs on CUDA cores" signature."""
        return (self.util_gpu is not None and self.util_gpu >= 50
                and self.tensor_active is not None and self.tensor_active < 5)


@dataclass(frozen=True, slots=True)
class GpuProcess:
    gpu: int | None
    pid: int
    name: str
    mem_mib: float | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuProcess | None:
        pid = d.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int):
            return None
        gpu = d.get("gpu")
        return cls(gpu=gpu if isinstance(gpu, int) and not isinstance(gpu, bool) else None,
                   pid=pid, name=_str(d.get("name")) or "?", mem_mib=_num(d.get("mem_mib")))


@dataclass(frozen=True, slots=True)
class Frame:
    """One telemetry tick of one host: every GPU at once."""

    time: float
    source: str
    gpus: tuple[GpuSample, ...]
    driver: str | None = None
    interval: float = 1.0
    seq: int | None = None
    processes: tuple[GpuProcess, ...] | None = None  # only on frames that sampled them
    note: str | None = None  # why the agent fell back to this source

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Frame:
        """Parse an agent ``frame`` event. Raises FrameError when it is not one."""
        if event.get("type") != "frame":
            raise FrameError(f"not a frame event: {event.get('type')!r}")
        gpus_raw = event.get("gpus")
        if not isinstance(gpus_raw, list):
            raise FrameError("frame without a gpus list")
        gpus = tuple(sorted((GpuSample.from_dict(g) for g in gpus_raw if isinstance(g, Mapping)),
                            key=lambda g: g.index))
        t = _num(event.get("time"))
        interval = _num(event.get("interval"))
        procs_raw = event.get("processes")
        procs: tuple[GpuProcess, ...] | None = None
        if isinstance(procs_raw, list):
            procs = tuple(p for p in (GpuProcess.from_dict(x) for x in procs_raw
                                      if isinstance(x, Mapping)) if p is not None)
        seq = event.get("seq")
        return cls(
            time=float(t) if t is not None else time.time(),
            source=_str(event.get("source")) or "unknown",
            gpus=gpus,
            driver=_str(event.get("driver")),
            interval=float(interval) if interval and interval > 0 else 1.0,
            seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
            processes=procs,
            note=_str(event.get("note")),
        )

    @property
    def simulated(self) -> bool:
        return self.source == "simulated"

    def gpu(self, index: int) -> GpuSample | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def to_cli_json(self, host: str) -> dict[str, Any]:
        """The ``dsv4tui gpus --json`` object: host, time, gpus (CLI_GPU_KEYS), source."""
        return {
            "host": host,
            "time": self.time,
            "gpus": [{k: getattr(g, k) for k in CLI_GPU_KEYS} for g in self.gpus],
            "source": self.source,
        }


def mean_of(values: Iterable[float | None]) -> float | None:
    """The mean of the values a GPU reported (None: none did; never a fake 0)."""
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def total_of(values: Iterable[float | None]) -> float | None:
    """The sum of the values the GPUs reported (None: none did)."""
    got = [v for v in values if v is not None]
    return sum(got) if got else None


def model_summary(gpus: Iterable[GpuSample]) -> str:
    """``8× NVIDIA H200`` (``4× A + 4× B`` on a mixed host; ``no GPU`` when empty)."""  # noqa: RUF002
    counts: dict[str, int] = {}
    for g in gpus:
        name = g.name or "GPU"
        counts[name] = counts.get(name, 0) + 1
    if not counts:
        return "no GPU"
    return " + ".join(f"{n}× {name}" for name, n in counts.items())  # noqa: RUF001


class Ring:
    """A fixed-capacity ring of floats; None is kept as NaN and given back as None."""

    __slots__ = ("_buf", "_capacity", "_len", "_next")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._capacity = capacity
        self._buf = array("d", [math.nan]) * capacity
        self._next = 0
        self._len = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._len

    def append(self, value: float | None) -> None:
        self._buf[self._next] = math.nan if value is None else float(value)
        self._next = (self._next + 1) % self._capacity
        if self._len < self._capacity:
            self._len += 1

    def values(self, last: int | None = None) -> list[float | None]:
        """Oldest first; the newest ``last`` values when given."""
        n = self._len if last is None else max(0, min(last, self._len))
        start = (self._next - n) % self._capacity
        out: list[float | None] = []
        for k in range(n):
            v = self._buf[(start + k) % self._capacity]
            out.append(None if math.isnan(v) else v)
        return out

    def latest(self) -> float | None:
        if not self._len:
            return None
        v = self._buf[(self._next - 1) % self._capacity]
        return None if math.isnan(v) else v

    def resize(self, capacity: int) -> None:
        """Change the capacity, keeping the newest values."""
        if capacity == self._capacity:
            return
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        kept = self.values(capacity)
        self._capacity = capacity
        self._buf = array("d", [math.nan]) * capacity
        self._next = 0
        self._len = 0
        for v in kept:
            self.append(v)


class GpuHistory:
    """All metric rings of one GPU plus the host time of each slot."""

    __slots__ = ("rings", "times")

    def __init__(self, capacity: int) -> None:
        self.times = Ring(capacity)
        self.rings = {m: Ring(capacity) for m in HISTORY_METRICS}

    def append(self, t: float | None, sample: GpuSample | None) -> None:
        self.times.append(t)
        for m, ring in self.rings.items():
            ring.append(None if sample is None else sample.value(m))

    def resize(self, capacity: int) -> None:
        self.times.resize(capacity)
        for ring in self.rings.values():
            ring.resize(capacity)


class TelemetryHistory:
    """Ring-buffer history per GPU and metric, sized for ``seconds`` at ``interval``."""

    def __init__(self, seconds: float = HISTORY_S, interval: float = 1.0) -> None:
        self.seconds = seconds
        self.interval = interval
        self.capacity = self._capacity_for(interval)
        self._gpus: dict[int, GpuHistory] = {}
        self._last_time: float | None = None

    def _capacity_for(self, interval: float) -> int:
        return max(1, math.ceil(self.seconds / max(interval, 0.05)))

    def gpus(self) -> list[int]:
        return sorted(self._gpus)

    def add(self, frame: Frame) -> None:
        if frame.interval < self.interval:  # faster frames: keep the same span of time
            self.interval = frame.interval
            self.capacity = self._capacity_for(frame.interval)
            for h in self._gpus.values():
                h.resize(self.capacity)
        gap = self._missed_ticks(frame)
        present = {g.index: g for g in frame.gpus}
        for index in present.keys() - self._gpus.keys():
            self._gpus[index] = GpuHistory(self.capacity)
        step = frame.interval
        for index, hist in self._gpus.items():
            for k in range(gap, 0, -1):  # honest holes for the ticks that never came
                hist.append(frame.time - k * step, None)
            hist.append(frame.time, present.get(index))
        self._last_time = frame.time

    def _missed_ticks(self, frame: Frame) -> int:
        if self._last_time is None or frame.time <= self._last_time:
            return 0
        missed = round((frame.time - self._last_time) / frame.interval) - 1
        return max(0, min(missed, MAX_GAP_FILL, self.capacity))

    def series(self, gpu: int, metric: str, last: int | None = None) -> list[float | None]:
        """Values of one metric of one GPU, oldest first (None: no data for that tick)."""
        hist = self._gpus.get(gpu)
        if hist is None or metric not in hist.rings:
            return []
        return hist.rings[metric].values(last)

    def times(self, gpu: int, last: int | None = None) -> list[float | None]:
        hist = self._gpus.get(gpu)
        return [] if hist is None else hist.times.values(last)

    def __len__(self) -> int:
        return max((len(h.times) for h in self._gpus.values()), default=0)


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """What a view shows for one GPU: its newest sample, and whether that is stale."""

    sample: GpuSample
    stale: bool
    age_s: float  # since this GPU was last in a frame (console clock)

    @property
    def index(self) -> int:
        return self.sample.index


class HostTelemetry:
    """Everything the console knows about one host's GPUs. Feed it frames with :meth:`add`."""

    def __init__(self, host: str, interval: float = 1.0, history_s: float = HISTORY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.interval = interval
        self.clock = clock
        self.history = TelemetryHistory(history_s, interval)
        self.latest: Frame | None = None
        self.frames = 0
        self.error: str | None = None
        self.processes: tuple[GpuProcess, ...] | None = None
        self.processes_at: float | None = None
        self._last_seen: dict[int, float] = {}
        self._last_sample: dict[int, GpuSample] = {}
        self._last_frame_at: float | None = None
        # a host made of nodes: (node name, the GPU indices it holds), in rank order
        self.node_groups: list[tuple[str, list[int]]] | None = None

    # -- input ---------------------------------------------------------------------------
    def add(self, frame: Frame, received: float | None = None) -> None:
        now = self.clock() if received is None else received
        self.latest = frame
        self.frames += 1
        self.error = None
        self.interval = frame.interval
        self._last_frame_at = now
        for g in frame.gpus:
            self._last_seen[g.index] = now
            self._last_sample[g.index] = g
        if frame.processes is not None:
            self.processes = frame.processes
            self.processes_at = now
        self.history.add(frame)

    def add_event(self, event: Mapping[str, Any], received: float | None = None) -> Frame | None:
        """Feed an agent event; frames are added, others ignored. Returns the frame."""
        if event.get("type") != "frame":
            return None
        frame = Frame.from_event(event)
        self.add(frame, received)
        return frame

    def set_error(self, message: str | None) -> None:
        """The stream failed (no driver, link lost ...); shown until the next frame."""
        self.error = message

    # -- queries -------------------------------------------------------------------------
    @property
    def stale_after_s(self) -> float:
        return STALE_TICKS * self.interval

    def age(self, index: int | None = None, now: float | None = None) -> float | None:
        """Seconds since GPU ``index`` (or any frame when None) was last seen."""
        seen = self._last_frame_at if index is None else self._last_seen.get(index)
        if seen is None:
            return None
        return max(0.0, (self.clock() if now is None else now) - seen)

    def is_stale(self, index: int | None = None, now: float | None = None) -> bool:
        age = self.age(index, now)
        return age is not None and age > self.stale_after_s

    def gpus(self, now: float | None = None) -> list[GpuStatus]:
        """Every GPU ever seen on this host, by index, with its newest sample."""
        now = self.clock() if now is None else now
        out = []
        for index in sorted(self._last_sample):
            age = max(0.0, now - self._last_seen[index])
            out.append(GpuStatus(self._last_sample[index], age > self.stale_after_s, age))
        return out

    def gpu_count(self) -> int:
        """How many GPUs :meth:`gpus` lists."""
        return len(self._last_sample)

    @property
    def source(self) -> str | None:
        return self.latest.source if self.latest else None

    @property
    def simulated(self) -> bool:
        return bool(self.latest and self.latest.simulated)

    def summary(self) -> str:
        return model_summary(self._last_sample.values())


def fmt_age(seconds: float) -> str:
    """``7s``, ``3m12s``, ``2h05m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_pct(value: float | None, decimals: int = 0) -> str:
    """``n/a`` for None, never 0. Small tensor numbers keep a decimal (``0.8%``)."""
    if value is None:
        return "n/a"
    if decimals == 0 and 0 < value < 9.95:
        return f"{value:.1f}%"
    return f"{value:.{decimals}f}%"


def fmt_reading(value: float | None, unit: str = "", decimals: int = 0) -> str:
    """A GPU reading as the gpus table prints it (``2430``, ``61°C``; n/a when missing)."""
    if value is None:
        return "n/a"
    return f"{value:.{decimals}f}{unit}"


def fmt_mem(used_mib: float | None, total_mib: float | None) -> str:
    """``121.3/140.4G`` in GiB (n/a parts stay n/a)."""
    if used_mib is None and total_mib is None:
        return "n/a"
    used = "n/a" if used_mib is None else f"{used_mib / 1024:.1f}"
    total = "n/a" if total_mib is None else f"{total_mib / 1024:.0f}"
    return f"{used}/{total}G"
