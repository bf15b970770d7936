"""Charts (textual-plotext) whose series colours come from the theme (``$chart-1`` ..).

A chart keeps the last data it was given and re-plots on resize and on theme change, so a
theme switch recolours the bars as well as the background.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual.color import Color
from textual_plotext import PlotextPlot

from dsv4tui.themes import chart_colors


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
    """Grouped bars (one colour per series) or lines over x labels."""

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
        self._version = 0  # bumped by every replot
        self._plot_cache: tuple[Any, Any] | None = None

    def render(self) -> Any:
        """plotext rebuilds the whole figure on every paint (tens of ms for a bar chart on a
        small CPU) and a screen switch repaints everything: keep the last build until the data,
        the size or the theme changes."""
        key = (self.size, self._version, self.app.theme)
        if self._plot_cache is not None and self._plot_cache[0] == key:
            return self._plot_cache[1].copy()
        out = super().render()
        self._plot_cache = (key, out)
        return out.copy() if hasattr(out, "copy") else out

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._replot())
        self._replot()

    def show_data(self, labels: Sequence[str], series: Sequence[Series], *, title: str | None = None,
                  ylabel: str | None = None, empty: str | None = None) -> None:
        labels, series = list(labels), list(series)
        if (labels == self._labels and series == self._series and title in (None, self.title)
                and ylabel in (None, self.ylabel) and empty in (None, self._empty)):
            return  # nothing new: skip the (costly) plotext rebuild
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
        if not self.is_mounted:
            return
        plt: Any = self.plt  # the bundled .pyi misses multiple_bar's labels= and colour lists
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        colors = self.series_colors()
        series = [s for s in self._series if any(v is not None for v in s.values)]
        if not self._labels or not series:
            plt.xticks([])
            plt.yticks([])
            plt.text(self._empty, 0.5, 0.5, alignment="center")
            plt.xlim(0, 1)
            plt.ylim(0, 1)
            self.refresh()
            return
        if self.ylabel:
            plt.ylabel(self.ylabel)
        names = [s.name for s in series]
        if self.kind == "bars":
            values = [[0.0 if v is None else float(v) for v in s.values] for s in series]
            if len(series) == 1:
                plt.bar(self._labels, values[0], color=colors[0], width=0.6)
            else:
                plt.multiple_bar(self._labels, values, labels=names, width=0.7,
                                 color=[colors[i % len(colors)] for i in range(len(series))])
        else:
            xs = list(range(1, len(self._labels) + 1))
            for i, s in enumerate(series):
                pts = [(x, float(v)) for x, v in zip(xs, s.values, strict=False) if v is not None]
                if not pts:
                    continue
                plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="braille",
                         color=colors[i % len(colors)], label=s.name)
            plt.xticks(xs, self._labels)
        self.refresh()
