"""``dsv4tui fleet [HOST ...] [--json] [--watch]``: every host at a glance.

Every host (the names given, else every ``[hosts.NAME]`` of the config) is connected in
parallel; each row: connection state, GPU count and model, mean utilisation / tensor pipe /
memory / power, the server's state, profile and backend, the best tok/s of the host's last
run. A host that cannot be reached shows its one-line reason and delays no other.

``--json``: ``{"hosts": [...]}``, one object per host with its ``host`` name and either its
figures or the one-line ``error``. Exit code: 0 when every host answered, 4 when at least one
could not be connected (unreachable, or refused by its host key or authentication: it is in the
output with its error), 2 for bad usage.
``--demo``: the simulated demo fleet (``dsv4tui demo --fleet`` shows it live). Its ``offline``
host is unreachable on purpose (it shows what an unreachable row looks like): it does not make
the exit 4 (its JSON says ``"demo_offline": true``); any other host of the demo does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_CONNECT, UserError
from dsv4tui.core.text_table import table

CLEAR, HOME, CLEAR_BELOW = "\x1b[2J", "\x1b[H", "\x1b[J"


def register(sub: Any) -> None:
    p = sub.add_parser("fleet", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("hosts", metavar="HOST", nargs="*",
                   help="hosts as for connect (default: every [hosts] entry of the config)")
    p.add_argument("--json", action="store_true", help="JSON: {\"hosts\": [...]}")
    p.add_argument("--watch", action="store_true", help="redraw every interval until Ctrl-C")
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="telemetry and redraw interval in seconds (default 1, min 0.2)")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S",
                   help="how long to wait for a silent host before printing (default 20)")
    p.add_argument("--demo", action="store_true", help="the simulated demo fleet")
    p.add_argument("--accept-new", action="store_true",
                   help="trust unknown host keys on first use (a changed key is still refused)")
    p.set_defaults(func=run)


def specs(args: argparse.Namespace) -> list[Any]:
    """The hosts ``args`` name (``connect`` with several hosts uses it too)."""
    from dsv4tui.core.fleet.model import specs_for

    if getattr(args, "demo", False):
        if args.hosts:
            raise UserError("fleet: --demo takes no HOST", EXIT_CONFIG)
        from dsv4tui.core.fleet.demo import demo_specs

        return demo_specs()
    settings, _ = load_settings(args)
    return specs_for(args.hosts, settings, accept_new=args.accept_new)


def render(summaries: list[Any], demo: bool = False, once: bool = False) -> str:
    """The table and one line per problem. ``once`` (no --watch): nothing retries after the
    command ends, so a host that did not connect is ``unreachable`` (or ``failed``: auth,
    host key), not ``lost · retry 3s``."""
    from dsv4tui.core.campaign.labels import safe_text
    from dsv4tui.core.fleet.demo import OFFLINE
    from dsv4tui.core.fleet.rows import COLUMNS, cells, problems

    def row(s: Any) -> list[str]:
        c = cells(s)
        if once and not s.connected:
            c["state"] = "failed" if s.state == "failed" else "unreachable"
        return [safe_text(c[key]) for key, _ in COLUMNS]

    rows = [row(s) for s in summaries]
    out = table(rows, [title for _, title in COLUMNS])
    lines = problems(summaries)
    if demo:  # the demo's unreachable host is there on purpose: say so
        lines = [line + " (the demo's offline host, unreachable on purpose)"
                 if line.startswith(OFFLINE + ":") else line for line in lines]
    if lines:
        out += "\n" + "\n".join(f"✗ {safe_text(line)}" for line in lines)
    return out


def run(args: argparse.Namespace) -> int:
    if args.interval < 0.2:
        raise UserError("fleet: --interval must be at least 0.2 s", EXIT_CONFIG)
    if args.timeout <= 0:
        raise UserError("fleet: --timeout must be positive", EXIT_CONFIG)
    return run_async(_run(args, specs(args)))


async def _run(args: argparse.Namespace, host_specs: list[Any]) -> int:
    from dsv4tui.core.fleet.model import Fleet

    fleet = Fleet(host_specs, interval=args.interval)
    try:
        await fleet.settled(args.timeout)
        if not args.watch:
            summaries = fleet.summaries()
            if args.json:
                print_json({"hosts": [_json(args, s) for s in summaries]})
            else:
                print(render(summaries, args.demo, once=True))
            return EXIT_CONNECT if any(not s.connected and not _demo_offline(args, s)
                                       for s in summaries) else 0
        tty = sys.stdout.isatty()
        if tty:
            sys.stdout.write(CLEAR)
        while True:
            summaries = fleet.summaries()
            if args.json:
                import json

                sys.stdout.write(json.dumps({"hosts": [_json(args, s) for s in summaries]})
                                 + "\n")
            else:
                text = render(summaries, args.demo)
                sys.stdout.write(f"{HOME}{text}{CLEAR_BELOW}\n" if tty else text + "\n\n")
            sys.stdout.flush()
            await asyncio.sleep(args.interval)
    finally:
        await fleet.stop()


def _demo_offline(args: argparse.Namespace, summary: Any) -> bool:
    """The demo's own unreachable host (there on purpose: it is not the user's problem)."""
    from dsv4tui.core.fleet.demo import OFFLINE

    return bool(getattr(args, "demo", False)) and summary.host == OFFLINE


def _json(args: argparse.Namespace, summary: Any) -> dict[str, Any]:
    out: dict[str, Any] = summary.to_json()
    if _demo_offline(args, summary):
        out["demo_offline"] = True
    return out
