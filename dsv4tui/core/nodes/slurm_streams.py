"""The dashboard's view of a Slurm host's running job: every allocated node's ``telemetry``
and its rank's log, each from the node's own agent run as an overlapping step of the job
(core/launchers/slurm_nodes), merged as a host made of nodes is (NodeFrames; each log line
behind its node's name). Started when the server status shows the job RUNNING, replaced when
another job runs, stopped when none does. A step that ends or fails is started again after a
pause while its job runs; its error goes to ``on_node_error``. No Textual here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsv4tui.core.launchers.slurm_nodes import node_agent
from dsv4tui.core.nodes.streams import node_log_event
from dsv4tui.core.nodes.telemetry import NodeFrames
from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.core.view.log_lines import Class

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host

RETRY_S = 5.0
LOG_LINES = 2000


class SlurmNodeStreams:
    def __init__(self, telemetry: HostTelemetry, interval: float, *,
                 on_frame: Callable[[Frame], None],
                 on_lines: Callable[[list[str], list[Class] | None], None],
                 on_node_error: Callable[[str, str], None]) -> None:
        self.telemetry, self.interval = telemetry, interval
        self.on_frame, self.on_lines, self.on_node_error = on_frame, on_lines, on_node_error
        self.job: str | None = None
        self.names: list[str] = []
        self.frames = NodeFrames([])
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def width(self) -> int:
        return max((len(n) for n in self.names), default=0)

    def follow(self, host: Host, status: dict[str, Any]) -> bool:
        """The server status of the Slurm host: follow its job's nodes if it runs (True when
        this started or replaced the streams)."""
        job = status.get("job_id")
        nodes = [str(n) for n in status.get("nodes") or []]
        if status.get("job_state") != "RUNNING" or not job or not nodes:
            self.stop_now()
            return False
        if str(job) == self.job:
            return False
        self.stop_now()
        self.job, self.names = str(job), nodes
        self.frames = NodeFrames(nodes)
        logs = [str(p) for p in (status.get("profile") or {}).get("slurm_rank_logs") or []]
        for rank, node in enumerate(nodes):
            self._spawn(host, node, ["telemetry", "--interval", f"{self.interval:g}"],
                        self._frame)
            if rank < len(logs):
                self._spawn(host, node, ["logs", logs[rank], "--follow", "--lines",
                                         str(LOG_LINES)], self._log)
        return True

    def _spawn(self, host: Host, node: str, args: list[str],
               handle: Callable[[str, dict[str, Any]], None]) -> None:
        job = self.job
        assert job is not None

        async def run() -> None:
            while True:
                try:
                    async for ev in node_agent(host, job, node).events(*args):
                        handle(node, ev)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the step failed: say so, try again while it runs
                    self.on_node_error(node, f"{args[0]}: {getattr(exc, 'message', exc)}")
                await asyncio.sleep(RETRY_S)

        self._tasks.append(asyncio.create_task(run()))

    def _frame(self, node: str, ev: dict[str, Any]) -> None:
        merged = self.frames.feed_event(self.telemetry, node, ev)
        if merged is not None:
            self.on_frame(merged)

    def _log(self, node: str, ev: dict[str, Any]) -> None:
        node_log_event(node, ev, self.width, self.on_lines, self.on_node_error)

    def stop_now(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self.job, self.names = None, []

    async def stop(self) -> None:
        tasks = list(self._tasks)
        self.stop_now()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
