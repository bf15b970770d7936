"""The dashboard's work per second for a running level, at 1k and at 50k requests done.

One second of a level in progress is what the console does in it: ``--rate`` request events
and one ``level_progress`` (the agent's aggregate) through the journal reducer
(core/view/journal.journal_event, what the App calls), and two refreshes of the running level
(``refresh_live_levels``, the App's 0.5 s tick). No Textual. It also prints what the old
refresh cost (the level's metrics recomputed over every request, twice a second) and the
agent's cost of keeping the aggregate (µs per request).

    PYTHONPATH=. python3 benchmarks/ui_scale.py [--rate 200] [--seconds 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from dsv4tui.agent.bench import progress, stats
from dsv4tui.core.view import journal
from dsv4tui.core.view import model as m

CID = "c1"


def request(i: int, rng: random.Random) -> dict[str, Any]:
    ttft = rng.uniform(0.05, 0.4)
    tokens = 256
    gaps = [round(rng.uniform(4, 12), 3) for _ in range(31)]
    return {"type": "request", "run": "v0.r0.a0", "variant": 0, "level": 0, "concurrency": 64,
            "index": i, "ok": True, "start_s": i * 0.01, "e2e_s": ttft + tokens * 0.008,
            "ttft_s": ttft, "tpot_s": 0.008, "output_tokens": tokens, "token_source": "usage",
            "prompt_tokens": 1024, "chunks": 32, "chunk_gaps_ms": gaps, "error_kind": None}


def setup(done: int, total: int) -> tuple[m.UiModel, dict[int, m.LiveLevel],
                                          progress.LevelTally, random.Random]:
    model, live = m.UiModel(), {}
    model.campaign.id = CID
    rng = random.Random(1)
    plan = {"levels": [[64, total]], "input_len": 1024, "output_len": 256}
    for ev in ({"type": "campaign_start", "plan": plan, "variants": [{"name": "a"}]},
               {"type": "variant_start", "variant": 0, "name": "a"},
               {"type": "run_start", "run": "v0.r0.a0", "variant": 0, "label": "a",
                "plan": plan},
               {"type": "level_start", "run": "v0.r0.a0", "variant": 0, "level": 0,
                "concurrency": 64, "requests": total}):
        journal.journal_event(model, ev, 0.0, live, watched=CID)
    tally = progress.LevelTally(0, 64, total)
    for i in range(done):
        ev = request(i, rng)
        tally.add(ev)
        journal.journal_event(model, ev, 0.0, live, watched=CID)
    return model, live, tally, rng


def one_second(model: m.UiModel, live: dict[int, m.LiveLevel], tally: progress.LevelTally,
               rng: random.Random, rate: int, start: int) -> float:
    """Seconds of console work for one second of the level (the tally's updates excluded:
    they are the agent's)."""
    evs = [request(start + k, rng) for k in range(rate)]
    for ev in evs:
        tally.add(ev)
    agg = {"type": "level_progress", "run": "v0.r0.a0", "variant": 0,
           **tally.event(in_flight=64)}
    t0 = time.perf_counter()
    for ev in evs[: rate // 2]:
        journal.journal_event(model, ev, 1.0, live, watched=CID)
    m.refresh_live_levels(model.sweep, live)
    for ev in evs[rate // 2:]:
        journal.journal_event(model, ev, 1.0, live, watched=CID)
    journal.journal_event(model, agg, 1.0, live, watched=CID)
    m.refresh_live_levels(model.sweep, live)
    return time.perf_counter() - t0


def measure(done: int, rate: int, seconds: int) -> dict[str, float]:
    total = done + rate * (seconds + 1)
    model, live, tally, rng = setup(done, total)
    works = [one_second(model, live, tally, rng, rate, done + s * rate) for s in range(seconds)]
    assert model.sweep.levels[0].out_tok_s is not None, "the aggregate was shown"
    reqs = [request(i, random.Random(2)) for i in range(done)]
    t0 = time.perf_counter()
    stats.level_metrics(reqs, 64, total)
    old = 2 * (time.perf_counter() - t0)  # the old refresh: every request, twice a second
    agent = progress.LevelTally(0, 64, done)
    t0 = time.perf_counter()
    for r in reqs:
        agent.add(r)
    tally_us = (time.perf_counter() - t0) / max(1, done) * 1e6
    return {"work_ms": statistics.median(works) * 1e3, "old_ms": old * 1e3,
            "tally_us": tally_us}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=200, help="request events per second")
    ap.add_argument("--seconds", type=int, default=20, help="seconds measured per size")
    args = ap.parse_args()
    out = {}
    for done in (1_000, 50_000):
        r = out[done] = measure(done, args.rate, args.seconds)
        print(f"{done:>6,} requests done: console work {r['work_ms']:.2f} ms per second of "
              f"the level ({args.rate} request events + 1 aggregate + 2 refreshes, median of "
              f"{args.seconds}); the old recompute {r['old_ms']:.1f} ms per second; the "
              f"agent's aggregate {r['tally_us']:.2f} µs per request")
    ratio = out[50_000]["work_ms"] / out[1_000]["work_ms"]
    old = out[50_000]["old_ms"] / out[1_000]["old_ms"]
    print(f"ratio 50k / 1k: {ratio:.2f} (goal <= 1.3; the old recompute's: {old:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
