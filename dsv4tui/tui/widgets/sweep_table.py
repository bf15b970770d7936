"""The live sweep table: one row per level, cells updated in place as requests finish."""

from __future__ import annotations

from textual.widgets import DataTable

from dsv4tui.core.campaign.columns import LEVEL_COLUMNS
from dsv4tui.core.view.model import LevelRow, SweepView, fmt_num

# The core's level columns (the CLI's level_table shows the same), between progress and status.
COLUMNS = (("C", "c", 4), ("done", "done", 7),
           *((c.title, c.key, c.width) for c in LEVEL_COLUMNS),
           ("err", "err", 3), ("status", "status", 9))


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


class SweepTable(DataTable[str]):
    DEFAULT_CSS = """
    SweepTable { height: auto; max-height: 14; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, show_cursor=False)
        self._shown: dict[str, tuple[str, ...]] = {}
        self._plan: tuple[tuple[int, int], ...] = ()

    def on_mount(self) -> None:
        for label, key, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show_sweep(self, sweep: SweepView) -> None:
        plan = tuple((lv.concurrency, lv.requests) for lv in sweep.levels)
        if plan != self._plan:
            self.clear()
            self._shown.clear()
            self._plan = plan
            for i, lv in enumerate(sweep.levels):
                key = f"L{i}"
                cells = level_cells(lv)
                self.add_row(*cells, key=key)
                self._shown[key] = cells
            return
        for i, lv in enumerate(sweep.levels):
            key = f"L{i}"
            cells = level_cells(lv)
            old = self._shown.get(key)
            if old == cells:
                continue
            for (_label, col, _w), new, prev in zip(COLUMNS, cells, old or (), strict=False):
                if new != prev:
                    self.update_cell(key, col, new)
            self._shown[key] = cells
