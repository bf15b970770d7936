"""Campaign: the matrix of a campaign the host runs by itself — variants x levels, each cell's
state (pending, n/N running, tok/s done, failed) — the current variant's restart and sanity,
elapsed time and an ETA, and the comparison of the variants as they finish (grouped bars per
C; the change of the best tok/s against a chosen baseline with its 95 % interval across
repeats and the verdict; startup time per phase: weights, KV cache, CUDA graphs, warm-up), and
the highlighted variant's kernel families. Everything comes from the campaign's journal
events (the families from the store, read by the App); a second console sees the same, and a
reconnect fills it in. On a narrow terminal columns give way in :data:`SPARE`'s order and the
best-Δ column shortens; the details line under the matrix says what was dropped."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.verdict import FASTER, SAME, SLOWER, Effect
from dsv4tui.core.campaign.view import CampaignView, VariantView, best_effect
from dsv4tui.core.view.model import PHASE_LABELS, UiModel, fmt_duration
from dsv4tui.tui import keymap
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.screens.base import Body
from dsv4tui.tui.screens.messages import CAMPAIGN, SANITY, STARTUP
from dsv4tui.tui.widgets.charts import Chart, Series
from dsv4tui.tui.widgets.focus_mark import FocusTable
from dsv4tui.tui.widgets.last_width import LastWidth
from dsv4tui.tui.widgets.startup import SanityResult, StartupPanel
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import plain, update_static

_STATE_STYLE = {"done": "$success", "running": "$warning", "restarting": "$warning",
                "sanity": "$warning", "starting": "$warning", "failed": "$error",
                "interrupted": "$error", "cancelled": "$warning", "partial": "$warning",
                "skipped": "$foreground-muted", "pending": "$foreground-muted"}


def best(v: VariantView) -> float | None:
    vals = [c.tok_s for c in v.cells if c.tok_s is not None and c.state in ("done", "partial")]
    return max(vals) if vals else None


def change_text(v: VariantView, base: VariantView | None, *, short: bool = False) -> str:
    """The variant's best tok/s against the baseline's, once both have finished a run: with
    repeats its 95 % interval and verdict (``+4.1 % [+1.2, +7.0] faster``, ``no detectable
    difference (≥ 6.0 % resolvable)``), with one run each the change alone; ``short``: the
    narrow terminal's ``+4.1% faster``, ``no diff ±6.0%``, ``+4.1% (1 run)``."""
    if v is base:
        return "base" if base is not None and best(v) is not None and \
            v.state in ("done", "partial") else ""
    e = best_effect(v, base)
    if e is None or e.change_pct is None:
        return ""
    return _effect_text(e, short)


def _effect_text(e: Effect, short: bool) -> str:
    pct = e.change_pct or 0.0
    if e.ci_low is None or e.ci_high is None:
        return f"{pct:+.1f}% (1 run)" if short else f"{pct:+.1f} % (one run each)"
    if e.verdict == SAME:
        half = e.detectable_pct or 0.0
        return f"no diff ±{half:.1f}%" if short else \
            f"no detectable difference (≥ {half:.1f} % resolvable)"
    word = e.verdict if e.verdict in (FASTER, SLOWER) else ""
    if short:
        return f"{pct:+.1f}% {word}"
    return f"{pct:+.1f} % [{e.ci_low:+.1f}, {e.ci_high:+.1f}] {word}"


def head_markup(model: UiModel) -> str:
    cv = model.campaign
    if cv.state == "idle":
        start = dict((a.id, k) for a, k in keymap.effective({})).get("campaign.start", "n")
        return (f"no campaign on {escape(model.conn.host)} yet · [$primary]{start}[/] starts "
                "one (restart → sanity → sweep per variant, on the host, unattended)")
    now = model.mono()
    style = _STATE_STYLE.get(cv.state, "$foreground")
    counts = cv.counts()
    tally = ", ".join(f"{counts[k]} {k}" for k in ("done", "partial", "failed", "cancelled",
                                                   "skipped", "interrupted") if counts.get(k))
    parts = [f"[{style}][b]{escape(cv.state)}[/b][/] [b]{escape(cv.name or cv.id or '')}[/b]",
             f"{len(cv.variants)} variants" + (f" ({tally})" if tally else "")]
    if cv.current is not None and (v := cv.variant(cv.current)) is not None and v.active:
        parts.append(f"now [b]{escape(v.name)}[/b] ({escape(v.state)}"
                     + (f": {escape(v.phase)}" if v.state == "restarting" and v.phase else "")
                     + ")")
    elapsed = cv.elapsed(now)
    if elapsed is not None:
        parts.append(f"elapsed {fmt_duration(elapsed)}")
    eta = cv.eta(now)
    if eta is not None:
        parts.append(f"ETA {fmt_duration(eta)}")
    elif cv.running:
        parts.append("ETA after the first variant")
    if cv.torn:
        parts.append(f"[$error]{cv.torn} torn journal line(s) skipped[/]")
    line = " · ".join(parts)
    tail = " · ".join(x for x in (cv.detail, cv.server) if x)
    if tail:
        line += f"\n[$foreground-muted]{escape(tail)}[/]"
    return line


_PAD = 2  # DataTable's cell padding, both sides
# what gives way on a narrow terminal, in order ("vs:short": the best-Δ column shortens)
SPARE = ("note", "runs", "p_ready", "p_kv_cache", "vs:short", "p_cuda_graph", "p_load_weights",
         "sanity", "startup", "vs:tiny")
_NOTE_MIN = 16
# the startup phases the matrix shows (startup_phases.COLUMNS' names): title, agent phase
PHASE_COLUMNS = (("weights", "load_weights"), ("KV", "kv_cache"), ("graphs", "cuda_graph"),
                 ("warm-up", "ready"))


def _vs_width(cv: CampaignView, form: str) -> int:
    base = cv.variant(cv.baseline)
    return max([len("best Δ")] + [len(vs_text(v, base, form)) for v in cv.variants])


def vs_text(v: VariantView, base: VariantView | None, form: str = "vs") -> str:
    """The best-Δ cell in the column's form: ``vs`` (in full), ``vs:short`` (``+4.1%
    faster``), ``vs:tiny`` (``+4.1%``: the details line says the rest)."""
    if form == "vs:tiny":
        e = best_effect(v, base) if v is not base else None
        return change_text(v, base) if e is None or e.change_pct is None else \
            f"{e.change_pct:+.1f}%"
    return change_text(v, base, short=form == "vs:short")


def runs_text(ids: list[int]) -> str:
    """``#11,#14,#17``; past three repeats ``#11 +3`` (the variant's details list them)."""
    if len(ids) > 3:
        return f"#{ids[0]} +{len(ids) - 1}"
    return ",".join(f"#{i}" for i in ids) or "—"


def matrix_columns(cv: CampaignView, width: int | None = None) -> list[tuple[str, str, int]]:
    """The matrix's columns ``(title, key, width)``; with ``width`` (the table's cells) the
    note takes what is left, and when even that does not fit, the SPARE columns go (the row's
    details line under the matrix says them for the highlighted variant)."""
    cols = [("variant", "variant", 20), ("state", "state", 10)]
    cols += [(f"C={c}", f"c{i}", 9) for i, (c, _) in enumerate(cv.levels)]
    cols += [("best Δ", "vs", _vs_width(cv, "vs")), ("startup", "startup", 8)]
    cols += [(title, f"p_{phase}", max(len(title), 6)) for title, phase in PHASE_COLUMNS]
    cols += [("sanity", "sanity", 6),
             ("runs", "runs", max([4] + [len(runs_text(v.run_ids)) for v in cv.variants])),
             ("note", "note", 60)]
    if width is None:
        return cols
    names = max([len(v.name) for v in cv.variants] + [7])
    cols[0] = ("variant", "variant", min(20, names))
    for key in SPARE:
        fixed = sum(w + _PAD for _, k, w in cols if k != "note")
        has_note = any(k == "note" for _, k, _ in cols)
        room = width - fixed - (_PAD if has_note else 0)
        if not has_note and fixed <= width:
            break
        if has_note and room >= _NOTE_MIN:
            return [(t, k, min(60, room) if k == "note" else w) for t, k, w in cols]
        if key.startswith("vs:"):
            cols = [(t, key, _vs_width(cv, key)) if k.startswith("vs") else (t, k, w)
                    for t, k, w in cols]
        else:
            cols = [c for c in cols if c[1] != key]
    return cols


DETAIL_NAMES = {"p_load_weights": "weights", "p_kv_cache": "KV", "p_cuda_graph": "graphs",
                "p_ready": "warm-up", "vs": "best Δ"}


def dropped_text(cv: CampaignView, v: VariantView, shown: set[str]) -> str:
    """The highlighted variant's cells that the narrow matrix has no room for (and its best Δ
    in full when the column shows it shortened)."""
    full = dict(zip((k for _, k, _ in matrix_columns(cv)), matrix_cells(cv, v), strict=True))
    order = [k for k in reversed(SPARE) if not k.startswith("vs:") and k not in shown]
    if "vs" not in shown and full["vs"] not in ("base", vs_text(v, cv.variant(cv.baseline),
                                                                 "vs:tiny")):
        order.insert(0, "vs")
    return " · ".join(f"{DETAIL_NAMES.get(k, k)} {full[k]}" if k != "note" else full[k]
                      for k in order if full[k] not in ("", "—"))


def _secs(value: float | None) -> str:
    return f"{value:.1f}s" if value is not None else "—"


def matrix_cells(cv: CampaignView, v: VariantView) -> tuple[str, ...]:
    base = cv.variant(cv.baseline)
    startup = _secs(v.startup_s) if v.startup_s is not None else (
        PHASE_LABELS.get(v.phase or "", v.phase or "") if v.state == "restarting" else "—")
    sanity = {True: "pass", False: "FAIL", None: "—"}[v.sanity]
    note = v.reason or (v.error_lines[-1] if v.error_lines else "")
    if v.backend and not note:
        note = f"{v.backend} / {v.checkpoint or '?'}"
    state = "not run" if v.state == "pending" and not cv.running else v.state
    phases = [_secs(v.phases.get(phase)) for _, phase in PHASE_COLUMNS]
    return (v.name, state, *(c.text() for c in v.cells), change_text(v, base), startup,
            *phases, sanity, runs_text(v.run_ids), note)


def families_text(v: VariantView) -> str:
    """The highlighted variant's kernel families (TC: tensor cores, CC: CUDA cores)."""
    return (f"{v.name} kernels (share of a decode step; TC tensor cores, CC CUDA cores): "
            f"{v.kernels}") if v.kernels else ""


def chart_series(cv: CampaignView) -> tuple[list[str], list[Series]]:
    labels = [f"C{c}" for c, _ in cv.levels]
    series = [Series(v.name, [c.tok_s if c.state in ("done", "partial") else None
                              for c in v.cells])
              for v in cv.variants if any(c.tok_s is not None for c in v.cells)]
    return labels, series


class CampaignMatrix(FocusTable[Text]):
    DEFAULT_CSS = """
    CampaignMatrix { height: auto; max-height: 100%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shape: tuple[tuple[tuple[str, str, int], ...], tuple[str, ...]] | None = None
        self._shown: dict[str, tuple[str, ...]] = {}
        self._cv: CampaignView | None = None
        self._width = LastWidth()

    def on_resize(self) -> None:
        if self._cv is not None:
            self.show(self._cv)

    def shown_keys(self) -> set[str]:
        return {key for _, key, _ in self._shape[0]} if self._shape else set()

    def show(self, cv: CampaignView) -> None:
        self._cv = cv
        width = self._width.keep(self.size.width) - 1  # the scrollbar's column, if any
        cols = matrix_columns(cv, width if width > 0 else None)
        shape = (tuple(cols), tuple(v.name for v in cv.variants))
        if shape != self._shape:
            self.clear(columns=True)
            self._shown.clear()
            self._shape = shape
            for label, key, width in cols:
                self.add_column(label, key=key, width=width)
            for i, v in enumerate(cv.variants):
                cells = self._cells(cv, v, cols)
                self.add_row(*(plain(c) for c in cells), key=f"v{i}")
                self._shown[f"v{i}"] = cells
            return
        keys = [key for _, key, _ in cols]
        for i, v in enumerate(cv.variants):
            row = f"v{i}"
            cells = self._cells(cv, v, cols)
            old = self._shown.get(row)
            for key, new, was in zip(keys, cells, old or (None,) * len(cells), strict=True):
                if new != was:
                    self.update_cell(row, key, plain(new))
            self._shown[row] = cells

    @staticmethod
    def _cells(cv: CampaignView, v: VariantView,
               cols: list[tuple[str, str, int]]) -> tuple[str, ...]:
        full = dict(zip((k for _, k, _ in matrix_columns(cv)), matrix_cells(cv, v), strict=True))
        base = cv.variant(cv.baseline)
        return tuple(vs_text(v, base, key) if key.startswith("vs:") else full[key]
                     for _, key, _ in cols)


class CampaignBody(Body):
    MODE = "campaign"
    SCOPES = ("app", "campaign")
    AUTO_FOCUS = "#camp-matrix"
    BINDINGS = keymap.bindings("campaign")

    def compose_body(self) -> ComposeResult:
        m = self.model
        with Vertical(id="camp-head", classes="panel") as head:
            head.border_title = "campaign"
            yield Static("", id="camp-title", markup=True)
        with Vertical(id="camp-matrix-box", classes="panel") as box:
            box.border_title = "variants by levels: output tok/s per C"
            yield CampaignMatrix(id="camp-matrix")
            yield Static("", id="camp-details", markup=False)
        with Horizontal(id="camp-main"):
            with Vertical(id="camp-side", classes="panel") as side:
                side.border_title = "current variant"
                yield StartupPanel(m, id="camp-startup")
                yield SanityResult(m, detail=False, id="camp-sanity")
            yield Chart(title="output tok/s per C, by variant", id="camp-chart",
                        classes="panel")

    def on_mount(self) -> None:
        every_second(self, self._tick)

    def _tick(self) -> None:
        if self.is_current and self.model.campaign.running:
            update_static(self.one(Static, "#camp-title"), head_markup(self.model))

    def refresh_body(self, parts: frozenset[str]) -> None:
        if CAMPAIGN in parts:
            cv = self.model.campaign
            update_static(self.one(Static, "#camp-title"), head_markup(self.model))
            self.one(CampaignMatrix).show(cv)
            base = cv.variant(cv.baseline)
            box = self.one(Vertical, "#camp-matrix-box")
            box.border_title = "output tok/s per C" + (
                f" · best Δ: best tok/s against {escape(base.name)} (B: another)"
                if base else "")
            self._show_row_details()
            labels, series = chart_series(cv)  # a new drawing only when a level finished
            self.one(Chart).show_data(labels, series, ylabel="tok/s",
                                      empty="no variant has finished a level yet")
        if STARTUP in parts:
            self.one(StartupPanel).refresh_model()
        if SANITY in parts:
            self.one(SanityResult).refresh_model()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row_details()

    def _show_row_details(self) -> None:
        """The line under the matrix, for the highlighted variant: on a narrow terminal what
        the matrix has no room for (best Δ in full, startup and its phases, sanity, runs,
        note), then its kernel families; wrapped at words, never cut."""
        cv, matrix = self.model.campaign, self.one(CampaignMatrix)
        row = matrix.cursor_row
        v = cv.variants[row] if 0 <= row < len(cv.variants) else None
        extra = dropped_text(cv, v, matrix.shown_keys()) if v is not None else ""
        lines = [f"{v.name}: {extra}"] if v is not None and extra else []
        if v is not None and v.kernels:
            lines.append(families_text(v))
        details = self.one(Static, "#camp-details")
        details.display = bool(lines)
        update_static(details, "\n".join(safe_text(line) for line in lines))
        self.one(Vertical, "#camp-matrix-box").border_subtitle = "enter: a variant's details"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """A variant's state, reason and error lines in full (the matrix cuts them)."""
        from dsv4tui.tui.screens.modals import ErrorScreen

        key = str(event.row_key.value or "")
        v = self.model.campaign.variant(key[1:]) if key.startswith("v") else None
        if v is None:
            return
        ran = f"{v.backend} / {v.checkpoint}" if v.backend else "not measured"
        text = (f"{v.state}" + (f": {v.reason}" if v.reason else "") + f" · ran {ran}"
                + (f" · runs {', '.join(f'#{i}' for i in v.run_ids)}" if v.run_ids else ""))
        self.app.push_screen(ErrorScreen(f"variant {escape(v.name)}", text, list(v.error_lines)))

    async def action_start_campaign(self) -> None:
        await self.app.run_action("app.pick_campaign")

    def action_next_baseline(self) -> None:
        cv = self.model.campaign
        with_numbers = [i for i, v in enumerate(cv.variants) if best(v) is not None]
        if not with_numbers:
            self.notify("no variant has numbers yet", timeout=3)
            return
        later = [i for i in with_numbers if i > cv.baseline]
        cv.baseline = later[0] if later else with_numbers[0]
        self.refresh_parts(frozenset({CAMPAIGN}))
        base = cv.variant(cv.baseline)
        self.notify(f"baseline: {base.name if base else '?'}", timeout=3, markup=False)
