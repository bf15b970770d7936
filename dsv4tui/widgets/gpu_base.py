"""What the GPU panel and the compact GPU strip share: telemetry in, redraw, error, ticking."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.style import Style
from textual.widget import Widget

from dsv4tui.telemetry import Frame, HostTelemetry


class TelemetryWidget(Widget):
    """A widget drawn from one host's :class:`HostTelemetry` (its own or a shared one)."""

    COMPONENT_PREFIX = ""  # e.g. "gpu-panel" -> component classes "gpu-panel--NAME"
    RELAYOUT = False  # True when a new frame can change the widget's height

    def __init__(self, host: str = "", telemetry: HostTelemetry | None = None, *,
                 clock: Callable[[], float] | None = None, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._telemetry = telemetry or HostTelemetry(host, clock=clock or time.monotonic)
        self._error: str | None = None

    @property
    def telemetry(self) -> HostTelemetry:
        return self._telemetry

    def _redraw(self) -> None:
        self.refresh(layout=self.RELAYOUT)

    def set_telemetry(self, telemetry: HostTelemetry) -> None:
        """Show another host (or a shared model)."""
        self._telemetry = telemetry
        self._redraw()

    def update_frame(self, frame: Frame) -> None:
        """Add a frame to the widget's telemetry and redraw."""
        self._telemetry.add(frame)
        self._error = None
        self._redraw()

    def refresh_telemetry(self) -> None:
        """Redraw after the shared telemetry model changed."""
        self._error = None
        self._redraw()

    def show_error(self, message: str | None) -> None:
        """A stream failure to show (None clears it); a new frame clears it too."""
        self._error = message
        self._telemetry.set_error(message)
        self._redraw()

    def on_mount(self) -> None:
        # ages and stale marks move with time even when no frame arrives
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self._telemetry.latest is not None:
            self.refresh()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"{self.COMPONENT_PREFIX}--{name}")
