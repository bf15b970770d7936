"""`dsv4tui trust HOST`: show the host key fingerprint and add it to ~/.ssh/known_hosts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dsv4tui.commands.output import load_settings, run_async
from dsv4tui.errors import EXIT_FAILED, ConfigError, HostKeyError, UserError
from dsv4tui.hosts import resolve, ssh_target
from dsv4tui.hosts.ssh import fetch_host_key


def register(sub: Any) -> None:
    p = sub.add_parser("trust", help="add HOST's SSH host key to ~/.ssh/known_hosts after confirming")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args)
    spec = resolve.host_spec(args.host, settings)
    if spec.target is None:
        raise ConfigError(f"{args.host} is not an SSH host; nothing to trust")
    parsed = ssh_target.SshTarget.parse(spec.target)
    resolved = ssh_target.resolve(parsed)
    key = run_async(fetch_host_key(parsed, resolved))
    fp = ssh_target.fingerprint(key)
    where = ssh_target.known_hosts_name(resolved)
    known = ssh_target.known_keys(resolved)
    if any(k.public_data == key.public_data for k in known):
        print(f"{where} is already trusted ({fp})")
        return 0
    if known:
        old = ", ".join(ssh_target.fingerprint(k) for k in known)
        raise HostKeyError(f"HOST KEY CHANGED for {where}: known {old}, offered {fp}; not adding "
                           "it. Remove the old entry yourself if the host was reinstalled",
                           changed=True, fingerprint=fp)
    print(f"{where} offers {key.get_algorithm()} key {fp}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserError("refusing to trust without confirmation: stdin is not a terminal "
                            "(pass --yes after checking the fingerprint)", EXIT_FAILED)
        answer = input("Trust this key and add it to ~/.ssh/known_hosts? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("not trusted")
            return EXIT_FAILED
    path = ssh_target.append_known_host(resolved, key)
    print(f"added {where} to {path}")
    return 0
