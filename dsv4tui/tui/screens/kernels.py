"""Kernels: where the GPU time goes -- stored kernel captures, family bars, top kernels.

The screen never reads the store or talks to a host. The app feeds it:

* ``screen.set_captures(items)`` -- stored captures, newest first (``dsv4tui.core.store.kernels.
  KernelCapture`` objects or their ``to_dict()``), e.g. from ``kernel_store.captures(store,
  host=...)``;
* ``screen.set_progress(text)`` / ``screen.set_error(text)`` while a capture is being taken.

and answers its messages: :class:`KernelsBody.Reload` (shown, ctrl+r: load the stored
captures) and :class:`KernelsBody.RunRequested` (``k``: take a capture now, e.g. with
``dsv4tui.core.campaign.kernels.collect_kernels`` + ``store_capture`` in a worker).

Keys: ``k`` capture now, ``space`` mark (two marked captures show side by side, the first
marked as the base), ``c`` (the app's ``compare`` binding id, answered here) where the time
moved between the two marked (:mod:`dsv4tui.core.campaign.kernel_compare`, drawn by
:class:`~dsv4tui.tui.widgets.kernel_compare.KernelCompare`; ``c`` or ``esc`` goes back),
``ctrl+r`` reload.

The capture list runs across the top, its columns fitted to the width (:func:`list_columns`:
the low-priority ones go first on a narrow terminal); the detail or the comparison below it
has the full width.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import ContentSwitcher, DataTable, Static

from dsv4tui.core.campaign.kernel_compare import compare
from dsv4tui.core.campaign.kernel_launch import launch_lines
from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.errors import UserError
from dsv4tui.core.view.model import UiModel
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.base import Body
from dsv4tui.tui.widgets.focus_mark import FocusTable, PanelScroll
from dsv4tui.tui.widgets.kernel_compare import KernelCompare
from dsv4tui.tui.widgets.kernel_families import FamilyBars
from dsv4tui.tui.widgets.kernel_table import KernelTable
from dsv4tui.tui.widgets.last_width import LastWidth
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import plain

MAX_MARKED = 2
PAD = 2  # a DataTable column's cell padding, both sides
# (title, key, minimum width); the natural widths of id, backend, ckpt, C, bs, run come from
# the captures shown
LIST_COLUMNS = (("", "mark", 1), ("#", "id", 1), ("backend", "backend", 7), ("ckpt", "ckpt", 4),
                ("C", "conc", 2), ("bs", "bs", 2), ("step ms", "step", 7),
                ("tensor %", "tensor", 8), ("run", "run", 3), ("date", "date", 16))
# what a narrow list gives up, in order: the date's year and seconds, then whole columns
NARROWING = ("date-short", "date", "run", "conc", "tensor", "ckpt")


def list_columns(width: int, natural: Mapping[str, int] | None = None
                 ) -> list[tuple[str, str, int]]:
    """The capture list's columns ``(title, key, width)`` for a table ``width`` cells wide:
    every column at 160 columns, the low-priority ones left out (whole, never cut) when
    narrow; backend last, cut to its minimum."""
    natural = natural or {}
    titles = {key: title for title, key, _ in LIST_COLUMNS}
    widths = {key: max(w, len(title), natural.get(key, 0)) for title, key, w in LIST_COLUMNS}

    def used() -> int:
        return sum(w + PAD for w in widths.values())

    for step in NARROWING:
        if used() <= width:
            break
        if step == "date-short":
            widths["date"] = 11  # 12-02 16:53
        else:
            del widths[step]
    if used() > width:
        widths["backend"] = max(4, widths["backend"] - (used() - width))
    return [(titles[k], k, w) for k, w in widths.items()]


@dataclass
class CaptureItem:
    """What the screen needs of a stored capture."""

    id: int
    summary: dict[str, Any]
    run_id: int | None = None
    host: str = ""
    backend: str | None = None
    checkpoint: str | None = None
    label: str | None = None
    created_at: float = 0.0
    simulated: bool = False
    launch_id: int | None = None
    server_pid: int | None = None
    concurrency: int | None = None
    load: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, item: Any) -> CaptureItem:
        get = item.get if isinstance(item, Mapping) else (lambda k, d=None: getattr(item, k, d))
        summary = get("summary") or {}
        return cls(id=int(get("id", 0) or 0), summary=dict(summary), run_id=get("run_id"),
                   host=str(get("host", "") or ""), backend=get("backend"),
                   checkpoint=get("checkpoint"), label=get("label"),
                   created_at=float(get("created_at", 0.0) or 0.0),
                   simulated=bool(get("simulated", False)), launch_id=get("launch_id"),
                   server_pid=get("server_pid"), concurrency=get("concurrency"),
                   load=get("load") or (summary.get("load") if isinstance(summary, Mapping)
                                        else None))

    @property
    def title(self) -> str:
        what = "/".join(x for x in (self.backend, self.checkpoint) if x) or self.label or "kernels"
        return f"#{self.id} {what}" + (f" (run {self.run_id})" if self.run_id is not None else "")

    @property
    def decode(self) -> dict[str, Any]:
        return (self.summary.get("steps") or {}).get("decode") or {}

    @property
    def tensor_pct(self) -> float | None:
        return (self.summary.get("tensor_decision") or {}).get("tensor_active_pct")

    @property
    def batch_text(self) -> str:
        """The decode batch it measured (``15.9``; ``1 far``: far from the load's C)."""
        bs = self.decode.get("mean_bs")
        if not isinstance(bs, (int, float)):
            return "-"
        return f"{bs:.3g}" + (" far" if (self.load or {}).get("batch_far") else "")

    @property
    def conc_text(self) -> str:
        c = self.concurrency if self.concurrency is not None else \
            (self.load or {}).get("concurrency")
        return "-" if c is None else str(c)


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def header_text(item: CaptureItem) -> str:
    """Two or three lines about one capture (markup-escaped)."""
    s = item.summary
    dec = item.decode
    decision = s.get("tensor_decision") or {}
    tele = s.get("telemetry") or {}
    sim = "  [b $warning]SIMULATED[/]" if (item.simulated or
                                            (s.get("server") or {}).get("simulated")) else ""
    line1 = f"[b]{escape(item.title)}[/]  {escape(str(s.get('model') or ''))}{sim}"
    parts = []
    if dec.get("count"):
        parts.append(f"{dec['count']} decode steps, {_num(dec.get('mean_ms'), '{:.2f}')} ms on "
                     f"the GPU" + (f", one every {dec['interval_ms']:.2f} ms"
                                   if dec.get("interval_ms") else ""))
        if dec.get("tok_s"):
            parts.append(f"bs {dec.get('mean_bs'):g} → {dec['tok_s']:.1f} tok/s")
    parts.append(f"{s.get('ranks', '?')} rank(s)")
    line2 = escape(" · ".join(parts))
    if decision.get("tensor_active_pct") is not None:
        line3 = (f"tensor pipe {decision['tensor_active_pct']:.2f} % "
                 f"({escape(str(tele.get('source') or decision.get('source') or '?'))}); "
                 "TC/CC flags from kernel names + that counter")
    else:
        line3 = "tensor pipe n/a: TC/CC flags from kernel names only"
    measured = [f"launch {item.launch_id}" if item.launch_id is not None else "launch unknown"]
    if item.server_pid is not None:
        measured.append(f"server pid {item.server_pid}")
    load = load_text(item.concurrency, item.load)
    if load is not None:
        measured.append(f"load {load}")
    measured.append(f"run {item.run_id}" if item.run_id is not None else "no run")
    lines = [line1, line2, line3, "measured: " + escape(" · ".join(measured))]
    if (item.load or {}).get("batch_far"):
        lines.append(f"[b $warning]{escape(str((item.load or {}).get('batch_note')))}[/]")
    lines.append(f"[dim]{escape(str(s.get('basis_note') or ''))}[/]")
    return "\n".join(lines)


def findings_text(shown: Sequence[CaptureItem], limit: int = 3) -> str:
    """The findings panel: per capture shown, the kernels that leave the GPU idle, ranked by
    the time they cost, and where the SM count came from (markup-escaped). Two captures
    side by side get two findings each and no SM-count line unless it is all they have."""
    two = len(shown) > 1
    blocks = []
    for item in shown:
        lines = launch_lines(item.summary, 2 if two else limit)
        note, rest = lines[0], lines[1:]
        if two and rest and rest[0].startswith("findings"):
            rest = rest[1:]
            body = [f"[b]{escape(item.title)}[/]: findings, ranked by the time they cost"]
        else:
            head = f"[b]{escape(item.title)}[/] " if two else ""
            body = [f"{head}[dim]{escape(note)}[/]"]
        for line in rest:
            body.append(f"[b $warning]{escape(line)}[/]" if line[:1].isdigit()
                        else escape(line))
        blocks.append("\n".join(body))
    return "\n".join(blocks)


class KernelsBody(Body):
    MODE = "kernels"
    AUTO_FOCUS = "#kern-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        *keymap.bindings("kernels"), keymap.answered_here("compare", "compare_marked"),
        keymap.escape_binding("close_compare")]
    SCOPES = ("kernels", "app")  # the key bar shows k, space ... like every other screen
    LEAD_KEYS = ("compare",)  # c is app-wide but hidden elsewhere: shown first here
    DEFAULT_CSS = """
    KernelsBody #kern-list-box { height: auto; max-height: 30%; min-height: 4; }
    KernelsBody #kern-table { height: auto; max-height: 12; }
    KernelsBody #kern-view { height: 1fr; }
    KernelsBody #kern-detail { height: 1fr; }
    KernelsBody #kern-compare-box { height: 1fr; }
    KernelsBody #kern-head { height: auto; padding: 0 1; }
    KernelsBody #kern-families { height: auto; max-height: 24; }
    KernelsBody #kern-findings { height: auto; max-height: 12; padding: 0 1; }
    KernelsBody #kern-status { height: auto; padding: 0 1; color: $text-muted; }
    """

    class Reload(Message):
        """The app: load the stored captures and call ``set_captures`` of ``screen`` (the
        one asking: it may be mounted in the background, not on top)."""

        def __init__(self, screen: KernelsBody | None = None) -> None:
            super().__init__()
            self.screen = screen

    class RunRequested(Message):
        """The app: take a capture now (agent ``kernels run``), store it, reload."""

        def __init__(self, steps: int = 5, concurrency: int = 16) -> None:
            super().__init__()
            self.steps = steps
            self.concurrency = concurrency

    def __init__(self, model: UiModel | None = None, *, steps: int = 5,
                 concurrency: int = 16) -> None:
        super().__init__(model if model is not None else UiModel())
        self.steps = steps
        self.concurrency = concurrency
        self.items: list[CaptureItem] = []
        self.marked: list[int] = []
        self.comparing = False  # the comparison of the two marked is shown
        self.comparison: dict[str, Any] | None = None  # kernel_compare.compare's model
        self._loaded = False
        self._columns: list[tuple[str, str, int]] | None = None
        self._width = LastWidth()

    def compose_body(self) -> ComposeResult:
        with Vertical(id="kern-list-box", classes="panel") as box:
            box.border_title = "kernel captures"
            yield FocusTable[str](id="kern-table", cursor_type="row", zebra_stripes=True)
        with ContentSwitcher(initial="kern-detail", id="kern-view"):
            with Vertical(id="kern-detail", classes="panel") as detail:
                detail.border_title = "where the decode time goes"
                yield Static("", id="kern-head", markup=True)
                yield FamilyBars(id="kern-families")
                yield Static("", id="kern-findings", markup=True)
                yield KernelTable(id="kern-kernels")
            with PanelScroll(id="kern-compare-box", classes="panel") as cmp:
                cmp.border_title = "where the time moved"
                yield KernelCompare(id="kern-compare")
        yield Static("", id="kern-status", markup=True)

    def on_mount(self) -> None:
        self._fill()
        self._draw_detail()

    def on_resize(self) -> None:
        self.call_after_refresh(self._fill)

    def on_shown(self) -> None:
        """Ask for the stored captures each time the screen is shown: it may have been mounted
        in the background, and a capture taken meanwhile (the CLI, another console) shows."""
        self.app.post_message(self.Reload(self))  # messages from a widget stop at its screen

    # -- fed by the app -----------------------------------------------------------------
    def set_captures(self, items: Sequence[Any]) -> None:
        """Stored captures, newest first (KernelCapture objects or dicts)."""
        self.items = [CaptureItem.of(i) for i in items]
        self._loaded = True
        ids = {i.id for i in self.items}
        self.marked = [m for m in self.marked if m in ids]
        self._fill()
        self._draw_detail()
        self._draw_compare()

    def set_progress(self, text: str | None) -> None:
        self.query_one("#kern-status", Static).update(escape(text) if text else "")

    def set_error(self, text: str) -> None:
        self.query_one("#kern-status", Static).update(f"[b $error]capture failed:[/] "
                                                      f"{escape(text)}")

    # -- drawing --------------------------------------------------------------------------
    def _layout(self) -> list[tuple[str, str, int]]:
        table = self.query_one("#kern-table", DataTable)
        width = self._width.keep(
            table.scrollable_content_region.width or table.size.width or self.size.width)
        cells = [self._cells(i) for i in self.items]
        natural = {key: max([len(c[key]) for c in cells] + [0])
                   for key in ("id", "backend", "ckpt", "conc", "bs", "run")}
        return list_columns(max(width - 1, 20), natural)

    def _fill(self) -> None:
        table = self.query_one("#kern-table", DataTable)
        keep = table.cursor_row
        columns = self._layout()
        if columns != self._columns:
            self._columns = columns
            table.clear(columns=True)
            for title, key, width in columns:
                table.add_column(title, key=key, width=width)
        else:
            table.clear()
        for item in self.items:
            cells = self._cells(item)
            row = []
            for _, key, _width in columns:
                cell = plain(cells[key])
                if key in ("id", "conc", "bs", "step", "tensor", "run"):
                    cell.justify = "right"
                row.append(cell)
            table.add_row(*row, key=str(item.id))
        if self.items:
            table.move_cursor(row=min(max(keep, 0), len(self.items) - 1))
        self._hint()

    def _cells(self, item: CaptureItem) -> dict[str, str]:
        mark = "AB"[self.marked.index(item.id)] if item.id in self.marked else ""
        short = bool(self._columns) and dict((k, w) for _, k, w in self._columns or []).get(
            "date", 16) < 16
        when = (_dt.datetime.fromtimestamp(item.created_at).strftime(
            "%m-%d %H:%M" if short else "%Y-%m-%d %H:%M") if item.created_at else "-")
        return {"mark": mark, "id": str(item.id), "backend": safe_text(item.backend or "-"),
                "ckpt": safe_text(item.checkpoint or "-"), "conc": item.conc_text,
                "bs": item.batch_text,
                "step": _num(item.decode.get("interval_ms") or item.decode.get("mean_ms")),
                "tensor": _num(item.tensor_pct, "{:.2f}"),
                "run": "-" if item.run_id is None else str(item.run_id), "date": when}

    def _key(self, binding_id: str) -> str:
        km = getattr(self.app, "active_keymap", None) or {}
        return dict((a.id, k) for a, k in keymap.effective(km))[binding_id]

    def _hint(self) -> None:
        """The list's subtitle: how many are marked and the keys that mark and compare."""
        box = self.query_one("#kern-list-box")
        n = len(self.marked)
        mark, cmp = escape(self._key("kernels.mark")), escape(self._key("compare"))
        if n == MAX_MARKED:
            what = f"A and B marked · {cmp} compare"
        else:
            what = f"{n} marked · {mark} mark two (A, B), then {cmp} compare"
        n_items = len(self.items)
        box.border_subtitle = f"{n_items} capture{'' if n_items == 1 else 's'} · {what}"

    def highlighted(self) -> CaptureItem | None:
        if not self.items:
            return None
        table = self.query_one("#kern-table", DataTable)
        row = table.cursor_row
        return self.items[row] if 0 <= row < len(self.items) else self.items[0]

    def shown(self) -> list[CaptureItem]:
        """The captures drawn: the marked ones (base first), else the highlighted one."""
        by_id = {i.id: i for i in self.items}
        marked = [by_id[m] for m in self.marked if m in by_id]
        if marked:
            return marked
        item = self.highlighted()
        return [item] if item is not None else []

    def _draw_detail(self) -> None:
        shown = self.shown()
        head = self.query_one("#kern-head", Static)
        bars = self.query_one("#kern-families", FamilyBars)
        kernels = self.query_one("#kern-kernels", KernelTable)
        found = self.query_one("#kern-findings", Static)
        if not shown:
            found.update("")
            head.update("no kernel captures yet: press [b]k[/] to take one under a steady "
                        "load, or run [b]dsv4tui kernels HOST[/]" if self._loaded else
                        "loading…")
            bars.show([])
            kernels.show(None)
            return
        head.update("\n\n".join(header_text(i) for i in shown))
        bars.show([i.summary for i in shown], [i.title for i in shown])
        found.update(findings_text(shown))
        kernels.show(shown[0].summary, shown[1].summary if len(shown) > 1 else None)

    def _draw_compare(self) -> None:
        """The comparison of the marked two (A: the first marked), when it is shown."""
        if not self.comparing:
            return
        by_id = {i.id: i for i in self.items}
        pair = [by_id[m] for m in self.marked if m in by_id]
        box = self.query_one("#kern-compare-box")
        view = self.query_one("#kern-compare", KernelCompare)
        if len(pair) < MAX_MARKED:
            self.comparison = None
            box.border_title = "where the time moved"
            view.show(None, f"mark two captures to compare ({len(pair)} marked)")
            return
        try:
            self.comparison = compare(pair[0], pair[1], top=5)
        except UserError as err:
            self.comparison = None
            view.show(None, err.message)
        else:
            view.show(self.comparison)
        a, b = pair
        sim = "[b $warning]SIMULATED[/] · " if a.simulated or b.simulated else ""
        box.border_title = (f"{sim}where the time moved: A {escape(a.title)} → "
                            f"B {escape(b.title)}")
        box.border_subtitle = (f"{escape(self._key('compare'))} or esc: back to the "
                               "captures' detail")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "kern-table" and not self.marked:
            self._draw_detail()

    # -- actions --------------------------------------------------------------------------
    def action_toggle_mark(self) -> None:
        item = self.highlighted()
        if item is None:
            return
        if item.id in self.marked:
            self.marked.remove(item.id)
        else:
            self.marked.append(item.id)
            self.marked = self.marked[-MAX_MARKED:]
        self._fill()
        self._draw_detail()
        self._draw_compare()

    def action_compare_marked(self) -> None:
        """Where the time moved between the two marked captures; again: back."""
        if self.comparing:
            self.action_close_compare()
            return
        if len(self.marked) < MAX_MARKED:
            self.set_progress(None)
            self.query_one("#kern-status", Static).update(
                f"[b $warning]mark two captures[/] with [b]{escape(self._key('kernels.mark'))}"
                f"[/] to compare them (the first marked is A, the base); "
                f"{len(self.marked)} marked")
            return
        self.comparing = True
        self.query_one("#kern-view", ContentSwitcher).current = "kern-compare-box"
        self._draw_compare()
        self.set_focus(self.query_one("#kern-compare-box"))  # up/down scroll it

    def action_close_compare(self) -> None:
        self.comparing = False
        self.query_one("#kern-view", ContentSwitcher).current = "kern-detail"
        self.set_focus(self.query_one("#kern-table"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_compare":
            return self.comparing  # not comparing: escape goes on as usual
        return True

    def action_reload(self) -> None:
        self.app.post_message(self.Reload(self))  # messages from a widget stop at its screen

    def action_capture(self) -> None:
        self.set_progress(f"capture requested: {self.steps} steps at C={self.concurrency}…")
        self.app.post_message(self.RunRequested(self.steps, self.concurrency))
