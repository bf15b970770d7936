"""Charts (textual-plotext) whose series colours come from the theme (``$chart-1`` ..).

A chart keeps the last data it was given and re-plots on resize and on theme change, so a
theme switch recolours the bars as well as the background. Drawings are made in a worker
thread and shown through Textual's Line API (see :class:`Chart`), so plotting never blocks
a key press (it still shares the interpreter with the UI loop while it runs: plotext is pure
Python, so the Bench screen redraws its chart at most once a second during a sweep).
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.strip import Strip
from textual_plotext import PlotextPlot

from dsv4tui.tui.themes import chart_colors


@dataclass(frozen=True)
class Series:
    name: str
    values: tuple[float | None, ...]

    def __init__(self, name: str, values: Sequence[float | None]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "values", tuple(values))


def _rgb(hex_color: str) -> tuple[int, int, int]:
    try:
        r, g, b = Color.parse(hex_color).rgb
    except Exception:
        return (128, 128, 128)
    return (r, g, b)


class Chart(PlotextPlot):
    """Grouped bars (one colour per series) or lines over x labels.

    plotext draws in pure Python (10-20 ms for a bar chart on a small CPU, and Textual's
    generic path for its ANSI output costs ~3x that again), so a chart is never drawn on the
    UI loop: each change (data, size, theme) is drawn in a worker thread into Strips, and the
    screen shows the previous drawing until the new one is ready.
    """

    DEFAULT_CSS = """
    Chart { height: 1fr; min-height: 8; }
    """

    def __init__(self, *, title: str = "", kind: str = "bars", id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.kind = kind  # "bars" | "lines"
        self.ylabel = ""
        self._labels: list[str] = []
        self._series: list[Series] = []
        self._empty = "no data yet"
        self._version = 0  # bumped by every change of what is plotted
        self._strips: list[Strip] = []
        self._strips_key: tuple[Any, ...] | None = None
        self._drawing: tuple[Any, ...] | None = None  # the key being drawn in the thread

    @property
    def settled(self) -> bool:
        """True when what is shown is the drawing of the current data, size and theme."""
        if self._drawing is not None:
            return False
        hidden = not self.size.width or not self.size.height or not self.display
        return hidden or self._strips_key == self._key()

    def _key(self) -> tuple[Any, ...]:
        return (self.size, self._version, self.app.theme)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = self._key()
        if key != self._strips_key and self._drawing is None and width and self.size.height:
            self._drawing = key
            self.run_worker(self._draw(key, self._spec()), group="chart-draw",
                            exit_on_error=False)
        base = self.rich_style
        if y < len(self._strips):
            strip = self._strips[y]
            return strip if strip.cell_length == width else strip.crop_extend(0, width, base)
        return Strip.blank(width, base)

    async def _draw(self, key: tuple[Any, ...], spec: dict[str, Any]) -> None:
        try:
            self._strips = await asyncio.to_thread(self._draw_strips, spec)
        except Exception as exc:  # plotext failed on this data/size: say so in the chart
            base = self.rich_style  # (the key counts as drawn: no retry loop, no dialogs)
            width = max(1, spec["width"])  # wrapped: a narrow chart still says it all
            lines = textwrap.wrap(f"chart failed: {type(exc).__name__}: {exc}", width)
            self._strips = [Strip([Segment(line, base)]).crop_extend(0, width, base)
                            for line in lines[:max(1, spec["height"])]]
        finally:
            self._strips_key = key
            self._drawing = None
            self.refresh()  # shows it, or starts the next drawing if the key moved on

    def _spec(self) -> dict[str, Any]:
        """Everything a drawing needs, read on the UI loop (the thread touches only plotext)."""
        return {"labels": list(self._labels), "series": list(self._series),
                "title": self.title, "ylabel": self.ylabel, "empty": self._empty,
                "kind": self.kind, "colors": self.series_colors(),
                "theme": self._get_plotext_theme_name(self.app.theme),
                "width": self.size.width, "height": self.size.height,
                "base": self.rich_style, "console": self.app.console}

    def _draw_strips(self, spec: dict[str, Any]) -> list[Strip]:
        """(worker thread) Plot, build and convert to Strips."""
        plt: Any = self.plt  # the bundled .pyi misses multiple_bar's labels= and colour lists
        plt.clear_data()
        plt.clear_figure()
        plt.title(spec["title"])
        legend = plot_series(plt, spec)
        width, height = spec["width"], spec["height"]
        base, console = spec["base"], spec["console"]
        strips = []
        if legend and height > 1:  # our own row: plotext's legend is drawn over the bars
            strips.append(legend_strip(legend, width, base))
            height -= 1
        plt.plotsize(width, height)
        plt._set_size(width, height)  # textual-plotext does both (its issue #5)
        plt.theme(spec["theme"])
        text = Text.from_ansi(plt.build())
        strips += [Strip(Segment.apply_style(line.render(console), base), line.cell_len)
                   .crop_extend(0, width, base) for line in text.split("\n", allow_blank=True)]
        return strips

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._replot())
        self._replot()

    def show_data(self, labels: Sequence[str], series: Sequence[Series], *, title: str | None = None,
                  ylabel: str | None = None, empty: str | None = None) -> None:
        labels, series = list(labels), list(series)
        if (labels == self._labels and series == self._series and title in (None, self.title)
                and ylabel in (None, self.ylabel) and empty in (None, self._empty)):
            return  # nothing new: no new drawing
        self._labels = labels
        self._series = series
        if title is not None:
            self.title = title
        if ylabel is not None:
            self.ylabel = ylabel
        if empty is not None:
            self._empty = empty
        self._replot()

    def series_colors(self) -> list[tuple[int, int, int]]:
        variables = self.app.theme_variables
        dark = self.app.current_theme.dark if self.app.current_theme else True
        return [_rgb(c) for c in chart_colors(variables, dark)]

    def _replot(self) -> None:
        self._version += 1
        self.refresh()


def legend_strip(legend: list[tuple[str, tuple[int, int, int]]], width: int,
                 base: Style) -> Strip:
    """One row above the plot: ``■ name`` in each series' colour (never over the bars)."""
    segments = [Segment(" ", base)]
    for name, (r, g, b) in legend:
        segments.append(Segment("■ ", base + Style(color=RichColor.from_rgb(r, g, b))))
        segments.append(Segment(f"{name}   ", base))
    return Strip(segments).crop_extend(0, width, base)


def plot_series(plt: Any, spec: dict[str, Any]) -> list[tuple[str, tuple[int, int, int]]]:
    """The plotext calls for ``spec``'s labels and series (or its empty message); returns
    the legend (name, colour) when there is more than one series, drawn by the caller."""
    labels: list[str] = spec["labels"]
    colors: list[tuple[int, int, int]] = spec["colors"]
    series = [s for s in spec["series"] if any(v is not None for v in s.values)]
    if not labels or not series:
        plt.xticks([])
        plt.yticks([])
        plt.text(spec["empty"], 0.5, 0.5, alignment="center")
        plt.xlim(0, 1)
        plt.ylim(0, 1)
        return []
    if spec["ylabel"]:
        plt.ylabel(spec["ylabel"])
    names = [s.name for s in series]
    legend = ([(name, colors[i % len(colors)]) for i, name in enumerate(names)]
              if len(series) > 1 else [])
    if spec["kind"] == "bars":
        values = [[0.0 if v is None else float(v) for v in s.values] for s in series]
        if len(series) == 1:
            plt.bar(labels, values[0], color=colors[0], width=0.6)
        else:
            plt.multiple_bar(labels, values, width=0.7,
                             color=[colors[i % len(colors)] for i in range(len(series))])
        return legend
    xs = list(range(1, len(labels) + 1))
    for i, s in enumerate(series):
        pts = [(x, float(v)) for x, v in zip(xs, s.values, strict=False) if v is not None]
        if not pts:
            continue
        plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="braille",
                 color=colors[i % len(colors)])
    plt.xticks(xs, labels)
    return legend
