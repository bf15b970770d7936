"""Keep Textual's Strips out of the cyclic garbage collector.

Textual (8.x) caches the result of ``Strip.divide`` and ``Strip.crop_extend`` on the strip
itself, and when the result is the strip unchanged (the compositor divides almost every line
at its own width) the cache holds the strip: a reference cycle. Every rendered line then
outlives its last use until a cyclic collection finds it, so a dashboard repainting a log
flood makes ~7,000 cyclic objects a second and the collector's pauses (15-60 ms on a small
machine) land in the middle of key presses.

:func:`install` wraps the two methods so the "unchanged" case returns the strip without
caching it (the same result, and cheaper than the cache lookup); every other case goes to
Textual's own code. Idempotent; a Textual without these methods is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.style import Style
from textual.strip import Strip

_MARK = "_dsv4tui_no_self_cycles"


def install() -> bool:
    """Patch :class:`Strip` once; True when the patch is (now) in place."""
    if getattr(Strip, _MARK, False):
        return True
    divide: Callable[[Strip, Iterable[int]], Sequence[Strip]] | None = getattr(
        Strip, "divide", None)
    crop_extend: Callable[[Strip, int, int, Style | None], Strip] | None = getattr(
        Strip, "crop_extend", None)
    if divide is None or crop_extend is None:
        return False

    def divide_no_cycle(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        length = self.cell_length
        cuts = list(cuts)
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]
        return divide(self, cuts)

    def crop_extend_no_cycle(self: Strip, start: int, end: int, style: Style | None) -> Strip:
        if start <= 0 and end == self.cell_length:
            return self
        return crop_extend(self, start, end, style)

    strip: Any = Strip
    strip.divide = divide_no_cycle
    strip.crop_extend = crop_extend_no_cycle
    setattr(Strip, _MARK, True)
    return True
