"""The GPUs of a sweep's other nodes (a host made of nodes): the host-side runner on node 0
samples node 0's GPUs for each level's GPU summary; while the console collects the run, this
samples every other node's (their ``telemetry`` streams into a GpuWindow each) and adds their
rows to each level's summary, numbered after node 0's (node 1's GPU 0 is 8 with 8 GPUs a node).
What no frame was heard of (the console was not attached during the level) is not made up.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from dsv4tui.agent.host.gpu_window import GpuWindow

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host

INTERVAL_S = 1.0


class NodeGpuSampler:
    def __init__(self, host: Host) -> None:
        self.specs = list(host.spec.group[1:])
        self.windows: dict[str, GpuWindow] = {s.name: GpuWindow() for s in self.specs}
        self._hosts: list[Host] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for spec in self.specs:
            self._tasks.append(asyncio.create_task(self._sample(spec)))

    async def _sample(self, spec: Any) -> None:
        from dsv4tui.core.hosts.resolve import connect

        with contextlib.suppress(Exception):  # a node we cannot reach adds no rows
            host = await connect(spec)
            self._hosts.append(host)
            async for ev in host.agent.events("telemetry", "--interval", f"{INTERVAL_S:g}"):
                self.windows[spec.name].add(ev)

    def summary(self, t0: float, t1: float, first: int) -> list[dict[str, Any]]:
        """Every other node's per-GPU rows over [t0, t1], indices from ``first`` on."""
        rows: list[dict[str, Any]] = []
        at = first
        for spec in self.specs:
            got = self.windows[spec.name].summary(t0, t1)
            for row in got:
                rows.append({**row, "gpu": at + int(row["gpu"])})
            if got:
                at += max(int(r["gpu"]) for r in got) + 1
        return rows

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for host in self._hosts:
            with contextlib.suppress(Exception):
                await host.session.close()
