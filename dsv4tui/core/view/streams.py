"""The agent streams the dashboard follows while it is attached -- ``telemetry`` (the GPUs'
frames), ``metrics`` (the server's /metrics) and ``logs --follow`` (the server log) -- their
argv and what their events change in the model. Each event function returns the part of the
model it changed (``dsv4tui.core.view.parts``), or None."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsv4tui.core.view import model as m
from dsv4tui.core.view.log_lines import classes_of
from dsv4tui.core.view.parts import GPU, LOGS, METRICS

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.telemetry import Frame

LOG_HISTORY_LINES = 2000  # the log lines a new ``logs --follow`` sends first


def telemetry_args(interval: float) -> list[str]:
    return ["telemetry", "--interval", f"{interval:g}"]


def metrics_args(interval: float, profile: ServerProfile | None) -> list[str]:
    """``metrics`` at the telemetry rate: of the server dsv4tui runs wherever it is, else of
    ``profile``'s port (a server someone else started there)."""
    args = ["metrics", "--interval", f"{interval:g}"]
    if profile is not None:
        args += ["--host", profile.host, "--port", str(profile.port)]
    return args


def log_args(path: str) -> list[str]:
    return ["logs", path, "--follow", "--lines", str(LOG_HISTORY_LINES)]


def add_frame(model: m.UiModel, ev: dict[str, Any], nodes: Any = None) -> Frame | None:
    """A ``telemetry`` event into the GPU panel's history; returns its frame (None: not a
    frame). ``nodes`` (a host made of nodes, ``core.nodes.streams.NodeStreams``): the frame
    is node 0's, merged with the other nodes' latest."""
    if ev.get("type") != "frame":
        return None
    from dsv4tui.core.telemetry import Frame, FrameError

    try:
        frame = Frame.from_event(ev)
    except FrameError:
        return None
    if nodes is not None:
        return nodes.frames.feed(model.telemetry, nodes.node0, frame)  # type: ignore[no-any-return]
    model.telemetry.add(frame)
    return frame


def add_metrics(model: m.UiModel, ev: dict[str, Any]) -> str | None:
    if ev.get("type") != "server_metrics":
        return None
    model.server_metrics.add(ev, model.mono())
    return METRICS


def stream_error(model: m.UiModel, name: str, message: str) -> str | None:
    """Stream ``name`` failed with ``message``: said where its data is shown."""
    if name == "telemetry" and model.telemetry is not None:
        model.telemetry.set_error(message)
        return GPU
    if name == "metrics":
        model.server_metrics.last_error = message
        return METRICS
    if name == "logs":
        model.logs.append(f"[dsv4tui] log stream: {message}")
        return LOGS
    return None


def skip_seen(tail: list[str], lines: list[str]) -> list[str]:
    """After a stream restart the agent resends the file's last lines: drop those we have
    (``tail``: our last lines)."""
    if not tail or not lines:
        return lines
    last = tail[-1]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] != last:
            continue
        k = min(len(tail), i + 1, 5)
        if lines[i - k + 1:i + 1] == tail[-k:]:
            return lines[i + 1:]
    return lines


class LogFeed:
    """The server log as the dashboard follows it: one file at a time (a switch to another is
    said in the log), without the lines a restarted stream sends again."""

    def __init__(self) -> None:
        self.path: str | None = None  # the file followed
        self._resent = False  # a stream restart resends lines we already have

    def follow(self, logs: Any, path: str) -> bool:
        """Follow ``path`` from now on; False when it is the one followed already."""
        if path == self.path:
            return False
        if self.path is not None:
            logs.append(f"──── log: {path} ────")
        self.path = path
        self._resent = False
        return True

    def add(self, model: m.UiModel, ev: dict[str, Any],
            relabel: Callable[[list[str]], list[str]] | None = None) -> str | None:
        """One event of ``logs --follow``; ``relabel``: what a host made of nodes does to its
        node 0's lines (the node column)."""
        kind = ev.get("type")
        if kind == "lines":
            lines = ev.get("lines") or []
            classes = classes_of(ev)  # each line's class, from the agent
            if relabel is not None:
                lines = relabel(lines)
            if ev.get("first_line") == 1 and len(model.logs) and self._resent:
                kept = skip_seen(model.logs.tail(20), lines)
                if classes is not None:
                    classes = classes[len(lines) - len(kept):]
                lines = kept
            self._resent = True
            model.logs.extend(lines, classes)
            return LOGS
        if kind == "log_event":
            return m.apply_log_event(model, ev.get("event") or {}, model.mono())
        if kind == "log_rotated":
            model.logs.append("──── log file replaced ────")
            self._resent = False
            return LOGS
        return None
