"""Runs: the stored sweeps with a filter; mark 2+ and compare them side by side."""

from __future__ import annotations

import datetime as _dt

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import DataTable, Input, Static

from dsv4tui import keymap
from dsv4tui.screens.base import DsvScreen
from dsv4tui.screens.messages import COMPARE, RUNS
from dsv4tui.screens.model import CompareView, RunRow, UiModel, fmt_num, fmt_pct_change
from dsv4tui.widgets.charts import Chart, Series
from dsv4tui.widgets.text import update_static

RUN_COLUMNS = (("", "mark", 2), ("label", "label", 24), ("date", "date", 16),
               ("host", "host", 10), ("backend", "backend", 12), ("ckpt", "ckpt", 6),
               ("best tok/s", "best", 10), ("status", "status", 11))


def fmt_date(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


class RunsScreen(DsvScreen):
    MODE = "runs"
    BINDINGS = keymap.bindings("runs")
    SCOPES = ("runs", "app")
    AUTO_FOCUS = "#runs-table"

    def compose_body(self) -> ComposeResult:
        yield Input(placeholder="filter: label, host, backend … (enter: apply, esc: clear)",
                    id="runs-filter")
        with Vertical(id="runs-box", classes="panel") as box:
            box.border_title = "runs"
            yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="runs-hint", markup=True)

    def on_mount(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        for label, key, width in RUN_COLUMNS:
            table.add_column(label, key=key, width=width)

    # -- drawing --------------------------------------------------------------------------
    def refresh_body(self, parts: frozenset[str]) -> None:
        if RUNS in parts:
            self._fill()

    _shown: tuple[object, ...] | None = None

    def _fill(self) -> None:
        runs = self.model.runs
        shown = (tuple(runs.rows), tuple(runs.marked), runs.baseline, runs.filter,
                 runs.loading, runs.error)
        if shown == self._shown:  # a DataTable rebuild repaints every row: only on change
            return
        self._shown = shown
        table = self.query_one("#runs-table", DataTable)
        keep = table.cursor_row
        current = self.highlighted()
        table.clear()
        for row in runs.visible():
            table.add_row(*self._cells(row), key=str(row.run_id))
        if current is not None:
            try:
                table.move_cursor(row=table.get_row_index(str(current.run_id)))
            except Exception:
                table.move_cursor(row=min(keep, max(0, table.row_count - 1)))
        filt = self.query_one("#runs-filter", Input)
        filt.set_class(bool(runs.filter) or filt.has_focus, "-visible")
        self._hint()

    def _cells(self, row: RunRow) -> tuple[str, ...]:
        runs = self.model.runs
        mark = "●" if row.run_id in runs.marked else ""
        if row.run_id == runs.baseline:
            mark = "◆" if row.run_id in runs.marked else "◇"
        label = row.label + (" [sim]" if row.simulated else "")
        return (mark, label, fmt_date(row.created), row.host, row.backend or "—",
                row.checkpoint or "—", fmt_num(row.best_tok_s, 1), row.status)

    def _hint(self) -> None:
        runs = self.model.runs
        n = len(runs.marked)
        if runs.error:
            text = f"[$error]{escape(runs.error)}[/]"
        elif runs.loading:
            text = "loading runs …"
        elif not runs.rows:
            text = "no runs stored yet — a sweep (4 Bench, w) stores one"
        else:
            shown = len(runs.visible())
            filt = f" · filter [b]{escape(runs.filter)}[/b]" if runs.filter else ""
            text = (f"{shown}/{len(runs.rows)} runs{filt} · {n} marked · "
                    "[$primary]space[/] mark  [$primary]c[/] compare (2+)  "
                    "[$primary]B[/] baseline  [$primary]/[/] filter")
        update_static(self.query_one("#runs-hint", Static), text)

    def highlighted(self) -> RunRow | None:
        table = self.query_one("#runs-table", DataTable)
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None
        for row in self.model.runs.rows:
            if str(row.run_id) == key:
                return row
        return None

    # -- actions --------------------------------------------------------------------------
    def action_toggle_mark(self) -> None:
        row = self.highlighted()
        if row is None:
            return
        marked = self.model.runs.marked
        if row.run_id in marked:
            marked.remove(row.run_id)
        else:
            marked.append(row.run_id)
        table = self.query_one("#runs-table", DataTable)
        table.update_cell(str(row.run_id), "mark", self._cells(row)[0])
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
        self._hint()

    def action_set_baseline(self) -> None:
        row = self.highlighted()
        if row is None:
            return
        self.model.runs.baseline = row.run_id
        self._fill()
        self.notify(f"baseline: {row.label}", timeout=2)

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.add_class("-visible")
        box.value = self.model.runs.filter
        self.set_focus(box)  # now: the keys typed right after `/` must land in the box

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.model.runs.filter = event.value.strip()
        self._fill()

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one("#runs-table").focus()
        self._fill()

    def key_escape(self) -> None:
        """Escape in the filter box clears it (the key goes on to the bindings); elsewhere
        it does what a Screen's escape does (clears a text selection)."""
        box = self.query_one("#runs-filter", Input)
        if not box.has_focus:
            self._key_escape()
            return
        box.value = ""
        self.model.runs.filter = ""
        self.set_focus(self.query_one("#runs-table"))
        self._fill()

    async def action_export(self) -> None:
        await self.app.run_action("export")

    async def action_reload(self) -> None:
        await self.app.run_action("reload_runs")


METRICS = (
    ("ttft_p50_ms", "TTFT p50 (ms) per C"),
    ("tpot_p50_ms", "TPOT p50 (ms) per C"),
    ("ttft_p99_ms", "TTFT p99 (ms) per C"),
    ("tensor_active", "tensor pipe active (%) per C"),
    ("tok_per_kw", "output tok/s per kW per C"),
)


def compare_rows(cmp: CompareView) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the compare table: per C, per run, with % change vs baseline."""
    headers = ["C", "run", "tok/s", "Δ tok/s", "TTFT p50", "TTFT p99", "TPOT", "tensor",
               "tok/kW", "Δ tok/kW", "roofline"]
    rows: list[list[str]] = []
    base = cmp.baseline if cmp.baseline is not None else (cmp.runs[0].run_id if cmp.runs else None)
    labels = [r.label for r in cmp.runs]
    names = {r.run_id: r.label if labels.count(r.label) == 1 else f"{r.label} #{r.run_id}"
             for r in cmp.runs}  # two runs of one label stay apart
    for c in cmp.concurrencies():
        b = cmp.stat(base, c)
        for run in cmp.runs:
            s = cmp.stat(run.run_id, c)
            if s is None:
                rows.append([str(c), names[run.run_id], "—", "", "", "", "", "", "", "", ""])
                continue
            is_base = run.run_id == base
            rows.append([
                str(c), names[run.run_id] + (" (base)" if is_base else ""),
                fmt_num(s.out_tok_s, 1),
                "base" if is_base else fmt_pct_change(s.out_tok_s, b.out_tok_s if b else None),
                fmt_num(s.ttft_p50_ms, 0), fmt_num(s.ttft_p99_ms, 0), fmt_num(s.tpot_p50_ms, 1),
                "n/a" if s.tensor_active is None else f"{s.tensor_active:.1f}%",
                fmt_num(s.tok_per_kw, 1),
                "base" if is_base else fmt_pct_change(s.tok_per_kw, b.tok_per_kw if b else None),
                "n/a" if s.roofline_pct is None else f"{s.roofline_pct:.2g}%",
            ])
    return headers, rows


class CompareScreen(DsvScreen):
    """Pushed over Runs: grouped bars per C (one colour per run), a second metric, a table."""

    MODE = "runs"
    BINDINGS = keymap.bindings("compare")
    SCOPES = ("compare", "app")

    def __init__(self, model: UiModel) -> None:
        super().__init__(model)
        self.metric = 0
        self._table_shown: tuple[object, object] | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="cmp-charts"):
            yield Chart(title="output tok/s per C", id="cmp-tok", classes="panel")
            yield Chart(title=METRICS[0][1], id="cmp-metric", classes="panel")
        with Vertical(id="cmp-table-box", classes="panel") as box:
            box.border_title = "per level, % change against the baseline"
            yield DataTable(id="cmp-table", zebra_stripes=True, cursor_type="row")

    def refresh_body(self, parts: frozenset[str]) -> None:
        if COMPARE in parts:
            self._draw()

    def _draw(self) -> None:
        cmp = self.model.runs.compare
        if cmp is None:
            return
        cs = cmp.concurrencies()
        labels = [f"C{c}" for c in cs]
        def col(run_id: object, attr: str) -> list[float | None]:
            out: list[float | None] = []
            for c in cs:
                s = cmp.stat(run_id, c)
                out.append(None if s is None else getattr(s, attr))
            return out
        self.query_one("#cmp-tok", Chart).show_data(
            labels, [Series(r.label, col(r.run_id, "out_tok_s")) for r in cmp.runs],
            ylabel="tok/s")
        attr, title = METRICS[self.metric]
        self.query_one("#cmp-metric", Chart).show_data(
            labels, [Series(r.label, col(r.run_id, attr)) for r in cmp.runs], title=title,
            empty="no data for this metric (older runs may lack telemetry)")
        headers, rows = compare_rows(cmp)
        if (headers, rows) != self._table_shown:  # a rebuild repaints (and resizes) it all
            self._table_shown = (headers, rows)
            table = self.query_one("#cmp-table", DataTable)
            table.clear(columns=True)
            for h in headers:
                table.add_column(h, key=h)
            for row in rows:
                table.add_row(*row)
        base = next((r for r in cmp.runs if r.run_id == cmp.baseline), None)
        box = self.query_one("#cmp-table-box")
        box.border_title = (f"per level · % change against {base.label if base else 'the first run'}"
                            " · m metric · B baseline · e export")

    def action_next_metric(self) -> None:
        self.metric = (self.metric + 1) % len(METRICS)
        self._draw()

    def action_next_baseline(self) -> None:
        cmp = self.model.runs.compare
        if cmp is None or not cmp.runs:
            return
        ids = [r.run_id for r in cmp.runs]
        i = ids.index(cmp.baseline) if cmp.baseline in ids else 0
        cmp.baseline = ids[(i + 1) % len(ids)]
        self.model.runs.baseline = cmp.baseline
        self._draw()

    async def action_export(self) -> None:
        await self.app.run_action("export")

    def action_back(self) -> None:
        self.dismiss()
