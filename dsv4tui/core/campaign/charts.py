"""A comparison's charts as SVG, drawn by matplotlib (the optional extra ``dsv4tui[report]``).

One chart per metric, the concurrencies C on the x axis (as categories: 1, 8, 16 are levels,
not a scale), one series per run, coloured in the order of the comparison's runs
(Okabe-Ito: told apart by people with colour-blindness too). Throughput, tensor pipe and
tok/s per kW are grouped bars (one bar per run at each C); TTFT and TPOT are lines with
markers. Every value comes from the :class:`~dsv4tui.core.campaign.compare.Comparison`
(``series``); nothing is recomputed here.

Each drawn series carries an SVG id naming its run -- ``series-r<ID>`` (a line) or
``series-r<ID>-c<C>`` (a bar) -- so a reader (or a test) can tell which run a shape is.

:func:`change_svg` draws the verdicts' chart: each variant's change in output tok/s against
the baseline per load, one bar per variant, its error bar the 95 % interval across restarts
(``change-v<N>-<load>`` the bar, ``interval-v<N>-<load>`` its error bar; N the variant's
place among the bars' labels); a bar without repeats has no error bar, and the title says
"one run each: no interval".
A run with no value for a metric draws nothing on that chart; a chart no run has a value
for is not drawn at all (:func:`chart_svg` returns None and the report says why).

matplotlib is imported only when a chart is drawn, through the object-oriented API (no
pyplot: no global figure state, safe from a worker thread).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign.compare import SIMULATED, sim_name
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.campaign.compare import Comparison

INSTALL_HINT = "reports draw their charts with matplotlib: pip install 'dsv4tui[report]'"

# Okabe & Ito's colour-blind safe palette (black last: it reads as "axis" on light).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")


class ChartsUnavailable(UserError):
    """matplotlib is not installed (exit 2, with the one-line install hint)."""

    def __init__(self) -> None:
        super().__init__(INSTALL_HINT, EXIT_CONFIG)


@dataclass(frozen=True)
class Theme:
    name: str
    background: str
    text: str
    muted: str
    grid: str
    palette: tuple[str, ...] = PALETTE


THEMES = {
    "light": Theme("light", "#ffffff", "#1f2328", "#59636e", "#d8dee4"),
    "dark": Theme("dark", "#0d1117", "#e6edf3", "#9198a1", "#30363d",
                  ("#56B4E9", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#0072B2",
                   "#F0E442", "#ffffff")),
}


@dataclass(frozen=True)
class ChartSpec:
    key: str  # a Comparison point key (Point.get)
    title: str
    ylabel: str
    kind: str  # "bar" | "line"
    decimals: int = 1
    empty: str = ""  # why a comparison can lack it


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("output_tok_s", "output tok/s per C", "output tok/s", "bar", 1),
    ChartSpec("ttft_p50_ms", "TTFT p50 per C", "TTFT p50 (ms)", "line", 0),
    ChartSpec("tpot_p50_ms", "TPOT p50 per C", "TPOT p50 (ms)", "line", 1),
    ChartSpec("tensor_active", "tensor pipe active per C (mean over GPUs)", "tensor active (%)",
              "bar", 1, "no GPU telemetry with tensor-pipe activity (NVML GPM) was stored "
              "with these runs"),
    ChartSpec("tok_s_per_kw", "output tok/s per kW per C (power: sum over GPUs)", "tok/s per kW",
              "bar", 1, "no GPU power was stored with these runs"),
)


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require() -> None:
    """ChartsUnavailable (exit 2, the install hint) unless matplotlib imports."""
    if not available():
        raise ChartsUnavailable()


def _label(text: str) -> str:
    """A run's name as a matplotlib text: no mathtext (``$``), not hidden from the legend
    (a label starting with ``_`` is), controls escaped."""
    out = safe_text(text).replace("$", r"\$")
    return "\u200b" + out if out.startswith("_") else out


def chart_title(spec: ChartSpec, simulated: bool) -> str:
    """A chart's title; a chart with a simulated run in it says so in the title too (a chart
    file travels without the report around it)."""
    return f"{spec.title} · {SIMULATED}" if simulated else spec.title


def _clean(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def _fmt(v: float, decimals: int) -> str:
    return f"{v:,.{decimals}f}"



@contextlib.contextmanager
def _figure(th: Any, width_in: float, height_in: float) -> Iterator[tuple[Any, Any]]:
    """A figure and its axes in the report's style (text stays text: fonttype none, the SVG
    names DejaVu Sans, what matplotlib measured with, and sans-serif fallbacks)."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    rc: Any = {"svg.fonttype": "none", "svg.hashsalt": "dsv4tui", "font.size": 9,
               "axes.edgecolor": th.muted, "axes.labelcolor": th.text, "text.color": th.text,
               "xtick.color": th.muted, "ytick.color": th.muted, "axes.titleweight": "bold",
               "axes.titlesize": 10, "legend.fontsize": 8, "legend.frameon": False}
    with rc_context(rc):
        fig = Figure(figsize=(width_in, height_in), facecolor=th.background)
        FigureCanvasSVG(fig)
        ax = fig.subplots()
        ax.set_facecolor(th.background)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.grid(axis="y", color=th.grid, linewidth=0.6)
        ax.set_axisbelow(True)
        yield fig, ax

def chart_svg(cmp: Comparison, spec: ChartSpec, theme: str = "light", *,
              width_in: float = 7.2, height_in: float = 3.3) -> str | None:
    """The chart of ``spec.key`` as a standalone SVG document; None when no run has a value.

    Deterministic for the same input (fixed ids, no date), so a report diffs cleanly."""
    require()

    th = THEMES.get(theme, THEMES["light"])
    cs = cmp.concurrencies()
    series = []
    simulated = False
    for run in cmp.runs:
        values = [_clean(v) for v in cmp.series(run.id, spec.key)]
        if any(v is not None for v in values):
            series.append((run.id, sim_name(cmp.name(run.id), run.simulated), values))
            simulated = simulated or run.simulated
    if not cs or not series:
        return None
    with _figure(th, width_in, height_in) as (fig, ax):
        xs = list(range(len(cs)))
        n = len(series)
        many = n > 4 or len(cs) > 6
        for i, (run_id, name, values) in enumerate(series):
            color = th.palette[i % len(th.palette)]
            if spec.kind == "bar":
                width = 0.8 / n
                pos = [x - 0.4 + width * (i + 0.5) for x in xs]
                drawn = [(p, v, c) for p, v, c in zip(pos, values, cs, strict=True)
                         if v is not None]
                bars = ax.bar([p for p, _, _ in drawn], [v for _, v, _ in drawn], width * 0.92,
                              color=color, label=_label(name))
                for patch, (_, _, c) in zip(bars.patches, drawn, strict=True):
                    patch.set_gid(f"series-r{run_id}-c{c}")
                if not many:
                    ax.bar_label(bars, labels=[_fmt(v, spec.decimals) for _, v, _ in drawn],
                                 fontsize=7, color=th.muted, padding=2)
            else:
                ys = [v if v is not None else math.nan for v in values]
                (line,) = ax.plot(xs, ys, marker="o", markersize=4, linewidth=1.8, color=color,
                                  label=_label(name))
                line.set_gid(f"series-r{run_id}")
        ax.set_xticks(xs, [f"C={c}" for c in cs])
        ax.set_xlim(-0.6, len(cs) - 0.4)
        ax.set_ylabel(spec.ylabel)
        ax.set_title(chart_title(spec, simulated), loc="left", color=th.text)
        if spec.kind == "bar":
            top = max([v for _, _, vals in series for v in vals if v is not None] or [0.0])
            # room for the values above the bars (an all-zero chart still gets an axis)
            ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.3)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None}, facecolor=th.background)
    return buf.getvalue()


_PROLOGUE = re.compile(r"\A\s*<\?xml[^>]*\?>\s*(<!DOCTYPE[^>]*>\s*)?", re.S)
_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str = "") -> str:
    """An SVG document as an element to put in HTML (no XML prologue). With ``prefix`` every
    id in it (and every reference to one) gets that prefix, so several charts in one page
    never share an id (matplotlib numbers its elements the same way in every figure)."""
    out = _PROLOGUE.sub("", svg)
    if not prefix:
        return out
    ids = set(_ID.findall(out))

    def ref(m: re.Match[str]) -> str:
        name = m.group(2)
        return f"{m.group(1)}{prefix}{name}" if name in ids else m.group(0)

    out = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', out)
    return re.sub(r'(url\(#|href="#)([^)"]+)', ref, out)


def _load_key(load: tuple[int, float | None]) -> str:
    c, rate = load
    return f"c{c}" if rate is None else f"r{rate:g}-c{c}"


def change_svg(bars: Sequence[Any], title: str, theme: str = "light", *,
               simulated: bool = False, width_in: float = 7.2,
               height_in: float = 3.3) -> str | None:
    """The change chart of ``bars`` (``report_model.ChangeBar``: label, load, load_text,
    change_pct, ci_low, ci_high): grouped bars per load, one per variant, the interval as an
    error bar. None when there is no bar."""
    require()

    if not bars:
        return None
    th = THEMES.get(theme, THEMES["light"])
    labels = list(dict.fromkeys(b.label for b in bars))
    loads = list(dict.fromkeys(b.load for b in bars))
    load_names = {b.load: b.load_text for b in bars}
    with _figure(th, width_in, height_in) as (fig, ax):
        ax.axhline(0.0, color=th.muted, linewidth=0.8)
        n = len(labels)
        width = 0.8 / n
        tops = [0.0]
        for i, label in enumerate(labels):
            color = th.palette[(i + 1) % len(th.palette)]  # the baseline keeps the first
            mine = [(loads.index(b.load), b) for b in bars if b.label == label]
            pos = [x - 0.4 + width * (i + 0.5) for x, _ in mine]
            sim = any(getattr(b, "simulated", False) for _, b in mine)
            drawn = ax.bar(pos, [b.change_pct for _, b in mine], width * 0.92, color=color,
                           label=_label(sim_name(label, sim)))
            for patch, (p, (_, b)) in zip(drawn.patches, zip(pos, mine, strict=True),
                                          strict=True):
                patch.set_gid(f"change-v{i}-{_load_key(b.load)}")
                tops += [abs(b.change_pct)]
                if b.ci_low is None or b.ci_high is None:
                    continue
                err = ax.errorbar([p], [b.change_pct], yerr=[[b.change_pct - b.ci_low],
                                                              [b.ci_high - b.change_pct]],
                                  fmt="none", ecolor=th.text, elinewidth=1.2, capsize=3)
                for part in err.lines[2]:
                    part.set_gid(f"interval-v{i}-{_load_key(b.load)}")
                tops += [abs(b.ci_low), abs(b.ci_high)]
        xs = list(range(len(loads)))
        ax.set_xticks(xs, [load_names[ld] for ld in loads])
        ax.set_xlim(-0.6, len(loads) - 0.4)
        top = max(tops) or 1.0
        ax.set_ylim(-top * 1.15, top * 1.15)
        ax.set_ylabel("change in output tok/s (%)")
        ax.set_title(f"{title} · {SIMULATED}" if simulated else title, loc="left",
                     color=th.text, fontsize=9, wrap=True)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.3)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None}, facecolor=th.background)
    return buf.getvalue()


def charts(cmp: Comparison, theme: str = "light",
           specs: Sequence[ChartSpec] = CHARTS) -> list[tuple[ChartSpec, str | None]]:
    """Every chart of the report, in order: ``(spec, svg or None)``."""
    return [(spec, chart_svg(cmp, spec, theme)) for spec in specs]


__all__ = ["CHARTS", "INSTALL_HINT", "PALETTE", "THEMES", "ChartSpec", "ChartsUnavailable",
           "available", "change_svg", "chart_svg", "chart_title", "charts", "inline_svg", "require"]

