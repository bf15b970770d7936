"""Planning a campaign's repeats (``campaign start --dry-run``): how long they take and which
effect they could resolve, from what the store holds of the same variants' earlier runs.

Time: the mean of the variants' earlier runs (run start to end) plus their launches' startup,
times the number of (variant, repeat) steps. Resolution: the run-to-run spread of an earlier
set of repeats of one variant (the sd of the log output tok/s at its highest C, over restarts:
``verdict.spread_pct``), and the half-width ``verdict.detectable_pct`` of the interval k
repeats a side would give with it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign.verdict import detectable_pct, spread_pct

if TYPE_CHECKING:
    from dsv4tui.core.store.runstore import RunStore

EXAMPLE_SPREAD_PCT = 5.0  # what the lines say when no earlier repeats tell the spread


def plan_lines(store: RunStore, labels: Sequence[str], repeats: int) -> list[str]:
    """What ``campaign start --dry-run`` prints about the repeats."""
    facts = plan_facts(store, labels, repeats)
    out = []
    steps = facts["steps"]
    if facts["step_s"] is not None:
        total = facts["step_s"] * steps
        out.append(f"  time: {steps} restarts + sweeps, ~{_duration(facts['step_s'])} each "
                   f"from earlier runs of these variants: ~{_duration(total)} in all")
    else:
        out.append(f"  time: {steps} restarts + sweeps (no earlier runs of these variants "
                   "to estimate their length from)")
    if repeats < 2:
        out.append("  verdicts: one run per variant gives no interval (repeats = 2 or more, "
                   "each on a fresh server, give one)")
        return out
    spread, source = facts["spread_pct"], facts["spread_source"]
    if spread is not None:
        half = detectable_pct(spread, repeats)
        out.append(f"  verdicts: the run-to-run spread of {source} was {spread:.1f} %; with "
                   f"{repeats} repeats a side the 95 % interval is about ±{half:.1f} %, so "
                   f"a difference smaller than that reads as 'no detectable difference'")
    else:
        half = detectable_pct(EXAMPLE_SPREAD_PCT, repeats)
        out.append(f"  verdicts: no earlier repeats of these variants tell their run-to-run "
                   f"spread; at {EXAMPLE_SPREAD_PCT:g} % spread, {repeats} repeats a side "
                   f"resolve about ±{half:.1f} %")
    return out


def plan_facts(store: RunStore, labels: Sequence[str], repeats: int) -> dict[str, Any]:
    """``{"steps", "step_s" (None: unknown), "spread_pct" (None: unknown), "spread_source"}``."""
    spans: list[float] = []
    best: tuple[int, float, str] | None = None  # (repeats, spread, text)
    for label in labels:
        runs = [r for r in store.runs(label=label) if r.status in ("done", "partial")]
        for r in runs[:5]:
            if r.finished_at is not None:
                span = r.finished_at - r.started_at
                if r.launch_id is not None:
                    rows = store.query("SELECT startup_s FROM launches WHERE id = ?",
                                       (r.launch_id,))
                    span += float(rows[0]["startup_s"] or 0.0) if rows else 0.0
                spans.append(span)
        by_campaign: dict[str, list[Any]] = {}
        for r in runs:
            if r.campaign_id:
                by_campaign.setdefault(r.campaign_id, []).append(r)
        for cid, group in by_campaign.items():
            if len(group) < 2:
                continue
            tops = []
            for r in group:
                levels = [lv for lv in store.levels(r.id) if lv.output_tok_s]
                if levels:
                    tops.append(max(levels, key=lambda lv: lv.concurrency).output_tok_s)
            s = spread_pct(tops)
            if s is not None and (best is None or len(tops) > best[0]):
                best = (len(tops), s, f"{label}'s {len(tops)} repeats (campaign {cid})")
    return {"steps": len(labels) * repeats,
            "step_s": statistics.fmean(spans) if spans else None,
            "spread_pct": best[1] if best else None, "spread_source": best[2] if best else None}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
