"""The dashboard's view of a host made of several nodes: node 0 is the app's own host
connection (its supervisor); this owns one HostSupervisor for each other node, with its
``telemetry`` stream and, once its server's log is known, its ``logs --follow`` stream.

Every node's frames are merged into the host's telemetry (node_telemetry.NodeFrames: the GPU
panel groups them by node) and every node's log lines go into the one log ring with the node
in a column (``h200b │ [2025-11-30 12:00:00 TP8] ...``: the log view filters by node and
TP rank). A node's error line, or a node that cannot be reached, is reported with
``on_node_error`` (the host bar's error state). No textual here: the app passes callbacks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsv4tui.core.nodes import fanout
from dsv4tui.core.nodes.telemetry import NodeFrames
from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.core.view.log_lines import Class, classes_of

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import HostSpec
    from dsv4tui.core.hosts.supervisor import HostSupervisor

LOG_HISTORY_LINES = 2000
_ERROR_KINDS = ("traceback", "oom", "nccl_error", "no_kernel_image", "warmup_failed", "fatal",
                "child_failed", "exception")


def _connected(sup: HostSupervisor) -> Any:
    from dsv4tui.core.hosts.session import ConnectionState

    return sup.host if sup.state is ConnectionState.CONNECTED else None


def node_log_event(node: str, ev: dict[str, Any], width: int,
                   on_lines: Callable[[list[str], list[Class] | None], None],
                   on_node_error: Callable[[str, str], None]) -> None:
    """One event of a node's ``logs --follow`` (SSH group or Slurm step alike): its lines, in
    the node column, to ``on_lines``; an error the agent found in them to ``on_node_error``."""
    if ev.get("type") == "lines":
        on_lines([node_column(node, width, str(line)) for line in ev.get("lines") or []],
                 classes_of(ev))
    elif ev.get("type") == "log_event":
        inner = ev.get("event") or {}
        if inner.get("kind") in _ERROR_KINDS:
            on_node_error(node, str(inner.get("text") or inner.get("message")
                                    or inner.get("kind")))


def node_column(node: str, width: int, line: str) -> str:
    return f"{node:<{width}} │ {line}"


class NodeStreams:
    def __init__(self, spec: HostSpec, telemetry: HostTelemetry, interval: float, *,
                 on_frame: Callable[[Frame], None], on_lines: Callable[[list[str], list[Class] | None], None],
                 on_node_error: Callable[[str, str], None]) -> None:
        self.spec = spec
        self.names = [s.name for s in spec.group]
        self.width = max(len(n) for n in self.names)
        self.telemetry = telemetry
        self.interval = interval
        self.frames = NodeFrames(self.names)
        self.on_frame = on_frame
        self.on_lines = on_lines
        self.on_node_error = on_node_error
        self.supervisors: dict[str, HostSupervisor] = {}
        self._log_paths: dict[str, str] = {}

    @property
    def node0(self) -> str:
        return self.names[0]

    def start(self) -> None:
        from dsv4tui.core.hosts.supervisor import HostSupervisor

        for spec in self.spec.group[1:]:
            name = spec.name
            sup = HostSupervisor(spec, on_stream_error=functools.partial(self._stream_error,
                                                                         name))
            sup.add_stream("telemetry", ["telemetry", "--interval", f"{self.interval:g}"],
                           functools.partial(self.node_frame, name))
            self.supervisors[name] = sup
            # server status / start / stop of the group reuse this node's connection
            fanout.SHARED[name] = functools.partial(_connected, sup)
            sup.start()

    async def stop(self) -> None:
        for name, sup in self.supervisors.items():
            fanout.SHARED.pop(name, None)
            await sup.stop()

    def _stream_error(self, node: str, stream: str, err: Any) -> None:
        self.on_node_error(node, f"{stream}: {getattr(err, 'message', err)}")

    # -- telemetry ---------------------------------------------------------------------------
    def node_frame(self, node: str, ev: dict[str, Any]) -> None:
        merged = self.frames.feed_event(self.telemetry, node, ev)
        if merged is not None:
            self.on_frame(merged)

    # -- logs --------------------------------------------------------------------------------
    def lines(self, node: str, lines: list[str]) -> list[str]:
        return [node_column(node, self.width, line) for line in lines]

    def follow_logs(self, nodes: list[dict[str, Any]]) -> None:
        """The group status's ``nodes`` (with each node's ``log``): follow the new paths."""
        for n in nodes:
            name, path = n.get("node"), n.get("log")
            if n.get("state") == "crashed" and name:
                self.on_node_error(str(name), f"server crashed on {name}")
            if not name or not path or name == self.node0 or name not in self.supervisors:
                continue
            if self._log_paths.get(name) == path:
                continue
            self._log_paths[name] = str(path)
            self.supervisors[name].add_stream(
                "logs", ["logs", str(path), "--follow", "--lines", str(LOG_HISTORY_LINES)],
                functools.partial(self._log_event, str(name)))

    def _log_event(self, node: str, ev: dict[str, Any]) -> None:
        node_log_event(node, ev, self.width, self.on_lines, self.on_node_error)
