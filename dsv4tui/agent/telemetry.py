"""``telemetry``: one long-lived sampler, one ``frame`` event per tick holding every GPU.

Sources, in the order ``--source auto`` tries them:

* ``simulated`` when ``DSV4TUI_SIM_STATE`` is set (the demo host; see ``sim_source``);
* ``nvml`` through the bundled ``pynvml`` (nvidia-ml-py), with GPM metrics on Hopper+
  (``nvml_source``);
* ``nvidia-smi`` streaming ``--query-gpu ... -lms`` when NVML cannot load (``smi_source``);
* none: an ``error`` event ``no NVIDIA driver on HOST`` and exit code 3.

A frame event::

    {"type": "frame", "v": 1, "seq": 0, "time": 1764460000.123, "interval": 1.0,
     "source": "nvml", "driver": "580.159",
     "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-...", "util_gpu": 99, ...}],
     "processes": [{"gpu": 0, "pid": 1234, "name": "sglang::scheduler_TP0", "mem_mib": 130112}]}

``processes`` is present only on frames where processes were sampled (every
``--processes-every`` seconds, default 5). Every metric a source cannot read is ``null``,
never 0 (GPM unsupported -> the GPM fields are null and ``gpm`` is false). Percentages are
0-100 (``tensor_active`` 0.8 means 0.8 %), throughput in MiB/s.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from dsv4tui.agent import protocol

MIN_INTERVAL = 0.2
DEFAULT_INTERVAL = 1.0
DEFAULT_PROCESSES_EVERY = 5.0
# The first frame comes this soon after start (GPM needs >= 100 ms between two samples),
# so a console sees numbers at once instead of after a whole interval.
FIRST_TICK_S = 0.25

SOURCES = ("auto", "nvml", "nvidia-smi", "simulated")

# Per-GPU fields of a frame, in display order. Every one may be None.
BASIC_FIELDS = (
    "util_gpu", "util_mem", "mem_used_mib", "mem_total_mib", "power_w", "power_limit_w",
    "temp_c", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "pstate",
)
GPM_FIELDS = (
    "tensor_active", "hmma_active", "imma_active", "sm_active", "sm_occupancy",
    "dram_active", "fp32_active", "fp16_active", "pcie_rx_mib_s", "pcie_tx_mib_s",
    "nvlink_rx_mib_s", "nvlink_tx_mib_s",
)
GPU_FIELDS = ("index", "name", "uuid", *BASIC_FIELDS, "clock_event_reasons", "gpm", *GPM_FIELDS)

# Clock-event (formerly "throttle") reason bits, as NVML and nvidia-smi report them.
CLOCK_EVENT_REASONS = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal"),
    (0x0040, "hw_thermal"),
    (0x0080, "hw_power_brake"),
    (0x0100, "display_clocks"),
)


def blank_gpu(index: int) -> Dict[str, Any]:
    """A GPU record with every field present and null (a field never read stays null)."""
    gpu: Dict[str, Any] = dict.fromkeys(GPU_FIELDS)
    gpu["index"] = index
    gpu["clock_event_reasons"] = None
    gpu["gpm"] = False
    return gpu


def clock_event_names(mask: Optional[int]) -> Optional[List[str]]:
    """Bitmask -> list of reason names; unknown bits are kept as hex; None stays None."""
    if mask is None:
        return None
    names = []
    rest = int(mask)
    for bit, name in CLOCK_EVENT_REASONS:
        if rest & bit:
            names.append(name)
            rest &= ~bit
    if rest:
        names.append("0x%x" % rest)
    return names


def hostname() -> str:
    return socket.gethostname() or "this host"


class SourceUnavailable(Exception):
    """A source cannot run here. ``no_driver``: the reason is that no driver is present."""

    def __init__(self, reason: str, no_driver: bool = False, no_gpu: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.no_driver = no_driver
        self.no_gpu = no_gpu


class Source:
    """What the sampling loop needs from a source.

    ``open`` may raise :class:`SourceUnavailable`. ``sample`` returns the GPU records of one
    tick (or None when a source that paces itself had nothing new). ``paced`` sources block
    in ``sample`` until their own next tick; the others are sampled on the loop's clock.
    """

    name = "?"
    paced = False
    driver: Optional[str] = None
    note: Optional[str] = None

    def open(self, interval: float) -> None:
        raise NotImplementedError

    def sample(self) -> Optional[List[Dict[str, Any]]]:
        raise NotImplementedError

    def processes(self) -> Optional[List[Dict[str, Any]]]:
        return None

    def close(self) -> None:
        pass


def _make_source(name: str) -> Source:
    if name == "nvml":
        from dsv4tui.agent.nvml_source import NvmlSource

        return NvmlSource()
    if name == "nvidia-smi":
        from dsv4tui.agent.smi_source import SmiSource

        return SmiSource()
    if name == "simulated":
        from dsv4tui.agent.sim_source import SimSource

        return SimSource()
    raise ValueError(name)


def open_source(wanted: str, interval: float,
                make: Callable[[str], Source] = _make_source) -> Source:
    """Open the first source that works; raise AgentError (exit 3 when there is no driver)."""
    if wanted == "auto":
        order = ["simulated"] if os.environ.get("DSV4TUI_SIM_STATE") else ["nvml", "nvidia-smi"]
    else:
        order = [wanted]
    reasons: List[str] = []
    failures: List[SourceUnavailable] = []
    for name in order:
        source = make(name)
        try:
            source.open(interval)
        except SourceUnavailable as exc:
            reasons.append("%s: %s" % (name, exc.reason))
            failures.append(exc)
            continue
        if reasons:
            source.note = "; ".join(reasons)
        return source
    host = hostname()
    detail = "; ".join(reasons)
    if any(f.no_gpu for f in failures):
        raise protocol.AgentError("no_gpu", "no NVIDIA GPU found on %s" % host,
                                  protocol.EXIT_NO_DRIVER, host=host, detail=detail)
    if all(f.no_driver for f in failures):
        raise protocol.AgentError("no_driver", "no NVIDIA driver on %s" % host,
                                  protocol.EXIT_NO_DRIVER, host=host, detail=detail)
    raise protocol.AgentError("driver_error", "NVIDIA driver not usable on %s (%s)" % (host, detail),
                              protocol.EXIT_NO_DRIVER, host=host, detail=detail)


def stream(source: Source, interval: float, count: Optional[int] = None,
           processes_every: float = DEFAULT_PROCESSES_EVERY,
           emit: Callable[..., None] = protocol.emit,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> int:
    """Emit one frame per tick until ``count`` frames were sent (forever when None)."""
    seq = 0
    start = clock()
    next_tick = start + min(interval, FIRST_TICK_S)
    next_processes = start
    while count is None or seq < count:
        if not source.paced:
            delay = next_tick - clock()
            if delay > 0:
                sleep(delay)
        gpus = source.sample()
        now = clock()
        if not source.paced:
            next_tick += interval
            if next_tick <= now:  # we fell behind (suspended, slow NVML): skip, don't burst
                next_tick = now + interval
        if gpus is None:
            continue
        fields: Dict[str, Any] = {
            "seq": seq, "time": round(time.time(), 3), "interval": interval,
            "source": source.name, "driver": source.driver, "gpus": gpus,
        }
        if source.note:
            fields["note"] = source.note
        if processes_every > 0 and now >= next_processes:
            next_processes = now + processes_every
            procs = source.processes()
            if procs is not None:
                fields["processes"] = procs
        emit("frame", **fields)
        seq += 1
    return seq


def add_parser(sub: Any) -> None:
    p = sub.add_parser("telemetry", help="stream one frame per tick with every GPU's telemetry")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL,
                   help="seconds between frames (default 1.0, minimum 0.2)")
    p.add_argument("--count", type=int, default=None,
                   help="stop after this many frames (default: run until cancelled)")
    p.add_argument("--processes-every", type=float, default=DEFAULT_PROCESSES_EVERY,
                   help="seconds between per-process memory samples (0: never)")
    p.add_argument("--source", choices=SOURCES, default="auto",
                   help="force a source (default auto: simulated, else nvml, else nvidia-smi)")
    p.set_defaults(func=run)


def run(args: Any) -> int:
    interval = float(args.interval)
    if not interval >= MIN_INTERVAL:  # also rejects NaN
        raise protocol.AgentError("usage", "--interval must be >= %g s" % MIN_INTERVAL,
                                  protocol.EXIT_USAGE)
    if args.count is not None and args.count < 1:
        raise protocol.AgentError("usage", "--count must be >= 1", protocol.EXIT_USAGE)
    source = open_source(args.source, interval)
    try:
        stream(source, interval, args.count, float(args.processes_every))
    finally:
        source.close()
    sys.stdout.flush()
    return protocol.EXIT_OK
