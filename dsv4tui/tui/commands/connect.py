"""`dsv4tui connect HOST`: open the dashboard attached to HOST; `connect HOST HOST ...`: the
Fleet view of those hosts (each row's ``enter`` opens its dashboard, ``0`` goes back)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dsv4tui.core.entry import load_settings
from dsv4tui.core.errors import EXIT_CONFIG, UserError


def _theme(value: str) -> str:
    from dsv4tui.core.theme_names import check_theme

    try:
        return check_theme(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def need_terminal(command: str) -> None:
    """The dashboard draws on a terminal and reads keys from it: refuse (exit 2) when stdin
    or stdout is not one, instead of running a TUI into a pipe at full CPU."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if not (stream is not None and stream.isatty())]
    if missing:
        raise UserError(f"{command}: the dashboard needs a terminal ({' and '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} not one); for scripts use "
                        "the CLI commands (server, sweep, runs, gpus --once)", EXIT_CONFIG)


def add_app_args(p: argparse.ArgumentParser) -> None:
    """The options every command that opens the dashboard takes."""
    p.add_argument("--theme", type=_theme, help="dark, light, high-contrast (or a Textual "
                   "theme); default: the config's theme")
    p.add_argument("--screen", default="dashboard",
                   choices=("dashboard", "logs", "launch", "bench", "runs"),
                   help="the screen to open on")


def register(sub: Any) -> None:
    p = sub.add_parser("connect", help="open the dashboard for HOST (a config host, an "
                       "~/.ssh/config alias, user@host[:port], local or demo); several hosts: "
                       "the Fleet view of them all")
    p.add_argument("host", metavar="HOST", nargs="+")
    p.add_argument("--accept-new", action="store_true",
                   help="trust an unknown host key on first use (a changed key is still refused)")
    add_app_args(p)
    p.set_defaults(func=run)


def build_app(args: argparse.Namespace) -> Any:
    """The dashboard for ``args.host`` (``connect``, and each browser tab of ``serve``)."""
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.tui.app import Dsv4App

    settings, path = load_settings(args)
    name = args.host if isinstance(args.host, str) else args.host[0]
    spec = host_spec(name, settings, accept_new=args.accept_new)
    return Dsv4App(spec, settings=settings, theme=args.theme, start_mode=args.screen,
                   config_path=path)


def run(args: argparse.Namespace) -> int:
    hosts = [args.host] if isinstance(args.host, str) else list(args.host)
    if len(hosts) > 1:
        return run_fleet(args, hosts)
    app = build_app(args)
    need_terminal("connect")
    return app.run() or 0


def run_fleet(args: argparse.Namespace, hosts: list[str]) -> int:
    """The Fleet view of ``hosts``, connected in parallel (dsv4tui.tui.app_fleet.browse)."""
    from dsv4tui.core.entry import run_async
    from dsv4tui.core.fleet.model import Fleet, specs_for
    from dsv4tui.tui.app_fleet import browse

    settings, path = load_settings(args)
    specs = specs_for(hosts, settings, accept_new=args.accept_new)  # a bad name fails here
    need_terminal("connect")

    async def main() -> int:
        fleet = Fleet(specs, interval=max(1.0, settings.telemetry.interval_s))
        return await browse(fleet, settings=settings, theme=args.theme, config_path=path)
    return run_async(main())
