#!/usr/bin/env python3
"""What watching a fleet costs the console: 8 simulated hosts of 8 GPUs each at 1 Hz.

Every host is a real ``local``-style simulated host (its own agent process streaming
``telemetry`` at 1 Hz, its server status polled, the run store read), as ``dsv4tui demo
--fleet`` has them. Two phases, each measured over ``--seconds`` after a warm-up:

* ``core``: the :class:`dsv4tui.core.fleet.model.Fleet` alone (what ``dsv4tui fleet --watch`` runs);
* ``fleet view``: the same plus the Fleet screen (Textual, headless, 160x48) redrawn at
  its rate, as ``dsv4tui connect h1 ... h8`` shows it.

Console CPU is this process's own user+system time (getrusage RUSAGE_SELF: the agents are
other processes and are not in it), as a percentage of one core; memory is this process's
resident set (VmRSS) at the end of each phase and its peak (VmHWM). The agents' CPU
(utime+stime from /proc of this process's long-lived children: the telemetry streams; the
short-lived status calls are not in it) is printed beside it for scale.
Linux only.

    python benchmarks/fleet_cost.py [--hosts 8] [--gpus 8] [--seconds 30] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _children_cpu() -> dict[int, float]:
    """utime+stime (s) of each live process whose parent is this one (the agents); the
    children found as serve finds its tabs' processes."""
    from dsv4tui.tui.commands.serve import children

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for pid in children():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[pid] = (int(fields[11]) + int(fields[12])) / tick
    return out


async def _measure(seconds: float, fleet: Any) -> dict[str, float]:
    frames0 = sum(s.frames for s in fleet.summaries())
    cpu0, kids0, t0 = _cpu_self(), _children_cpu(), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, kids1, t1 = _cpu_self(), _children_cpu(), time.monotonic()
    # the long-lived telemetry agents (alive at both ends; the short status calls come and go)
    agents = sum(kids1[pid] - kids0[pid] for pid in kids0.keys() & kids1.keys())
    frames1 = sum(s.frames for s in fleet.summaries())
    wall = t1 - t0
    return {"wall_s": round(wall, 1), "console_cpu_pct": round(100 * (cpu1 - cpu0) / wall, 2),
            "console_cpu_ms_per_frame": round(1000 * (cpu1 - cpu0) / max(1, frames1 - frames0),
                                              3),
            "frames": frames1 - frames0,
            "agents_cpu_pct": round(100 * agents / wall, 2),
            "rss_mib": round(_status_kib("VmRSS") / 1024, 1),
            "peak_rss_mib": round(_status_kib("VmHWM") / 1024, 1)}


async def run(hosts: int, gpus: int, seconds: float, warmup: float) -> dict[str, Any]:
    from dsv4tui.core.fleet.demo import PORT_BASE, demo_spec
    from dsv4tui.core.fleet.model import Fleet

    specs = [demo_spec(f"sim-{i + 1}", gpus, "h200", PORT_BASE + i) for i in range(hosts)]
    fleet = Fleet(specs, interval=1.0)
    out: dict[str, Any] = {"hosts": hosts, "gpus_per_host": gpus, "interval_s": 1.0,
                           "rss_before_mib": round(_status_kib("VmRSS") / 1024, 1)}
    try:
        fleet.start()
        await fleet.settled(60)
        up = sum(1 for s in fleet.summaries() if s.connected and s.frames)
        if up != hosts:
            raise SystemExit(f"only {up} of {hosts} hosts streamed frames")
        await asyncio.sleep(warmup)
        out["core"] = await _measure(seconds, fleet)

        from dsv4tui.tui.fleet_app import FleetApp

        app = FleetApp(fleet)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(warmup)
            out["fleet view"] = await _measure(seconds, fleet)
            from dsv4tui.tui.widgets.fleet_table import FleetTable

            out["rows_shown"] = app.screen.query_one(FleetTable).row_count
    finally:
        await fleet.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DSV4TUI_DATA_DIR"] = tmp
        os.environ["DSV4TUI_CONFIG"] = str(Path(tmp) / "none.toml")
        Path(os.environ["DSV4TUI_CONFIG"]).touch()  # named: it must exist
        os.environ["PYTHONPATH"] = str(REPO)
        result = asyncio.run(run(args.hosts, args.gpus, args.seconds, args.warmup))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['hosts']} simulated hosts x {result['gpus_per_host']} GPUs, telemetry at "
          f"1 Hz, server status every 10 s, runs every 30 s; {os.cpu_count()} CPU cores here")
    print(f"console RSS before connecting: {result['rss_before_mib']} MiB")
    for phase in ("core", "fleet view"):
        r = result[phase]
        print(f"{phase:>10}: console CPU {r['console_cpu_pct']:.2f} % of a core "
              f"({r['console_cpu_ms_per_frame']:.2f} ms per host frame, {r['frames']} frames in "
              f"{r['wall_s']} s) · RSS {r['rss_mib']} MiB (peak {r['peak_rss_mib']} MiB) · "
              f"the {result['hosts']} telemetry agents: {r['agents_cpu_pct']:.1f} % of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
