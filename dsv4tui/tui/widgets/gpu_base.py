"""What the GPU panel and the compact GPU strip share: telemetry in, redraw, error, ticking,
and a cheap way to draw: the widget's lines are built once per change (a frame, a tick, a
resize, a theme) as Strips and served row by row (Textual's Line API), so a screen switch or a
log-driven repaint reuses them instead of rebuilding the text."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from dsv4tui.core.telemetry import Frame, HostTelemetry
from dsv4tui.tui.clock import every_second


class Row:
    """A row of runs of text, each with the names of its component styles, drawn straight
    to Segments: the GPU rows are rebuilt with every frame, and going through Rich Text
    (spans, then render) took half of the panel's 5 ms redraw."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: list[tuple[str, tuple[str, ...]]] = []

    def append(self, text: str, *styles: str) -> None:
        self.runs.append((text, styles))

    def stylize(self, style: str) -> None:
        """Lay ``style`` over everything appended so far (as ``Text.stylize`` does)."""
        self.runs = [(text, (*styles, style)) for text, styles in self.runs]

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.runs)


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
        self._version = 0  # bumped by every change that can alter what is drawn
        self._strips: list[Strip] = []
        self._strips_key: tuple[int, int] | None = None
        self._styles: dict[str, Style] = {}
        self._row_styles: dict[tuple[str, ...], Style] = {}  # the widget's style + the names'
        self._height: int | None = None

    @property
    def telemetry(self) -> HostTelemetry:
        return self._telemetry

    def _redraw(self) -> None:
        self._version += 1
        layout = False
        if self.RELAYOUT:  # a layout pass reflows the whole screen: only when the height moves
            height = self.line_count()
            layout, self._height = height != self._height, height
        self.refresh(layout=layout)

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
        every_second(self, self._tick)

    def _tick(self) -> None:
        if self._telemetry.latest is not None:
            self._redraw()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(
                f"{self.COMPONENT_PREFIX}--{name}")
        return style

    # -- drawing -------------------------------------------------------------------------
    def lines(self, width: int) -> Sequence[Text | Row]:
        """The widget's rows for ``width`` cells (subclasses)."""
        raise NotImplementedError

    def line_count(self) -> int:
        """How many rows :meth:`lines` returns (without building them)."""
        return 1

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._row_styles.clear()
        self._strips_key = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (width, self._version)
        if key != self._strips_key:
            base = self.rich_style
            console = self.app.console
            strips = []
            for text in self.lines(width):
                if isinstance(text, Row):
                    strips.append(self._row_strip(text, width, base))
                    continue
                if text.cell_len > width:
                    text.truncate(width, overflow=text.overflow or "crop")
                style = text.style  # Text.render leaves the Text's own style out
                if style:
                    own = base + (style if isinstance(style, Style) else console.get_style(style))
                else:
                    own = base
                segments = Segment.apply_style(text.render(console), own)
                strips.append(Strip(segments, text.cell_len).extend_cell_length(width, base))
            self._strips, self._strips_key = strips, key
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.rich_style)

    def _row_strip(self, row: Row, width: int, base: Style) -> Strip:
        """The Strip Rich would make of the same text and styles, cropped to ``width``."""
        styles = self._row_styles
        segments = []
        cells = 0
        for text, names in row.runs:
            style = styles.get(names)
            if style is None:
                style = base
                for name in names:
                    style = style + self._style(name)
                styles[names] = style
            segments.append(Segment(text, style))
            cells += cell_len(text)
        strip = Strip(segments, cells)
        if cells > width:
            strip = strip.crop(0, width)
        return strip.extend_cell_length(width, base)
