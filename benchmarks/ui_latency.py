"""How responsive is the dashboard under load, and what does it cost when idle?

1. Load: the demo host (real agent subprocess + simulated SGLang, 8 simulated GPUs) serving a
   C=64 sweep, telemetry at 2 Hz, and a log flood of 2,000 lines/s appended to the server log
   (the agent's ``logs --follow`` streams it, parsed, to the console). Then keys are sent the
   way the terminal driver sends them (``driver.send_message(Key)``) and the time to the first
   screen update that shows their effect is measured: screen switches (1/2/4 ...) and the
   log view's follow toggle (``f``). Prints p50/p99/max. Target: p99 < 50 ms.
2. Idle: a fresh console monitoring 8 GPUs at 1 Hz (server up, no sweep, no flood); prints
   the console process's CPU % of one core over the window. Target: < 25 %.

The app runs headless (Textual's headless driver): everything up to the composed frame is
measured, not the terminal's own drawing. Timing of requests is the agent's; the console only
displays events, so this load cannot distort the sweep's numbers.

    python benchmarks/ui_latency.py [--keys 200] [--idle-s 30] [--flood 2000] [--port N]
                                    [--json]

``--idle-s 0`` skips the idle phase. The frame clock is Textual's private ``App._display``
(what the driver is handed), read here only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from dsv4tui.core.config import HostConfig, Settings  # noqa: E402
from dsv4tui.core.hosts.demo import demo_profile  # noqa: E402
from dsv4tui.core.hosts.resolve import HostSpec, demo_env  # noqa: E402
from dsv4tui.tui.app import Dsv4App  # noqa: E402
from dsv4tui.tui.screens.modals import PlanInput  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MeasuredApp(Dsv4App):
    """Records when a frame showing the last key's effect is composed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.want: tuple[str, Any] | None = None  # ("mode", name) | ("follow", bool)
        self.shown_at: float | None = None
        self.current_at: float | None = None  # a switch: the frame with current data

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None and self.want is not None and self.current_at is None:
            kind, value = self.want
            if kind == "mode" and screen is self.main and self.view == value:
                # a body is brought up to date before it is switched in: current at once
                self.shown_at = self.current_at = time.perf_counter()
            elif kind == "follow" and screen is self.main:
                panel = self.main.body.log_panel()
                if panel is not None and panel.view.follow is value:
                    self.shown_at = self.current_at = time.perf_counter()
        super()._display(screen, renderable)


FLOOD = r"""
import sys, time
path, rate = sys.argv[1], int(sys.argv[2])
per_tick = max(1, rate // 100)
i = 0
next_t = time.monotonic()
with open(path, "a", encoding="utf-8") as fh:
    while True:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        lines = []
        for _ in range(per_tick):
            rank = i % 8
            if i % 50 == 0:
                lines.append(f"[{stamp} TP0] Decode batch, #running-req: 64, #token: 81920, "
                             f"token usage: 0.06, cuda graph: True, gen throughput "
                             f"(token/s): {700 + i % 90:.2f}, #queue-req: 0\n")
            elif i % 97 == 0:
                lines.append(f"[{stamp} TP{rank}] WARNING: flood line {i}\n")
            else:
                lines.append(f"[{stamp} TP{rank}] flood: scheduler step {i} batch ok, "
                             f"#running-req: 64, #queue-req: 0\n")
            i += 1
        fh.write("".join(lines))
        fh.flush()
        next_t += 0.01
        time.sleep(max(0.0, next_t - time.monotonic()))
"""


def start_flood(path: str, rate: int) -> subprocess.Popen[bytes]:
    """The server's log grows by ``rate`` lines/s (SGLang format), from another process, as
    it would on the host: the console only sees what the agent's ``logs --follow`` sends."""
    return subprocess.Popen([sys.executable, "-c", FLOOD, path, str(rate)])


async def until(pilot: Any, cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def spec_for(port: int, speed: float) -> HostSpec:
    profile = demo_profile("MXFP4", port=port, speed=speed,
                           extra_args=["--decode-log-interval", "10",
                                       "--sim-decode-speed", "40"])
    return HostSpec("demo", HostConfig(profiles={"mxfp4": profile}, default_profile="mxfp4"),
                    "demo", env=demo_env())


CPU_MS: list[float] = []  # the console's CPU time from each key to its frame
CURRENT_MS: list[float] = []  # each switch: key to the frame with current data


async def press(app: MeasuredApp, pilot: Any, key: str, want: tuple[str, Any]) -> float:
    app.want, app.shown_at, app.current_at = want, None, None
    c0, t0 = time.process_time(), time.perf_counter()
    app._driver.send_message(events.Key(key, key))  # type: ignore[union-attr]
    deadline = t0 + 2.0
    while app.current_at is None and time.perf_counter() < deadline:
        if app.shown_at is not None:
            app.current_at = time.perf_counter()  # up to date, and nothing more to draw
            break
        await asyncio.sleep(0.001)
    shown, current = app.shown_at, app.current_at
    CPU_MS.append((time.process_time() - c0) * 1000)
    if want[0] == "mode":
        CURRENT_MS.append((current - t0) * 1000 if current is not None else 2000.0)
    app.want = None
    return (shown - t0) * 1000 if shown is not None else 2000.0


async def stop_server(app: MeasuredApp, pilot: Any) -> None:
    """Stop the demo server once the cancelled sweep has let go of it (the agent refuses
    to stop a server a sweep is using)."""
    from dsv4tui.core.errors import UserError
    from dsv4tui.core.server import control as server_control

    for _ in range(30):
        try:
            await server_control.stop(app.link.host(), grace=5)
            return
        except UserError:
            await pilot.pause(1.0)


async def load_phase(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    settings.telemetry.interval_s = 0.5
    settings.sweep.warmup = 0
    port = args.port or free_port()
    app = MeasuredApp(spec_for(port, 50.0), settings=settings, autostart=True)
    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.model
        await until(pilot, lambda: m.sanity.status in ("passed", "failed", "error"), 120,
                    "the demo server to be ready")
        app.sweeps.run_sweep(PlanInput("ui-latency", [(64, 100_000)], 128, 64))
        await until(pilot, lambda: sum(lv.completed for lv in m.sweep.levels) > 0, 120,
                    "the C=64 sweep's first requests")
        app.show_body("dashboard")
        await until(pilot, lambda: m.server.log_path is not None, 10, "the server log path")
        assert m.server.log_path is not None
        flooder = start_flood(m.server.log_path, args.flood)
        await pilot.pause(3.0)  # the flood reaches the screen; every screen mounted once below
        first: dict[str, float] = {}
        CPU_MS.clear()
        for key in "124351":
            mode = {"1": "dashboard", "2": "logs", "3": "launch", "4": "bench", "5": "runs"}[key]
            shown = app.view == mode or mode in first
            ms = await press(app, pilot, key, ("mode", mode))
            if not shown:  # the first switch to it in this run (launch was shown at startup)
                first[mode] = ms
            await pilot.pause(0.2)
        out["first_visit"] = first
        CPU_MS.clear()  # the first visits are not in it
        CURRENT_MS.clear()
        lines0, frames0, t0 = len(m.logs) + m.logs.first, m.telemetry.frames, time.monotonic()
        cpu0 = time.process_time()
        switch: list[float] = []
        follow: list[float] = []
        by_screen: dict[str, list[float]] = {}
        cycle = ["2", "f", "4", "1", "f", "5", "3", "1", "f", "2", "f", "4"]
        names = {"1": "dashboard", "2": "logs", "3": "launch", "4": "bench", "5": "runs"}
        for n in range(args.keys):
            key = cycle[n % len(cycle)]
            if key == "f":
                panel = app.main.body.log_panel() if app.main is not None else None
                assert panel is not None
                view = panel.view
                follow.append(await press(app, pilot, "f", ("follow", not view.follow)))
            else:
                ms = await press(app, pilot, key, ("mode", names[key]))
                switch.append(ms)
                by_screen.setdefault(names[key], []).append(ms)
            await asyncio.sleep(random.uniform(0.05, 0.15))
        elapsed = time.monotonic() - t0
        out["console_cpu_pct"] = 100.0 * (time.process_time() - cpu0) / elapsed
        out["loadavg"] = os.getloadavg()[0]
        out["cores"] = os.cpu_count()
        out["log_lines_per_s"] = (m.logs.next - lines0) / elapsed
        out["frames_per_s"] = (m.telemetry.frames - frames0) / elapsed
        out["flood_per_s"] = args.flood
        out["completed_requests"] = sum(lv.completed for lv in m.sweep.levels)
        out["switch"], out["follow"], out["by_screen"] = switch, follow, by_screen
        out["cpu"] = list(CPU_MS)
        out["current"] = list(CURRENT_MS)
        flooder.kill()
        flooder.wait()
        app.action_cancel()
        await pilot.pause(1.0)
        await stop_server(app, pilot)
    return out


async def idle_phase(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    settings.telemetry.interval_s = 1.0
    port = args.port or free_port()
    app = MeasuredApp(spec_for(port, 50.0), settings=settings, autostart=True)
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.model
        await until(pilot, lambda: m.sanity.status in ("passed", "failed", "error"), 120,
                    "the demo server to be ready")
        app.show_body("dashboard")
        await pilot.pause(3.0)
        frames0 = m.telemetry.frames
        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.sleep(args.idle_s)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        frames = m.telemetry.frames - frames0
        gpus = len(m.telemetry.gpus())
        await stop_server(app, pilot)
    return {"cpu_pct": 100.0 * cpu / wall, "wall": wall, "frames": frames, "gpus": gpus}


def pct(values: list[float], q: float) -> float:
    vals = sorted(values)
    if not vals:
        return float("nan")
    k = min(len(vals) - 1, max(0, round(q / 100 * (len(vals) - 1))))
    return vals[k]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200, help="key presses under load")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle window (seconds)")
    parser.add_argument("--flood", type=int, default=2000, help="log lines per second")
    parser.add_argument("--port", type=int, default=0,
                        help="the simulated server's port (default: a free one)")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DSV4TUI_DATA_DIR"] = tmp
        os.environ["DSV4TUI_CONFIG"] = str(Path(tmp) / "config.toml")
        Path(os.environ["DSV4TUI_CONFIG"]).touch()  # named: it must exist
        try:
            load = asyncio.run(load_phase(args))
            idle = asyncio.run(idle_phase(args)) if args.idle_s > 0 else None
        finally:  # never leave the simulated server running
            subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace",
                            "3"], env=dict(os.environ, **demo_env()), capture_output=True,
                           timeout=60)
    every = load["switch"] + load["follow"]
    print("dsv4tui UI latency (headless Textual; keys via the driver; frame = first composed "
          "update showing the key's effect)")
    print(f"load: C=64 sweep ({load['completed_requests']} requests done during the run), "
          f"8 GPUs at {load['frames_per_s']:.1f} frames/s, log flood "
          f"{load['flood_per_s']} lines/s written by another process, "
          f"{load['log_lines_per_s']:.0f} lines/s reached the log view")
    print(f"      console CPU under load {load['console_cpu_pct']:.0f} % of one core; host load "
          f"average {load['loadavg']:.1f} on {load['cores']} cores (the simulator, the agent "
          f"and the flood share them)")
    for name, values in (("screen switch", load["switch"]), ("follow toggle", load["follow"]),
                         ("all keys", every)):
        print(f"  {name:<14} n={len(values):<4} p50 {statistics.median(values):6.1f} ms   "
              f"p99 {pct(values, 99):6.1f} ms   max {max(values):6.1f} ms")
    cur = load["current"]
    print(f"  switch -> current data  p50 {statistics.median(cur):6.1f} ms   p99 "
          f"{pct(cur, 99):6.1f} ms  (the switch frame shows the screen as it was left; "
          f"its parts are brought up to date in the same callback)")
    print(f"  console CPU per key (key to frame, all threads): p50 "
          f"{statistics.median(load['cpu']):.1f} ms  p90 {pct(load['cpu'], 90):.1f} ms")
    print("  switch to:     " + "  ".join(
        f"{name} p50 {statistics.median(v):.0f}/p99 {pct(v, 99):.0f} ms"
        for name, v in sorted(load["by_screen"].items())))
    print("  first switch to each screen (warm-up, not in the numbers above): " + "  ".join(
        f"{name} {ms:.0f} ms" for name, ms in load["first_visit"].items()))
    p99 = pct(every, 99)
    print(f"key press -> screen update p99: {p99:.1f} ms (target < 50 ms): "
          f"{'OK' if p99 < 50 else 'OVER'}"
          )
    if idle is not None:
        print(f"idle: {idle['gpus']} GPUs at 1 Hz ({idle['frames']} frames in "
              f"{idle['wall']:.0f} s): console CPU {idle['cpu_pct']:.1f} % of one core "
              f"(target < 25 %): {'OK' if idle['cpu_pct'] < 25 else 'OVER'}")
    if args.json:
        print(json.dumps({
            "keys": len(every), "loadavg": load["loadavg"],
            "p50": statistics.median(every), "p90": pct(every, 90), "p99": p99,
            "max": max(every), "cpu_p50": statistics.median(load["cpu"]),
            "cpu_p90": pct(load["cpu"], 90),
            "switch_p99": pct(load["switch"], 99), "follow_p99": pct(load["follow"], 99),
            "current_p50": statistics.median(cur), "current_p99": pct(cur, 99),
            "first_visit": load["first_visit"], "console_cpu_pct": load["console_cpu_pct"],
            "idle_cpu_pct": idle["cpu_pct"] if idle is not None else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
