"""What a telemetry source is to the sampling loop (agent/host/telemetry.py) and what it gives:
the GPU record of a frame (every field present, null when not read), the clock-event reason
names, and :class:`SourceUnavailable` when it cannot run here. The sources (nvml_source,
smi_source, sim_source) build on this; the loop picks one of them."""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Optional

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
