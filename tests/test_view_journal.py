"""A watched campaign's journal into the views (dsv4tui.core.view.journal) and the Bench
screen's sweep (dsv4tui.core.view.sweeps), without Textual; the sweep rebuilt from a real
SQLite store."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from dsv4tui.core.campaign.view import CampaignView, VariantView
from dsv4tui.core.config import SweepPlan
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.core.view import journal, sweeps
from dsv4tui.core.view.model import LevelRow, LiveLevel, SweepView, UiModel
from dsv4tui.core.view.parts import CAMPAIGN, SANITY, SERVER, STARTUP, SWEEP

RUN_START = {"type": "run_start", "label": "MXFP4_triton",
             "plan": {"levels": [[1, 4], [8, 16]], "rates": [[2.5, 10]], "max_concurrency": 8,
                      "input_len": 64, "output_len": 32},
             "meta": {"backend": "triton", "checkpoint": "MXFP4"}}


def event(model: UiModel, ev: dict[str, object], watched: str | None = "c1",
          live: dict[int, LiveLevel] | None = None) -> journal.Effects:
    return journal.journal_event(model, ev, 100.0, live if live is not None else {},
                                 watched=watched)


def test_a_runs_start_shows_its_levels_the_open_loop_ones_last() -> None:
    model, live = UiModel(), {0: LiveLevel()}
    model.conn.host = "demo"
    fx = event(model, RUN_START, live=live)
    sw = model.sweep
    assert {SWEEP, SANITY} <= fx.parts and not live
    assert [(lv.concurrency, lv.requests) for lv in sw.levels] == [(1, 4), (8, 16), (8, 10)]
    assert (sw.host, sw.backend, sw.rates, sw.started) == ("demo", "triton", [(2.5, 10)], 100.0)
    assert model.sanity.status == "running" and model.sanity.checkpoint == "MXFP4"


def test_a_sweep_this_console_started_keeps_its_start_time() -> None:
    old = SweepView(status="starting", label="MXFP4_triton", started=42.0)
    assert sweeps.for_run_start(RUN_START, old, "demo", 100.0).started == 42.0
    other = SweepView(status="starting", label="another", started=42.0)
    assert sweeps.for_run_start(RUN_START, other, "demo", 100.0).started == 100.0


def test_a_new_variant_forgets_the_last_ones_sanity_answer() -> None:
    model = UiModel()
    model.sanity.status = "passed"
    assert SANITY in event(model, {"type": "variant_start"}).parts
    assert model.sanity.status == "idle"


def test_a_campaigns_launch_is_the_launch_screens_and_its_end_asks_for_the_status() -> None:
    model = UiModel()
    fx = event(model, {"type": "launch_start", "profile_name": "nvfp4", "backend": "marlin"})
    assert fx.parts == {STARTUP, SERVER} and model.startup.status == "stopping"
    fx = event(model, {"type": "started", "launch": 1, "pid": 7, "log": "/l/s.log"})
    assert fx.follow_log == "/l/s.log" and model.server.state == "starting"
    fx = event(model, {"type": "launch_end", "ok": True})
    assert fx.refresh_status and model.server.state == "ready"
    assert model.startup.status == "ready"


def test_a_stored_run_rereads_the_run_list() -> None:
    fx = event(UiModel(), {"type": "run_stored", "run_id": 3})
    assert fx.run_stored
    assert not event(UiModel(), {"type": "run_stored"}).run_stored


def test_the_watched_campaigns_events_reach_its_matrix_only() -> None:
    model = UiModel()
    model.campaign = CampaignView(state="running", id="c1", variants=[VariantView("a", "a")])
    assert CAMPAIGN in event(model, {"type": "variant_start", "variant": 0}).parts
    assert CAMPAIGN not in event(model, {"type": "variant_start", "variant": 0},
                                 watched="c2").parts


def test_host_times_land_on_our_clock_even_when_the_host_is_ahead() -> None:
    clock = journal.HostClock()
    assert clock.mono({}, 50.0) == 50.0  # no time: now
    wall = time.time()
    assert abs(clock.mono({"t": wall - 10}, 50.0) - 40.0) < 1.0
    clock.mono({"t": wall + 30}, 50.0)  # the host's clock is 30 s ahead
    assert abs(clock.mono({"t": wall + 20}, 50.0) - 40.0) < 1.0


def test_a_campaigns_status_times_are_on_our_clock() -> None:
    cv = CampaignView(variants=[VariantView("a", "a"), VariantView("b", "b")])
    info = {"created_at": 900.0, "variants": [{"started_at": 950.0, "ended_at": 990.0}, {}]}
    journal.campaign_times(cv, info, 500.0, 1000.0)
    assert (cv.started, cv.ended) == (400.0, None)
    assert (cv.variants[0].started, cv.variants[0].ended) == (450.0, 490.0)
    assert cv.variants[1].started is None


def test_a_lost_link_and_a_console_that_stops_watching_are_said() -> None:
    model = UiModel()
    model.conn.host = "box"
    model.sweep.status = "running"
    assert journal.link_lost(model) == (SWEEP, CAMPAIGN)
    assert "goes on on box; reconnecting" in str(model.sweep.detail)
    journal.detached(model)
    assert model.sweep.status == "detached" and model.campaign.state == "idle"


def test_a_campaigns_end_counts_its_variants() -> None:
    cv = CampaignView(state="done", name="two", variants=[
        VariantView("a", "a", state="done"), VariantView("b", "b", state="failed")])
    notice = journal.campaign_summary(cv)
    assert notice.text == "campaign two: done (1 done, 1 failed)" and notice.severity == "error"


def test_a_sweep_from_the_plan_starts_with_its_levels_pending() -> None:
    sw = sweeps.for_plan("x", SweepPlan(levels=[(1, 2), (4, 4)], rates=[(1.5, 3)]), "h", 5.0)
    assert [lv.status for lv in sw.levels] == ["pending"] * 3 and sw.status == "starting"


def test_a_sweeps_end_says_its_best_or_why_it_failed() -> None:
    model = UiModel()
    model.sweep = SweepView(status="running", label="x", levels=[LevelRow(1, 2,
                                                                          out_tok_s=12.34)])
    done = sweeps.ended(model, SimpleNamespace(sanity=None, status="done", error=None))
    assert done is not None and done.text == "x: best 12.3 tok/s"
    failed = sweeps.ended(model, SimpleNamespace(
        sanity=SimpleNamespace(error="no answer"), status="failed", error="sanity failed"))
    assert failed is not None and failed.severity == "error" and failed.title == "sweep failed"
    assert model.sanity.status == "error" and model.sanity.detail == "no answer"


def test_a_sweep_the_console_stops_watching_shows_no_level_running() -> None:
    sw = SweepView(levels=[LevelRow(1, 2, status="done"), LevelRow(4, 4, status="running")])
    sweeps.stopped(sw, 9.0)
    assert [lv.status for lv in sw.levels] == ["done", "stopped"] and sw.ended == 9.0


def test_a_running_sweep_is_rebuilt_from_what_the_store_holds(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite3") as store:
        cstore.ensure(store, "c1", host="demo", name="x", kind="sweep")
        rid = cstore.add_run(store, "c1", "v0/r0", label="x", host="demo",
                             meta={"backend": "triton", "checkpoint": "MXFP4"}, url=None,
                             model=None, plan=None, variant="v0", repeat=0, launch_id=None,
                             gpu_names=[], simulated=True)
        store.add_level(rid, {"level": 0, "concurrency": 1, "requests": 2, "completed": 2,
                              "errors": 0, "output_tok_s": 20.0})
        for i, ok in enumerate((True, True, False)):
            store.add_request(rid, {"level": 1, "index": i, "ok": ok})
        info = {"id": "c1", "name": "x", "plan": {"levels": [[1, 2], [4, 4]]},
                "variants": [{"runs": ["v0/r0"]}]}
        sw = sweeps.from_store(info, store, "demo")
    assert sw.run_id == rid and sw.label == "x"
    first, second = sw.levels
    assert first.status == "done" and first.out_tok_s == 20.0
    assert (second.status, second.completed, second.errors) == ("running", 2, 1)
