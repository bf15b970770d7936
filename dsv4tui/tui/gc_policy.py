"""When the console's cyclic garbage collector runs (:class:`GcPolicy`): between keys, not in them.

Measured under load (``benchmarks/ui_latency.py``: a C=64 sweep, 8 GPUs at 2 Hz, a 2,000
lines/s log flood): CPython's own schedule ran a *full* collection about once a second, each
scanning the whole heap (~176,000 tracked objects: Textual's DOM, its render caches, every
imported module), 124 ms at p50; the keys that met one were the tail of the latency table
(p90 157 ms against p50 42 ms). Young collections (gen 0/1, 0.05 to 1.2 ms) were never the
problem. So, once the dashboard is up:

- what exists then (modules, classes, the frame and its bodies) is frozen out of every later
  scan (``gc.freeze``): a full collection then scans what was made since, a third of the cost;
- CPython's automatic full collections are off (its third threshold out of reach); the young
  generations are collected as before;
- a full collection runs from a timer when ``QUIET_S`` has passed without a key and at least
  ``FULL_EVERY_S`` since the last one, or after ``FULL_MAX_S`` whatever the keys, so cyclic
  garbage that lived long enough to reach the old generation is held for a minute at most.

``stop`` puts the collector back as it was (the thresholds, nothing frozen): an App that ends
leaves no policy behind in the process (tests run many). Standard library only; nothing of
Textual's is touched (Textual itself pauses the collector while it scrolls).
"""

from __future__ import annotations

import gc
import time
from typing import Any

QUIET_S = 1.0  # no key for this long: a full collection will not meet one
FULL_EVERY_S = 10.0  # at most one full collection this often while quiet
FULL_MAX_S = 60.0  # and at least this often, keys or not
TICK_S = 0.5
NEVER = 1_000_000  # gen-2 threshold no run reaches: CPython never starts a full collection


class GcPolicy:
    """``start`` once the dashboard is up, ``key`` for every key typed, ``stop`` at exit."""

    def __init__(self, app: Any, clock: Any = time.monotonic) -> None:
        self.app, self.clock = app, clock
        self._saved: tuple[int, int, int] | None = None
        self._timer: Any = None
        self._last_key = self._last_full = 0.0
        self.full_collections = 0
        self.full_ms = 0.0  # time spent in them (the benchmark prints it)

    @property
    def active(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        if self._saved is not None:
            return
        first, second, _third = self._saved = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(first, second, NEVER)
        self._last_key = self._last_full = self.clock()
        self._timer = self.app.set_interval(TICK_S, self.tick, name="gc-policy")

    def key(self) -> None:
        self._last_key = self.clock()

    def tick(self) -> bool:
        """A full collection if it is time; True when one ran."""
        if self._saved is None:
            return False
        now = self.clock()
        since = now - self._last_full
        due = since >= FULL_MAX_S or (since >= FULL_EVERY_S and now - self._last_key >= QUIET_S)
        if not due:
            return False
        t0 = time.perf_counter()
        gc.collect()
        self.full_ms += (time.perf_counter() - t0) * 1000
        self.full_collections += 1
        self._last_full = self.clock()
        return True

    def stop(self) -> None:
        if self._saved is None:
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        gc.set_threshold(*self._saved)
        self._saved = None
        gc.unfreeze()
