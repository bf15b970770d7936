"""`dsv4tui hosts`: configured hosts, built-ins and ~/.ssh/config aliases (any other host name
or IP, and user@host[:port], work too, as for ssh)."""

from __future__ import annotations

import argparse
from typing import Any

from dsv4tui.cli.output import print_json
from dsv4tui.core.entry import load_settings
from dsv4tui.core.hosts.ssh_target import ssh_config_aliases
from dsv4tui.core.text_table import table


def register(sub: Any) -> None:
    p = sub.add_parser("hosts")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args)
    rows: list[dict[str, Any]] = [
        {"name": "local", "source": "built-in", "ssh": None, "profiles": sorted(
            settings.hosts["local"].profiles) if "local" in settings.hosts else []},
        {"name": "demo", "source": "built-in (simulated)", "ssh": None, "profiles": ["mxfp4", "nvfp4"]},
        {"name": "demo-pair", "source": "built-in (simulated, 2 nodes)", "ssh": None,
         "nodes": ["demo-node0", "demo-node1"], "profiles": ["pro-2x8"]},
    ]
    for name, host in settings.hosts.items():
        if name != "local" and host.nodes:  # a host made of nodes: each node has its ssh
            rows.append({"name": name, "source": f"config ({len(host.nodes)} nodes)",
                         "ssh": None, "nodes": list(host.nodes),
                         "profiles": sorted(host.profiles)})
        elif name != "local":
            rows.append({"name": name, "source": "config", "ssh": host.ssh or name,
                         "profiles": sorted(host.profiles)})
    seen = {r["name"] for r in rows}
    rows += [{"name": a, "source": "~/.ssh/config", "ssh": a, "profiles": []}
             for a in ssh_config_aliases() if a not in seen]
    if args.json:
        print_json({"hosts": rows})
        return 0
    print(table([[r["name"], r["source"], r["ssh"] or ("nodes " + ", ".join(r["nodes"])
                                                    if r.get("nodes") else "-"),
                  ", ".join(r["profiles"]) or "-"]
                 for r in rows], ["HOST", "SOURCE", "SSH", "PROFILES"]))
    print("(any other host name or IP, or user@host[:port], is an SSH target too)")
    return 0
