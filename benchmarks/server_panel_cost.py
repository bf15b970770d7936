"""The server panel's per-redraw cost of its latency readings (issue 25: 'the server panel
recomputes window quantiles on every redraw'): three histograms (TTFT, ITL, E2E), their p50/p99
over the window and two 30-point sparklines each, over a full 10-minute window of 1 s samples.
'cached' is MetricsWindow as the dashboard keeps it (each sample's window quantile computed
once); 'from scratch' reads the same samples through a window that never cached (what every
redraw cost before, less the linear scans bisect replaced: the old code read 6.4 ms p50 here).
Prints p50/p90 ms of 30 redraws each and the ratio.

    python3 benchmarks/server_panel_cost.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsv4tui.core.server.metrics_window import MetricsWindow

KEYS = ("time_to_first_token_seconds", "inter_token_latency_seconds",
        "e2e_request_latency_seconds")
BOUNDS = [0.01 * 2 ** i for i in range(20)]
rng = random.Random(1)


def hist(n: int) -> dict[str, object]:
    c, buckets = 0, []
    for b in BOUNDS:
        c += n // 20 + rng.randint(0, 3)
        buckets.append([b, c])
    return {"buckets": [*buckets, [None, c]], "count": c, "sum": c * 0.1}


def sample(i: int) -> dict[str, object]:
    return {"ok": True, "time": float(i), "interval": 1.0, "generation_tokens_total": i * 500,
            "histograms": {k: hist(i * 50) for k in KEYS}}


def redraw(win: MetricsWindow, now: float) -> None:
    for k in KEYS:
        win.quantiles(k, now)
        win.quantile_history(k, 0.5)
        win.quantile_history(k, 0.99)


def main() -> None:
    win = MetricsWindow()
    for i in range(600):
        win.add(sample(i), float(i))
    cached, scratch = [], []
    for j in range(30):
        now = 600.0 + j
        win.add(sample(600 + j), now)
        t = time.perf_counter()
        redraw(win, now)
        cached.append((time.perf_counter() - t) * 1000)
        fresh = MetricsWindow()
        fresh.samples.extend(win.samples)
        t = time.perf_counter()
        redraw(fresh, now)
        scratch.append((time.perf_counter() - t) * 1000)
    cached.sort()
    scratch.sort()
    print(f"per redraw, {len(win.samples)} samples of 3 histograms x 20 buckets:")
    print(f"  cached        p50 {cached[15]:.2f} ms  p90 {cached[27]:.2f} ms")
    print(f"  from scratch  p50 {scratch[15]:.2f} ms  p90 {scratch[27]:.2f} ms")
    print(f"  ratio (p50)   {scratch[15] / cached[15]:.0f}x")


if __name__ == "__main__":
    main()
