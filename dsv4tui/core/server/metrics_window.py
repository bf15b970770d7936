"""The serving engine's own numbers over time: the agent's ``server_metrics`` samples in a
sliding window, and what is read from them — gauges, counter rates, histogram quantiles.

Pure data (no textual): the dashboard's server panel and ``dsv4tui server metrics --watch``
read the same :class:`MetricsWindow`; a sweep level's server-side view uses
:func:`histogram_delta` and :func:`quantile` on the two samples around it (the agent's
campaign runner does the same on the host). Quantiles follow Prometheus'
``histogram_quantile`` (linear within the bucket; the +Inf bucket answers the highest finite
bound), over the bucket counts *added* in the window, so old requests never count.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsv4tui.agent.host.server_metrics import (
    histogram_delta,
    mean,
    quantile,
    quantile_bucket,
    server_view,
)

__all__ = ["MetricsWindow", "Reading", "histogram_delta", "mean", "quantile", "quantile_bucket",
           "server_view"]


@dataclass(frozen=True)
class Reading:
    """One number of the panel: its value now and its history (for a sparkline)."""

    value: float | None
    history: tuple[float, ...] = ()


class MetricsWindow:
    """The last ``keep_s`` seconds of ``server_metrics`` samples, on the console's clock."""

    def __init__(self, keep_s: float = 600.0, window_s: float = 60.0) -> None:
        self.keep_s = keep_s
        self.window_s = window_s
        self._restarted_at: float | None = None
        self.samples: deque[tuple[float, dict[str, Any]]] = deque()
        self.last_error: str | None = None
        self.interval = 1.0
        # (key, q) -> {sample time: the window quantile at that sample}: a sample's window
        # only holds samples before it, so its quantile is computed once (sparklines)
        self._q_at: dict[tuple[str, float], dict[float, float | None]] = {}

    def add(self, sample: dict[str, Any], now: float) -> None:
        self.interval = float(sample.get("interval") or self.interval)
        if not sample.get("ok"):
            self.last_error = str(sample.get("error") or "no /metrics")
            return
        self.last_error = None
        if self.samples and self._restarted(self.samples[-1][1], sample):
            self.samples.clear()  # counters started again: the old window says nothing now
            self._q_at.clear()
            self._restarted_at = now  # (a first sample after it counts since then: in window)
        self.samples.append((now, dict(sample)))
        while self.samples and self.samples[0][0] < now - self.keep_s:
            t_old, _ = self.samples.popleft()
            for cached in self._q_at.values():
                cached.pop(t_old, None)

    @staticmethod
    def _restarted(old: dict[str, Any], new: dict[str, Any]) -> bool:
        a, b = old.get("generation_tokens_total"), new.get("generation_tokens_total")
        return a is not None and b is not None and float(b) < float(a)

    def latest(self, now: float) -> dict[str, Any] | None:
        """The newest sample, or None when there is none or it is stale (3 intervals)."""
        if not self.samples:
            return None
        t, sample = self.samples[-1]
        return sample if now - t <= max(3.0 * self.interval, 3.0) else None

    def age(self, now: float) -> float | None:
        return None if not self.samples else now - self.samples[-1][0]

    def _at_or_before(self, t: float) -> dict[str, Any] | None:
        i = bisect.bisect_right(self.samples, t, key=lambda s: s[0])
        if i:
            return self.samples[i - 1][1]
        return self.samples[0][1] if self.samples else None

    def gauge(self, key: str, now: float, points: int = 60) -> Reading:
        latest = self.latest(now)
        hist = tuple(float(s[key]) for _, s in list(self.samples)[-points:]
                     if isinstance(s.get(key), (int, float)))
        value = latest.get(key) if latest else None
        return Reading(None if value is None else float(value), hist)

    def rate(self, key: str, now: float) -> float | None:
        """Per second over the window of a counter (generation_tokens_total ...)."""
        latest = self.latest(now)
        if latest is None:
            return None
        old = self._at_or_before(self.samples[-1][0] - self.window_s)
        if old is None or old is latest:
            return None
        v0, v1 = old.get(key), latest.get(key)
        t0, t1 = old.get("time"), latest.get("time")
        if None in (v0, v1, t0, t1) or float(t1) <= float(t0):  # type: ignore[arg-type]
            return None
        return max(0.0, (float(v1) - float(v0)) / (float(t1) - float(t0)))  # type: ignore[arg-type]

    def histogram(self, key: str, now: float) -> dict[str, Any] | None:
        """``key``'s histogram over the requests of the last window (a delta of two scrapes)."""
        latest = self.latest(now)
        if latest is None:
            return None
        old = self._at_or_before(self.samples[-1][0] - self.window_s)
        if old is None:  # the window is not full yet: since the first sample we have
            old = self.samples[0][1]
        if old is latest:
            # one sample: its histogram counts since the server started -- inside the window
            # only when we saw it restart; otherwise a window needs two samples
            if self._restarted_at is None or self._restarted_at < self.samples[-1][0] - \
                    self.window_s:
                return None
            old = None
        new_h = (latest.get("histograms") or {}).get(key)
        old_h = (old.get("histograms") or {}).get(key) if old is not None else None
        return histogram_delta(new_h, old_h)

    def quantiles(self, key: str, now: float, qs: Sequence[float] = (0.5, 0.99)
                  ) -> dict[float, float | None]:
        """``key``'s histogram quantiles (seconds) over the requests of the last window."""
        d = self.histogram(key, now)
        return {q: quantile(d, q) for q in qs}

    def quantile_history(self, key: str, q: float, points: int = 30) -> tuple[float, ...]:
        """The sliding-window quantile at each of the last ``points`` samples (sparklines);
        0 where a window held no request after the first that did (the line drops, rather than
        the last value standing for a minute with nothing behind it)."""
        samples = self.samples
        cached = self._q_at.setdefault((key, q), {})
        out: list[float] = []
        for i in range(max(0, len(samples) - points), len(samples)):
            t, s = samples[i]
            if t in cached:
                v = cached[t]
            else:
                j = bisect.bisect_right(samples, t - self.window_s, 0, i, key=lambda x: x[0])
                old = samples[j - 1][1] if j else (samples[0][1] if i > 0 else None)
                d = histogram_delta((s.get("histograms") or {}).get(key),
                                    (old.get("histograms") or {}).get(key) if old else None)
                v = cached[t] = quantile(d, q)
            if v is not None:
                out.append(v)
            elif out:
                out.append(0.0)
        return tuple(out)
