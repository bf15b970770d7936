"""CLI: ``dsv4tui logs HOST [--follow] [--lines N]``: the server log of a host, through its agent.

A host made of nodes shows every node's log, each line behind its node's name (``--node``:
one node's, untagged); ``--json`` events carry ``node``."""

from __future__ import annotations

import json
import sys
from typing import Any

from dsv4tui.core.campaign.labels import safe_line, safe_text
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.nodes.streams import node_column


def register(sub: Any) -> None:
    p = sub.add_parser("logs")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--lines", "-n", type=int, default=200, help="last N lines (default 200)")
    where.add_argument("--from-start", action="store_true", help="the whole log")
    p.add_argument("--file", help="a log file on the host (default: our server's log, else the "
                   "file the server on the default profile's port writes to)")
    p.add_argument("--node", metavar="NAME", help="a host made of nodes: this node's log only "
                   "(default: every node's, each line behind its node's name)")
    p.add_argument("--json", action="store_true",
                   help="print the agent's events (lines + parsed events) as JSON lines")
    p.set_defaults(func=_run)


def _print_event(ev: dict[str, Any], as_json: bool, node: str | None = None,
                 width: int = 0) -> None:
    """One agent event; ``node`` (a host made of nodes): its JSON's ``node``, and the text
    line's tag padded to ``width`` (no tag with ``width`` 0: one node's log)."""
    def out(text: str) -> None:
        sys.stdout.write((node_column(node, width, text) if node and width else text) + "\n")

    if as_json:
        sys.stdout.write(json.dumps({**ev, "node": node} if node else ev) + "\n")
    elif ev.get("type") == "lines":
        for line in ev.get("lines") or []:  # a log line cannot drive the terminal
            out(safe_line(str(line)))
    elif ev.get("type") == "log_rotated":
        out("--- the log was replaced (a new launch) ---")
    elif ev.get("type") == "log_waiting":
        out(f"--- waiting for {safe_text(ev.get('path'))} to appear ---")
    sys.stdout.flush()


async def _node_logs(host: Any, cmd: list[str], args: Any) -> None:
    """Every node's log of a host made of nodes (or ``--node``'s), in rank order; followed
    together with ``--follow``. A node that cannot be reached is one line, the others print."""
    import asyncio

    from dsv4tui.core.nodes.fanout import Nodes

    names = [spec.name for spec in host.spec.group]
    if args.node and args.node not in names:
        raise ConfigError(f"--node {args.node}: {host.name}'s nodes are {', '.join(names)}")
    width = 0 if args.node else max(len(n) for n in names)
    group = Nodes(host, tolerant=True)
    async with group as nodes:
        ranks = [r for r, name in enumerate(names) if args.node in (None, name)]
        for rank in ranks:
            if nodes[rank] is None:
                print(f"dsv4tui: node {names[rank]} (rank {rank}): "
                      f"{safe_text(group.errors.get(rank, 'cannot be reached'))}", file=sys.stderr)

        async def one(rank: int) -> None:
            name = names[rank]
            if args.follow:
                async for ev in nodes[rank].agent.events(*cmd, "--follow"):
                    _print_event(ev, args.json, name, width)
            else:
                for ev in await nodes[rank].agent.call(*cmd):
                    _print_event(ev, args.json, name, width)

        live = [r for r in ranks if nodes[r] is not None]
        if args.follow:
            await asyncio.gather(*(one(r) for r in live))
        else:
            for rank in live:
                await one(rank)


async def _slurm_logs(host: Any, opts: list[str], args: Any) -> bool:
    """A Slurm host with a running job: every rank's log, read on its own node by the node's
    agent (an srun step of the job: core/launchers/slurm_nodes), each line behind the node's
    name (``--node``: one node's). False when no job runs (the login node's own log then)."""
    import asyncio

    from dsv4tui.core.launchers import slurm, slurm_nodes

    js = await slurm_nodes.running_job(host)
    found = slurm.last_job(host.name)
    if js is None or found is None:
        return False
    logs = [str(p) for p in found[1].get("slurm_rank_logs") or []]
    names = js.nodes[:len(logs)]
    if args.node and args.node not in names:
        raise ConfigError(f"--node {args.node}: Slurm job {js.job_id} runs on "
                          f"{', '.join(names)}")
    width = 0 if args.node else max(len(n) for n in names)

    async def one(node: str, path: str) -> None:
        agent = slurm_nodes.node_agent(host, js.job_id, node)
        if args.follow:
            async for ev in agent.events("logs", path, *opts, "--follow"):
                _print_event(ev, args.json, node, width)
        else:
            for ev in await agent.call("logs", path, *opts):
                _print_event(ev, args.json, node, width)

    picked = [(n, p) for n, p in zip(names, logs, strict=False) if args.node in (None, n)]
    if args.follow:
        await asyncio.gather(*(one(n, p) for n, p in picked))
    else:
        for n, p in picked:
            await one(n, p)
    return True


def _run(args: Any) -> int:
    from dsv4tui.core.hosts.resolve import open_host

    if args.lines < 0:
        raise ConfigError("--lines must be >= 0")
    settings, _ = load_settings(args)
    opts = ["--from-start"] if args.from_start else ["--lines", str(args.lines)]
    if not args.json:
        opts.append("--no-parse")
    cmd = ["logs", *([args.file] if args.file else []), *opts]

    async def go() -> None:
        from dsv4tui.core.launchers.slurm_nodes import is_slurm

        async with open_host(args.host, settings) as host:
            if not args.file and is_slurm(host) and await _slurm_logs(host, opts, args):
                return
            if not args.file and host.config.profiles:  # a server we did not start: its file
                _, prof = host.config.profile()
                cmd[1:1] = ["--port", str(prof.port), "--host", prof.host]
            if host.spec.group:
                await _node_logs(host, cmd, args)
            elif args.node:
                raise ConfigError(f"--node: {host.name} is not a host made of nodes")
            elif args.follow:
                async for ev in host.agent.events(*cmd, "--follow"):
                    _print_event(ev, args.json)
            else:
                for ev in await host.agent.call(*cmd):
                    _print_event(ev, args.json)

    run_async(go())
    return 0
