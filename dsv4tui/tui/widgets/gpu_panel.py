"""GpuPanel: one row per GPU -- utilisation, tensor pipe, SM, DRAM, memory, power,
temperature and SM clock bars plus a tensor-pipe sparkline -- under a header with the host,
GPU model and count, driver and source.

The panel never fetches anything. Give it data::

    panel = GpuPanel(host="ct200")          # owns a HostTelemetry (history + stale ages)
    panel.update_frame(frame)               # a dsv4tui.core.telemetry.Frame, on every GpuFrame

or share the app's :class:`~dsv4tui.core.telemetry.HostTelemetry` (so history survives screen
switches) with ``GpuPanel(telemetry=t)``: the app calls ``t.add(frame)`` and then
``panel.refresh_telemetry()``. ``panel.show_error("no NVIDIA driver on ct200")`` shows a
stream failure until the next frame.

Null metrics read "n/a" (never 0). A GPU not heard from for three intervals is greyed with
its age. A busy GPU whose tensor pipe idles (util >= 50 %, tensor < 5 %: the MoE runs on
CUDA cores) shows its tensor number in the warning colour. Colours come from the app theme
through component classes ($primary, $accent, $warning, $error, $text-muted ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from dsv4tui.core.telemetry import Frame, GpuSample, GpuStatus, fmt_age
from dsv4tui.tui.widgets import gpu_nodes
from dsv4tui.tui.widgets.cells import bar_cells, spark_chars
from dsv4tui.tui.widgets.gpu_base import Row, TelemetryWidget

THROTTLE_REASONS = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})


class GpuFrame(Message):
    """A telemetry frame for one host (posted by the app's telemetry worker).

    Coalesces: a newer frame for the same host replaces one still queued.
    """

    def __init__(self, host: str, frame: Frame) -> None:
        super().__init__()
        self.host = host
        self.frame = frame

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuFrame) and message.host == self.host


def _pct_text(v: float | None, width: int, small_decimals: bool = False) -> str:
    if v is None:
        return "n/a".rjust(width)
    if small_decimals and v < 9.95:
        return f"{v:.1f}%".rjust(width)
    return f"{v:.0f}%".rjust(width)


def _pair_text(a: float | None, b: float | None, width: int, scale: float = 1.0) -> str:
    if a is None and b is None:
        return "n/a".rjust(width)
    left = "n/a" if a is None else f"{a / scale:.0f}"
    right = "n/a" if b is None else f"{b / scale:.0f}"
    return f"{left}/{right}".rjust(width)


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    text_w: int
    priority: int  # higher survives narrower terminals
    bar_min: int = 3
    bar_max: int = 10
    short: str = ""  # title when only the value text is shown

    def title_for(self, width: int) -> str:
        if len(self.title) <= width or not self.short:
            return self.title[:width]
        return self.short[:width]


COLUMNS = (
    Column("util", "UTIL", 4, 9),
    Column("tensor", "TENSOR", 5, 10),
    Column("sm", "SM", 4, 7),
    Column("dram", "DRAM", 4, 6),
    Column("mem", "MEM GiB", 7, 8),
    Column("power", "POWER W", 7, 5),
    Column("temp", "TEMP", 4, 3, bar_max=5),
    Column("clock", "SM MHz", 4, 2, bar_max=5, short="MHz"),
)
IDX_W = 4  # "  7 " -- the GPU index and a space
GAP = 1
SPARK_MIN = 10


def spark_title(width: int, interval: float) -> str:
    """``TENSOR LAST 22s`` (or shorter) for a sparkline of ``width`` ticks."""
    span = fmt_age(width * interval)
    for title in (f"TENSOR LAST {span}", f"TENSOR {span}", "TENSOR"):
        if len(title) <= width:
            return title
    return ""


@dataclass(frozen=True)
class Layout:
    columns: tuple[Column, ...]
    bars: dict[str, int]  # key -> bar width (0: text only)
    spark_w: int

    @property
    def width(self) -> int:
        w = IDX_W
        for c in self.columns:
            bar = self.bars[c.key]
            w += c.text_w + (bar + 1 if bar else 0) + GAP
        return w + self.spark_w


def plan_layout(width: int) -> Layout:
    """Fit the columns into ``width`` cells: shrink bars, drop bars, then drop columns."""
    cols = list(COLUMNS)
    bars = {c.key: c.bar_min for c in cols}
    spark = SPARK_MIN

    def used() -> int:
        return Layout(tuple(cols), bars, spark).width

    # 1) drop bars, least important first; 2) drop columns; 3) drop the sparkline last of all
    by_priority = sorted(cols, key=lambda c: c.priority)
    for c in by_priority:
        if used() <= width:
            break
        if c.key not in ("util", "tensor"):
            bars[c.key] = 0
    for c in by_priority:
        if used() <= width:
            break
        if c.key not in ("util", "tensor", "mem"):
            cols.remove(c)
    if used() > width:
        spark = 0
    for key in ("util", "tensor"):  # very narrow: numbers only, memory last to go
        if used() > width:
            bars[key] = 0
    if used() > width:
        cols = [c for c in cols if c.key != "mem"]
    # grow: half the spare cells go to the bars (round robin, most important first, up to
    # their max), the rest and whatever the bars cannot take to the sparkline
    spare = width - used()
    budget = spare - (min(spare // 2, 40) if spark else 0)
    growable = [c for c in sorted(cols, key=lambda c: -c.priority) if bars[c.key]]
    while budget > 0:
        grew = False
        for c in growable:
            if budget > 0 and bars[c.key] < c.bar_max:
                bars[c.key] += 1
                budget -= 1
                spare -= 1
                grew = True
        if not grew:
            break
    if spark:
        spark += max(0, spare)
    return Layout(tuple(cols), dict(bars), spark)


class GpuPanel(TelemetryWidget):
    """Live view of every GPU on one host. Feed it frames; it never connects anywhere."""

    DEFAULT_CSS = """
    GpuPanel {
        height: auto;
        padding: 0 1;
    }
    GpuPanel > .gpu-panel--header { color: $text; text-style: bold; }
    GpuPanel > .gpu-panel--title { color: $text-muted; }
    GpuPanel > .gpu-panel--value { color: $text; }
    GpuPanel > .gpu-panel--na { color: $text-disabled; }
    GpuPanel > .gpu-panel--bar { color: $primary; background: $panel; }
    GpuPanel > .gpu-panel--bar-tensor { color: $accent; background: $panel; }
    GpuPanel > .gpu-panel--spark { color: $accent; }
    GpuPanel > .gpu-panel--warn { color: $warning; text-style: bold; }
    GpuPanel > .gpu-panel--error { color: $error; text-style: bold; }
    GpuPanel > .gpu-panel--stale { color: $text-disabled; }
    GpuPanel > .gpu-panel--sim { color: $warning; text-style: bold reverse; }
    """

    COMPONENT_CLASSES = {
        "gpu-panel--header", "gpu-panel--title", "gpu-panel--value", "gpu-panel--na",
        "gpu-panel--bar", "gpu-panel--bar-tensor", "gpu-panel--spark", "gpu-panel--warn",
        "gpu-panel--error", "gpu-panel--stale", "gpu-panel--sim",
    }

    COMPONENT_PREFIX = "gpu-panel"
    RELAYOUT = True

    # -- drawing -------------------------------------------------------------------------
    def line_count(self) -> int:
        t = self._telemetry
        count = 1 + bool(self._error or t.error)
        gpus = t.gpu_count()
        if gpus and t.node_groups:
            return count + self._node_lines(len(t.node_groups), gpus)
        if gpus:
            return count + 1 + gpus
        return count + (0 if (self._error or t.error) else 1)

    def _short_terminal(self) -> bool:
        try:
            return 0 < self.app.size.height < gpu_nodes.SUMMARY_BELOW
        except Exception:  # no app (yet)
            return False

    def _node_lines(self, nodes: int, gpus: int) -> int:
        return nodes + (0 if self._short_terminal() else gpus + 1)

    def _grouped(self, statuses: list[GpuStatus], width: int) -> list[Text | Row]:
        """A host made of nodes: a header per node over its GPUs, or one row per node."""
        groups = gpu_nodes.by_node(self._telemetry, statuses)
        if self._short_terminal():
            name_w = min(max(len(n) for n, _ in groups), 12)
            return [gpu_nodes.node_summary(n, r, sts, name_w)
                    for r, (n, sts) in enumerate(groups)]
        layout = plan_layout(width)
        out: list[Text | Row] = [self._titles(layout)]
        for rank, (node, sts) in enumerate(groups):
            out.append(gpu_nodes.node_header(node, rank, sts, width))
            first = sts[0].sample.index if sts else 0
            out.extend(self._row(s, layout, s.sample.index - first) for s in sts)
        return out

    def lines(self, width: int) -> list[Text | Row]:
        t = self._telemetry
        now = t.clock()
        lines: list[Text | Row] = [self._header(width, now)]
        error = self._error or t.error
        if error:
            lines.append(Text(error, style=self._style("error"), no_wrap=True,
                              overflow="ellipsis"))
        statuses = t.gpus(now)
        if not statuses:
            if not error:
                lines.append(Text("waiting for telemetry…", style=self._style("na")))
            return lines
        if t.node_groups:
            lines.extend(self._grouped(statuses, width))
            return lines
        layout = plan_layout(width)
        lines.append(self._titles(layout))
        lines.extend(self._row(s, layout) for s in statuses)
        return lines

    def _header(self, width: int, now: float) -> Text:
        t = self._telemetry
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(t.host or "host", self._style("header"))
        latest = t.latest
        if latest is not None:
            head.append(f" · {t.summary()}", self._style("value"))
            head.append(f" · driver {latest.driver or 'n/a'} · {latest.source}",
                        self._style("title"))
            if latest.note:
                head.append(f" ({latest.note})", self._style("na"))
        right = Text(no_wrap=True)
        if t.is_stale(None, now):
            age = t.age(None, now) or 0.0
            right.append(f" no frames for {fmt_age(age)} ", self._style("warn"))
        if t.simulated:
            right.append(" SIMULATED ", self._style("sim"))
        if right.cell_len:
            room = max(0, width - right.cell_len - 1)
            head.truncate(room, overflow="ellipsis", pad=True)
            head.append(" ")
            head.append_text(right)
        return head

    def _titles(self, layout: Layout) -> Text:
        out = Text(no_wrap=True, overflow="crop", style=self._style("title"))
        out.append("GPU".ljust(IDX_W))
        for c in layout.columns:
            bar = layout.bars[c.key]
            w = c.text_w + (bar + 1 if bar else 0)
            out.append(c.title_for(w).ljust(w))
            out.append(" " * GAP)
        if layout.spark_w:
            title = spark_title(layout.spark_w, self._telemetry.interval)
            out.append(title.ljust(layout.spark_w))
        return out

    def _row(self, status: GpuStatus, layout: Layout, shown: int | None = None) -> Row:
        g = status.sample
        stale = status.stale
        out = Row()
        out.append(f"{g.index if shown is None else shown:>{IDX_W - 1}} ",
                   "stale" if stale else "header")
        if g.error and not stale:
            out.append(f"{g.name or 'GPU'}: {g.error}", "error")
            return out
        gap = " " * GAP
        for c in layout.columns:
            self._cell(out, c, layout.bars[c.key], g, stale)
            out.append(gap)
        if stale:  # grey the numbers; the age label below keeps the warning colour
            out.stylize("stale")
        if layout.spark_w:
            if stale:
                label = f"stale {fmt_age(status.age_s)}"
                out.append(label[:layout.spark_w].ljust(layout.spark_w), "warn")
            elif not g.gpm and g.tensor_active is None:
                out.append("n/a".ljust(layout.spark_w), "na")
            else:
                series = self._telemetry.history.series(g.index, "tensor_active", layout.spark_w)
                out.append(spark_chars(series, layout.spark_w), "spark")
        return out

    def _cell(self, out: Row, c: Column, bar_w: int, g: GpuSample, stale: bool) -> None:
        frac, text, warn = cell_value(c.key, g, c.text_w)
        if bar_w:
            filled, empty = bar_cells(frac, bar_w)
            out.append(filled + empty, "bar-tensor" if c.key == "tensor" else "bar")
            out.append(" ")
        out.append(text, "na" if text.strip() == "n/a" else (
            "warn" if warn and not stale else "value"))

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return self.line_count()


def cell_value(key: str, g: GpuSample, width: int) -> tuple[float | None, str, bool]:
    """(bar fraction, right-aligned text, warn?) for one column of one GPU."""
    if key == "util":
        v = g.util_gpu
        return _frac(v), _pct_text(v, width), False
    if key == "tensor":
        v = g.tensor_active
        return _frac(v), _pct_text(v, width, small_decimals=True), g.cuda_core_bound
    if key == "sm":
        v = g.sm_active
        return _frac(v), _pct_text(v, width), False
    if key == "dram":
        v = g.dram_active
        return _frac(v), _pct_text(v, width), False
    if key == "mem":
        frac = g.mem_frac
        return frac, _pair_text(g.mem_used_mib, g.mem_total_mib, width, 1024.0), bool(
            frac is not None and frac >= 0.98)
    if key == "power":
        frac = g.power_frac
        return frac, _pair_text(g.power_w, g.power_limit_w, width), bool(
            frac is not None and frac >= 0.98)
    if key == "temp":
        v = g.temp_c
        text = "n/a".rjust(width) if v is None else f"{v:.0f}°C".rjust(width)
        frac = None if v is None else (v - 20.0) / 75.0
        return frac, text, v is not None and v >= 85
    if key == "clock":
        v = g.sm_clock_mhz
        text = "n/a".rjust(width) if v is None else f"{v:.0f}".rjust(width)
        top = g.sm_clock_max_mhz or 2000.0
        frac = None if v is None else v / top
        throttled = bool(g.clock_event_reasons and THROTTLE_REASONS & set(g.clock_event_reasons))
        return frac, text, throttled
    raise KeyError(key)


def _frac(v: float | None) -> float | None:
    return None if v is None else v / 100.0
