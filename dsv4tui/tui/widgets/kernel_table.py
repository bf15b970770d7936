"""The top kernels of a capture: share of decode time, family, calls, mean duration, tensor
cores by name; one launch column: blocks launched, the share of the SMs a launch covers
(``3.9w``: waves, the grid is larger than the GPU) and est. achieved occupancy (``n/e``: the
profiler could not estimate it; ``-``: not in this trace); with a second capture, its share
of the same kernel in a column beside."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv4tui.core.campaign.kernel_launch import launch_cells
from dsv4tui.tui.widgets.focus_mark import FocusTable

COLUMNS = (("share", "share", 7), ("other", "other", 7), ("family", "family", 16),
           ("calls", "calls", 6), ("mean µs", "mean", 9), ("GPU ms", "ms", 9),
           ("TC", "tc", 3), (" blk  SMs  occ", "launch", 14), ("kernel", "kernel", 60))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def launch_cell(k: Mapping[str, Any]) -> str:
    """``  64  34%   3%``: blocks, SMs covered (or waves), est. occupancy, aligned."""
    blocks, sms, occ = launch_cells(k)
    return f"{blocks:>4} {sms:>4} {occ:>4}"


def kernel_cells(k: Mapping[str, Any], other: float | None, with_other: bool) -> tuple[str, ...]:
    tc = {True: "TC", False: "CC", None: "?"}[k.get("tensor_core_by_name")]
    cells = [_pct(k.get("share"))]
    if with_other:
        cells.append(_pct(other))
    cells += [str(k.get("family", "-")), str(k.get("calls", "-")),
              f"{k.get('mean_us') or 0:.1f}", f"{(k.get('total_us') or 0) / 1000:.1f}", tc,
              launch_cell(k), str(k.get("short_name") or k.get("name") or "?")]
    return tuple(cells)


class KernelTable(FocusTable[str]):
    """Call :meth:`show` with a capture summary (and optionally one to compare with)."""

    DEFAULT_CSS = """
    KernelTable { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None, limit: int = 25) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.limit = limit
        self._with_other: bool | None = None

    def _columns(self, with_other: bool) -> None:
        if self._with_other == with_other:
            return
        self.clear(columns=True)
        for label, key, width in COLUMNS:
            if key == "other" and not with_other:
                continue
            self.add_column(label, key=key, width=width)
        self._with_other = with_other

    def show(self, summary: Mapping[str, Any] | None,
             other: Mapping[str, Any] | None = None) -> None:
        self._columns(other is not None)
        self.clear()
        if not summary:
            return
        others: dict[str, float | None] = {}
        if other is not None:
            for k in other.get("kernels") or []:
                others[k["name"]] = k.get("share")
        for i, k in enumerate((summary.get("kernels") or [])[:self.limit]):
            self.add_row(*kernel_cells(k, others.get(k["name"]), other is not None),
                         key=f"k{i}")
