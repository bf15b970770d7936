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
    FrameError,
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


async def _agents(host: Any) -> tuple[list[tuple[str | None, Any]], str | None]:
    """Who samples: the host's own agent, or on a Slurm host with a running job each node's
    agent as a step of the job (core/launchers/slurm_nodes), with the job id."""
    from dsv4tui.core.launchers import slurm_nodes

    if slurm_nodes.is_slurm(host):
        js = await slurm_nodes.running_job(host)
        if js is not None:
            return ([(node, slurm_nodes.node_agent(host, js.job_id, node)) for node in js.nodes],
                    js.job_id)
    return [(None, host.agent)], None


def _nodes_line(telemetry: HostTelemetry, job: str | None) -> str:
    groups = ", ".join(f"{node} GPUs {g[0]}-{g[-1]}" if g else f"{node} no frame"
                       for node, g in telemetry.node_groups or [])
    return f"Slurm job {job}, each node sampled by its own agent (an srun step): {groups}"


def _cli_json(telemetry: HostTelemetry, frame: Frame, host: str, job: str | None
              ) -> dict[str, Any]:
    out = frame.to_cli_json(host)
    if job is not None:
        out["slurm_job_id"] = job
        out["nodes"] = [{"node": node, "gpus": g} for node, g in telemetry.node_groups or []]
    return out


async def _once(host_name: str, settings: Any, interval: float, as_json: bool) -> int:
    from dsv4tui.core.hosts.resolve import open_host
    from dsv4tui.core.nodes.telemetry import NodeFrames

    async with open_host(host_name, settings) as host:
        agents, job = await _agents(host)
        got = await asyncio.gather(*(agent.call(
            "telemetry", "--interval", _interval_arg(interval), "--count", "1",
            timeout=ONCE_TIMEOUT_S) for _, agent in agents), return_exceptions=True)
        telemetry = HostTelemetry(host.name, interval)
        nodes = NodeFrames([str(n) for n, _ in agents]) if job is not None else None
        for (node, _), events in zip(agents, got, strict=True):
            if isinstance(events, AgentFailed):
                err = driver_error(host_name, events)
                raise (UserError(f"node {node}: {err}", getattr(err, "exit_code", 1))
                       if node is not None else err) from None
            if isinstance(events, BaseException):
                raise events
            frame = first_frame(events)
            if nodes is not None:
                nodes.feed(telemetry, str(node), frame)
            else:
                telemetry.add(frame)
        assert telemetry.latest is not None
        if as_json:
            print_json(_cli_json(telemetry, telemetry.latest, host.name, job))
        else:
            print(render_table(telemetry))
            if job is not None:
                print(_nodes_line(telemetry, job))
    return 0


async def _live(host_name: str, settings: Any, interval: float, as_json: bool, redraw: bool,
                out: TextIO) -> int:
    from dsv4tui.core.hosts.resolve import open_host

    async with open_host(host_name, settings) as host:
        from dsv4tui.core.nodes.telemetry import NodeFrames

        telemetry = HostTelemetry(host.name, interval)
        agents, job = await _agents(host)
        nodes = NodeFrames([str(n) for n, _ in agents]) if job is not None else None
        queue: asyncio.Queue[tuple[str | None, dict[str, Any]] | BaseException | None] = \
            asyncio.Queue()

        async def pump(node: str | None, agent: Any) -> None:
            try:
                async for event in agent.events("telemetry", "--interval",
                                                _interval_arg(interval)):
                    queue.put_nowait((node, event))
                queue.put_nowait(None)
            except Exception as exc:  # handed to the drawing loop, raised there
                queue.put_nowait(exc)

        tasks = [asyncio.create_task(pump(node, agent)) for node, agent in agents]
        ended = 0
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
                if item is None:  # a stream ended (every node's: the view ends)
                    ended += 1
                    if ended == len(tasks):
                        return 0
                    continue
                if isinstance(item, AgentFailed):
                    raise driver_error(host_name, item)
                if isinstance(item, BaseException):
                    raise item
                node, event = item
                if nodes is not None:
                    try:
                        frame: Frame | None = nodes.feed(telemetry, str(node),
                                                         Frame.from_event(event))
                    except FrameError:
                        continue
                else:
                    frame = telemetry.add_event(event, time.monotonic())
                if frame is None:
                    continue
                if as_json:
                    out.write(json.dumps(_cli_json(telemetry, frame, host.name, job)) + "\n")
                    out.flush()
                else:
                    text = render_table(telemetry)
                    draw(out, text + ("\n" + _nodes_line(telemetry, job) if job else ""),
                         redraw)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.gather(*tasks)


def draw(out: TextIO, text: str, redraw: bool) -> None:
    """Redraw in place on a terminal (cursor home, clear each line's tail and below)."""
    if redraw:
        body = "".join(line + CLEAR_EOL + "\n" for line in text.splitlines())
        out.write(HOME + body + CLEAR_BELOW)
    else:
        out.write(text + "\n\n")
    out.flush()
