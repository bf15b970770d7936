"""The dashboard's live link to its one host: the host's supervisor -- its own, or a fleet's
(watched, and given back still connected) -- the streams the screens show (the GPUs'
telemetry, the server's /metrics and log; on a host made of nodes every other node's GPUs and
log too), and the server's status as the model shows it.

No Textual here: the App passes ``mark`` (these parts of the model changed), ``on_frame`` (a
GPU frame arrived) and ``on_back`` (the link came back after being down)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.view import model as m
from dsv4tui.core.view import streams
from dsv4tui.core.view.log_lines import Class
from dsv4tui.core.view.parts import CONN, LOGS, PROFILES, SERVER

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.telemetry import Frame

DASHBOARD_STREAMS = ("telemetry", "metrics", "logs")  # the streams a dashboard adds


class HostLink:
    def __init__(self, spec: Any, model: m.UiModel, *, mark: Callable[..., None],
                 on_frame: Callable[[Frame], None], on_back: Callable[[], None]) -> None:
        self.spec, self.model = spec, model
        self.mark, self.on_frame, self.on_back = mark, on_frame, on_back
        self.supervisor: Any = None
        self.shared = False  # the supervisor is a fleet's: watched, not owned
        self._unwatch: Callable[[], None] | None = None
        self.nodes: Any = None  # a host made of nodes: core.nodes.streams.NodeStreams
        self.slurm: Any = None  # a Slurm host: core.nodes.slurm_streams.SlurmNodeStreams
        self.log = streams.LogFeed()
        self.status_gen = 0  # bumped by restarts: an older status answer is dropped

    # -- the supervisor and its streams ------------------------------------------------------
    def start(self, interval: float, shared: Any = None) -> None:
        """Connect (or watch ``shared``, a fleet's connected supervisor) and follow the GPUs
        every ``interval`` seconds."""
        if shared is None:
            from dsv4tui.core.hosts.supervisor import HostSupervisor

            self.supervisor = HostSupervisor(self.spec, on_state=self._on_state,
                                             on_stream_error=self._on_stream_error)
        else:
            self.supervisor, self.shared = shared, True
            self._unwatch = shared.watch(self._on_state, self._on_stream_error)
            self._on_state(shared)  # where it stands now (connected, most likely)
        self.model.conn.retry_in = self.supervisor.retry_in
        self.model.gpu_interval = interval
        if getattr(self.spec.config, "slurm", None) is not None:
            # the GPUs are the job's nodes', each sampled there (the login node's are not
            # the server's): followed once the status shows the job running
            self.slurm = self._slurm_streams(interval)
        else:
            self.supervisor.add_stream("telemetry", streams.telemetry_args(interval),
                                       self._on_telemetry)
        if self.spec.group:
            self.nodes = self._start_nodes(interval)

    def _on_node_lines(self, lines: list[str], classes: list[Class] | None) -> None:
        self.model.logs.extend(lines, classes)
        self.mark(LOGS)

    def _on_node_error(self, node: str, text: str) -> None:
        self.model.server.node_error = f"{node}: {text}"[:120]
        self.mark(SERVER)

    def _slurm_streams(self, interval: float) -> Any:
        from dsv4tui.core.nodes.slurm_streams import SlurmNodeStreams

        return SlurmNodeStreams(self.model.telemetry, interval, on_frame=self.on_frame,
                                on_lines=self._on_node_lines,
                                on_node_error=self._on_node_error)

    def _start_nodes(self, interval: float) -> Any:
        from dsv4tui.core.nodes.streams import NodeStreams

        model = self.model
        nodes = NodeStreams(self.spec, model.telemetry, interval, on_frame=self.on_frame,
                            on_lines=self._on_node_lines, on_node_error=self._on_node_error)
        # the log view's node filter goes through the nodes in rank order
        model.logs.nodes[:] = [*nodes.names, *(n for n in model.logs.nodes
                                               if n not in nodes.names)]
        nodes.start()
        return nodes

    async def wait_connected(self) -> Any:
        if self.supervisor is None:
            raise ConnectError(f"{self.model.conn.host}: not connected")
        return await self.supervisor.wait_connected()

    def host(self) -> Any:
        """The connected host; ConnectError while the link is down."""
        sup = self.supervisor
        if sup is None or sup.host is None or self.model.conn.state != "connected":
            raise ConnectError(f"{self.model.conn.host}: not connected")
        return sup.host

    def follow_metrics(self, profile: ServerProfile | None) -> None:
        if self.supervisor is not None:
            self.supervisor.add_stream(
                "metrics", streams.metrics_args(self.model.gpu_interval, profile),
                self._on_metrics)

    def follow_log(self, path: str | None) -> None:
        """Follow the server log at ``path`` (nothing when None or followed already)."""
        if self.supervisor is None or not path or not self.log.follow(self.model.logs, path):
            return
        self.supervisor.add_stream("logs", streams.log_args(path), self._on_log)
        self.mark(LOGS)

    def _on_state(self, sup: Any) -> None:
        if self.model.conn.update(sup.state.value, sup.detail, sup.attempts):
            self.model.logs.append("──── reconnected ────")
            self.mark(LOGS)
            self.on_back()
        self.mark(CONN)

    def _marked(self, part: str | None) -> None:
        if part is not None:
            self.mark(part)

    def _on_stream_error(self, name: str, error: UserError) -> None:
        self._marked(streams.stream_error(self.model, name, error.message))

    def _on_metrics(self, ev: dict[str, Any]) -> None:
        self._marked(streams.add_metrics(self.model, ev))

    def _on_telemetry(self, ev: dict[str, Any]) -> None:
        frame = streams.add_frame(self.model, ev, self.nodes)
        if frame is not None:
            self.on_frame(frame)

    def _on_log(self, ev: dict[str, Any]) -> None:
        nodes = self.nodes
        relabel = None if nodes is None else (lambda lines: nodes.lines(nodes.node0, lines))
        self._marked(self.log.add(self.model, ev, relabel))

    # -- the server's status -----------------------------------------------------------------
    async def refresh_status(self) -> dict[str, Any]:
        """The server's status (of the active profile) into the model, unless a restart
        began meanwhile; its log (and each node's) followed. ``{}`` while disconnected."""
        from dsv4tui.core.server import control

        try:
            host = self.host()
        except ConnectError:
            return {}
        gen = self.status_gen
        status = await control.status(host, self.model.active_profile)
        if gen == self.status_gen and not self.model.startup.active:
            m.apply_status(self.model, status)
            self.mark(SERVER, PROFILES)
        self.follow_log(str(status["log"]) if status.get("log") else None)
        if self.nodes is not None and isinstance(status.get("nodes"), list):
            self.nodes.follow_logs(status["nodes"])
        if self.slurm is not None and status.get("slurm") and self.slurm.follow(host, status):
            logs = self.model.logs  # the log view's node filter: the job's nodes in rank order
            logs.nodes[:] = [*self.slurm.names, *(n for n in logs.nodes
                                                  if n not in self.slurm.names)]
            self.mark(LOGS)
        return status

    def restarted(self) -> None:
        """A restart began or ended: a status asked for before it is stale."""
        self.status_gen += 1

    # -- the end -----------------------------------------------------------------------------
    async def release(self, timeout: float) -> None:
        """Stop the supervisor we own; give a fleet's back, still connected, without the
        dashboard's streams."""
        if self.slurm is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.slurm.stop(), timeout)
        sup = self.supervisor
        if sup is None:
            return
        if self.shared:
            for name in DASHBOARD_STREAMS:
                sup.remove_stream(name)
            if self._unwatch is not None:
                self._unwatch()
                self._unwatch = None
            self.supervisor = None
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sup.stop(), timeout)

    async def close(self, timeout: float) -> None:
        """The dashboard ends: the other nodes' links too."""
        if self.nodes is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.nodes.stop(), timeout)
        await self.release(timeout)
