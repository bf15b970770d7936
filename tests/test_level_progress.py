"""The running level's aggregate (the agent's ``level_progress``, agent/bench/progress.py) and
the one reducer (core/campaign/reducer.py): the same numbers as the final level, shown by the
Bench screen without going over the requests, and never stored as requests."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.agent.bench import progress, stats
from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.ingest import Collector
from dsv4tui.core.campaign.view import CampaignView, apply_campaign_event
from dsv4tui.core.store import RunStore
from dsv4tui.core.view import model as m


def requests(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ok = rng.random() > 0.1
        ttft = rng.uniform(0.02, 0.4)
        tokens = rng.choice([1, 2, 16, 64])
        out.append({"level": 0, "index": i, "ok": ok, "start_s": i * 0.05 + rng.random() * 0.01,
                    "e2e_s": ttft + tokens * rng.uniform(0.005, 0.02),
                    "ttft_s": ttft if ok else None, "output_tokens": tokens if ok else 0,
                    "error_kind": None if ok else "http_500"})
    return out


def test_the_running_aggregate_has_the_final_levels_numbers() -> None:
    reqs = requests(300)
    tally = progress.LevelTally(0, 8, 400)
    for k, r in enumerate(reqs, 1):
        tally.add(r)
        if k in (1, 37, 300):  # at any point: the level's formulas over the requests so far
            agg, final = tally.event(in_flight=5), stats.level_metrics(reqs[:k], 8, 400)
            for key in ("completed", "errors", "duration_s", "output_tokens", "output_tok_s",
                        "requests", "concurrency"):
                assert agg[key] == final[key], (k, key)
            assert agg["ttft_ms"] == {q: final["ttft_ms"][q] for q in ("p50", "p99")}
            assert agg["tpot_ms"]["p50"] == final["tpot_ms"]["p50"]
            assert agg["in_flight"] == 5 and set(agg) <= set(ev_t.LevelProgressEvent.__annotations__)


def test_the_aggregate_goes_out_only_when_a_request_finished() -> None:
    sent: list[dict[str, Any]] = []
    tally = progress.LevelTally(2, 1, 3)

    async def main() -> None:
        task = asyncio.ensure_future(progress.report(
            tally, lambda t, **f: sent.append({"type": t, **f}), lambda: 1, every=0.01))
        for r in requests(3):
            tally.add(r)
            while tally.changed:
                await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # ticks with nothing new: nothing sent
        task.cancel()

    asyncio.run(main())
    assert [e["completed"] + e["errors"] for e in sent] == [1, 2, 3]
    assert {e["type"] for e in sent} == {"level_progress"} and sent[0]["level"] == 2


class Record(reducer.Reader):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name in reducer.Reader.__dict__ and not name.startswith("_"):
            return lambda ev: self.seen.append(name) or name
        return super().__getattribute__(name)


def test_every_declared_event_has_one_callback_and_others_are_ignored() -> None:
    rec = Record()
    for name in ev_t.EVENTS:
        assert reducer.fold(rec, {"type": name}) is not None, name
    assert rec.seen.count("server_step") == 4  # stopping, stopped, started, status
    assert reducer.fold(rec, {"type": "frame"}) is None and reducer.fold(rec, {}) is None
    assert reducer.fold(reducer.Reader(), {"type": "level"}) is None
    assert reducer.is_journal_end({"type": "journal_end"})
    assert not reducer.is_journal_end({"type": "journal_pos"})


def sweep_view() -> tuple[m.SweepView, dict[int, m.LiveLevel]]:
    sw = m.SweepView(status="running", levels=[m.LevelRow(8, 400), m.LevelRow(16, 10)])
    live: dict[int, m.LiveLevel] = {}
    m.apply_sweep_event(sw, {"type": "level_start", "level": 0, "requests": 400}, live, 1.0)
    return sw, live


def test_the_bench_screen_shows_the_agents_aggregate_and_counts_requests_itself() -> None:
    sw, live = sweep_view()
    reqs = requests(50)
    for r in reqs[:40]:
        m.apply_sweep_event(sw, {"type": "request", **r}, live, 2.0)
    tally = progress.LevelTally(0, 8, 400)
    for r in reqs[:40]:
        tally.add(r)
    agg = {"type": "level_progress", **tally.event(in_flight=8)}
    assert not m.apply_sweep_event(sw, agg, live, 2.0)  # kept for the screen's next refresh
    for r in reqs[40:]:  # requests after the aggregate: the counts go on
        m.apply_sweep_event(sw, {"type": "request", **r}, live, 2.0)
    assert m.refresh_live_levels(sw, live) and not m.refresh_live_levels(sw, live)
    lv = sw.levels[0]
    assert lv.completed + lv.errors == 50
    assert (lv.out_tok_s, lv.ttft_p50_ms, lv.ttft_p99_ms, lv.tpot_p50_ms) == (
        agg["output_tok_s"], agg["ttft_ms"]["p50"], agg["ttft_ms"]["p99"], agg["tpot_ms"]["p50"])
    final = {"type": "level", "level": 0, **stats.level_metrics(reqs, 8, 400)}
    assert m.apply_sweep_event(sw, final, live, 3.0) and 0 not in live
    assert (lv.status, lv.out_tok_s, lv.completed) == ("done", final["output_tok_s"],
                                                        final["completed"])


def test_an_aggregate_of_a_level_the_view_does_not_have_changes_nothing() -> None:
    sw, live = sweep_view()
    assert not m.apply_sweep_event(sw, {"type": "level_progress", "level": 5}, live, 2.0)
    assert 5 not in live and not m.refresh_live_levels(sw, live)


def test_the_campaign_matrix_counts_requests_not_aggregates() -> None:
    cv = CampaignView(levels=[(8, 400)])
    apply_campaign_event(cv, {"type": "campaign_start", "plan": {"levels": [[8, 400]]},
                              "variants": [{"name": "a"}]}, 1.0)
    apply_campaign_event(cv, {"type": "level_start", "variant": 0, "level": 0}, 1.0)
    apply_campaign_event(cv, {"type": "request", "variant": 0, "level": 0, "ok": True}, 1.0)
    assert not apply_campaign_event(cv, {"type": "level_progress", "variant": 0, "level": 0,
                                         "completed": 99}, 1.0)
    assert cv.variants[0].cells[0].text() == "1/400"


def test_the_store_keeps_requests_and_levels_but_no_aggregate(tmp_path: Path) -> None:
    reqs = requests(5)
    with RunStore(tmp_path / "runs.db") as store:
        col = Collector(store, "h", "c1")
        col.apply_batch([
            {"type": "campaign_start", "variants": [{"name": "a"}], "plan": {}, "seq": 0},
            {"type": "run_start", "run": "v0.r0.a0", "variant": 0, "label": "a", "seq": 1},
            {"type": "level_start", "run": "v0.r0.a0", "level": 0, "seq": 2},
            *({"type": "request", "run": "v0.r0.a0", "seq": 3 + i, "concurrency": 8, **r}
              for i, r in enumerate(reqs[:3])),
            {"type": "level_progress", "run": "v0.r0.a0", "level": 0, "completed": 3,
             "seq": 6},
            *({"type": "request", "run": "v0.r0.a0", "seq": 7 + i, "concurrency": 8, **r}
              for i, r in enumerate(reqs[3:], 3)),
            {"type": "level", "run": "v0.r0.a0", "seq": 9, "level": 0,
             **stats.level_metrics(reqs, 8, 5)},
        ])
        rid = col.runs["v0.r0.a0"]
        assert sorted(r["index"] for r in store.requests(rid)) == list(range(5))
        assert [lv.idx for lv in store.levels(rid)] == [0]
        assert not col.detail["bad_events"]
