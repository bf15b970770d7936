"""`dsv4tui demo`: the dashboard against the built-in demo host (this machine + the simulator).

Nothing to install or configure: the simulated SGLang server starts through the same
``server start`` path as a real one (default profile: MXFP4 on triton), so a first look shows
the startup phases, then ready, then the sanity gate. Every number says SIMULATED.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsv4tui.commands.connect import add_app_args, need_terminal
from dsv4tui.commands.output import load_settings


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="the dashboard against a simulated 8-GPU host (nothing "
                       "to set up)")
    p.add_argument("--no-start", action="store_true",
                   help="do not start the simulated server (r starts it)")
    p.add_argument("--nodes", type=int, choices=(1, 2), default=1,
                   help="2: a host made of two simulated nodes of 8 H200 on this machine "
                   "(demo-pair: one launch at TP 16 across both)")
    add_app_args(p)
    p.set_defaults(func=run)


def build_app(args: argparse.Namespace) -> Any:
    """The demo's dashboard (``demo``, and each browser tab of ``serve demo``)."""
    from dsv4tui.app import Dsv4App
    from dsv4tui.config import DEMO, DEMO_PAIR, SweepPlan
    from dsv4tui.hosts.resolve import host_spec

    settings, _ = load_settings(args)
    if "sweep" not in settings.model_fields_set:
        # The simulator decodes at the campaign's real speed (~23 tok/s at C=16), so the full
        # campaign plan would take 10+ minutes; the demo's default is a shorter sweep.
        settings.sweep = SweepPlan(levels=[(1, 4), (8, 16), (16, 32)], output_len=64)
    spec = host_spec(DEMO_PAIR if getattr(args, "nodes", 1) == 2 else DEMO, settings)
    return Dsv4App(spec, settings=settings, theme=args.theme, autostart=not args.no_start,
                   start_mode=args.screen)


def run(args: argparse.Namespace) -> int:
    app = build_app(args)
    need_terminal("demo")
    return app.run() or 0
