"""Verdicts across restarts (core/campaign/verdict.py): Student's t against table values, the
interval's coverage and the A/A false-alarm rate over many simulated comparisons drawn from the
simulator's own run-to-run noise model (sim/speed.run_factor), and the share (canary) verdict."""

from __future__ import annotations

import math
import random

import pytest

from dsv4tui.core.campaign import verdict as vd
from dsv4tui.sim.speed import run_factor


@pytest.mark.parametrize(("p", "df", "want"), [
    (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 5, 2.571),
    (0.975, 10, 2.228), (0.975, 30, 2.042), (0.95, 4, 2.132), (0.995, 8, 3.355),
    (0.975, 2.5, 3.5747), (0.975, 7.3, 2.3451),  # fractional df (Welch), from scipy
])
def test_t_quantile_matches_the_table(p, df, want):
    assert vd.t_quantile(p, df) == pytest.approx(want, abs=2e-3)
    assert vd.t_quantile(1 - p, df) == pytest.approx(-want, abs=2e-3)


def test_betainc_against_scipy_value():
    assert vd.betainc(2.5, 0.5, 0.3) == pytest.approx(0.0189271, abs=1e-6)


def _repeats(rng: random.Random, speed: float, n: int, noise_pct: float) -> list[float]:
    """n restarts of one variant: each process's speed factor (the simulator's noise model)
    times the backend's speed, plus a small within-run measurement noise."""
    return [speed * run_factor(noise_pct, rng) * math.exp(rng.gauss(0, 0.01))
            for _ in range(n)]


@pytest.mark.parametrize("n", [2, 3, 5])
def test_interval_covers_the_true_effect_and_aa_finds_no_difference(n):
    rng = random.Random(20261202 + n)
    trials, covered, aa_same, detected = 2000, 0, 0, 0
    true = 5.0  # B is 5 % faster than A
    for _ in range(trials):
        a = _repeats(rng, 28.7, n, 8.0)
        b = _repeats(rng, 28.7 * 1.05, n, 8.0)
        e = vd.speed_effect("output_tok_s", b, a)
        assert e.ci_low is not None and e.ci_high is not None
        covered += e.ci_low <= true <= e.ci_high
        detected += e.verdict == vd.FASTER
        a2 = _repeats(rng, 28.7, n, 8.0)
        aa_same += vd.speed_effect("output_tok_s", a2, a).verdict == vd.SAME
    coverage, aa = covered / trials, aa_same / trials
    print(f"n={n}: A/B coverage {100 * coverage:.1f} % over {trials} trials, "
          f"A/A 'no difference' {100 * aa:.1f} %, 5 % effect detected {100 * detected / trials:.1f} %")
    assert coverage >= 0.93
    assert aa >= 0.93


def test_verdict_direction_follows_the_metric():
    fast = [30.0, 30.3, 29.8]
    slow = [25.0, 25.2, 24.9]
    assert vd.speed_effect("output_tok_s", fast, slow).verdict == vd.FASTER
    assert vd.speed_effect("output_tok_s", slow, fast).verdict == vd.SLOWER
    # a lower TPOT is faster
    assert vd.speed_effect("tpot_p50_ms", slow, fast).verdict == vd.FASTER
    e = vd.speed_effect("output_tok_s", fast, slow)
    assert e.change_pct == pytest.approx(100 * (math.exp(
        sum(map(math.log, fast)) / 3 - sum(map(math.log, slow)) / 3) - 1))
    assert e.ci_low < e.change_pct < e.ci_high
    assert e.n_repeats == 3 and "faster" in e.text() and "[" in e.text()


def test_one_run_each_has_no_interval_and_says_so():
    e = vd.speed_effect("output_tok_s", [28.5], [28.7])
    assert e.ci_low is None and e.ci_high is None and e.verdict is None
    assert e.change_pct == pytest.approx(-0.697, abs=0.01)
    assert "no interval" in e.text()
    assert e.to_json()["verdict"] is None and e.to_json()["n_repeats"] == 1


def test_no_difference_says_what_the_repeats_could_have_seen():
    e = vd.speed_effect("output_tok_s", [28.5, 29.9, 27.1], [28.7, 27.5, 30.0])
    assert e.verdict == vd.SAME
    assert e.detectable_pct is not None and e.detectable_pct > 5
    assert f"±{e.detectable_pct:.1f} %" in e.text()


def test_planning_half_width_shrinks_with_repeats():
    widths = [vd.detectable_pct(8.0, k) for k in (2, 3, 5, 10)]
    assert vd.detectable_pct(8.0, 1) is None
    assert all(w is not None for w in widths)
    assert widths == sorted(widths, reverse=True)
    assert vd.spread_pct([100.0, 100.0]) == 0.0


def test_wilson_and_share_effect():
    low, high = vd.wilson(90, 100)
    assert low == pytest.approx(0.8256, abs=1e-3) and high == pytest.approx(0.9448, abs=1e-3)
    assert vd.share_effect(90, 100, 100, 100).verdict == vd.WORSE
    assert vd.share_effect(99, 100, 100, 100).verdict == vd.SAME
