"""The nodes of a host made of several nodes, connected, and what is asked of all of them at
once: ``server stop`` (each ends its own process group) and ``server status`` (one result per
node, an unreachable node's error in its place). Used by the group's server control
(nodes/control) and by its watcher (nodes/watch), which stops every node when one fails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import AgentFailed, UserError
from dsv4tui.core.server.startup import StartupStep

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host

BUSY_RETRIES = 10  # half a second apart: a start cancelled a moment ago may still hold the lock


# node name -> its live connection, where something keeps one (the dashboard's supervisors):
# used instead of a new connection, and never closed here
SHARED: dict[str, Callable[[], Host | None]] = {}


class Nodes:
    """The connected nodes of a group host, in rank order (node 0: ``host`` itself)."""

    def __init__(self, host: Host, *, tolerant: bool = False) -> None:
        """``tolerant``: a node that cannot be reached is None in the list (its one-line
        reason in ``errors``) instead of failing the whole group."""
        self.host = host
        self.hosts: list[Any] = []
        self.tolerant = tolerant
        self.errors: dict[int, str] = {}
        self._borrowed: set[int] = set()

    async def __aenter__(self) -> list[Any]:
        from dsv4tui.core.hosts.resolve import connect

        specs = list(self.host.spec.group)

        async def one(rank: int) -> Host:
            live = SHARED.get(specs[rank].name)
            shared = live() if live is not None else None
            if shared is not None:
                self._borrowed.add(id(shared))
                return shared
            try:
                return await connect(specs[rank])
            except UserError as exc:
                self.errors[rank] = exc.message
                raise UserError(f"node {specs[rank].name} (rank {rank}): {exc.message}",
                                exc.exit_code) from None

        others = await asyncio.gather(*(one(r) for r in range(1, len(specs))),
                                      return_exceptions=True)
        self.hosts = [h for h in others if not isinstance(h, BaseException)]
        failed = next((h for h in others if isinstance(h, BaseException)), None)
        if failed is not None and not (self.tolerant and isinstance(failed, UserError)):
            await self.close()
            raise failed
        return [self.host, *(None if isinstance(h, BaseException) else h for h in others)]

    async def close(self) -> None:
        for h in self.hosts:
            if h is not None and h is not self.host and id(h) not in self._borrowed:
                with contextlib.suppress(Exception):
                    await h.session.close()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def node_names(host: Host) -> list[str]:
    return [s.name for s in host.spec.group]


async def stop_all(nodes: list[Host], names: list[str], grace: float,
                    on_step: Callable[[StartupStep], None] | None = None,
                    ranks: list[int] | None = None) -> list[dict[str, Any]]:
    """Every node's (or ``ranks``') ``server stop``, all at once."""
    async def one(rank: int) -> dict[str, Any]:
        for attempt in range(BUSY_RETRIES + 1):
            try:
                events = await nodes[rank].agent.call("server", "stop", "--grace", f"{grace:g}")
                break
            except AgentFailed as exc:  # a start cancelled a moment ago may still hold the lock
                if exc.kind != "busy" or attempt == BUSY_RETRIES:
                    return {"node": names[rank], "rank": rank, "how": "error",
                            "error": exc.message}
                await asyncio.sleep(0.5)
            except UserError as exc:
                return {"node": names[rank], "rank": rank, "how": "error", "error": exc.message}
        ev: dict[str, Any] = next((e for e in events if e.get("type") == "stopped"),
                                  {"how": "not_running"})
        out = {"node": names[rank], "rank": rank,
               **{k: v for k, v in ev.items() if k not in ("type", "v")}}
        if on_step is not None:
            on_step(StartupStep("stopped", duration_s=ev.get("stop_s"), text=ev.get("how"),
                                event=ev, node=names[rank]))
        return out

    wanted = range(len(nodes)) if ranks is None else ranks
    return list(await asyncio.gather(*(one(r) for r in wanted)))


def group_stopped(results: list[dict[str, Any]]) -> dict[str, Any]:
    how = "not_running" if all(r.get("how") == "not_running" for r in results) else "stopped"
    freed = [r.get("gpu_mem_freed_mib") for r in results]
    return {"how": how, "nodes": results,
            "leftover_pids": [p for r in results for p in r.get("leftover_pids") or []],
            "errors": [f"{r['node']}: {r['error']}" for r in results if r.get("error")],
            "gpu_mem_freed_mib": sum(f for f in freed if f is not None)
            if any(f is not None for f in freed) else None}


async def node_status(nodes: Sequence[Host | None], names: list[str], profile_name: str | None,
                      config: Any, errors: dict[int, str] | None = None, *, http: bool = True
                      ) -> list[dict[str, Any]]:
    """Every node's ``status`` event (``node``, ``rank`` added; an unreachable node's error).
    ``http=False``: from each node's processes and log only (the watcher's poll, which would
    otherwise put two access-log lines a second into rank 0's log)."""
    args = ["server", "status"] + ([] if http else ["--no-http"])
    if config.profiles:
        _, profile = config.profile(profile_name)
        args += ["--port", str(profile.port), "--host", profile.host]

    async def one(rank: int) -> dict[str, Any]:
        node = nodes[rank]
        if node is None:  # not reachable (Nodes(tolerant=True))
            return {"node": names[rank], "rank": rank, "state": "unreachable", "pid": None,
                    "error": (errors or {}).get(rank, "not reachable")}
        try:
            events = await node.agent.call(*args)
        except UserError as exc:
            return {"node": names[rank], "rank": rank, "state": "unknown", "pid": None,
                    "error": exc.message}
        ev: dict[str, Any] = next((e for e in events if e.get("type") == "status"),
                                  {"state": "unknown"})
        return {"node": names[rank], "rank": rank,
                **{k: v for k, v in ev.items() if k not in ("type", "v")},
                "pid": ev.get("pid") if ev.get("ours") else None}

    return list(await asyncio.gather(*(one(r) for r in range(len(nodes)))))
