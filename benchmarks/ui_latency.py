"""How fast does a key reach the screen under load, and what does the console cost?

1. Load: the demo host (real agent subprocesses + simulated SGLang, 8 simulated GPUs)
   serving a C=64 sweep, telemetry at 2 Hz, and a log flood of 2,000 lines/s appended to the
   server log by another process (the agent's ``logs --follow`` streams it, parsed, to the
   console). Keys go in the way the terminal driver sends them (``driver.send_message(Key)``):
   screen switches (1 2 3 4 5) and the log view's follow toggle (``f``). The clock stops at the
   first frame that shows the key's effect *with current figures*: a frame of the body as it
   was left, or with a chart still being drawn, does not count (see ``stale``). Prints
   p50/p90/p99 per target screen, the console's CPU % of one core, and what was pinned where.
2. Idle: a fresh console on the same demo host (server up, no sweep, no flood), telemetry at
   the product's default interval; prints the console's CPU % of one core.

Two topologies:

- default: everything on the machine's cores, as the scheduler likes (console, agents,
  simulator, load generator and flood compete);
- ``--pin``: the simulator, the agents (so the load generator) and the flood on one core, the
  console on another: the real topology, a console on a laptop and the load on the GPU host.
  The console pins itself with ``os.sched_setaffinity``; every agent command is started through
  ``taskset -c CORE`` (what they start inherits it), the flood too. The benchmark checks the
  affinity of every process of the run and prints it.

The app runs headless (Textual's headless driver). Each frame is also turned into the bytes a
terminal driver would write (``render_segments``), so the console CPU includes them; the
terminal's own drawing is not measured. Timing of requests is the agent's; the console only
displays events, so this load cannot distort the sweep's numbers.

    python benchmarks/ui_latency.py [--pin] [--keys 200] [--idle-s 30] [--flood 2000]
                                    [--port N] [--json] [--profile FILE]

``--idle-s 0`` skips the idle phase. Private Textual names, here only (benchmarks/): the
frame clock ``App._display`` (no public "frame composed" event), ``App._driver`` (to send keys
as the driver does), the compositor update classes.

Teardown: the sweep is cancelled on the host (``campaign cancel``) and the server stopped
before each phase ends, and once more when the script exits for any reason; what is still
running of this run afterwards is said on stderr. (Before: the benchmark "cancelled" with the
``x`` key's action, which asks first since issue 25, so the sweep ran on with its simulator
after the benchmark, and the idle phase attached to it and waited for a sanity that never
came.)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402  (private; benchmarks only)

from dsv4tui.core.campaign import session  # noqa: E402
from dsv4tui.core.config import HostConfig, Settings  # noqa: E402
from dsv4tui.core.errors import UserError  # noqa: E402
from dsv4tui.core.hosts import resolve  # noqa: E402
from dsv4tui.core.hosts.demo import demo_profile  # noqa: E402
from dsv4tui.core.hosts.resolve import HostSpec, demo_env  # noqa: E402
from dsv4tui.core.server import control as server_control  # noqa: E402
from dsv4tui.tui.app import Dsv4App  # noqa: E402
from dsv4tui.tui.screens.base import Body  # noqa: E402
from dsv4tui.tui.screens.modals import PlanInput  # noqa: E402
from dsv4tui.tui.widgets.charts import Chart  # noqa: E402
from dsv4tui.tui.widgets.log_view import LogView  # noqa: E402

SCREENS = {"1": "dashboard", "2": "logs", "3": "launch", "4": "bench", "5": "runs"}
CYCLE = ["2", "f", "4", "1", "f", "5", "3", "1", "f", "2", "f", "4"]
NO_FRAME_MS = 10_000.0  # a key whose current frame did not come within this counts as this


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stale(body: Body) -> list[str]:
    """What the body shows that is not its current state yet: a chart whose drawing of the
    current data, size and theme is not in (it is drawn in a thread; meanwhile the previous
    drawing shows), a following log not at its end."""
    out = [f"chart #{chart.id}" for chart in body.query(Chart) if not chart.settled]
    out += [f"log #{view.id or '?'} not at its end" for view in body.query(LogView)
            if view.follow and view.scroll_y < view.max_scroll_y - 0.5]
    return out


class MeasuredApp(Dsv4App):
    """Records when the first frame showing the last key's effect, current, is composed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.want: Callable[[], bool] | None = None  # the key's effect is on screen
        self.frames = 0  # frames composed since the key
        self.stale_frames = 0  # of them: the effect shown, but not current yet
        self.stale_what: set[str] = set()
        self.current_at: float | None = None
        self.composed = 0  # every frame composed (the steady rate)

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None:
            self.composed += 1
            if isinstance(renderable, CompositorUpdate) and self.is_headless:
                renderable.render_segments(self.console)  # the bytes a terminal would get
            if self.want is not None and self.current_at is None and screen is self.main:
                self.frames += 1
                if self.want():
                    body = self.body
                    left = stale(body) if body is not None else []
                    if left:
                        self.stale_frames += 1
                        self.stale_what.update(left)
                    else:
                        self.current_at = time.perf_counter()
        super()._display(screen, renderable)


FLOOD = r"""
import os, sys, time
path, rate, parent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_tick = max(1, rate // 100)
i = 0
next_t = time.monotonic()
with open(path, "a", encoding="utf-8") as fh:
    while os.getppid() == parent:  # the benchmark gone (even killed -9): stop too
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


class Topology:
    """Where things run: ``pin`` puts the load on ``load_core`` and the console on
    ``console_core``; otherwise nothing is pinned."""

    def __init__(self, pin: bool) -> None:
        self.pin = pin
        cores = sorted(os.sched_getaffinity(0))
        if pin and len(cores) < 2:
            raise SystemExit("--pin needs two cores; this process may use only "
                             f"{len(cores)}")
        self.load_core: int | None = cores[0] if pin else None
        self.console_core: int | None = cores[1] if pin else None

    def apply(self) -> None:
        """Pin the console (this thread, and the threads it starts) and the agents."""
        if self.console_core is None:
            return
        os.sched_setaffinity(0, {self.console_core})
        core = str(self.load_core)
        plain = resolve.prepare_agent

        async def pinned(spec: HostSpec, host_session: Any) -> Any:
            host = await plain(spec, host_session)
            host.agent.prefix = ["taskset", "-c", core, *host.agent.prefix]
            return host
        resolve.prepare_agent = pinned  # type: ignore[assignment]  # connect() looks it up

    def argv(self, argv: list[str]) -> list[str]:
        return ["taskset", "-c", str(self.load_core), *argv] if self.pin else argv

    def describe(self, flood_pid: int | None) -> str:
        """Every process of this run (the agent home's and the flood) and its cores."""
        home = demo_env()["DSV4TUI_AGENT_HOME"]
        found: dict[str, int] = {}
        for pid in run_pids(home) | ({flood_pid} if flood_pid else set()):
            try:
                cores = ",".join(map(str, sorted(os.sched_getaffinity(pid))))
            except OSError:
                continue
            found[cores] = found.get(cores, 0) + 1
        console = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        load = "; ".join(f"{n} on CPU {c}" for c, n in sorted(found.items()))
        return f"load processes (agents, simulator, load generator, flood): {load}; " \
               f"console on CPU {console}"


def run_pids(home: str) -> set[int]:
    """The processes started with this run's agent home in their environment."""
    key = f"DSV4TUI_AGENT_HOME={home}".encode()
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if key in env.split(b"\0"):
            pids.add(int(entry))
    return pids


def start_flood(path: str, rate: int, topo: Topology) -> subprocess.Popen[bytes]:
    """The server's log grows by ``rate`` lines/s (SGLang format), from another process, as
    it would on the host: the console only sees what the agent's ``logs --follow`` sends."""
    return subprocess.Popen(topo.argv([sys.executable, "-c", FLOOD, path, str(rate),
                                       str(os.getpid())]))


async def until(pilot: Any, app: MeasuredApp, cond: Callable[[], bool], timeout: float,
                what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            m = app.model
            raise SystemExit(
                f"timed out after {timeout:g} s waiting for {what}: connected "
                f"{m.conn.connected}, restart {m.startup.status} ({m.startup.current}), "
                f"sanity {m.sanity.status}, sweep {m.sweep.status}, campaign "
                f"{m.campaign.state}, last error {app.last_error!r}")
        await pilot.pause(0.05)


def spec_for(port: int, speed: float) -> HostSpec:
    profile = demo_profile("MXFP4", port=port, speed=speed,
                           extra_args=["--decode-log-interval", "10",
                                       "--sim-decode-speed", "40"])
    return HostSpec("demo", HostConfig(profiles={"mxfp4": profile}, default_profile="mxfp4"),
                    "demo", env=demo_env())


def showing(app: MeasuredApp, mode: str) -> Callable[[], bool]:
    return lambda: app.view == mode


def following(view: LogView, goal: bool) -> Callable[[], bool]:
    return lambda: view.follow is goal


async def press(app: MeasuredApp, key: str, want: Callable[[], bool],
                cpu: list[float], stale_first: list[bool]) -> float:
    """Send ``key``; the ms to the first current frame showing ``want``."""
    app.want, app.frames, app.stale_frames, app.current_at = want, 0, 0, None
    c0, t0 = time.process_time(), time.perf_counter()
    app._driver.send_message(events.Key(key, key))  # type: ignore[union-attr]
    deadline = t0 + NO_FRAME_MS / 1000
    while app.current_at is None and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    cpu.append((time.process_time() - c0) * 1000)
    stale_first.append(app.stale_frames > 0)
    app.want = None
    return (app.current_at - t0) * 1000 if app.current_at is not None else NO_FRAME_MS


async def leave_host(app: MeasuredApp, pilot: Any) -> None:
    """Cancel every sweep running on the demo host, then stop its server (the agent refuses
    to stop a server a sweep is using)."""
    host = app.link.host()
    for found in await session.listing(host, running=True):
        await session.cancel(host, None, str(found["id"]))
    for _ in range(30):
        try:
            await server_control.stop(host, grace=5)
            return
        except UserError:
            await pilot.pause(1.0)
    raise SystemExit("the demo server did not stop")


def clean_host() -> None:
    """Whatever happened: cancel what runs on this run's demo host, stop its server, and say
    what is left (never leave a load running after the benchmark)."""
    agent = [sys.executable, "-m", "dsv4tui.agent"]
    env = dict(os.environ, **demo_env())

    def call(*args: str) -> list[dict[str, Any]]:
        try:
            done = subprocess.run([*agent, *args], env=env, capture_output=True, timeout=90,
                                  text=True)
        except subprocess.TimeoutExpired:
            return []
        return [json.loads(line) for line in done.stdout.splitlines()
                if line.startswith("{")]
    for ev in call("campaign", "list", "--running"):
        if ev.get("type") == "campaign":
            call("campaign", "cancel", str(ev["id"]), "--wait", "30")
    call("server", "stop", "--grace", "3")
    home = demo_env()["DSV4TUI_AGENT_HOME"]
    deadline = time.monotonic() + 15  # the streams of the console that just ended are exiting
    while (left := run_pids(home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        print(f"warning: processes of this run still running: {sorted(left)}", file=sys.stderr)


async def load_phase(args: argparse.Namespace, topo: Topology) -> dict[str, Any]:
    settings = Settings()
    settings.telemetry.interval_s = 0.5
    settings.sweep.warmup = 0
    port = args.port or free_port()
    app = MeasuredApp(spec_for(port, 50.0), settings=settings, autostart=True)
    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.model
        await until(pilot, app, lambda: m.sanity.status in ("passed", "failed", "error"), 120,
                    "the demo server's sanity")
        app.sweeps.run_sweep(PlanInput("ui-latency", [(64, 100_000)], 128, 64))
        await until(pilot, app, lambda: sum(lv.completed for lv in m.sweep.levels) > 0, 120,
                    "the C=64 sweep's first requests")
        app.show_body("dashboard")
        await until(pilot, app, lambda: m.server.log_path is not None, 10,
                    "the server log path")
        assert m.server.log_path is not None
        flooder = start_flood(m.server.log_path, args.flood, topo)
        try:
            await pilot.pause(3.0)  # the flood reaches the screen
            cpu: list[float] = []
            stale_first: list[bool] = []
            first: dict[str, float] = {}
            for key in "124351":  # every body shown once: first visits, not in the numbers
                mode = SCREENS[key]
                if app.view != mode:
                    first[mode] = await press(app, key, showing(app, mode), cpu, stale_first)
                await pilot.pause(0.2)
            out["first_visit"] = first
            out["steady_cpu_pct"], out["steady_fps"] = {}, {}
            for name in ("dashboard", "logs") if args.steady_s > 0 else ():  # no key: steady
                app.show_body(name)
                await pilot.pause(1.0)
                c0, w0, f0 = time.process_time(), time.monotonic(), app.composed
                steady_prof = (cProfile.Profile(time.process_time)
                               if args.profile_steady and name == "dashboard" else None)
                if steady_prof is not None:
                    steady_prof.enable()
                await asyncio.sleep(args.steady_s)
                if steady_prof is not None:
                    steady_prof.disable()
                    steady_prof.dump_stats(args.profile_steady)
                wall = time.monotonic() - w0
                out["steady_cpu_pct"][name] = 100.0 * (time.process_time() - c0) / wall
                out["steady_fps"][name] = (app.composed - f0) / wall
            app.show_body("dashboard")
            await pilot.pause(0.5)
            cpu.clear()
            stale_first.clear()
            app.stale_what.clear()
            lines0, frames0, t0 = m.logs.next, m.telemetry.frames, time.monotonic()
            cpu0 = time.process_time()
            gc0 = [st["collections"] for st in gc.get_stats()]
            policy0 = app.gc_policy.full_collections, app.gc_policy.full_ms
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            if profiler is not None:
                profiler.enable()
            follow: list[float] = []
            by_screen: dict[str, list[float]] = {}
            for n in range(args.keys):
                key = CYCLE[n % len(CYCLE)]
                if key == "f":
                    panel = app.main.log_panel() if app.main is not None else None
                    assert panel is not None
                    view, goal = panel.view, not panel.view.follow
                    follow.append(await press(app, "f", following(view, goal), cpu,
                                              stale_first))
                else:
                    mode = SCREENS[key]
                    by_screen.setdefault(mode, []).append(await press(
                        app, key, showing(app, mode), cpu, stale_first))
                await asyncio.sleep(random.uniform(0.05, 0.15))
            elapsed = time.monotonic() - t0
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
            out["console_cpu_pct"] = 100.0 * (time.process_time() - cpu0) / elapsed
            out["gc"] = {"collections": [st["collections"] - n
                                         for st, n in zip(gc.get_stats(), gc0, strict=True)],
                         "policy_full": app.gc_policy.full_collections - policy0[0],
                         "policy_full_ms": app.gc_policy.full_ms - policy0[1],
                         "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
            out["loadavg"] = os.getloadavg()
            out["cores"] = os.cpu_count()
            out["log_lines_per_s"] = (m.logs.next - lines0) / elapsed
            out["frames_per_s"] = (m.telemetry.frames - frames0) / elapsed
            out["completed_requests"] = sum(lv.completed for lv in m.sweep.levels)
            out["follow"], out["by_screen"], out["cpu"] = follow, by_screen, cpu
            out["stale_first"] = sum(stale_first)
            out["stale_what"] = sorted(app.stale_what)
            out["topology"] = topo.describe(flooder.pid)
        finally:
            flooder.kill()
            flooder.wait()
        await leave_host(app, pilot)
    return out


async def idle_phase(args: argparse.Namespace, topo: Topology) -> dict[str, Any]:
    settings = Settings()
    port = args.port or free_port()
    app = MeasuredApp(spec_for(port, 50.0), settings=settings, autostart=True)
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.model
        await until(pilot, app, lambda: m.sanity.status in ("passed", "failed", "error"), 120,
                    "the demo server's sanity")
        app.show_body("dashboard")
        await pilot.pause(3.0)
        frames0 = m.telemetry.frames
        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.sleep(args.idle_s)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        frames = m.telemetry.frames - frames0
        gpus = len(m.telemetry.gpus())
        await leave_host(app, pilot)
    return {"cpu_pct": 100.0 * cpu / wall, "wall": wall, "frames": frames, "gpus": gpus,
            "interval_s": settings.telemetry.interval_s, "loadavg": os.getloadavg()}


def pct(values: list[float], q: float) -> float:
    """The q-th percentile, nearest rank."""
    vals = sorted(values)
    if not vals:
        return float("nan")
    k = min(len(vals) - 1, max(0, round(q / 100 * (len(vals) - 1))))
    return vals[k]


def row(name: str, values: list[float]) -> str:
    return (f"| {name} | {len(values)} | {statistics.median(values):.1f} | "
            f"{pct(values, 90):.1f} | {pct(values, 99):.1f} | {max(values):.1f} |")


def report(args: argparse.Namespace, load: dict[str, Any], idle: dict[str, Any] | None
           ) -> float:
    """Print the tables (Markdown); returns the all-keys p99."""
    switches = [ms for v in load["by_screen"].values() for ms in v]
    every = switches + load["follow"]
    mode = "--pin" if args.pin else "default"
    la = load["loadavg"]
    print(f"### ui_latency {mode}: key -> first current frame, ms (headless Textual 160x48)")
    print()
    print(f"load: C=64 sweep ({load['completed_requests']} requests done), 8 GPUs at "
          f"{load['frames_per_s']:.1f} frames/s, log flood {args.flood} lines/s "
          f"({load['log_lines_per_s']:.0f} lines/s reached the log view); "
          f"{load['topology']}; host load average {la[0]:.2f} / {la[1]:.2f} / {la[2]:.2f} "
          f"(1/5/15 min) on {load['cores']} cores")
    print()
    print("| key | n | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for name in ("dashboard", "logs", "launch", "bench", "runs"):
        if name in load["by_screen"]:
            print(row(f"switch to {name}", load["by_screen"][name]))
    print(row("**all switches**", switches))
    print(row("follow toggle (f)", load["follow"]))
    print(row("**all keys**", every))
    print()
    cpu = load["cpu"]
    print(f"- console CPU under load: **{load['console_cpu_pct']:.1f} %** of one core "
          f"(target <= 20 %); per key (key to its frame): p50 {statistics.median(cpu):.1f} ms, "
          f"p90 {pct(cpu, 90):.1f} ms")
    g = load["gc"]
    print(f"- garbage collections during the keys: young {g['collections'][0]}, "
          f"middle {g['collections'][1]}, full {g['collections'][2]} (of which the console's "
          f"policy ran {g['policy_full']} between keys, {g['policy_full_ms']:.0f} ms); "
          f"console max RSS {g['max_rss_mb']:.0f} MB")
    print("- console CPU under the same load with no key pressed (" + (", ".join(
        f"{name} {v:.1f} %, {load['steady_fps'][name]:.1f} frames/s"
        for name, v in load["steady_cpu_pct"].items()) or "not measured: --steady-s 0") + ")")
    if idle is not None:
        print(f"- console CPU idle ({idle['gpus']} GPUs, telemetry every "
              f"{idle['interval_s']:g} s, {idle['frames']} frames in {idle['wall']:.0f} s, "
              f"server up, no sweep, no flood): **{idle['cpu_pct']:.1f} %** of one core "
              f"(target <= 5 %; load average then {idle['loadavg'][0]:.2f})")
    print(f"- keys whose first frame showed the effect with something not current yet: "
          f"{load['stale_first']} of {len(every)}"
          + (f" ({', '.join(load['stale_what'])}); their time runs to the current frame"
             if load["stale_first"] else ""))
    print("- first switch to each body (not in the table): " + ", ".join(
        f"{name} {ms:.0f} ms" for name, ms in load["first_visit"].items()))
    p99 = pct(every, 99)
    goal = 35.0 if args.pin else 50.0
    print(f"- all keys p99 {p99:.1f} ms (target <= {goal:g} ms): "
          f"{'OK' if p99 <= goal else 'OVER'}")
    return p99


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="store_true",
                        help="load (simulator, agents, flood) on one core, console on another")
    parser.add_argument("--keys", type=int, default=200, help="key presses under load")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle window (seconds)")
    parser.add_argument("--steady-s", type=float, default=10.0,
                        help="seconds under load with no key, per body (dashboard, logs)")
    parser.add_argument("--flood", type=int, default=2000, help="log lines per second")
    parser.add_argument("--port", type=int, default=0,
                        help="the simulated server's port (default: a free one)")
    parser.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    parser.add_argument("--profile-steady", metavar="FILE",
                        help="cProfile the console on the dashboard under load, no key")
    parser.add_argument("--profile", metavar="FILE",
                        help="cProfile the console during the keys (its numbers are slower)")
    args = parser.parse_args()
    topo = Topology(args.pin)
    # the agents and the simulator run this tree's code, wherever the script is started from
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    topo.apply()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DSV4TUI_DATA_DIR"] = tmp
        os.environ["DSV4TUI_CONFIG"] = str(Path(tmp) / "config.toml")
        Path(os.environ["DSV4TUI_CONFIG"]).touch()  # named: it must exist
        try:
            load = asyncio.run(load_phase(args, topo))
            idle = asyncio.run(idle_phase(args, topo)) if args.idle_s > 0 else None
        finally:  # never leave the simulated server or a sweep running
            clean_host()
    p99 = report(args, load, idle)
    if args.json:
        every = [ms for v in load["by_screen"].values() for ms in v] + load["follow"]
        print(json.dumps({
            "pin": args.pin, "keys": len(every), "loadavg": load["loadavg"],
            "p50": statistics.median(every), "p90": pct(every, 90), "p99": p99,
            "by_screen": {k: {"p50": statistics.median(v), "p90": pct(v, 90),
                              "p99": pct(v, 99)} for k, v in load["by_screen"].items()},
            "follow_p99": pct(load["follow"], 99), "stale_first": load["stale_first"],
            "first_visit": load["first_visit"], "console_cpu_pct": load["console_cpu_pct"],
            "steady_cpu_pct": load["steady_cpu_pct"],
            "idle_cpu_pct": idle["cpu_pct"] if idle is not None else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
