"""How the commands open the dashboard (``connect``, ``demo``, each browser tab of ``serve``):
their shared options, the terminal check, the App for one host, and the Fleet of several --
in one place, so the three open the same dashboard the same way."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from dsv4tui.core.config import DEMO, DEMO_PAIR, Settings, SweepPlan
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, UserError

AppRunner = Callable[[Any], Awaitable[Any]]
BeforeStop = Callable[[], Awaitable[None]]


def _theme(value: str) -> str:
    from dsv4tui.core.theme_names import check_theme

    try:
        return check_theme(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_app_args(p: argparse.ArgumentParser) -> None:
    """The options every command that opens the dashboard takes."""
    p.add_argument("--theme", type=_theme, help="dark, light, high-contrast (or a Textual "
                   "theme); default: the config's theme")
    p.add_argument("--screen", default="dashboard",
                   choices=("dashboard", "logs", "launch", "bench", "runs"),
                   help="the screen to open on")


def need_terminal(command: str) -> None:
    """The dashboard draws on a terminal and reads keys from it: refuse (exit 2) when stdin
    or stdout is not one, instead of running a TUI into a pipe at full CPU."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if not (stream is not None and stream.isatty())]
    if missing:
        raise UserError(f"{command}: the dashboard needs a terminal ({' and '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} not one); for scripts use "
                        "the CLI commands (server, sweep, runs, gpus --once)", EXIT_CONFIG)


def demo_settings(settings: Settings) -> Settings:
    """The demo's settings: the simulator decodes at the campaign's real speed (~23 tok/s
    at C=16), so the full campaign plan would take 10+ minutes; without a ``[sweep]`` of the
    config's own the demo sweeps a shorter plan."""
    if "sweep" not in settings.model_fields_set:
        settings.sweep = SweepPlan(levels=[(1, 4), (8, 16), (16, 32)], output_len=64)
    return settings


def app_for(args: argparse.Namespace, *, demo: bool = False) -> Any:
    """The dashboard for ``args.host`` (its first one); ``demo``: for the demo host (two
    nodes with ``--nodes 2``) with the demo's settings, starting its simulated server unless
    ``--no-start``. A bad host name fails here, before anything is drawn."""
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.tui.app import Dsv4App

    settings, path = load_settings(args)
    notes: list[str] = []
    if demo:
        from dsv4tui.core.hosts.resolve import claim_demo_port

        demo_settings(settings)
        name = DEMO_PAIR if getattr(args, "nodes", 1) == 2 else DEMO
        notes.append("demo: " + claim_demo_port()[1])  # a free port, never another server's
    else:
        name = args.host if isinstance(args.host, str) else args.host[0]
    spec = host_spec(name, settings, accept_new=getattr(args, "accept_new", False))
    return Dsv4App(spec, settings=settings, theme=args.theme, start_mode=args.screen,
                   autostart=demo and not args.no_start, config_path=path, notes=notes)


def run_app(args: argparse.Namespace, command: str, *, demo: bool = False) -> int:
    app = app_for(args, demo=demo)
    need_terminal(command)
    return app.run() or 0


def run_fleet(command: str, specs: Sequence[Any], settings: Settings, *, theme: str | None,
              config_path: Path | None = None, title: str = "fleet", interval: float = 1.0,
              on_start: Callable[[Any], BeforeStop] | None = None) -> int:
    """The Fleet view of ``specs``, connected in parallel; ``on_start(fleet)`` runs once the
    fleet connects and returns what to do before it closes."""
    from dsv4tui.core.fleet.model import Fleet

    need_terminal(command)

    async def main() -> int:
        fleet = Fleet(specs, interval=interval)
        before_stop = on_start(fleet) if on_start is not None else None
        return await browse(fleet, settings=settings, theme=theme, config_path=config_path,
                            title=title, before_stop=before_stop)
    return run_async(main())


async def _run(app: Any) -> Any:
    return await app.run_async()


async def browse(fleet: Any, *, settings: Settings, theme: str | None = None,
                 config_path: Path | None = None, title: str = "fleet",
                 run: AppRunner = _run, before_stop: BeforeStop | None = None) -> int:
    """The Fleet, then a host's dashboard (``enter``), then the Fleet again (``0`` there) ...
    until one quits; the fleet's connections live through all of them (a dashboard shares
    its host's) and are closed at the end."""
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.controllers.fleet import BACK
    from dsv4tui.tui.fleet_app import FleetApp

    fleet.start()
    selected: str | None = None
    try:
        while True:
            app = FleetApp(fleet, settings=settings, theme=theme, selected=selected, title=title)
            host = await run(app)
            if not host:
                return int(getattr(app, "return_code", 0) or 0)
            selected = str(host)
            dash = Dsv4App(fleet.spec(selected), settings=settings, theme=theme,
                           config_path=config_path)
            dash.fleet.join(fleet.supervisor(selected))
            result = await run(dash)
            fleet.reread_runs()
            if result != BACK:
                return result if isinstance(result, int) else int(dash.return_code or 0)
    finally:
        if before_stop is not None:
            with contextlib.suppress(Exception):
                await before_stop()
        await fleet.stop()
