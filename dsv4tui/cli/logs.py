"""CLI: ``dsv4tui logs HOST [--follow] [--lines N]``: the server log of a host, through its agent."""

from __future__ import annotations

import json
import sys
from typing import Any

from dsv4tui.core.campaign.labels import safe_line, safe_text
from dsv4tui.core.entry import load_settings, run_async


def register(sub: Any) -> None:
    p = sub.add_parser("logs", help="print or follow the server log of a host")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--lines", "-n", type=int, default=200, help="last N lines (default 200)")
    where.add_argument("--from-start", action="store_true", help="the whole log")
    p.add_argument("--file", help="a log file on the host (default: our server's log, else the "
                   "file the server on the default profile's port writes to)")
    p.add_argument("--json", action="store_true",
                   help="print the agent's events (lines + parsed events) as JSON lines")
    p.set_defaults(func=_run)


def _print_event(ev: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(ev) + "\n")
    elif ev.get("type") == "lines":
        for line in ev.get("lines") or []:  # a log line cannot drive the terminal
            sys.stdout.write(safe_line(str(line)) + "\n")
    elif ev.get("type") == "log_rotated":
        sys.stdout.write("--- the log was replaced (a new launch) ---\n")
    elif ev.get("type") == "log_waiting":
        sys.stdout.write(f"--- waiting for {safe_text(ev.get('path'))} to appear ---\n")
    sys.stdout.flush()


def _run(args: Any) -> int:
    from dsv4tui.core.errors import ConfigError
    from dsv4tui.core.hosts.resolve import open_host

    if args.lines < 0:
        raise ConfigError("--lines must be >= 0")
    settings, _ = load_settings(args)
    cmd = ["logs", *([args.file] if args.file else [])]
    cmd += ["--from-start"] if args.from_start else ["--lines", str(args.lines)]
    if not args.json:
        cmd.append("--no-parse")

    async def go() -> None:
        async with open_host(args.host, settings) as host:
            if not args.file and host.config.profiles:  # a server we did not start: its file
                _, prof = host.config.profile()
                cmd[1:1] = ["--port", str(prof.port), "--host", prof.host]
            if args.follow:
                async for ev in host.agent.events(*cmd, "--follow"):
                    _print_event(ev, args.json)
            else:
                for ev in await host.agent.call(*cmd):
                    _print_event(ev, args.json)

    run_async(go())
    return 0
