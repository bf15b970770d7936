"""Runs: the stored sweeps with a filter; mark 2+ and compare them side by side."""

from __future__ import annotations

import datetime as _dt

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Static

from dsv4tui.core.campaign.columns import change_title, fmt_change
from dsv4tui.core.campaign.compare import SIMULATED, Comparison, load_text, sim_name
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.verdict import canary_lines, verdict_lines
from dsv4tui.core.view.model import RunRow, UiModel, fmt_num
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.base import Body, FramedScreen
from dsv4tui.tui.screens.messages import COMPARE, RUNS
from dsv4tui.tui.widgets.charts import Chart, Series
from dsv4tui.tui.widgets.focus_mark import FocusTable
from dsv4tui.tui.widgets.last_width import LastWidth
from dsv4tui.tui.widgets.text import esc, plain, update_static

# (title, key, width, flexible): flexible columns grow to their longest value, the label
# takes what is left; on a narrow terminal the date loses its year, then the host, the
# sanity and checkpoint columns go -- the run id, tok/s and status always stay.
_PAD = 2  # DataTable's cell padding, both sides
_MIN = {"label": 10, "host": 6, "backend": 8}


def run_columns(width: int, natural: dict[str, int] | None = None
                ) -> list[tuple[str, str, int]]:
    """The Runs table's columns ``(title, key, width)`` for a table ``width`` cells wide."""
    natural = natural or {}
    cols: dict[str, list[object]] = {
        "mark": ["", 2], "id": ["id", max(2, natural.get("id", 3))],
        "label": ["label", _MIN["label"]], "date": ["date", 16],
        "host": ["host", _MIN["host"]], "backend": ["backend", _MIN["backend"]],
        "ckpt": ["ckpt", 6], "best": ["best tok/s", 10], "status": ["status", 11],
        "sanity": ["sanity", 6],
    }

    def used() -> int:
        return sum(int(w) + _PAD for _, w in cols.values())  # type: ignore[call-overload]

    for step in ("date", "host", "sanity", "ckpt", "date-off", "backend-min"):
        if used() <= width:
            break
        if step == "date":
            cols["date"][1] = 11  # 03-02 09:17
        elif step == "date-off":
            del cols["date"]
        elif step == "backend-min":
            cols["backend"][1] = 6
        else:
            del cols[step]
    spare = width - used()
    if "ckpt" in cols and natural.get("label", 0) > _MIN["label"] + spare and width < 100:
        del cols["ckpt"]  # narrow: the label (it usually names the checkpoint) before ckpt
        spare = width - used()
    for key in ("backend", "host", "label"):  # up to their longest value, most useful first
        if key in cols and spare > 0:
            want = max(0, natural.get(key, 0) - int(cols[key][1]))  # type: ignore[call-overload]
            grow = min(spare, want)
            cols[key][1] = int(cols[key][1]) + grow  # type: ignore[call-overload]
            spare -= grow
    if spare > 0:
        cols["label"][1] = int(cols["label"][1]) + spare  # type: ignore[call-overload]
    return [(str(t), k, int(w)) for k, (t, w) in cols.items()]  # type: ignore[call-overload]


def fmt_date(epoch: float, year: bool = True) -> str:
    return _dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M" if year
                                                      else "%m-%d %H:%M")


class RunsBody(Body):
    MODE = "runs"
    BINDINGS = [*keymap.bindings("runs"), keymap.escape_binding("close_filter")]
    SCOPES = ("runs", "app")
    AUTO_FOCUS = "#runs-table"

    def compose_body(self) -> ComposeResult:
        yield Input(placeholder="filter: label, host, backend … (enter: apply, esc: clear)",
                    id="runs-filter")
        with Vertical(id="runs-box", classes="panel") as box:
            box.border_title = "runs"
            yield FocusTable[str](id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="runs-hint", markup=True)

    _columns: list[tuple[str, str, int]] | None = None

    def on_mount(self) -> None:
        self._width = LastWidth()
        self._fill()

    def on_resize(self) -> None:
        self.call_after_refresh(self._fill)

    def _layout(self) -> list[tuple[str, str, int]]:
        table = self.query_one("#runs-table", DataTable)
        width = self._width.keep(
            table.scrollable_content_region.width or table.size.width or self.size.width)
        rows = self.model.runs.visible()
        natural = {"id": max([len(str(r.run_id)) for r in rows] + [2]),
                   "label": max([len(r.label) + (6 if r.simulated else 0) for r in rows] + [5]),
                   "host": max([len(r.host) for r in rows] + [4]),
                   "backend": max([len(r.backend or "—") for r in rows] + [7])}
        return run_columns(max(width - 1, 20), natural)
    # -- drawing --------------------------------------------------------------------------
    def refresh_body(self, parts: frozenset[str]) -> None:
        if RUNS in parts:
            self._fill()

    _shown: tuple[object, ...] | None = None

    def _fill(self) -> None:
        runs = self.model.runs
        columns = self._layout()
        shown = (tuple(runs.rows), tuple(runs.marked), runs.baseline, runs.filter,
                 runs.loading, runs.error, runs.show_failed, tuple(columns))
        if shown == self._shown:  # a DataTable rebuild repaints every row: only on change
            return
        self._shown = shown
        table = self.query_one("#runs-table", DataTable)
        keep = table.cursor_row
        current = self.highlighted()
        if columns != self._columns:
            self._columns = columns
            table.clear(columns=True)
            for title, key, width in columns:
                table.add_column(title, key=key, width=width)
        else:
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

    def _cells(self, row: RunRow) -> list[Text]:
        runs = self.model.runs
        mark = "●" if row.run_id in runs.marked else ""
        if row.run_id == runs.baseline:
            mark = "◆" if row.run_id in runs.marked else "◇"
        widths = {key: width for _, key, width in (self._columns or [])}
        cells = {"mark": mark, "id": str(row.run_id),
                 "label": row.label + (" [sim]" if row.simulated else ""),
                 "date": fmt_date(row.created, year=widths.get("date", 16) >= 16),
                 "host": row.host, "backend": row.backend or "—", "ckpt": row.checkpoint or "—",
                 "best": fmt_num(row.best_tok_s, 1), "status": row.status,
                 "sanity": {True: "pass", False: "FAIL", None: "—"}[row.sanity_passed]}
        out = []
        for _, key, _ in self._columns or []:
            cell = plain(cells[key])
            if key in ("best", "id"):
                cell.justify = "right"
            out.append(cell)
        return out

    def _hint(self) -> None:
        runs = self.model.runs
        n = len(runs.marked)
        if runs.error:
            text = f"[$error]{esc(runs.error)}[/]"
        elif runs.loading:
            text = "loading runs …"
        elif not runs.rows:
            text = "no runs stored yet — a sweep (4 Bench, w) stores one"
        else:
            shown = len(runs.visible())
            filt = f" · filter [b]{esc(runs.filter)}[/b]" if runs.filter else ""
            km = getattr(self.app, "active_keymap", None) or {}
            key = dict((a.id, k) for a, k in keymap.effective(km))
            hidden = runs.hidden_failed
            failed = ""
            if hidden:
                failed = (f" · [$warning]{hidden} failed-sanity run{'s' if hidden > 1 else ''} "
                          f"hidden[/] ([$primary]{esc(key['runs.failed'])}[/] shows)")
            elif runs.show_failed:
                failed = (f" · failed-sanity runs shown ([$primary]{esc(key['runs.failed'])}"
                          "[/] hides)")
            text = (f"{shown}/{len(runs.rows)} runs{filt}{failed} · {n} marked · "
                    f"[$primary]{esc(key['runs.mark'])}[/] mark  "
                    f"[$primary]{esc(key['compare'])}[/] compare (2+)  "
                    f"[$primary]{esc(key['runs.report'])}[/] report  "
                    f"[$primary]{esc(key['runs.baseline'])}[/] baseline  "
                    f"[$primary]{esc(key['runs.filter'])}[/] filter")
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
        self._shown = None
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
        self._hint()

    def action_set_baseline(self) -> None:
        row = self.highlighted()
        if row is None:
            return
        self.model.runs.baseline = row.run_id
        self._fill()
        self.notify(f"baseline: #{row.run_id} {safe_text(row.label)}", timeout=2, markup=False)

    def action_toggle_failed(self) -> None:
        runs = self.model.runs
        runs.show_failed = not runs.show_failed
        self._fill()

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_filter":  # escape: leaves the filter box, else goes on as usual
            return self.query_one("#runs-filter", Input).has_focus
        return True

    def action_close_filter(self) -> None:
        """Escape in the filter box clears it and goes back to the table."""
        box = self.query_one("#runs-filter", Input)
        box.value = ""
        self.model.runs.filter = ""
        self.set_focus(self.query_one("#runs-table"))
        self._fill()
        box.remove_class("-visible")  # it still has focus until its Blur comes

    async def action_export(self) -> None:
        await self.app.run_action("export")

    async def action_report(self) -> None:
        await self.app.run_action("report_runs")

    async def action_reload(self) -> None:
        await self.app.run_action("reload_runs")


METRICS = (
    ("ttft_p50_ms", "TTFT p50 (ms) per C"),
    ("tpot_p50_ms", "TPOT p50 (ms) per C"),
    ("ttft_p99_ms", "TTFT p99 (ms) per C"),
    ("tensor_active", "tensor pipe active (%, mean over GPUs) per C"),
    ("tok_s_per_kw", "output tok/s per kW per C"),
)


def compare_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the compare table (the core's columns): per C, per run, each
    change column against the baseline run it names (``vs #1``)."""
    base = cmp.baseline_id
    headers = ["C", "run"]
    for col in cmp.columns():
        headers.append(col.header)  # with its unit, as the CLI's: "TTFT p50 ms", "tensor %"
        if col.change:
            headers.append(change_title(base))
    rows: list[list[str]] = []
    for row in cmp.rows():
        name = sim_name(row.name, row.run.simulated, short=True) + (" (base)" if row.is_baseline
                                                                     else "")
        load = row.load if row.rate is not None else str(row.concurrency)  # "5 req/s"
        if row.point is None:
            rows.append([load, name, "not run"] + [""] * (len(headers) - 3))
            continue
        cells = [load, name]
        for col in cmp.columns():
            cells.append(col.text(row.values.get(col.key), none="n/a"))
            if col.change:
                cells.append("base" if row.is_baseline
                             else fmt_change(row.changes.get(col.key), none="n/a"))
        rows.append(cells)
    return headers, rows


VERDICT_STYLE = {"faster": "$success", "slower": "$error"}
CANARY_STYLE = {"better": "$success", "worse": "$error"}


def verdict_markup(cmp: Comparison) -> list[str]:
    """Each variant (label) against the baseline's per level: its change in output tok/s with
    the 95 % interval across repeats and the verdict, then each variant's accuracy canary
    against the baseline's -- ``runs compare``'s lines (one core function each,
    :meth:`Comparison.verdicts`, :meth:`Comparison.canary_verdicts`), the verdict words and a
    failed gate coloured."""
    out = []
    for line in verdict_lines(cmp.verdicts(), load_text):
        text = esc(line)
        for word, style in VERDICT_STYLE.items():
            text = text.replace(f"] {word} (", f"] [b {style}]{word}[/] (", 1)
        out.append(text)
    for line in canary_lines(cmp.canary_verdicts()):
        text = esc(line)
        for word, style in CANARY_STYLE.items():
            text = text.replace(f"] {word}", f"] [b {style}]{word}[/]", 1)
        out.append(text.replace("gate FAILED", "[b $error]gate FAILED[/]", 1))
    return out


class CompareScreen(FramedScreen):
    """Pushed over Runs (or over the Campaign, for its variants; escape goes back there):
    grouped bars per C (one colour per run), a second metric, a table."""

    MODE = "runs"
    BINDINGS = keymap.bindings("compare")
    SCOPES = ("compare", "app")

    def __init__(self, model: UiModel, over: str = "runs") -> None:
        self.MODE = over  # the tab it shows as current: the screen it was opened from
        super().__init__(model)
        self.metric = 0
        self._table_shown: tuple[object, object] | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="cmp-charts"):
            yield Chart(title="output tok/s per C", id="cmp-tok", classes="panel")
            yield Chart(title=METRICS[0][1], id="cmp-metric", classes="panel")
        with Vertical(id="cmp-table-box", classes="panel") as box:
            box.border_title = "per level, % change against the baseline"
            yield FocusTable[str](id="cmp-table", zebra_stripes=True, cursor_type="row")
            yield Static("", id="cmp-notes", markup=True)  # what differs: wrapped, never cut

    def refresh_body(self, parts: frozenset[str]) -> None:
        if COMPARE in parts:
            self._draw()

    def _draw(self) -> None:
        cmp = self.model.runs.compare
        if cmp is None:
            return
        labels = [f"C{c}" for c in cmp.concurrencies()]
        names = [safe_text(sim_name(cmp.name(r.id), r.simulated, short=True)) for r in cmp.runs]
        sim = f" · {SIMULATED}" if cmp.simulated_ids else ""  # on the chart, as in a report's
        self.query_one("#cmp-tok", Chart).show_data(
            labels, [Series(n, cmp.series(r.id, "output_tok_s"))
                     for n, r in zip(names, cmp.runs, strict=True)], ylabel="tok/s",
            title=f"output tok/s per C{sim}")
        attr, title = METRICS[self.metric]
        self.query_one("#cmp-metric", Chart).show_data(
            labels, [Series(n, cmp.series(r.id, attr)) for n, r in zip(names, cmp.runs,
                                                                         strict=True)],
            title=title + sim, empty="no data for this metric (older runs may lack telemetry)")
        headers, rows = compare_rows(cmp)
        if (headers, rows) != self._table_shown:  # a rebuild repaints (and resizes) it all
            self._table_shown = (headers, rows)
            table = self.query_one("#cmp-table", DataTable)
            table.clear(columns=True)
            for i, h in enumerate(headers):
                table.add_column(h, key=f"c{i}")
            for row in rows:
                table.add_row(*(plain(c) for c in row))
        base = cmp.baseline_run
        box = self.query_one("#cmp-table-box")
        box.border_title = (("[b $warning]SIMULATED[/] · " if cmp.simulated_ids else "")
                            + f"per level · % change against "
                            f"{esc(f'#{base.id} {base.label}') if base else 'the first run'}")
        box.border_subtitle = "m metric · B baseline · e export · R report"
        diffs = cmp.differences()
        notes = [f"[$warning]workloads differ: {esc('; '.join(diffs))}[/]"] if diffs else []
        servers = cmp.server_args_differences(limit=4)
        if servers:  # the SGLang version, GPUs, driver, server args that differ
            notes.append(f"servers differ: {esc('; '.join(servers))}")
        notes += verdict_markup(cmp)
        for line in cmp.definition_notes():  # another tool's runs: whose TTFT/TPOT/tokens
            style = "$warning" if line.startswith("warning") else "$foreground-muted"
            notes.append(f"[{style}]{esc(line)}[/]")
        update_static(self.query_one("#cmp-notes", Static), "\n".join(notes))

    def action_next_metric(self) -> None:
        self.metric = (self.metric + 1) % len(METRICS)
        self._draw()

    def action_next_baseline(self) -> None:
        cmp = self.model.runs.compare
        if cmp is None or not cmp.runs:
            return
        ids = [r.id for r in cmp.runs]
        i = ids.index(cmp.baseline_id) if cmp.baseline_id in ids else 0
        cmp = cmp.with_baseline(ids[(i + 1) % len(ids)])
        self.model.runs.compare = cmp
        self.model.runs.baseline = cmp.baseline_id
        self._draw()

    async def action_export(self) -> None:
        await self.app.run_action("export")

    async def action_report(self) -> None:
        await self.app.run_action("report_compare")

    def action_back(self) -> None:
        self.dismiss()
