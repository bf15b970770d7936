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
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from dsv4tui.agent import protocol
from dsv4tui.agent.host.gpu_source import Source, SourceUnavailable, hostname

MIN_INTERVAL = 0.2
DEFAULT_INTERVAL = 1.0
DEFAULT_PROCESSES_EVERY = 5.0
# The first frame comes this soon after start (GPM needs >= 100 ms between two samples),
# so a console sees numbers at once instead of after a whole interval.
FIRST_TICK_S = 0.25

SOURCES = ("auto", "nvml", "nvidia-smi", "simulated")

def _make_source(name: str) -> Source:
    if name == "nvml":
        from dsv4tui.agent.host.nvml_source import NvmlSource

        return NvmlSource()
    if name == "nvidia-smi":
        from dsv4tui.agent.host.smi_source import SmiSource

        return SmiSource()
    if name == "simulated":
        from dsv4tui.agent.host.sim_source import SimSource

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
