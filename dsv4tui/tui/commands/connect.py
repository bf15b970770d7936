"""`dsv4tui connect HOST`: open the dashboard attached to HOST; `connect HOST HOST ...`: the
Fleet view of those hosts (each row's ``enter`` opens its dashboard, ``0`` goes back)."""

from __future__ import annotations

import argparse
from typing import Any

from dsv4tui.core.entry import load_settings
from dsv4tui.tui.commands.dashboard import add_app_args, run_app, run_fleet


def register(sub: Any) -> None:
    p = sub.add_parser("connect")
    p.add_argument("host", metavar="HOST", nargs="+")
    p.add_argument("--accept-new", action="store_true",
                   help="trust an unknown host key on first use (a changed key is still refused)")
    add_app_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    hosts = [args.host] if isinstance(args.host, str) else list(args.host)
    if len(hosts) == 1:
        return run_app(args, "connect")
    from dsv4tui.core.fleet.model import specs_for

    settings, path = load_settings(args)
    specs = specs_for(hosts, settings, accept_new=args.accept_new)  # a bad name fails here
    return run_fleet("connect", specs, settings, theme=args.theme, config_path=path,
                     interval=max(1.0, settings.telemetry.interval_s))
