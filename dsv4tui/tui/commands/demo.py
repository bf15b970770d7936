"""`dsv4tui demo`: the dashboard against the built-in demo host (this machine + the simulator).

Nothing to install or configure: the simulated SGLang server starts through the same
``server start`` path as a real one (default profile: MXFP4 on triton), so a first look shows
the startup phases, then ready, then the sanity gate. Every number says SIMULATED.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsv4tui.core.config import SweepPlan
from dsv4tui.core.entry import load_settings
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.tui.commands.connect import add_app_args, need_terminal

FLEET_STARTS = 2  # the demo fleet starts the simulated server on this many hosts


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="the dashboard against a simulated 8-GPU host (nothing "
                       "to set up)")
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


def build_app(args: argparse.Namespace) -> Any:
    """The demo's dashboard (``demo``, and each browser tab of ``serve demo``)."""
    from dsv4tui.core.config import DEMO, DEMO_PAIR
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.tui.app import Dsv4App

    settings, _ = load_settings(args)
    if "sweep" not in settings.model_fields_set:
        # The simulator decodes at the campaign's real speed (~23 tok/s at C=16), so the full
        # campaign plan would take 10+ minutes; the demo's default is a shorter sweep.
        settings.sweep = SweepPlan(levels=[(1, 4), (8, 16), (16, 32)], output_len=64)
    spec = host_spec(DEMO_PAIR if getattr(args, "nodes", 1) == 2 else DEMO, settings)
    return Dsv4App(spec, settings=settings, theme=args.theme, autostart=not args.no_start,
                   start_mode=args.screen)


def run(args: argparse.Namespace) -> int:
    if args.fleet:
        return run_fleet(args)
    if args.hosts is not None:
        raise UserError("demo: --hosts goes with --fleet", EXIT_CONFIG)
    app = build_app(args)
    need_terminal("demo")
    return app.run() or 0


def run_fleet(args: argparse.Namespace) -> int:
    """The demo fleet (dsv4tui.core.fleet.demo) in the Fleet view; the simulated servers it
    started on the first hosts are stopped when it ends."""
    from dsv4tui.core.entry import run_async
    from dsv4tui.core.fleet import demo as fleet_demo
    from dsv4tui.core.fleet.model import Fleet
    from dsv4tui.tui.app_fleet import browse

    if args.hosts is not None and not 1 <= args.hosts <= 64:
        raise UserError("demo: --hosts must be 1 to 64", EXIT_CONFIG)
    settings, _ = load_settings(args)
    if "sweep" not in settings.model_fields_set:
        settings.sweep = SweepPlan(levels=[(1, 4), (8, 16), (16, 32)], output_len=64)
    specs = fleet_demo.demo_specs(args.hosts)
    need_terminal("demo")

    async def main() -> int:
        import asyncio

        fleet = Fleet(specs)
        fleet.start()
        names = [] if args.no_start else [s.name for s in specs if s.simulated][:FLEET_STARTS]
        starting = asyncio.create_task(fleet_demo.start_servers(fleet, names))

        async def cleanup() -> None:
            started = await asyncio.wait_for(starting, 30) if not starting.done() \
                else starting.result()
            await fleet_demo.stop_servers(fleet, started)
        return await browse(fleet, settings=settings, theme=args.theme, title="demo fleet",
                            before_stop=cleanup)
    return run_async(main())
