"""The live sweep table: one row per level, cells updated in place as requests finish.

On a narrow terminal the less needed columns go (the server's TTFT, then TTFT p99) so the
level's status is never cut off; the CLI's ``level_table`` always has them all."""

from __future__ import annotations

from textual import events

from dsv4tui.core.campaign.columns import LEVEL_COLUMNS
from dsv4tui.core.view.model import LevelRow, SweepView, fmt_num
from dsv4tui.tui.widgets.focus_mark import FocusTable

# The core's level columns (the CLI's level_table shows the same), between progress and status.
COLUMNS = (("C", "c", 4), ("done", "done", 7),
           *((c.title, c.key, c.width) for c in LEVEL_COLUMNS),
           ("err", "err", 3), ("status", "status", 9))
DROP_FIRST = ("server_ttft_p50", "ttft_p99_ms")  # the column keys that go when space is short
_PAD = 2  # DataTable's cell padding, both sides


def _ms(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1000:.2f}s" if v >= 10_000 else f"{v:.0f}ms"


def level_cells(lv: LevelRow) -> tuple[str, ...]:
    stats = lv.stats()
    values = []
    for col in LEVEL_COLUMNS:
        if col.bounds(stats) is not None:
            values.append(col.cell(stats, short=True))
            continue
        v = col.value(stats)
        values.append(_ms(v) if col.unit == "ms" else fmt_num(v, col.decimals))
    # an open-loop (rate) level without a max_concurrency cap has no C: "rate"
    return (str(lv.concurrency) if lv.concurrency else "rate",
            f"{lv.completed + lv.errors}/{lv.requests}", *values,
            str(lv.errors), lv.status)


def columns_for(width: int) -> tuple[tuple[str, str, int], ...]:
    """The columns that fit ``width`` cells, dropping DROP_FIRST's in order as needed."""
    cols = list(COLUMNS)
    for key in DROP_FIRST:
        if sum(w + _PAD for _, _, w in cols) <= width:
            break
        cols = [c for c in cols if c[1] != key]
    return tuple(cols)


class SweepTable(FocusTable[str]):
    DEFAULT_CSS = """
    SweepTable { height: auto; max-height: 14; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, show_cursor=False)
        self._shown: dict[str, tuple[str, ...]] = {}
        self._plan: tuple[tuple[int, int], ...] = ()
        self._columns: tuple[tuple[str, str, int], ...] = ()
        self._sweep: SweepView | None = None

    def on_resize(self, event: events.Resize) -> None:
        wanted = columns_for(event.size.width)
        if wanted != self._columns:
            self.clear(columns=True)
            self._columns = wanted
            for label, key, width in wanted:
                self.add_column(label, key=key, width=width)
            self._plan = ()  # the rows again, with the new columns
            if self._sweep is not None:
                self.show_sweep(self._sweep)

    def _cells(self, lv: LevelRow) -> tuple[str, ...]:
        shown = {key for _, key, _ in self._columns}
        return tuple(cell for (_, key, _), cell in zip(COLUMNS, level_cells(lv), strict=True)
                     if key in shown)

    def show_sweep(self, sweep: SweepView) -> None:
        self._sweep = sweep
        if not self._columns:
            return  # drawn on the first resize, once the width is known
        plan = tuple((lv.concurrency, lv.requests) for lv in sweep.levels)
        if plan != self._plan:
            self.clear()
            self._shown.clear()
            self._plan = plan
            for i, lv in enumerate(sweep.levels):
                key = f"L{i}"
                cells = self._cells(lv)
                self.add_row(*cells, key=key)
                self._shown[key] = cells
            return
        for i, lv in enumerate(sweep.levels):
            key = f"L{i}"
            cells = self._cells(lv)
            old = self._shown.get(key)
            if old == cells:
                continue
            for (_label, col, _w), new, prev in zip(self._columns, cells, old or (),
                                                    strict=False):
                if new != prev:
                    self.update_cell(key, col, new)
            self._shown[key] = cells
