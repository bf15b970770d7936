"""Dashboard: host bar, GPU panel, server decode throughput, sanity/sweep status, log tail."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from dsv4tui.core.view.model import UiModel, fmt_num
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.base import LogBody
from dsv4tui.tui.screens.messages import CONN, DECODE, GPU, METRICS, SANITY, STARTUP, SWEEP
from dsv4tui.tui.widgets.focus_mark import PanelScroll
from dsv4tui.tui.widgets.gpu_panel import GpuPanel
from dsv4tui.tui.widgets.log_view import LogPanel
from dsv4tui.tui.widgets.server_panel import ServerPanel
from dsv4tui.tui.widgets.startup import SanityResult
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import update_static
from dsv4tui.tui.widgets.throughput import ThroughputPanel


def sweep_markup(model: UiModel) -> str:
    sw = model.sweep
    if sw.status == "idle":
        return "sweep [$foreground-muted]none yet[/] ([$primary]w[/] to start)"
    color = {"done": "$success", "running": "$warning", "starting": "$warning",
             "interrupted": "$error", "failed": "$error", "cancelled": "$warning"}.get(
                 sw.status, "$foreground")
    parts = [f"sweep [b]{escape(sw.label or '')}[/b] [{color}]{escape(sw.status)}[/]"]
    if sw.running and sw.current is not None and sw.current < len(sw.levels):
        lv = sw.levels[sw.current]
        parts.append(f"C={lv.concurrency} {lv.completed + lv.errors}/{lv.requests}")
    parts.append(f"{sw.completed_requests}/{sw.total_requests} requests")
    best = sw.best_tok_s
    if best is not None:
        parts.append(f"best [b]{fmt_num(best, 1)}[/b] tok/s")
    return " · ".join(parts)


def startup_markup(model: UiModel) -> str:
    su = model.startup
    if su.status == "idle":
        return ""
    from dsv4tui.core.view.model import PHASE_LABELS, fmt_duration

    total = fmt_duration(su.total(model.mono()))
    if su.active:
        phase = PHASE_LABELS.get(su.current or "", su.current or "stopping")
        pct = (f" {su.weights_pct:.0f}%" if su.current == "load_weights"
               and su.weights_pct is not None else "")
        return f"restart [$warning]{escape(phase)}{pct}[/] {total}"
    if su.status == "ready" and su.startup_s is not None:  # the host's figure, as on Launch
        return f"restart [$success]ready[/] · startup {fmt_duration(su.startup_s)}"
    color = "$success" if su.status == "ready" else "$error"
    return f"restart [{color}]{escape(su.status)}[/] in {total}"


class DashboardBody(LogBody):
    MODE = "dashboard"

    def compose_body(self) -> ComposeResult:
        m = self.model
        with Horizontal(id="dash-top"):
            with PanelScroll(id="gpu-box", classes="panel") as box:
                box.border_title = "GPUs"
                box.can_focus = True
                yield GpuPanel(m.conn.host, telemetry=m.telemetry)
            with Vertical(id="dash-side", classes="panel") as side:
                side.border_title = "server"
                yield ServerPanel(m, id="dash-server")
                yield SanityResult(m, detail=False, id="dash-sanity")
                yield Static("", id="dash-sweep", markup=True)
                yield Static("", id="dash-startup", markup=True)
        yield ThroughputPanel(m, id="dash-tp-narrow", classes="narrow-only -inline")
        yield LogPanel(m.logs, title="server log", empty_text=self._empty_log(),
                       classes="panel", id="dash-log")

    def _empty_log(self) -> str:
        return "no server log yet — r restarts the server with the active profile"

    def refresh_body(self, parts: frozenset[str]) -> None:
        m = self.model
        if GPU in parts or CONN in parts:
            panel = self.one(GpuPanel)
            if m.telemetry is not None and panel.telemetry is not m.telemetry:
                panel.set_telemetry(m.telemetry)
            panel.refresh_telemetry()  # a layout pass only when rows come or go
            self._fit_gpu_box()
        if DECODE in parts or CONN in parts:
            for tp in self.every(ThroughputPanel):
                tp.refresh_model()
        if METRICS in parts or DECODE in parts or CONN in parts:
            server = self.one(ServerPanel)
            server.refresh_model()
            side = self.one(Vertical, "#dash-side")
            subtitle = server.source_text()
            if side.border_subtitle != subtitle:
                side.border_subtitle = subtitle
        if SANITY in parts:
            self.one(SanityResult, "#dash-sanity").refresh_model()
        if SWEEP in parts:
            update_static(self.one(Static, "#dash-sweep"), sweep_markup(m),
                          fixed_height=True)
        if STARTUP in parts:
            startup = self.one(Static, "#dash-startup")
            update_static(startup, startup_markup(m), fixed_height=True)
            su = m.startup
            startup.set_class(not (su.active or su.status == "failed"), "-idle")

    # rows of the side panel: the server's numbers (6), sanity, sweep (2), startup
    SIDE_ROWS = 10
    TINY_ROWS = 5  # compact: gen, run | queue, TTFT, sanity, sweep; tiny: gen (+ run, queue)

    def _fit_gpu_box(self) -> None:
        """Few GPUs: the side panel goes compact so that the row is as tall as the GPUs need.
        Too short a terminal for every GPU: the box's bottom border says how many are not
        shown (g focuses the box, then the arrows scroll)."""
        panel = self.one(GpuPanel)
        side, lines = self.one(Vertical, "#dash-side"), panel.line_count()
        side.set_class(lines < self.SIDE_ROWS, "-compact")
        if side.has_class("-tiny") != (lines < self.TINY_ROWS):
            side.set_class(lines < self.TINY_ROWS, "-tiny")
            self.one(ServerPanel).refresh_model()  # its gen row carries run and queue then
        self.call_after_refresh(self._count_hidden)

    def on_resize(self) -> None:
        self.call_after_refresh(self._count_hidden)

    def _count_hidden(self) -> None:
        box = self.query_one("#gpu-box", PanelScroll)
        panel = self.one(GpuPanel)
        gpus = panel.telemetry.gpu_count() if panel.telemetry is not None else 0
        hidden = min(gpus, max(0, panel.line_count() - box.scrollable_content_region.height))
        km = getattr(self.app, "active_keymap", None) or {}
        key = keymap.display_key(km.get("focus.gpus", keymap.BY_ID["focus.gpus"].key))
        subtitle = (f"{hidden} more GPU{'s' if hidden > 1 else ''} below · {key} then ↓"
                    if hidden else "")
        if box.border_subtitle != subtitle:
            box.border_subtitle = subtitle

    def focus_gpus(self) -> None:
        self.query_one("#gpu-box").focus()
