"""Server control of a host made of several nodes: start, stop and status on every node.

- start: every node's agent ``server start`` (its Launch from node_group.plan_nodes: argv
  lists, ``--node-rank``), all at once, each followed until ready: node rank 0 is ready when it
  answers HTTP, the others once they joined it (which rank 0 needs before it can be ready, so
  the slowest rank governs "ready"). The first node that fails (crashes, times out, cannot be
  reached) stops every node at once -- no rank is left waiting in NCCL -- and the failure names
  that node and carries its log lines.
- stop: every node's ``server stop`` at once (each ends its own process group, by pid/pgid,
  and checks its GPUs' memory is freed); one result per node.
- status: every node's ``server status``; the group's state (ready only when every node is
  and rank 0 answers), and ``nodes``: node, rank, state, pid of each.

Steps are reported with ``node`` set, so the CLI and the dashboard print the same thing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import AgentFailed, UserError
from dsv4tui.core.nodes import group as node_group
from dsv4tui.core.nodes import watch as group_watch
from dsv4tui.core.nodes.fanout import Nodes, group_stopped, node_names, node_status, stop_all
from dsv4tui.core.server import startup
from dsv4tui.core.server.startup import DEFAULT_GRACE_S, DEFAULT_TIMEOUT_S, StartResult, StartupStep

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host
    from dsv4tui.core.server.sglang_version import SglangVersion
    from dsv4tui.core.store import RunStore

FAIL_STOP_GRACE_S = 5.0  # a group that lost a rank has nothing to drain: stop it quickly
REFUSAL_WAIT_S = 15.0  # after one node refused a start: how long the others get to answer


def _failure_rank(failures: dict[int, BaseException]) -> int:
    """The node that failed first in cause: not one that died of another's NCCL error."""
    def nccl_only(exc: BaseException) -> bool:
        text = " ".join(startup.log_excerpt(exc.event)) if isinstance(exc, AgentFailed) else ""
        return "ncclRemoteError" in text or "NCCL error" in text

    return min(failures, key=lambda r: (nccl_only(failures[r]), r))


async def start(host: Host, profile_name: str | None = None, backend: str | None = None, *,
                replace: bool = False, wait: bool = True, grace: float = DEFAULT_GRACE_S,
                timeout: float = DEFAULT_TIMEOUT_S,
                on_step: Callable[[StartupStep], None] | None = None,
                store: RunStore | None = None, overrides: Mapping[str, Any] | None = None,
                sglang: SglangVersion | None = None, config_path: str | None = None,
                watch: bool = True) -> StartResult:
    """Start the profile on every node of ``host`` (a group host: its node 0's Host); once
    every node is ready, the group's watcher (group_watch: ``config_path``, else the default
    config) stops every node when one of them fails later."""
    from dsv4tui.core.server import sglang_version

    names = node_names(host)
    _, profile = host.config.profile(profile_name)
    found = sglang or await sglang_version.probe(host, profile)
    plans = node_group.plan_nodes(host.config, list(host.spec.group), profile_name, backend,
                                  overrides=overrides, sglang_version=found.version)
    results = [StartResult(host.name if p.rank == 0 else f"{host.name}/{p.node}",
                           plans[0].launch.profile_name or "", p.launch) for p in plans]
    group = results[0]
    group.nodes = [{"node": p.node, "rank": p.rank, "argv": p.launch.argv} for p in plans]

    def tagged(rank: int) -> Callable[[StartupStep], None] | None:
        if on_step is None:
            return None
        return lambda step: on_step(dataclasses.replace(step, node=names[rank], rank=rank))

    async with Nodes(host) as nodes:
        if replace:
            for name in names:
                if on_step is not None:
                    on_step(StartupStep("stopping", text="stopping the old server", node=name))
            group.previous_stop = {"nodes": await stop_all(nodes, names, grace, on_step)}

        async def run(rank: int) -> None:
            args = plans[rank].launch.agent_args(wait_ready=wait, grace=grace, timeout=timeout)
            if wait:
                async for ev in nodes[rank].agent.events(*args):
                    startup.apply_event(results[rank], ev, tagged(rank))
            else:
                for ev in await nodes[rank].agent.call(*args):
                    startup.apply_event(results[rank], ev, tagged(rank))

        tasks = {asyncio.ensure_future(run(r)): r for r in range(len(plans))}
        failures: dict[int, BaseException] = {}
        try:
            pending = set(tasks)
            while pending and not failures:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
                for t in done:
                    if t.exception() is not None:
                        failures[tasks[t]] = t.exception()  # type: ignore[assignment]
            if failures:
                first = next(iter(failures.values()))
                if isinstance(first, AgentFailed) and first.kind not in startup.FAILURES:
                    # a refusal (already running, busy): the other nodes answer as quickly,
                    # and a node that has not answered yet must not be taken for one this
                    # start launched (stopping it would stop a running group's rank)
                    await asyncio.wait(pending, timeout=REFUSAL_WAIT_S)
                else:
                    await asyncio.sleep(0.3)  # a second node failing with it: which first?
                for t in pending:
                    if t.done() and t.exception() is not None:
                        failures[tasks[t]] = t.exception()  # type: ignore[assignment]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        group.pid = results[0].pid
        for p, r in zip(plans, results, strict=True):
            group.nodes[p.rank].update(pid=r.pid, ready=r.ready, startup_s=r.startup_s)
        if failures:
            rank = _failure_rank(failures)
            exc = failures[rank]
            # what this start launched goes (a refusal, e.g. already running, launched nothing
            # there: a group that runs is not stopped by a second start)
            def refused(rank: int) -> bool:  # said no before launching anything there
                exc = failures.get(rank)
                return results[rank].pid is None and isinstance(exc, AgentFailed) and \
                    exc.kind not in startup.FAILURES

            launched = [p.rank for p in plans if not refused(p.rank)]
            stopped = await stop_all(nodes, names, FAIL_STOP_GRACE_S, on_step, launched)
            group.previous_stop = {"nodes": stopped}
            message = exc.message if isinstance(exc, UserError) else str(exc) or \
                type(exc).__name__
            what = ("every node was stopped" if len(launched) == len(plans) else
                    "the nodes it started were stopped" if launched else "nothing was started")
            message = f"node {names[rank]} (rank {rank}): {message}; {what}"
            startup.record_launch(store, group, False, message)
            if isinstance(exc, AgentFailed) and exc.kind not in startup.FAILURES:
                raise AgentFailed(exc.kind, message, exc.exit_code, exc.event) from None
            excerpt = startup.log_excerpt(exc.event) if isinstance(exc, AgentFailed) else []
            fail = exc.failure if isinstance(exc, startup.StartupFailed) else (
                (exc.event or {}).get("failure") if isinstance(exc, AgentFailed) else None)
            raise startup.StartupFailed(message, kind=getattr(exc, "kind", "failed"),
                                excerpt=[f"[{names[rank]}] {line}" for line in excerpt],
                                result=group, failure=fail) from None  # the node's class
    group.ready = all(r.ready for r in results) if wait else False
    group.startup_s = max((r.startup_s or 0.0 for r in results), default=None) \
        if group.ready else None
    group.status = results[0].status
    group.phases = results[0].phases
    startup.record_launch(store, group, group.ready or not wait, None)
    if group.ready and watch:
        group_watch.spawn(host.name, config_path)
    return group


async def stop(host: Host, grace: float = DEFAULT_GRACE_S) -> dict[str, Any]:
    """Stop every node's server; ``nodes``: one stopped result each; ``leftover_pids`` of any."""
    group_watch.end(host.name)  # a stop is not a failure: the watcher goes first
    names = node_names(host)
    async with Nodes(host) as nodes:
        results = await stop_all(nodes, names, grace)
    return group_stopped(results)


def group_state(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The group's state from its nodes' (rank 0's fields, ``state`` over all, ``nodes``)."""
    states = [n.get("state") for n in nodes]
    rank0 = nodes[0]
    if all(s == "ready" for s in states) and rank0.get("health") == 200:
        state = "ready"
    elif "crashed" in states:
        state = "crashed"
    elif all(s == "stopped" for s in states):
        state = "stopped"
    elif any(s in ("starting", "ready") for s in states) and "stopped" not in states:
        state = "starting"
    elif rank0.get("state") == "foreign":
        state = "foreign"
    else:
        state = "partial"  # some nodes run, some do not: a group that lost a rank
    out = {k: v for k, v in rank0.items() if k not in ("node", "rank")}
    out.update(state=state, nodes=[{"node": n["node"], "rank": n["rank"],
                                    "state": n.get("state"), "pid": n.get("pid"),
                                    "phase": n.get("phase"), "exit_code": n.get("exit_code"),
                                    "signal": n.get("signal"), "log": n.get("log"),
                                    "last_errors": n.get("last_errors") or [],
                                    **({"error": n["error"]} if n.get("error") else {})}
                                   for n in nodes])
    return out


async def status(host: Host, profile_name: str | None = None) -> dict[str, Any]:
    names = node_names(host)
    group = Nodes(host, tolerant=True)  # an unreachable node is a node's state, not an error
    async with group as nodes:
        return group_state(await node_status(nodes, names, profile_name, host.config,
                                             group.errors))
