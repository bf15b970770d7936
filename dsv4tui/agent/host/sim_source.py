"""Simulated GPUs for the demo host and tests (``source: "simulated"``).

The simulated SGLang server (``dsv4tui/sim``) writes its state file (env
``DSV4TUI_SIM_STATE``, see docs/CONTRACTS.md) every 0.5 s. This source reads it each tick:

* file missing, unreadable, its pid dead, or phase ``stopped``/``crashed``: idle GPUs,
  memory 0;
* memory is ``mem_used_frac * total``; a file without ``load_progress`` gets a ~8 s ramp
  during ``load_weights`` (the simulator's own ``mem_used_frac`` already ramps with its
  ``load_progress``, so it is used as it is);
* ``running_requests > 0``: the ``busy`` percentages plus small noise; otherwise idle.

Only the GPUs in ``gpu_ids`` (else the first ``tp_size``) take part. The GPU count comes from ``DSV4TUI_SIM_GPUS``
(default 8); before the server has written a model name, ``DSV4TUI_SIM_GPU_NAME`` and
``DSV4TUI_SIM_GPU_MEM_MIB`` (optional) name the idle GPUs, else an H200.
Power, temperature and clocks are modelled from the load so the panel looks alive; none of
these numbers are measurements.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple

from dsv4tui.agent.host.gpu_source import Source, blank_gpu, hostname
from dsv4tui.agent.host.procs import alive, process_title

DEFAULT_GPUS = 8
DEFAULT_NAME = "NVIDIA H200"
DEFAULT_MEM_MIB = 143771
LOAD_RAMP_S = 8.0
WEIGHTS_SHARE = 0.7  # part of the final memory that the weights take (the rest is KV cache)
CONTEXT_MIB = 520  # CUDA context + allocator slack of a live process
ACTIVE_PHASES = ("load_weights", "kv_cache", "cuda_graph", "http_up", "ready", "draining")
SERVING_PHASES = ("ready", "draining")

# name fragment -> (idle W, power limit W, max SM MHz, memory MHz)
_MODELS: Tuple[Tuple[str, Tuple[float, float, int, int]], ...] = (
    ("H200", (76.0, 700.0, 1980, 3201)),
    ("H100", (70.0, 700.0, 1980, 2619)),
    ("B200", (140.0, 1000.0, 1965, 3996)),
    ("RTX PRO 6000", (32.0, 600.0, 2430, 14001)),
)
_DEFAULT_MODEL = (70.0, 700.0, 1980, 2619)
_IDLE_SM_MHZ = 345


def _model(name: str) -> Tuple[float, float, int, int]:
    for fragment, spec in _MODELS:
        if fragment in name:
            return spec
    return _DEFAULT_MODEL


def _clamp(x: float, lo: float = 0.0, hi: float = 100.0) -> float:
    return lo if x < lo else hi if x > hi else x


class SimSource(Source):
    name = "simulated"

    def __init__(self, state_path: Optional[str] = None, gpus: Optional[int] = None,
                 seed: int = 0, clock: Any = time.monotonic) -> None:
        self._path = state_path
        self._count = gpus
        self._rng = random.Random(seed)
        self._clock = clock
        self._name = os.environ.get("DSV4TUI_SIM_GPU_NAME") or DEFAULT_NAME
        try:
            self._mem_total = int(os.environ.get("DSV4TUI_SIM_GPU_MEM_MIB") or DEFAULT_MEM_MIB)
        except ValueError:
            self._mem_total = DEFAULT_MEM_MIB
        self._phase: Optional[str] = None
        self._phase_since = 0.0
        self._temps: List[float] = []
        self._state: Optional[Dict[str, Any]] = None
        self._uuids: List[str] = []
        self._mem_used: List[int] = []

    def open(self, interval: float) -> None:
        if self._path is None:
            self._path = os.environ.get("DSV4TUI_SIM_STATE") or None
        if self._count is None:
            try:
                self._count = max(1, int(os.environ.get("DSV4TUI_SIM_GPUS") or DEFAULT_GPUS))
            except ValueError:
                self._count = DEFAULT_GPUS
        self.driver = "simulated"
        host = hostname()
        self._uuids = ["GPU-%s" % uuid.uuid5(uuid.NAMESPACE_DNS, "dsv4tui-sim.%s.%d" % (host, i))
                       for i in range(self._count)]
        self._temps = [31.0 + (i % 3) for i in range(self._count)]

    def read_state(self) -> Optional[Dict[str, Any]]:
        """The simulator's state, or None when there is no live simulated server."""
        if not self._path:
            return None
        try:
            with open(self._path, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or not alive(state.get("pid")):
            return None
        return state

    def sample(self) -> Optional[List[Dict[str, Any]]]:
        now = self._clock()
        state = self._state = self.read_state()
        phase = state.get("phase") if state else None
        if phase != self._phase:
            self._phase, self._phase_since = phase, now
        if state:
            if state.get("gpu_name"):
                self._name = str(state["gpu_name"])
            if state.get("mem_total_mib"):
                self._mem_total = int(state["mem_total_mib"])
        live = state is not None and phase in ACTIVE_PHASES
        used_by_server = self._server_gpus(state)
        mem_frac = self._mem_frac(state, phase, now) if live else 0.0
        busy = live and phase in SERVING_PHASES and _num(state, "running_requests") > 0
        gpus = []
        for i in range(self._count or 0):
            mine = live and i in used_by_server
            gpus.append(self._gpu(i, mine, mem_frac, state if busy and mine else None))
        self._mem_used = [g["mem_used_mib"] for g in gpus]
        return gpus

    def _server_gpus(self, state: Optional[Dict[str, Any]]) -> Set[int]:
        count = self._count or 0
        if state is None:
            return set()
        ids = state.get("gpu_ids")
        if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                         for i in ids):
            return set(ids)
        try:
            tp = int(state.get("tp_size") or count)
        except (TypeError, ValueError):
            tp = count
        return set(range(tp))

    def _mem_frac(self, state: Any, phase: Optional[str], now: float) -> float:
        full = _clamp(_num(state, "mem_used_frac", 0.85), 0.0, 1.0)
        if phase != "load_weights" or isinstance(state.get("load_progress"), (int, float)):
            return full  # the simulator ramps mem_used_frac itself while it loads
        progress = (now - self._phase_since) / LOAD_RAMP_S
        return full * WEIGHTS_SHARE * _clamp(progress, 0.0, 1.0)

    def _noisy(self, value: float, rel: float = 0.03, floor: float = 0.0) -> float:
        if value <= 0:
            return 0.0
        jitter = self._rng.uniform(-1.0, 1.0) * max(value * rel, 0.15)
        return _clamp(max(value + jitter, floor))

    def _gpu(self, i: int, live: bool, mem_frac: float,
             busy_state: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        idle_w, limit_w, max_sm, mem_mhz = _model(self._name)
        rec = blank_gpu(i)
        rec.update(name=self._name, uuid=self._uuids[i], mem_total_mib=self._mem_total,
                   power_limit_w=limit_w, sm_clock_max_mhz=max_sm, mem_clock_mhz=mem_mhz,
                   pstate="P0", gpm=True)
        used = 0
        if live:
            used = int(CONTEXT_MIB + (self._mem_total - CONTEXT_MIB) * mem_frac)
        rec["mem_used_mib"] = min(used, self._mem_total)
        busy: Dict[str, Any] = {}
        if busy_state is not None and isinstance(busy_state.get("busy"), dict):
            busy = busy_state["busy"]
        util = self._noisy(_num(busy, "util_gpu"), 0.01) if busy else 0.0
        tensor = self._noisy(_num(busy, "tensor_active"), 0.08, 0.05) if busy else 0.0
        sm = self._noisy(_num(busy, "sm_active"), 0.02) if busy else 0.0
        dram = self._noisy(_num(busy, "dram_active"), 0.04) if busy else 0.0
        cuda_core = tensor < 5.0  # MoE on CUDA cores: the FP32 pipe carries the math
        load = (util / 100.0) * (0.55 + 0.45 * max(sm, dram) / 100.0)
        power = min(limit_w, idle_w + (limit_w - idle_w) * load * 0.92)
        power = max(idle_w * 0.9, power + self._rng.uniform(-1.5, 1.5))
        target_temp = 30.0 + 45.0 * (power - idle_w) / max(limit_w - idle_w, 1.0)
        self._temps[i] += (target_temp - self._temps[i]) * 0.15
        rec.update(
            util_gpu=round(util), util_mem=round(dram * 0.9),
            power_w=round(power, 1), temp_c=round(self._temps[i]),
            sm_clock_mhz=max_sm if util > 0 else _IDLE_SM_MHZ,
            tensor_active=round(tensor, 2), hmma_active=round(tensor * 0.98, 2),
            imma_active=0.0, sm_active=round(sm, 2),
            sm_occupancy=round(sm * (0.5 if cuda_core else 0.15), 2),
            dram_active=round(dram, 2),
            fp32_active=round(sm * (0.45 if cuda_core else 0.05), 2),
            fp16_active=round(sm * 0.08, 2),
            pcie_rx_mib_s=round(6.0 + util * 0.4, 1), pcie_tx_mib_s=round(4.0 + util * 0.3, 1),
            nvlink_rx_mib_s=round(util * 250.0, 1), nvlink_tx_mib_s=round(util * 250.0, 1),
        )
        if util <= 0:
            rec["clock_event_reasons"] = ["gpu_idle"]
        elif power >= 0.97 * limit_w:
            rec["clock_event_reasons"] = ["sw_power_cap"]
        else:
            rec["clock_event_reasons"] = []
        return rec

    def processes(self) -> Optional[List[Dict[str, Any]]]:
        state = self._state
        if state is None or state.get("phase") not in ACTIVE_PHASES:
            return []
        pid = int(state["pid"])
        name = process_title(pid) or "sglang"
        return [{"gpu": i, "pid": pid, "name": name, "mem_mib": max(0, used - 8)}
                for i, used in enumerate(self._mem_used) if used]


def _num(obj: Any, key: str, default: float = 0.0) -> float:
    if not isinstance(obj, dict):
        return default
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)
