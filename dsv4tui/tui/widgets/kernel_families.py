"""Family bars: the share of decode GPU time per kernel family, one bar per capture.

Two captures (two backends) show as two bars per family, the first in the primary colour and
the second in the accent colour, so "MoE 39 % -> 22 %" reads at a glance. The tensor-core
flag of each family follows the bar: ``TC`` (tensor cores), ``CC`` (CUDA cores), ``?``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

BAR_CHARS = " ▏▎▍▌▋▊▉█"
LABEL_WIDTH = 20
STYLES = ("bold $primary", "bold $accent", "bold $secondary")


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``fraction`` (0-1) of ``width`` cells, in eighths."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (BAR_CHARS[part] if part and full < width else "")
    return text.ljust(width)


def tc_mark(flag: bool | None) -> str:
    return {True: "TC", False: "CC", None: "? "}[flag]


def family_rows(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Any]]]:
    """(label, [family dict or None per summary]) in the first summary's order."""
    order: list[str] = []
    labels: dict[str, str] = {}
    for s in summaries:
        for f in s.get("families") or []:
            if f["family"] not in labels:
                order.append(f["family"])
                labels[f["family"]] = f["label"]
    rows = []
    for key in order:
        cells = [next((f for f in s.get("families") or [] if f["family"] == key), None)
                 for s in summaries]
        rows.append((labels[key], cells))
    return rows


class FamilyBars(Static):
    """Call :meth:`show` with one or more capture summaries (and their titles)."""

    DEFAULT_CSS = """
    FamilyBars { height: auto; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes)
        self._summaries: list[Mapping[str, Any]] = []
        self._titles: list[str] = []

    def show(self, summaries: Sequence[Mapping[str, Any]], titles: Sequence[str] = ()) -> None:
        self._summaries = list(summaries)
        self._titles = list(titles) or [f"#{i + 1}" for i in range(len(summaries))]
        self.refresh_bars()

    def on_resize(self) -> None:
        self.refresh_bars()

    def render_text(self, width: int) -> Text:
        out = Text()
        if not self._summaries:
            out.append("no capture to show", style="italic")
            return out
        n = len(self._summaries)
        styles = [self._style(i) for i in range(n)]
        bar_width = max(8, width - LABEL_WIDTH - 14)
        # The largest share fills the bar: small families stay visible.
        top = max((f.get("share") or 0.0 for s in self._summaries
                   for f in s.get("families") or []), default=0.0) or 1.0
        if n > 1:
            for i, title in enumerate(self._titles):
                out.append("██ ", style=styles[i])
                out.append(f"{title}   ")
            out.append("\n")
        for label, cells in family_rows(self._summaries):
            for i, f in enumerate(cells):
                head = label[:LABEL_WIDTH].ljust(LABEL_WIDTH) if i == 0 else " " * LABEL_WIDTH
                out.append(head)
                share = (f or {}).get("share")
                if f is None or share is None:
                    out.append("-".ljust(bar_width), style="dim")
                    out.append("     -   \n")
                    continue
                out.append(bar(share / top, bar_width), style=styles[i])
                out.append(f" {100 * share:5.1f}% ")
                flag = f.get("tensor_cores")
                out.append(tc_mark(flag), style="bold" if flag else "dim")
                out.append("\n")
        out.rstrip()
        return out

    def _style(self, i: int) -> str:
        style = STYLES[i % len(STYLES)]
        try:  # resolve $variables against the running app's theme
            variables = self.app.theme_variables
            name = style.split("$", 1)[1]
            return style.replace("$" + name, variables.get(name, "cyan"))
        except Exception:
            return style.replace("$primary", "cyan").replace("$accent", "magenta").replace(
                "$secondary", "green")

    def refresh_bars(self) -> None:
        width = self.size.width or 80
        self.update(self.render_text(width))
