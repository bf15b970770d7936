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
marked as the base), ``ctrl+r`` reload.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from dsv4tui.core.campaign.kernel_launch import launch_lines
from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.view.model import UiModel
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.base import Body
from dsv4tui.tui.widgets.kernel_families import FamilyBars
from dsv4tui.tui.widgets.kernel_table import KernelTable
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe
from dsv4tui.tui.widgets.text import plain

LIST_COLUMNS = (("", "mark", 2), ("#", "id", 4), ("backend", "backend", 12),
                ("ckpt", "ckpt", 6), ("run", "run", 5), ("step ms", "step", 8),
                ("tensor %", "tensor", 8), ("date", "date", 16))
MAX_MARKED = 2


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
    BINDINGS: ClassVar[list[BindingType]] = keymap.bindings("kernels")
    SCOPES = ("kernels", "app")  # the key bar shows k, space ... like every other screen
    DEFAULT_CSS = """
    KernelsBody #kern-main { height: 1fr; }
    KernelsBody #kern-list-box { width: 44; min-width: 30; }
    KernelsBody #kern-table { height: 1fr; }
    KernelsBody #kern-detail { width: 1fr; }
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
        self._loaded = False

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="kern-main"):
            with Vertical(id="kern-list-box", classes="panel") as box:
                box.border_title = "kernel captures"
                yield DataTable(id="kern-table", cursor_type="row", zebra_stripes=True)
            with Vertical(id="kern-detail", classes="panel") as detail:
                detail.border_title = "where the decode time goes"
                yield Static("", id="kern-head", markup=True)
                yield FamilyBars(id="kern-families")
                yield Static("", id="kern-findings", markup=True)
                yield KernelTable(id="kern-kernels")
        yield Static("", id="kern-status", markup=True)

    def on_mount(self) -> None:
        table = self.query_one("#kern-table", DataTable)
        for label, key, width in LIST_COLUMNS:
            table.add_column(label, key=key, width=width)

        self._draw_detail()

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

    def set_progress(self, text: str | None) -> None:
        self.query_one("#kern-status", Static).update(escape(text) if text else "")

    def set_error(self, text: str) -> None:
        self.query_one("#kern-status", Static).update(f"[b $error]capture failed:[/] "
                                                      f"{escape(text)}")

    # -- drawing --------------------------------------------------------------------------
    def _fill(self) -> None:
        table = self.query_one("#kern-table", DataTable)
        keep = table.cursor_row
        table.clear()
        for item in self.items:
            table.add_row(*(plain(c) for c in self._cells(item)), key=str(item.id))
        if self.items:
            table.move_cursor(row=min(max(keep, 0), len(self.items) - 1))

    def _cells(self, item: CaptureItem) -> tuple[str, ...]:
        mark = str(self.marked.index(item.id) + 1) if item.id in self.marked else ""
        when = (_dt.datetime.fromtimestamp(item.created_at).strftime("%Y-%m-%d %H:%M")
                if item.created_at else "-")
        return (mark, str(item.id), safe_text(item.backend or "-"),
                safe_text(item.checkpoint or "-"),
                "-" if item.run_id is None else str(item.run_id),
                _num(item.decode.get("interval_ms") or item.decode.get("mean_ms")),
                _num(item.tensor_pct, "{:.2f}"), when)

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

    def action_reload(self) -> None:
        self.app.post_message(self.Reload(self))  # messages from a widget stop at its screen

    def action_capture(self) -> None:
        self.set_progress(f"capture requested: {self.steps} steps at C={self.concurrency}…")
        self.app.post_message(self.RunRequested(self.steps, self.concurrency))
