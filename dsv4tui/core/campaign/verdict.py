"""Is a variant really faster? An effect with a 95 % confidence interval across restarts.

The unit of replication is a server process: each repeat of a campaign restarts the server, so
the spread between repeats is the run-to-run (between-restart) spread, the part of the noise a
single sweep cannot show (docs/metrics.md, "Verdicts").

:func:`speed_effect` compares one number (output tok/s, TTFT p50, TPOT p50) of a variant's
repeats with the baseline's: Welch's t on the logs of the per-repeat values. The difference of
the log means is the log of the ratio of geometric means, so the interval of the difference,
exponentiated, is an interval of the ratio, and ``100 * (ratio - 1)`` the change in %. Welch
does not assume the two variants spread alike; its degrees of freedom are Welch-Satterthwaite's.
:func:`t_quantile` is Student's t quantile from the regularized incomplete beta function
(stdlib only; checked against table values in the tests).

:func:`share_effect` is the same question for an accuracy canary's share correct (a Wilson
interval per side, Newcombe's interval of the difference).

Pure: no store, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsv4tui.agent.bench.canary import wilson

LEVEL = 0.95
FASTER, SLOWER, SAME = "faster", "slower", "no detectable difference"
BETTER, WORSE = "better", "worse"
ONE_RUN = "one run each: no interval (repeats = 2 or more gives one)"

# which way is better for the numbers a verdict is given on
HIGHER_IS_BETTER = {"output_tok_s": True, "ttft_p50_ms": False, "tpot_p50_ms": False}
VERDICT_KEYS = tuple(HIGHER_IS_BETTER)


# -- Student's t ---------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom must be > 0")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with ``P(T <= t) = p`` (bisection on :func:`t_cdf`; to ~1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _pct(log_ratio: float) -> float:
    return 100.0 * math.expm1(log_ratio)


# -- speed -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Effect:
    """One number of a variant against the baseline's, across their repeats."""

    key: str
    n_variant: int
    n_baseline: int
    change_pct: float | None  # ratio of geometric means - 1, in %
    ci_low: float | None = None  # % (None: no interval)
    ci_high: float | None = None
    verdict: str | None = None  # FASTER / SLOWER / SAME (BETTER / WORSE for a share)
    detectable_pct: float | None = None  # the half-width: the smallest effect these could see
    df: float | None = None
    note: str | None = None  # why there is no interval

    @property
    def n_repeats(self) -> int:
        return min(self.n_variant, self.n_baseline)

    def text(self) -> str:
        """``+4.1 % [+1.2, +7.0] faster (n=3/3)`` or ``+0.7 % (one run each: no interval ...)``."""
        if self.change_pct is None:
            return "-"
        head = f"{self.change_pct:+.1f} %"
        if self.ci_low is None or self.ci_high is None:
            return f"{head} ({self.note or ONE_RUN})"
        tail = f"n={self.n_variant}/{self.n_baseline}"
        if self.verdict == SAME and self.detectable_pct is not None:
            tail += f"; could see ±{self.detectable_pct:.1f} %"
        return f"{head} [{self.ci_low:+.1f}, {self.ci_high:+.1f}] {self.verdict} ({tail})"

    def to_json(self) -> dict[str, Any]:
        r = _round
        return {"key": self.key, "change_pct": r(self.change_pct), "ci_low": r(self.ci_low),
                "ci_high": r(self.ci_high), "verdict": self.verdict,
                "n_repeats": self.n_repeats, "n_variant": self.n_variant,
                "n_baseline": self.n_baseline, "detectable_pct": r(self.detectable_pct),
                "df": r(self.df), "note": self.note}


def _round(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]


def speed_effect(key: str, variant: Sequence[float | None], baseline: Sequence[float | None],
                 level: float = LEVEL) -> Effect:
    """``key``'s change of ``variant``'s repeats against ``baseline``'s with a ``level``
    interval (Welch on logs) and a verdict. Fewer than two values on a side: no interval."""
    a, b = _clean(variant), _clean(baseline)
    if not a or not b:
        return Effect(key, len(a), len(b), None, note="not measured")
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    diff = statistics.fmean(la) - statistics.fmean(lb)
    if len(a) < 2 or len(b) < 2:
        note = ONE_RUN if len(a) == len(b) == 1 else (
            f"{len(a)} against {len(b)} runs: an interval needs 2 or more on each side")
        return Effect(key, len(a), len(b), _pct(diff), note=note)
    va, vb = statistics.variance(la) / len(a), statistics.variance(lb) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:  # identical repeats (a deterministic server): the interval is the point
        df = float(len(a) + len(b) - 2)
        half = 0.0
    else:
        df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
        half = t_quantile(0.5 + level / 2.0, df) * se
    low, high = diff - half, diff + half
    higher = HIGHER_IS_BETTER.get(key, True)
    if low > 0:
        verdict = FASTER if higher else SLOWER
    elif high < 0:
        verdict = SLOWER if higher else FASTER
    else:
        verdict = SAME
    return Effect(key, len(a), len(b), _pct(diff), _pct(low), _pct(high), verdict,
                  _pct(half), df)


def detectable_pct(spread_pct: float, repeats: int, level: float = LEVEL) -> float | None:
    """Planning: the half-width (in %) of the interval ``repeats`` per side would give when
    one run's log-spread (its sd, as a % of speed) is ``spread_pct``; None below 2 repeats."""
    if repeats < 2:
        return None
    s = math.log1p(spread_pct / 100.0)
    se = s * math.sqrt(2.0 / repeats)
    return _pct(t_quantile(0.5 + level / 2.0, 2.0 * (repeats - 1)) * se)


def spread_pct(values: Sequence[float | None]) -> float | None:
    """The run-to-run spread of one variant's repeats: the sd of their logs, as a %."""
    v = _clean(values)
    if len(v) < 2:
        return None
    return _pct(statistics.stdev(math.log(x) for x in v))


# -- shares (the accuracy canary) ---------------------------------------------------------------

def share_effect(correct: int, n: int, base_correct: int, base_n: int,
                 level: float = LEVEL) -> Effect:
    """A canary's share correct against the baseline's, in percentage points: Newcombe's
    interval of the difference (from the two Wilson intervals) and better / worse / no
    detectable difference."""
    if n <= 0 or base_n <= 0:
        return Effect("canary", n, base_n, None, note="not measured")
    p1, p2 = correct / n, base_correct / base_n
    l1, u1 = wilson(correct, n, level)
    l2, u2 = wilson(base_correct, base_n, level)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    verdict = BETTER if low > 0 else WORSE if high < 0 else SAME
    return Effect("canary", n, base_n, 100 * d, 100 * low, 100 * high, verdict,
                  100 * max(d - low, high - d))


# -- variants (runs grouped by label) against the baseline ---------------------------------------

Load = tuple[int, "float | None"]


@dataclass(frozen=True)
class VerdictRow:
    """One variant against the baseline at one load: an :class:`Effect` per number."""

    label: str
    baseline_label: str
    load: Load
    run_ids: tuple[int, ...]
    baseline_run_ids: tuple[int, ...]
    effects: dict[str, Effect]

    @property
    def concurrency(self) -> int:
        return self.load[0]

    @property
    def headline(self) -> Effect:
        """Output tok/s: the number the verdict is given on."""
        return self.effects["output_tok_s"]

    def to_json(self) -> dict[str, Any]:
        h = self.headline
        return {"label": self.label, "baseline_label": self.baseline_label,
                "concurrency": self.load[0], "rate": self.load[1],
                "run_ids": list(self.run_ids), "baseline_run_ids": list(self.baseline_run_ids),
                "n_repeats": h.n_repeats, "change_pct": _round(h.change_pct),
                "ci_low": _round(h.ci_low), "ci_high": _round(h.ci_high),
                "verdict": h.verdict, "detectable_pct": _round(h.detectable_pct),
                "note": h.note, "effects": {k: e.to_json() for k, e in self.effects.items()}}


def group_verdicts(groups: Sequence[tuple[str, Sequence[tuple[int, Any]]]], baseline: str,
                   loads: Sequence[Load]) -> list[VerdictRow]:
    """``groups``: (label, [(run id, {load: point}) per repeat]) in order; ``point.get(key)``
    gives a number. Every label but ``baseline`` against it, at each load both measured."""
    by_label = dict(groups)
    base = by_label.get(baseline)
    if base is None:
        return []
    out = []
    for label, runs in groups:
        if label == baseline:
            continue
        for load in loads:
            mine = [(rid, pts[load]) for rid, pts in runs if load in pts]
            theirs = [(rid, pts[load]) for rid, pts in base if load in pts]
            if not mine or not theirs:
                continue
            effects = {k: speed_effect(k, [p.get(k) for _, p in mine],
                                       [p.get(k) for _, p in theirs]) for k in VERDICT_KEYS}
            out.append(VerdictRow(label, baseline, load, tuple(r for r, _ in mine),
                                  tuple(r for r, _ in theirs), effects))
    return out


def verdict_lines(rows: Sequence[VerdictRow], load_text: Any = None) -> list[str]:
    """The verdicts as the CLI prints them (one line per variant and load)."""
    if not rows:
        return []
    lt = load_text or (lambda load: f"C={load[0]}")
    lines = [f"verdicts against {rows[0].baseline_label} (95 % interval across restarts: "
             "Welch on log values, docs/metrics.md):"]
    for row in rows:
        e = row.effects
        lines.append(f"  {row.label} {lt(row.load)}: tok/s {e['output_tok_s'].text()}")
        if e["output_tok_s"].ci_low is not None:
            lines.append(f"      TTFT p50 {e['ttft_p50_ms'].text()}; "
                         f"TPOT p50 {e['tpot_p50_ms'].text()}")
    return lines


@dataclass(frozen=True)
class CanaryRow:
    """One label's accuracy canary, and against the baseline's (None for the baseline)."""

    label: str
    run_id: int
    correct: int
    total: int
    low: float  # Wilson, 0..1
    high: float
    effect: Effect | None  # in points of share correct
    gate: dict[str, Any] | None  # the runner's canary_gate (passed, drop_points, margin, action)

    @property
    def share(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def text(self) -> str:
        head = (f"{self.label}: {self.correct}/{self.total} correct ({100 * self.share:.1f} % "
                f"[{100 * self.low:.1f}, {100 * self.high:.1f}])")
        if self.effect is None:
            return head + " <- baseline"
        e = self.effect
        out = (f"{head}: {e.change_pct:+.1f} points [{e.ci_low:+.1f}, {e.ci_high:+.1f}] "
               f"{e.verdict}")
        if self.gate is not None and self.gate.get("passed") is False:
            out += (f"; gate FAILED (drop {self.gate.get('drop_points')} > margin "
                    f"{self.gate.get('margin')} points"
                    + (", sweep skipped)" if self.gate.get("action") == "skip" else
                       ", marked)"))
        return out

    def to_json(self) -> dict[str, Any]:
        e = self.effect
        return {"label": self.label, "run_id": self.run_id, "correct": self.correct,
                "total": self.total, "share": round(self.share, 4),
                "low": round(self.low, 4), "high": round(self.high, 4),
                "change_points": _round(e.change_pct) if e else None,
                "ci_low": _round(e.ci_low) if e else None,
                "ci_high": _round(e.ci_high) if e else None,
                "verdict": e.verdict if e else None,
                "gate_passed": None if self.gate is None else self.gate.get("passed"),
                "gate": self.gate}


def canary_rows(runs: Sequence[tuple[str, tuple[int, Any]]], baseline: str) -> list[CanaryRow]:
    """(label, (run id, stored canary)) in order: the baseline first, then the others."""
    by = dict(runs)
    base = by.get(baseline)
    out = []
    order = ([baseline] if base else []) + [label for label, _ in runs if label != baseline]
    for label in order:
        rid, c = by[label]
        correct, total = int(c.get("correct") or 0), int(c.get("total") or 0)
        low, high = wilson(correct, total)
        effect = None
        if label != baseline and base is not None:
            b = base[1]
            effect = share_effect(correct, total, int(b.get("correct") or 0),
                                  int(b.get("total") or 0))
        gate = c.get("gate")
        out.append(CanaryRow(label, rid, correct, total, low, high, effect,
                             dict(gate) if isinstance(gate, dict) else None))
    return out


def canary_lines(rows: Sequence[CanaryRow]) -> list[str]:
    if not rows:
        return []
    return ["accuracy canary (share correct, Wilson 95 %; against the baseline: Newcombe):",
            *[f"  {r.text()}" for r in rows]]


def _interval(e: Effect) -> str:
    if e.change_pct is None:
        return "-"
    if e.ci_low is None or e.ci_high is None:
        return f"{e.change_pct:+.1f} % (no interval)"
    return f"{e.change_pct:+.1f} % [{e.ci_low:+.1f}, {e.ci_high:+.1f}]"


VERDICT_HEAD = ("variant", "load", "repeats", "tok/s change [95 %]", "verdict",
                "could see", "TTFT p50 [95 %]", "TPOT p50 [95 %]")


def verdict_table(rows: Sequence[VerdictRow], load_text: Any = None) -> list[list[str]]:
    """The verdicts as table rows (reports): :data:`VERDICT_HEAD`'s columns."""
    lt = load_text or (lambda load: f"C={load[0]}")
    out = []
    for r in rows:
        h = r.headline
        out.append([r.label, lt(r.load), f"{h.n_variant}/{h.n_baseline}", _interval(h),
                    h.verdict or (h.note or ONE_RUN),
                    f"±{h.detectable_pct:.1f} %" if h.detectable_pct is not None else "-",
                    _interval(r.effects["ttft_p50_ms"]), _interval(r.effects["tpot_p50_ms"])])
    return out
