"""A Sparkline drawn straight into Strips.

Textual's Sparkline builds a Rich renderable on every paint (exact-fraction bucketing and a new
Style per cell: ~2.6 ms for 104 x 2 cells on a small machine, on every decode line of a busy
server). This one draws the same bars with the same colours from integer bucketing and a
per-colour style cache, and keeps the rows until the data, the size or the theme changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color as RichColor
from rich.color import blend_rgb
from rich.color_triplet import ColorTriplet
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"


def spark_rows(data: Sequence[float], width: int, height: int, low: tuple[int, int, int],
               high: tuple[int, int, int], base: Style) -> list[list[tuple[str, Style]]]:
    """Rows (top first) of (character, style) cells: Textual's Sparkline with ``max`` as the
    summary of each bucket."""
    if width <= 0 or height <= 0:
        return []
    styles: dict[tuple[int, ...], Style] = {}

    def style_for(rgb: tuple[int, ...]) -> Style:
        style = styles.get(rgb)
        if style is None:
            style = styles[rgb] = base + Style(color=RichColor.from_rgb(*rgb))
        return style

    if not data:
        return [[(" ", base)] * width for _ in range(height - 1)] + [
            [("▁", style_for(low))] * width]
    if len(data) == 1:
        return [[("█", style_for(high))] * width for _ in range(height)]
    n = len(data)
    buckets = [max(data[(n * k) // width:(n * (k + 1)) // width])
               for k in range(width) if (n * (k + 1)) // width > (n * k) // width]
    minimum, maximum = min(data), max(data)
    extent = maximum - minimum or 1
    segments = len(BARS) * height - 1
    step = len(buckets) / width
    columns = []
    index = 0.0
    for _ in range(width):
        ratio = (buckets[int(index)] - minimum) / extent
        columns.append((int(ratio * segments), style_for(tuple(blend_rgb(ColorTriplet(*low), ColorTriplet(*high), ratio)))))
        index += step
    rows = []
    for i in reversed(range(height)):
        lo, hi = i * len(BARS), (i + 1) * len(BARS)
        row = []
        for bar, style in columns:
            if bar < lo:
                row.append((" ", base))
            elif bar >= hi:
                row.append(("█", style))
            else:
                row.append((BARS[bar % len(BARS)], style))
        rows.append(row)
    return rows


class FastSparkline(Sparkline):
    """Textual's Sparkline as the dashboard uses it: colours from the CSS component classes
    (``sparkline--min-color`` / ``--max-color``) and ``max`` summaries. The ``min_color``,
    ``max_color`` and ``summary_function`` arguments of Sparkline are not supported."""

    def __init__(self, data: Sequence[float] | None = None, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(data, name=name, id=id, classes=classes)
        self._rows: list[Strip] = []
        self._rows_key: tuple[object, ...] | None = None
        self._colors_now: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rows_key = None
        self._colors_now = None

    def _colors(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(low, high) bar colours over the background; kept until the styles change."""
        if self._colors_now is None:
            _, background = self.background_colors
            low = background + self.get_component_styles("sparkline--min-color").color
            high = background + self.get_component_styles("sparkline--max-color").color
            self._colors_now = (low.rgb, high.rgb)
        return self._colors_now

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        data = tuple(self.data or ())
        low, high = self._colors()
        base = self.rich_style
        key = (width, height, data, low, high, base)
        if key != self._rows_key:
            self._rows = []
            for row in spark_rows(data, width, height, low, high, base):
                merged: list[Segment] = []
                for char, style in row:
                    if merged and merged[-1].style is style:
                        merged[-1] = Segment(merged[-1].text + char, style)
                    else:
                        merged.append(Segment(char, style))
                self._rows.append(Strip(merged, width))
            self._rows_key = key
        if y < len(self._rows):
            return self._rows[y]
        return Strip.blank(width, self.rich_style)
