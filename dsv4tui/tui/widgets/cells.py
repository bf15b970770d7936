"""Bars, sparklines and level marks drawn as text cells (1/8-cell bars, one block a value):
the GPU panel's rows, the per-node rows of a host made of nodes, the compact GPU strip."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dsv4tui.tui.widgets.spark import BARS as SPARKS

BLOCKS = " ▏▎▍▌▋▊▉█"


def bar_cells(frac: float | None, width: int) -> tuple[str, str]:
    """(filled, empty) strings for a horizontal bar with 1/8-cell resolution."""
    if width <= 0:
        return "", ""
    if frac is None or math.isnan(frac):
        return "", " " * width
    frac = max(0.0, min(1.0, frac))
    eighths = round(frac * width * 8)
    if frac > 0 and eighths == 0:
        eighths = 1  # a non-zero value never looks like zero
    full, part = divmod(eighths, 8)
    filled = "█" * full + (BLOCKS[part] if part else "")
    return filled, " " * (width - len(filled))


def spark_chars(values: Sequence[float | None], width: int, top: float = 100.0) -> str:
    """One cell per value (newest right, padded left); None -> blank, 0 -> lowest bar."""
    vals = list(values)[-width:] if width > 0 else []
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        else:
            level = round(max(0.0, min(1.0, v / top)) * (len(SPARKS) - 1))
            out.append(SPARKS[level])
    return " " * (width - len(out)) + "".join(out)


def level_char(frac: float | None) -> str:
    """One vertical block for a 0-1 fraction (GpuStrip's per-GPU cells)."""
    if frac is None:
        return "·"
    return SPARKS[round(max(0.0, min(1.0, frac)) * (len(SPARKS) - 1))]
