"""`dsv4tui trust HOST`: show the host keys on the path to HOST and add the unknown ones to
~/.ssh/known_hosts after confirming, hop by hop (a jump host's key first, fetched directly; the
next hop's key fetched through the jump host, as the connection will go)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_FAILED, ConfigError, UserError
from dsv4tui.core.hosts import resolve, ssh_target
from dsv4tui.core.hosts.ssh import DnsError, HopKey, learn_host_keys


def register(sub: Any) -> None:
    p = sub.add_parser("trust")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args)
    spec = resolve.host_spec(args.host, settings)
    if spec.target is None:
        raise ConfigError(f"{args.host} is not an SSH host; nothing to trust")

    async def decide(hk: HopKey) -> bool:
        print(f"{hk.hop.label} offers {hk.key.get_algorithm()} key {hk.fingerprint}", flush=True)
        if args.yes:
            return True
        if not sys.stdin.isatty():
            raise UserError("refusing to trust without confirmation: stdin is not a terminal "
                            "(pass --yes after checking the fingerprint)", EXIT_FAILED)
        answer = await asyncio.to_thread(
            input, "Trust this key and add it to ~/.ssh/known_hosts? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    try:
        results = run_async(learn_host_keys(spec.name, spec.target, decide,
                                            connect_timeout=spec.config.connect_timeout_s))
    except DnsError as err:
        raise resolve.explain_dns(spec, err) from None
    for hk in results:
        if hk.state == "trusted":
            print(f"{hk.hop.label} is already trusted ({hk.fingerprint})")
        elif hk.state == "learnt":
            print(f"added {hk.hop.known_hosts_name} to {ssh_target.known_hosts_path()}")
        elif hk.state == "declined":
            print("not trusted")
            return EXIT_FAILED
    return 0
