"""Open-loop arrivals: when each request of a rate level is due, decided before the level.

A rate level (``request_rate`` r requests/s, n requests) sends request i at ``t0 + s_i``
whatever the server does, so a slow server makes the requests pile up (the open loop the
field measures with ``bench_serving --request-rate``). The offsets are precomputed from a
seed, so the same seed gives the same timeline, and the client can say afterwards how late it
sent each request against it (docs/metrics.md: send lag).

- ``poisson`` (default, bench_serving's): the first request at 0, then exponential gaps of
  mean 1/r (``random.expovariate``), i.e. a Poisson process of rate r;
- ``constant``: one request every 1/r seconds.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import math
import random
from typing import Dict, List, Optional, Sequence

KINDS = ("poisson", "constant")


def timeline(n: int, rate: float, seed: int, kind: str = "poisson") -> List[float]:
    """Send offsets in seconds from the level's start for ``n`` requests (sorted, first 0)."""
    if kind not in KINDS:
        raise ValueError("arrival must be one of %s, not %r" % (", ".join(KINDS), kind))
    if not rate > 0 or math.isinf(rate):
        raise ValueError("a request rate must be a finite number > 0, not %r" % (rate,))
    if kind == "constant":
        return [i / rate for i in range(n)]
    rng = random.Random("arrivals:%d" % seed)
    out = [0.0] * n
    t = 0.0
    for i in range(1, n):
        t += rng.expovariate(rate)
        out[i] = t
    return out


def dispersion(offsets: Sequence[float], window_s: float = 1.0) -> Optional[float]:
    """Variance / mean of the arrival counts per ``window_s`` window (1 for a Poisson
    process, 0 for a constant one); None with fewer than 2 whole windows."""
    if not offsets:
        return None
    windows = int(offsets[-1] // window_s)
    if windows < 2:
        return None
    counts = [0] * windows
    for t in offsets:
        k = int(t // window_s)
        if k < windows:
            counts[k] += 1
    mean = sum(counts) / windows
    if mean == 0:
        return None
    var = sum((c - mean) ** 2 for c in counts) / windows
    return var / mean


def offered_rate(offsets: Sequence[float]) -> Optional[float]:
    """The rate the timeline actually offers: (n - 1) / (last - first offset)."""
    if len(offsets) < 2 or offsets[-1] <= offsets[0]:
        return None
    return (len(offsets) - 1) / (offsets[-1] - offsets[0])


def describe(kind: str, rate: float) -> Dict[str, object]:
    return {"arrival": kind, "rate": rate}
