"""`dsv4tui demo`: the dashboard against the built-in demo host (this machine + the simulator).

Nothing to install or configure: the simulated SGLang server starts through the same
``server start`` path as a real one (default profile: MXFP4 on triton), so a first look shows
the startup phases, then ready, then the sanity gate. Every number says SIMULATED.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dsv4tui.core.entry import load_settings
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.tui.commands.dashboard import (
    BeforeStop,
    add_app_args,
    demo_settings,
    run_app,
    run_fleet,
)

FLEET_STARTS = 2  # the demo fleet starts the simulated server on this many hosts


def register(sub: Any) -> None:
    p = sub.add_parser("demo")
    p.add_argument("--no-start", action="store_true",
                   help="do not start the simulated server (r starts it)")
    p.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                   help="2: a host made of two simulated nodes of 8 H200 on this machine "
                   "(demo-pair: one launch at TP 16 across both)")
    p.add_argument("--fleet", action="store_true",
                   help="the Fleet view of several simulated hosts (and one unreachable)")
    p.add_argument("--hosts", type=int, default=None, metavar="N",
                   help="with --fleet: how many simulated hosts (default 4)")
    add_app_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.fleet:
        return run_demo_fleet(args)
    if args.hosts is not None:
        raise UserError("demo: --hosts goes with --fleet", EXIT_CONFIG)
    return run_app(args, "demo", demo=True)


def run_demo_fleet(args: argparse.Namespace) -> int:
    """The demo fleet (dsv4tui.core.fleet.demo) in the Fleet view; the simulated servers it
    started on the first hosts are stopped when it ends."""
    from dsv4tui.core.fleet import demo as fleet_demo

    if args.hosts is not None and not 1 <= args.hosts <= 64:
        raise UserError("demo: --hosts must be 1 to 64", EXIT_CONFIG)
    settings = demo_settings(load_settings(args)[0])
    specs = fleet_demo.demo_specs(args.hosts)

    def start_servers(fleet: Any) -> BeforeStop:
        fleet.start()
        names = [] if args.no_start else [s.name for s in specs if s.simulated][:FLEET_STARTS]
        starting = asyncio.create_task(fleet_demo.start_servers(fleet, names))

        async def cleanup() -> None:
            started = await asyncio.wait_for(starting, 30) if not starting.done() \
                else starting.result()
            await fleet_demo.stop_servers(fleet, started)
        return cleanup
    return run_fleet("demo", specs, settings, theme=args.theme, title="demo fleet",
                     on_start=start_servers)
