"""`dsv4tui config check|path`."""

from __future__ import annotations

import argparse
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core import paths
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.entry import load_settings


def register(sub: Any) -> None:
    p = sub.add_parser("config")
    csub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    check = csub.add_parser("check", help="validate the config file")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(func=check_config)
    path = csub.add_parser("path", help="print the config file path")
    path.add_argument("--json", action="store_true",
                      help="print {path, exists, source} as JSON")
    path.set_defaults(func=print_path)


def check_config(args: argparse.Namespace) -> int:
    settings, path = load_settings(args)  # raises ConfigError (exit 2) when invalid
    hosts = {name: sorted(h.profiles) for name, h in settings.hosts.items()}
    if args.json:
        print_json({"ok": True, "path": str(path), "exists": path.exists(), "hosts": hosts,
                    "theme": settings.theme})
        return 0
    state = "ok" if path.exists() else "not found (defaults apply)"
    print(safe_text(f"{path}: {state}"))
    for name, profiles in hosts.items():
        print(safe_text(f"  host {name}: profiles {', '.join(profiles) or '(none)'}"))
    return 0


def print_path(args: argparse.Namespace) -> int:
    path, source = paths.config_choice(args.config)
    if getattr(args, "json", False):
        print_json({"path": str(path), "exists": path.exists(), "source": source})
    else:
        print(safe_text(path))
    return 0
