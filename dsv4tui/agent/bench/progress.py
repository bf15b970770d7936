"""The running level's aggregate (the ``level_progress`` event, about once a second): the final
``level``'s formulas (stats.py) kept up to date one request at a time, so neither the agent
nor the console goes over every request again. Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Any, Callable, Dict, List, Mapping, Optional

from dsv4tui.agent.bench import stats

PROGRESS_S = 1.0  # how often a running level says where it stands


class LevelTally:
    """Completed, errors, output tok/s, TTFT p50/p99 and TPOT p50 of the requests so far."""

    def __init__(self, level: int, concurrency: int, planned: int) -> None:
        self.level = level
        self.concurrency = concurrency
        self.planned = planned
        self.completed = 0
        self.errors = 0
        self.tokens = 0
        self.first: Optional[float] = None  # the earliest start (s from the level's t0)
        self.last: Optional[float] = None  # the latest end
        self._ttft_ms: List[float] = []  # sorted, as stats.summarize sorts them
        self._tpot_ms: List[float] = []
        self.changed = False

    def add(self, r: Mapping[str, Any]) -> None:
        """One ``request`` event (its ``ok``, ``start_s``, ``e2e_s``, ``ttft_s``, tokens)."""
        self.changed = True
        start = r.get("start_s")
        if start is not None:
            end = start + (r.get("e2e_s") or 0.0)
            self.first = start if self.first is None else min(self.first, start)
            self.last = end if self.last is None else max(self.last, end)
        if not r.get("ok"):
            self.errors += 1
            return
        self.completed += 1
        tokens = int(r.get("output_tokens") or 0)
        self.tokens += tokens
        if r.get("ttft_s") is not None:
            bisect.insort(self._ttft_ms, r["ttft_s"] * 1000.0)
        per = stats.tpot(r.get("e2e_s"), r.get("ttft_s"), tokens)
        if per is not None:
            bisect.insort(self._tpot_ms, per * 1000.0)

    def event(self, in_flight: Optional[int] = None) -> Dict[str, Any]:
        """The ``level_progress`` fields (named and rounded as the ``level`` event's)."""
        duration = (self.last - self.first) if self.first is not None \
            and self.last is not None else 0.0
        return {"level": self.level, "concurrency": self.concurrency,
                "requests": self.planned, "completed": self.completed, "errors": self.errors,
                "in_flight": in_flight, "duration_s": round(duration, 4),
                "output_tokens": self.tokens,
                "output_tok_s": round(self.tokens / duration, 3) if duration > 0 else None,
                "ttft_ms": {"p50": _pct(self._ttft_ms, 50), "p99": _pct(self._ttft_ms, 99)},
                "tpot_ms": {"p50": _pct(self._tpot_ms, 50)}}


def _pct(values: List[float], q: float) -> Optional[float]:
    return round(stats.percentile(values, q), 3) if values else None


async def report(tally: LevelTally, emit: Callable[..., None],
                 in_flight: Callable[[], Optional[int]], every: float = PROGRESS_S) -> None:
    """Emit ``level_progress`` every ``every`` seconds while requests finish (cancel to stop)."""
    while True:
        await asyncio.sleep(every)
        if tally.changed:
            tally.changed = False
            emit("level_progress", **tally.event(in_flight()))
