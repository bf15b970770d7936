"""The app's part of a host made of several nodes: the other nodes' streams (node_streams)
wired to the model -- their frames into the GPU panel, their lines into the log with a node
column, their errors into the host bar. Kept out of app.py (which only calls :func:`start`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsv4tui.core.nodes.streams import NodeStreams
from dsv4tui.tui.screens.messages import LOGS, SERVER
from dsv4tui.tui.widgets.gpu_panel import GpuFrame

if TYPE_CHECKING:
    from dsv4tui.core.telemetry import Frame


def start(app: Any, spec: Any, interval: float) -> NodeStreams:
    model = app.model

    def on_frame(frame: Frame) -> None:
        app.post_message(GpuFrame(model.conn.host, frame))

    def on_lines(lines: list[str]) -> None:
        model.logs.extend(lines)
        app.mark(LOGS)

    def on_node_error(node: str, text: str) -> None:
        model.server.node_error = f"{node}: {text}"[:120]
        app.mark(SERVER)

    streams = NodeStreams(spec, model.telemetry, interval, on_frame=on_frame,
                          on_lines=on_lines, on_node_error=on_node_error)
    # the log view's node filter goes through the nodes in rank order
    model.logs.nodes[:] = [*streams.names, *(n for n in model.logs.nodes
                                             if n not in streams.names)]
    streams.start()
    return streams
