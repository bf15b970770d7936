"""Keep Textual's Strips (one per rendered line) light for the cyclic garbage collector.

A dashboard repainting a log flood makes thousands of Strips a second, and two habits of
Textual 8.x make each of them cost the collector far more than the line itself:

- Every Strip is built with seven small caches (``FIFOCache``: seven GC-tracked objects,
  and their dicts once used) whether or not it is ever cropped, divided or filtered: a
  one-segment strip cost the collector 10 objects instead of 3. Under load the caches were
  40 % of the young generation, and the first collection after a key's pause ran 15-20 ms. :func:`install` makes them lazy: a cache is built the first time it is asked
  for, with the size Textual gives it (the way Textual's own ``Content`` builds its cache).
- ``divide`` and ``crop_extend`` cache their result on the strip, and when the result is the
  strip unchanged (the compositor divides almost every line at its own width) the cache
  holds the strip itself: a reference cycle per rendered line (~7,000 cyclic objects a
  second). That case now returns the strip without caching it (the same result, cheaper).

Results are identical to Textual's; only when the caches come into being changes. The
install checks the Strip it patches (slots, cache sizes read from a Strip built by Textual's
own ``__init__``) and leaves a Textual it does not recognise alone. Idempotent; the patch
stays for the life of the process (it changes when caches are made, not what Strips do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.cache import FIFOCache
from textual.strip import Strip

_MARK = "_dsv4tui_light_strips"
_EAGER = ("_segments", "_cell_length")


def install() -> bool:
    """Patch :class:`Strip` once; True when the patch is (now) in place."""
    if getattr(Strip, _MARK, False):
        return True
    divide: Callable[[Strip, Iterable[int]], Sequence[Strip]] | None = getattr(
        Strip, "divide", None)
    crop_extend: Callable[[Strip, int, int, Style | None], Strip] | None = getattr(
        Strip, "crop_extend", None)
    layout = _slot_layout()
    if divide is None or crop_extend is None or layout is None or "__getattr__" in vars(Strip):
        return False
    lazy, plain = layout

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

    def light_init(self: Any, segments: Iterable[Segment], cell_length: int | None = None
                   ) -> None:
        self._segments = list(segments)
        self._cell_length = cell_length
        for name, value in plain:
            setattr(self, name, value)

    def lazy_cache(self: Strip, name: str) -> FIFOCache[Any, Any]:
        """Only called for a slot not set yet (Python's fallback after AttributeError)."""
        size = lazy.get(name)
        if size is None:
            raise AttributeError(f"'Strip' object has no attribute {name!r}")
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache

    strip: Any = Strip
    strip.divide = divide_no_cycle
    strip.crop_extend = crop_extend_no_cycle
    strip.__init__ = light_init
    strip.__getattr__ = lazy_cache
    setattr(Strip, _MARK, True)
    return True


def _slot_layout() -> tuple[dict[str, int], tuple[tuple[str, None], ...]] | None:
    """``({cache slot: maxsize}, ((other slot, None), ...))`` from a Strip built by Textual,
    or None when its slots hold anything else (a Textual this module does not know)."""
    probe = Strip([], 0)
    lazy: dict[str, int] = {}
    plain: list[tuple[str, None]] = []
    for name in getattr(Strip, "__slots__", ()):
        if name in _EAGER:
            continue
        value = getattr(probe, name, None)
        if isinstance(value, FIFOCache) and isinstance(getattr(value, "_maxsize", None), int):
            lazy[name] = value._maxsize
        elif value is None:
            plain.append((name, None))
        else:
            return None
    return (lazy, tuple(plain)) if lazy else None
