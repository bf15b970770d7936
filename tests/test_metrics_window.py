"""Reading a server's histograms and counters over time: quantiles as Prometheus'
histogram_quantile gives them (and the bucket they are only known to), a level's server-side
view from the two scrapes around it, and the console's sliding window."""

from __future__ import annotations

from typing import Any

import pytest

from dsv4tui.agent.host import server_metrics as sm
from dsv4tui.core.campaign.columns import SERVER_TTFT_P50
from dsv4tui.core.server.metrics_window import (
    MetricsWindow,
    histogram_delta,
    quantile,
    quantile_bucket,
)

# sglang:time_to_first_token_seconds bounds (0.5.x), cumulative counts
LE = [0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0]


def hist(counts: list[float], total_sum: float | None = None) -> dict[str, Any]:
    cum, run = [], 0.0
    for c in counts:
        run += c
        cum.append(run)
    return {"buckets": [*([le, n] for le, n in zip(LE, cum, strict=True)), [None, cum[-1]]],
            "sum": total_sum, "count": cum[-1]}


def test_quantile_interpolates_inside_the_bucket_and_says_which_bucket() -> None:
    h = hist([0, 0, 0, 4, 0, 0, 0])  # four requests, all between 0.4 and 0.6 s
    assert quantile(h, 0.5) == pytest.approx(0.5)
    assert quantile_bucket(h, 0.5) == (0.4, 0.6)
    h = hist([1, 1, 1, 1, 0, 0, 0])
    assert quantile(h, 0.5) == pytest.approx(0.2)
    assert quantile_bucket(h, 0.99) == (0.4, 0.6)


def test_quantile_above_the_last_bound_is_only_a_floor() -> None:
    h = {"buckets": [[0.1, 1.0], [None, 3.0]], "sum": 20.0, "count": 3.0}
    assert quantile(h, 0.5) == 0.1  # Prometheus answers the highest finite bound
    assert quantile_bucket(h, 0.5) == (0.1, None)


def test_no_observations_is_no_quantile_not_zero() -> None:
    assert quantile(hist([0] * 7), 0.5) is None
    assert quantile(None, 0.5) is None and quantile_bucket(None, 0.5) is None


def test_delta_counts_only_what_happened_between_two_scrapes() -> None:
    old = hist([10, 0, 0, 0, 0, 0, 0], 0.5)
    new = hist([10, 0, 0, 0, 0, 2, 0], 2.3)  # two slow requests since
    d = histogram_delta(new, old)
    assert d is not None and d["count"] == 2 and d["sum"] == pytest.approx(1.8)
    assert quantile_bucket(d, 0.5) == (0.8, 1.0)  # the old fast ones do not pull it down
    assert histogram_delta(old, new) is None  # counts went down: the server restarted


def sample(t: float, ttft: dict[str, Any], gen: float, ok: bool = True) -> dict[str, Any]:
    return {"ok": ok, "time": t, "engine": "sglang", "generation_tokens_total": gen,
            "running": 1.0, "histograms": {"ttft": ttft}, "interval": 1.0}


def test_server_view_of_a_level() -> None:
    before = sample(100.0, hist([3, 0, 0, 0, 0, 0, 0], 0.2), 1000.0)
    after = sample(110.0, hist([3, 0, 0, 4, 0, 0, 0], 2.2), 1512.0)
    view = sm.server_view(before, after)
    assert view is not None
    assert view["requests"] is None  # no e2e histogram in these samples
    assert view["ttft_ms"]["mean"] == pytest.approx(500.0)
    assert view["ttft_ms"]["p50_bucket"] == [400.0, 600.0]
    assert (view["output_tokens"], view["output_tok_s"], view["window_s"]) == (512.0, 51.2, 10.0)
    assert sm.server_view(before, {**after, "ok": False}) is None
    # the cell says what is known: the bucket, never a made-up exact number
    assert SERVER_TTFT_P50.cell({"server": view}) == "400-600"
    assert SERVER_TTFT_P50.cell({"server": view}, short=True) == "400-600ms"
    assert SERVER_TTFT_P50.cell({}) == "-"


def test_window_rates_and_quantiles_forget_old_requests() -> None:
    win = MetricsWindow(window_s=10.0)
    for k in range(31):
        fast = hist([k * 2.0, 0, 0, 0, 0, 0, 0])  # two fast requests a second until t=20
        slow = [0, 0, 0, 0, 0, 0, max(0, k - 20) * 2.0]  # then two slow ones a second
        counts = [fast["buckets"][0][1] if k <= 20 else 40.0, 0, 0, 0, 0, 0, slow[6]]
        win.add(sample(1000.0 + k, hist(counts), 100.0 * k), now=float(k))
    q = win.quantiles("ttft", now=30.0)
    assert q[0.5] is not None and 1.0 < q[0.5] <= 2.0  # the last 10 s were all slow
    assert win.rate("generation_tokens_total", now=30.0) == pytest.approx(100.0)
    assert win.latest(now=30.0) is not None and win.latest(now=40.0) is None  # stale
    assert win.gauge("running", now=40.0).value is None  # a stale gauge is not current
    history = win.quantile_history("ttft", 0.5)
    assert history[0] <= 0.1 and history[-1] > 1.0


def test_window_starts_again_when_the_server_restarts() -> None:
    win = MetricsWindow(window_s=60.0)
    win.add(sample(1.0, hist([5, 0, 0, 0, 0, 0, 0]), 5000.0), now=1.0)
    win.add(sample(2.0, hist([0, 0, 0, 0, 1, 0, 0]), 10.0), now=2.0)  # counters reset
    assert len(win.samples) == 1
    assert win.quantiles("ttft", now=2.0)[0.5] == pytest.approx(0.7)  # in (0.6, 0.8]


def test_a_failed_scrape_is_an_error_not_a_zero() -> None:
    win = MetricsWindow()
    win.add({"ok": False, "error": "/metrics answered HTTP 404", "interval": 1.0}, now=1.0)
    assert win.last_error == "/metrics answered HTTP 404" and not win.samples
    assert win.latest(now=1.0) is None


def test_latency_history_drops_when_no_request_is_in_the_window() -> None:
    """A sparkline of TTFT must not hold the last value for a minute with nothing behind it."""
    win = MetricsWindow(window_s=10.0)
    for k in range(40):
        done = min(k, 10) * 2.0  # two requests a second for 10 s, then none
        win.add(sample(1000.0 + k, hist([done, 0, 0, 0, 0, 0, 0]), 0.0), now=float(k))
    history = win.quantile_history("ttft", 0.5, points=40)
    assert history[5] > 0 and history[-1] == 0.0  # requests, then an empty window


def test_one_sample_is_not_a_window() -> None:
    """The first scrape's histogram counts every request since the server started: shown as
    'over the last minute' it would be a lie (server metrics --watch's first line did that)."""
    win = MetricsWindow(window_s=5.0)
    win.add(sample(1000.0, hist([21, 0, 0, 0, 0, 0, 0]), 100.0), now=0.0)
    assert win.quantiles("ttft", now=0.0)[0.5] is None
    win.add(sample(1001.0, hist([21, 0, 0, 0, 0, 0, 0]), 100.0), now=1.0)  # nothing new
    assert win.quantiles("ttft", now=1.0)[0.5] is None
    win.add(sample(1002.0, hist([23, 0, 0, 0, 0, 0, 0]), 100.0), now=2.0)  # two more
    assert win.histogram("ttft", now=2.0)["count"] == 2  # type: ignore[index]


def test_latency_history_is_kept_per_sample_and_equals_a_fresh_reading() -> None:
    """The sparkline's window quantiles are computed once per sample (not on every redraw):
    read again after more samples, and after a server restart, they equal what a window that
    never cached anything reads from the same samples."""
    import random

    rng = random.Random(5)
    win = MetricsWindow(keep_s=60.0, window_s=10.0)
    counts = [0.0] * 7
    for k in range(120):
        if k == 70:  # a restart: the counters start again
            counts = [0.0] * 7
        counts = [c + rng.randint(0, 3) for c in counts]
        win.add(sample(1000.0 + k * 10 if k < 70 else float(k), hist(counts), 0.0), now=float(k))
        if k % 7 == 0:
            fresh = MetricsWindow(keep_s=60.0, window_s=10.0)
            fresh.samples.extend(win.samples)
            for q in (0.5, 0.99):
                assert win.quantile_history("ttft", q) == fresh.quantile_history("ttft", q)
