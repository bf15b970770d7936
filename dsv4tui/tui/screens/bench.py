"""Bench: the sanity gate on top, the sweep plan, a live table per level, progress, a live
chart, and the GPUs (one-line strip) beside the server's own decode throughput."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import ProgressBar, Static

from dsv4tui.core.view.model import SweepView, UiModel, fmt_duration
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.screens.base import Body
from dsv4tui.tui.screens.messages import ALL, CONN, DECODE, GPU, SANITY, SWEEP
from dsv4tui.tui.widgets.charts import Chart, Series
from dsv4tui.tui.widgets.gpu_strip import GpuStrip
from dsv4tui.tui.widgets.startup import SanityResult
from dsv4tui.tui.widgets.sweep_table import SweepTable
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import update_static
from dsv4tui.tui.widgets.throughput import ThroughputPanel

_STATUS_COLOR = {"done": "$success", "running": "$warning", "starting": "$warning",
                 "interrupted": "$error", "failed": "$error", "cancelled": "$warning"}


def plan_markup(model: UiModel, default_label: str) -> str:
    sw = model.sweep
    if sw.status == "idle":
        return (f"no sweep yet · label [b]{escape(default_label)}[/b] · "
                "[$primary]w[/] plans and starts one")
    closed = sw.levels[:len(sw.levels) - len(sw.rates)]  # the rate levels' rows come last
    levels = ",".join(f"{lv.concurrency}:{lv.requests}" for lv in closed) or "none"
    if sw.rates:
        levels += " · rates " + ",".join(f"{r:g}/s:{n}" for r, n in sw.rates)
    color = _STATUS_COLOR.get(sw.status, "$foreground")
    elapsed = ""
    now = model.mono()
    spent = sw.elapsed(now)
    if spent is not None:  # time, not requests, as the Campaign screen says it
        elapsed = f" · elapsed {fmt_duration(spent)}"
        if sw.running:
            eta = sw.eta(now)
            elapsed += f" · ETA {fmt_duration(eta)}" if eta is not None else \
                " · ETA after the first requests"
    detail = f" · [$foreground-muted]{escape(sw.detail)}[/]" if sw.detail else ""
    return (f"[{color}][b]{escape(sw.status)}[/b][/] [b]{escape(sw.label or '')}[/b]{elapsed} · "
            f"levels {levels} · in {sw.input_len or '?'} / out {sw.output_len or '?'} tok"
            f"{detail}")


def progress_of(sw: SweepView, now: float) -> dict[str, float]:
    """The progress bar while a sweep runs, in seconds: elapsed of elapsed + ETA (empty until
    there is a pace); once it ended, how much of its plan ran (full when done)."""
    spent = sw.elapsed(now)
    if spent is None or sw.status == "idle":
        return {"total": 1.0, "progress": 0.0}
    if not sw.running:
        if sw.status == "done":
            return {"total": 1.0, "progress": 1.0}
        return {"total": float(max(1, sw.total_requests)),
                "progress": float(sw.completed_requests)}
    eta = sw.eta(now)
    if eta is None:
        return {"total": 1.0, "progress": 0.0}
    return {"total": max(spent + eta, 1e-6), "progress": spent}


def chart_series(sw: SweepView) -> tuple[list[str], list[Series]]:
    labels = [f"C{lv.concurrency}" for lv in sw.levels]
    return labels, [Series("output tok/s", [lv.out_tok_s for lv in sw.levels])]


class BenchBody(Body):
    MODE = "bench"
    LEAD_KEYS = ("sweep", "sanity")  # never cut off the key bar, even at 80 columns

    def compose_body(self) -> ComposeResult:
        m = self.model
        with Vertical(id="bench-head", classes="panel") as head:
            head.border_title = "sweep"
            yield SanityResult(m, detail=False, id="bench-sanity")
            yield Static("", id="bench-plan", markup=True)
            # time elapsed of elapsed + ETA (requests take longer at low C: a count misleads)
            yield ProgressBar(total=1, show_eta=False, id="bench-progress")
        with Horizontal(id="bench-main"):
            with Vertical(id="bench-table-box", classes="panel") as box:
                box.border_title = "levels"
                yield SweepTable(id="bench-table")
            yield Chart(title="output tok/s per C", id="bench-chart", classes="panel")
        with Vertical(id="bench-hw", classes="panel") as hw:
            hw.border_title = "hardware · server"
            yield GpuStrip(m.conn.host, telemetry=m.telemetry, id="bench-gpus")
            yield ThroughputPanel(m, id="bench-tp", classes="-inline")

    _chart_due = False  # the chart waits for the next tick while a sweep runs

    def on_mount(self) -> None:
        every_second(self, self._tick)

    def _tick(self) -> None:
        """The elapsed time moves while a sweep runs; the chart follows once a second."""
        if self.is_current and self.model.sweep.running:
            update_static(self.one(Static, "#bench-plan"),
                          plan_markup(self.model, self.default_label()), fixed_height=True)
            self._update_progress()
        if self.is_current and self._chart_due:
            self._update_chart()

    def _update_progress(self) -> None:
        bar = self.one(ProgressBar, "#bench-progress")
        bar.update(**progress_of(self.model.sweep, self.model.mono()))

    def _update_chart(self) -> None:
        self._chart_due = False
        labels, series = chart_series(self.model.sweep)
        self.one(Chart).show_data(labels, series, ylabel="tok/s",
                                        empty="no level finished yet")

    def default_label(self) -> str:
        prof = self.model.profile()
        if prof is None:
            return "run"
        return f"{prof.checkpoint}_{self.model.server.backend or prof.backend}"

    def refresh_body(self, parts: frozenset[str]) -> None:
        m = self.model
        if SANITY in parts:
            self.one(SanityResult, "#bench-sanity").refresh_model()
        if SWEEP in parts:
            sw = m.sweep
            update_static(self.one(Static, "#bench-plan"),
                          plan_markup(m, self.default_label()), fixed_height=True)
            self._update_progress()
            self.one(SweepTable).show_sweep(sw)
            # a plotext build costs ~10-20 ms: while requests finish many times a second, the
            # chart redraws once a second (on the tick); otherwise (and when the screen comes
            # into view) after this frame
            if sw.running and parts != ALL:
                self._chart_due = True
            else:
                self.call_after_refresh(self._update_chart)
        if GPU in parts or CONN in parts:
            strip = self.one(GpuStrip)
            if m.telemetry is not None and strip.telemetry is not m.telemetry:
                strip.set_telemetry(m.telemetry)
            strip.refresh_telemetry()
        if DECODE in parts or CONN in parts:
            self.one(ThroughputPanel).refresh_model()
