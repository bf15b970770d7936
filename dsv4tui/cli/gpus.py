"""``dsv4tui gpus HOST [--once] [--json] [--interval S]``: every GPU of a host, tensor pipe
included, from the agent's ``telemetry`` stream.

* ``--once --json``: one frame as JSON (``{"host", "time", "gpus": [...], "source"}``);
* ``--once``: one table;
* live (default): the table redrawn in place (ANSI cursor-home) until Ctrl-C; piped, one table
  per frame; ``--json`` live: one JSON object per line per frame.

No NVIDIA driver on the host: one line ``no NVIDIA driver on HOST``, exit code 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from datetime import datetime
from typing import Any, TextIO

from dsv4tui.cli.output import print_json
from dsv4tui.core.entry import load_settings
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_NO_DRIVER, AgentFailed, UserError
from dsv4tui.core.telemetry import (
    STALE_TICKS,
    Frame,
    GpuStatus,
    HostTelemetry,
    fmt_age,
    fmt_mem,
    fmt_pct,
    fmt_reading,
)
from dsv4tui.core.text_table import table

MIN_INTERVAL = 0.2
ONCE_TIMEOUT_S = 120.0  # NVML init on 8 GPUs, or the nvidia-smi probe, can take a while
CLEAR, HOME, CLEAR_EOL, CLEAR_BELOW = "\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"

HEADERS = ["GPU", "UTIL", "TENSOR", "SM", "DRAM", "MEM GiB", "POWER W", "TEMP", "SM MHz", "NOTE"]


def register(sub: Any) -> None:
    p = sub.add_parser("gpus", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("host", metavar="HOST",
                   help="local, demo, a [hosts] name, an ~/.ssh/config alias or user@host[:port]")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between frames (default: telemetry.interval_s, 1.0; min 0.2)")
    p.set_defaults(func=run)


def _interval_arg(seconds: float) -> str:
    return f"{seconds:g}"


def driver_error(host: str, exc: AgentFailed) -> UserError:
    """The agent's no-driver / no-GPU failures as one clean line with exit code 3."""
    if exc.kind == "no_driver":
        where = host if host != "local" else str(exc.event.get("host") or host)
        return UserError(f"no NVIDIA driver on {where}", EXIT_NO_DRIVER)
    if exc.exit_code == EXIT_NO_DRIVER:
        return UserError(exc.message, EXIT_NO_DRIVER)
    return exc


def first_frame(events: list[dict[str, Any]]) -> Frame:
    for ev in events:
        if ev.get("type") == "frame":
            return Frame.from_event(ev)
    raise UserError("the agent sent no telemetry frame")


def _note(status: GpuStatus) -> str:
    g = status.sample
    notes = []
    if status.stale:
        notes.append(f"stale {fmt_age(status.age_s)}")
    if g.error:
        notes.append(g.error)
    if g.cuda_core_bound:
        notes.append("busy, tensor pipe idle")
    reasons = [r for r in g.clock_event_reasons or () if r not in ("gpu_idle",)]
    if reasons:
        notes.append("clocks: " + ",".join(reasons))
    return "; ".join(notes)


def render_table(telemetry: HostTelemetry, now: float | None = None) -> str:
    """The plain-text table of the newest frame (and stale marks), header line first."""
    frame = telemetry.latest
    if frame is None:
        return f"{telemetry.host}: waiting for telemetry…"
    stamp = datetime.fromtimestamp(frame.time).strftime("%Y-%m-%d %H:%M:%S")
    head = (f"{telemetry.host} · {telemetry.summary()} · driver {frame.driver or 'n/a'} · "
            f"{frame.source} · {stamp}")
    if frame.simulated:
        head += " · SIMULATED"
    if telemetry.is_stale(None, now):
        head += f" · no frame for {fmt_age(telemetry.age(None, now) or 0.0)}"
    rows = []
    for status in telemetry.gpus(now):
        g = status.sample
        rows.append([
            str(g.index), fmt_pct(g.util_gpu), fmt_pct(g.tensor_active), fmt_pct(g.sm_active),
            fmt_pct(g.dram_active),
            fmt_mem(g.mem_used_mib, g.mem_total_mib).removesuffix("G"),
            f"{fmt_reading(g.power_w)}/{fmt_reading(g.power_limit_w)}",
            fmt_reading(g.temp_c, "°C"), fmt_reading(g.sm_clock_mhz), _note(status),
        ])
    lines = [head, table(rows, HEADERS)]
    if frame.note:
        lines.append(f"({frame.note})")
    return "\n".join(lines)


def run(args: Any) -> int:
    settings, _path = load_settings(args)
    interval = args.interval if args.interval is not None else settings.telemetry.interval_s
    if not interval >= MIN_INTERVAL:
        raise UserError(f"--interval must be >= {MIN_INTERVAL:g} s", EXIT_CONFIG)
    if args.once:
        return _run(_once(args.host, settings, interval, args.json))
    out = sys.stdout
    redraw = out.isatty() and not args.json
    try:
        return _run(_live(args.host, settings, interval, args.json, redraw, out))
    except KeyboardInterrupt:  # Ctrl-C is how the live view ends
        return 0
    finally:
        if redraw:
            out.write(SHOW_CURSOR)
            out.flush()


def _run(coro: Any) -> int:
    return int(asyncio.run(coro))


async def _once(host_name: str, settings: Any, interval: float, as_json: bool) -> int:
    from dsv4tui.core.hosts.resolve import open_host

    async with open_host(host_name, settings) as host:
        try:
            events = await host.agent.call("telemetry", "--interval", _interval_arg(interval),
                                           "--count", "1", timeout=ONCE_TIMEOUT_S)
        except AgentFailed as exc:
            raise driver_error(host_name, exc) from None
        frame = first_frame(events)
        if as_json:
            print_json(frame.to_cli_json(host.name))
        else:
            telemetry = HostTelemetry(host.name, interval)
            telemetry.add(frame)
            print(render_table(telemetry))
    return 0


async def _live(host_name: str, settings: Any, interval: float, as_json: bool, redraw: bool,
                out: TextIO) -> int:
    from dsv4tui.core.hosts.resolve import open_host

    async with open_host(host_name, settings) as host:
        telemetry = HostTelemetry(host.name, interval)
        queue: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in host.agent.events("telemetry", "--interval",
                                                     _interval_arg(interval)):
                    queue.put_nowait(event)
                queue.put_nowait(None)
            except Exception as exc:  # handed to the drawing loop, raised there
                queue.put_nowait(exc)

        task = asyncio.create_task(pump())
        if redraw:
            out.write(HIDE_CURSOR + CLEAR + HOME)
            out.flush()
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), STALE_TICKS * interval)
                except TimeoutError:
                    if redraw:  # no frame for three intervals: show the age
                        draw(out, render_table(telemetry), redraw)
                    continue
                if item is None:
                    return 0
                if isinstance(item, AgentFailed):
                    raise driver_error(host_name, item)
                if isinstance(item, BaseException):
                    raise item
                frame = telemetry.add_event(item, time.monotonic())
                if frame is None:
                    continue
                if as_json:
                    out.write(json.dumps(frame.to_cli_json(host.name)) + "\n")
                    out.flush()
                else:
                    draw(out, render_table(telemetry), redraw)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def draw(out: TextIO, text: str, redraw: bool) -> None:
    """Redraw in place on a terminal (cursor home, clear each line's tail and below)."""
    if redraw:
        body = "".join(line + CLEAR_EOL + "\n" for line in text.splitlines())
        out.write(HOME + body + CLEAR_BELOW)
    else:
        out.write(text + "\n\n")
    out.flush()
