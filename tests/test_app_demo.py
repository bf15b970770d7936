"""The whole campaign loop, driven by keys, against the demo host: the real agent (subprocess),
the real simulator (its own process group), a real SQLite store in the test's data dir.

One test, one app (each start of the app costs seconds): connect -> switch backend (b) ->
restart to ready -> sanity pass -> sweep (w) to the end -> switch profile (p) -> second sweep
-> compare the two runs (5, space, c) -> export -> a long sweep: quit (q) asks, x cancels it
-> a profile whose answers are wrong fails the sanity gate -> a server that cannot start
gives one error dialog, never a crash.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.pilot import until
from plugins.sim import free_port, sim_profile
from textual.widgets import Input

from dsv4tui.core.config import HostConfig, Settings, SweepPlan
from dsv4tui.core.hosts.resolve import HostSpec, demo_env
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.screens.modals import ConfirmScreen, ErrorScreen, PickerScreen, SweepPlanScreen
from dsv4tui.tui.screens.runs import CompareScreen, RunsBody

pytestmark = pytest.mark.timeout(180)



@pytest.fixture
def demo_spec(isolated_env: Path) -> Iterator[HostSpec]:
    port = free_port()
    config = HostConfig(profiles={
        "mxfp4": sim_profile(port, checkpoint="MXFP4"),
        "nvfp4": sim_profile(port, checkpoint="NVFP4", backend="marlin"),
        "wrong": sim_profile(port, "--sim-fault", "wrong-answer", checkpoint="MXFP4"),
        "broken": sim_profile(port, "--sim-fault", "fail-startup", checkpoint="MXFP4"),
    }, default_profile="mxfp4")
    spec = HostSpec("demo", config, "demo", env=demo_env())
    yield spec
    env = dict(os.environ, **spec.env)
    subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace", "3"],
                   env=env, capture_output=True, timeout=60)


def settings() -> Settings:
    s = Settings()
    s.sweep = SweepPlan(levels=[(1, 2), (4, 4)], input_len=16, output_len=12, warmup=0)
    s.telemetry.interval_s = 0.5
    return s


async def pick(pilot: object, app: Dsv4App, value: str) -> None:
    screen = app.screen
    assert isinstance(screen, PickerScreen), screen
    index = [c.value for c in screen.choices].index(value)
    current = next(i for i, c in enumerate(screen.choices) if c.current) if any(
        c.current for c in screen.choices) else 0
    step = "down" if index >= current else "up"
    await pilot.press(*([step] * abs(index - current)), "enter")  # type: ignore[attr-defined]


async def sweep(pilot: object, app: Dsv4App, **boxes: str) -> None:
    """w, the plan dialog (``boxes``: plan-rates="4:4", ... typed into it), enter."""
    from textual.widgets import Input

    await pilot.press("w")  # type: ignore[attr-defined]
    await until(pilot, lambda: isinstance(app.screen, SweepPlanScreen), 5, "the plan dialog")
    for box, text in boxes.items():
        app.screen.query_one(f"#{box.replace('_', '-')}", Input).value = text
    await pilot.press("enter")  # type: ignore[attr-defined]
    await until(pilot, lambda: app.model.sweep.status not in ("idle", "starting", "running"),
                60, "the sweep to end")


async def test_campaign_loop(demo_spec: HostSpec) -> None:
    app = Dsv4App(demo_spec, settings=settings())
    async with app.run_test(size=(120, 40)) as pilot:
        m = app.model
        await until(pilot, lambda: m.conn.connected, 20, "connected")
        await until(pilot, lambda: m.telemetry.frames > 0, 20, "a telemetry frame")
        await until(pilot, lambda: m.server.state == "stopped", 20, "server status")
        assert m.simulated

        # b: backend picker (only backends that fit MXFP4, current marked) -> marlin, confirm
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "backend picker")
        assert isinstance(app.screen, PickerScreen)
        values = [c.value for c in app.screen.choices]
        assert "marlin" in values and "flashinfer_cutlass" not in values
        assert [c.value for c in app.screen.choices if c.current] == ["triton"]
        await pick(pilot, app, "marlin")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "restart confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready", 60, "ready")
        assert app.view == "launch"
        assert m.server.backend == "marlin" and m.server.state == "ready"
        assert all(m.startup.phases[p].started is not None for p in ("load_weights", "ready"))
        await until(pilot, lambda: m.sanity.status == "passed", 30, "sanity passed")
        await until(pilot, lambda: len(m.logs) > 20, 10, "server log lines")

        # what the dialog shows is what runs: a rate level, goodput targets, a seed
        await sweep(pilot, app, plan_rates="8:4", plan_goodput="ttft:60000", plan_seed="7")
        assert m.sweep.status == "done", m.sweep.detail
        assert [lv.status for lv in m.sweep.levels] == ["done", "done", "done"]
        assert m.sweep.rates == [(8.0, 4)]
        assert all(lv.out_tok_s for lv in m.sweep.levels)
        assert m.sweep.label == "MXFP4_marlin"
        # the dashboard's restart is a recorded launch, and the sweep's run points at it
        from dsv4tui.core.store import RunStore

        with RunStore() as store:
            [launch] = store.launches()
            [run] = store.runs()
            assert (launch.backend, launch.ok, run.backend, run.launch_id) == (
                "marlin", True, "marlin", launch.id)
            assert run.plan["rates"] == [[8.0, 4]] and run.plan["seed"] == 7, run.plan
            assert run.plan["goodput"] == {"ttft_ms": 60000.0}
            rate_level = [lv for lv in store.levels(run.id) if lv.stats.get("rate")]
            assert [lv.stats["rate"] for lv in rate_level] == [8.0]

        # p: the NVFP4 profile, same restart flow, then a second sweep
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "profile picker")
        await pick(pilot, app, "nvfp4")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready" and m.sanity.status == "passed",
                    60, "nvfp4 ready + sanity")
        assert m.server.profile == "nvfp4" and m.server.checkpoint == "NVFP4"
        await sweep(pilot, app)
        assert m.sweep.status == "done"

        # 5, space, space, c: compare the two runs
        await pilot.press("5")
        await until(pilot, lambda: isinstance(app.body, RunsBody) and len(m.runs.rows) >= 2,
                    10, "two runs listed")
        from textual.widgets import DataTable
        await until(pilot, lambda: app.screen.query_one("#runs-table", DataTable).row_count >= 2
                    and all(r.status == "done" for r in m.runs.rows), 10, "both runs shown done")
        # the cursor stays on the row it was on when the newer run was listed above it
        await pilot.press("up", "up", "space", "space", "c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "compare view")
        cmp = m.runs.compare
        assert cmp is not None and len(cmp.runs) == 2
        assert sorted(len(cmp.points[r.id]) for r in cmp.runs) == [2, 3]  # + a rate level
        assert {r.label for r in cmp.runs} == {"MXFP4_marlin", "NVFP4_marlin"}
        await pilot.press("e")
        exports = Path(os.environ["DSV4TUI_DATA_DIR"]) / "exports"
        await until(pilot, lambda: exports.is_dir() and any(exports.glob("*.csv")), 10, "export")
        assert app.last_error is None
        rows = list(csv.DictReader(next(exports.glob("*.csv")).open(encoding="utf-8")))
        measured = [r for r in rows if r["output_tok_s"]]  # the NVFP4 run had no rate level
        assert len(rows) == 6 and len(measured) == 5
        assert all(float(r["output_tok_s"]) > 0 for r in measured)  # numbers
        # the rate level is told apart from the C levels (C 0, its rate given)
        assert sorted(r["rate"] for r in rows) == ["", "", "", "", "8.0", "8.0"]
        assert {r["baseline_run_id"] for r in rows} == {str(cmp.baseline_id)}
        await pilot.press("escape")
        assert isinstance(app.body, RunsBody)

        # a plan no one means (1:999999) asks first (issue 23 point 10); n starts nothing
        before = m.sweep
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, SweepPlanScreen), 5, "plan dialog")
        app.screen.query_one("#plan-levels", Input).value = "1:999999"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "size confirm")
        shown = str(app.screen.message)
        assert "longer than 1 h" in shown and "999,999 requests" in shown  # warmup 0
        await pilot.press("n")
        await pilot.pause()
        assert m.sweep is before and not m.sweep.running

        # q asks while a sweep runs; n keeps it; x cancels it and keeps what finished
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, SweepPlanScreen), 5, "plan dialog")
        app.screen.query_one("#plan-levels", Input).value = "2:200"
        app.screen.query_one("#plan-out", Input).value = "64"
        await pilot.click("#start")
        await until(pilot, lambda: any(lv.completed for lv in m.sweep.levels), 30, "requests")
        await until(pilot, lambda: any(r.status == "running" for r in m.runs.rows), 10,
                    "the run listed while it runs")
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "quit confirm")
        await pilot.press("n")
        assert app.is_running and m.sweep.running
        await pilot.press("x")  # asks first: n keeps the sweep, y cancels it
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "cancel confirm")
        await pilot.press("n")
        await pilot.pause(0.5)
        assert m.sweep.running
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "cancel confirm")
        await pilot.press("y")
        await until(pilot, lambda: not m.sweep.running, 20, "cancelled")
        assert m.sweep.status == "cancelled"
        assert m.sweep.levels[0].completed > 0
        await until(pilot, lambda: any(r.status == "cancelled" for r in m.runs.rows), 10)

        # a profile whose server answers wrong: the sanity gate fails (and again with s)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "profile picker")
        await pick(pilot, app, "wrong")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready", 60, "ready")
        await until(pilot, lambda: m.sanity.status in ("passed", "failed", "error"), 30)
        assert m.sanity.status == "failed"
        assert m.sanity.cases and m.sanity.cases[0].passed is False
        assert "391" not in (m.sanity.cases[0].answer or "")
        first = m.sanity
        await pilot.press("s")
        await until(pilot, lambda: m.sanity is not first and m.sanity.status != "running", 30,
                    "sanity again")
        assert m.sanity.status == "failed"

        # a server that cannot start: one error dialog (with the log lines), no crash
        m.active_profile = "broken"
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, ErrorScreen), 60, "error dialog")
        assert m.startup.status == "failed"
        assert app.last_error
        assert sum(isinstance(sc, ErrorScreen) for sc in app.screen_stack) == 1
        await pilot.press("enter")
        assert not isinstance(app.screen, ErrorScreen)
        assert app.is_running


