"""One definition per figure (issue 23, point 8): the startup is launch -> ready on the host's
wall clock in the Launch screen (with an "other" row, the phases add up to it), the header's
time is named uptime, and the Bench progress is time elapsed of elapsed + ETA, not a count of
requests. (server start = server status: tests/test_server_cli.py; a cancel says what it
measured: tests/test_load_workers.py.)"""

from __future__ import annotations

import re
from typing import Any

from snapshot_apps.frozen import frozen_app
from textual.widgets import Static

from dsv4tui.core.server.startup import StartupStep
from dsv4tui.core.view import model as m
from dsv4tui.tui.screens.bench import plan_markup, progress_of
from dsv4tui.tui.widgets.host_bar import HostBar
from dsv4tui.tui.widgets.startup import StartupPanel


async def settle(pilot: Any) -> None:
    for _ in range(20):
        await pilot.pause()
        if not pilot.app.flush.pending:
            break
    await pilot.pause()


def _secs(text: str) -> float:
    """``51s``, ``2.1s``, ``1m28s`` -> seconds."""
    mins = re.match(r"(\d+)m(\d+)s$", text)
    return int(mins.group(1)) * 60 + int(mins.group(2)) if mins else float(text.rstrip("s"))


def test_the_ready_step_carries_the_host_s_startup() -> None:
    su = m.StartupView()
    su.reset("mxfp4", "triton", "MXFP4", 100.0)
    m.apply_step(su, StartupStep("started", elapsed_s=0.0), 101.0)
    m.apply_step(su, StartupStep("phase", name="load_weights", duration_s=3.0), 104.5)
    m.apply_step(su, StartupStep("ready", elapsed_s=5.055), 106.5)  # the agent's figure
    assert su.startup_s == 5.055  # not the console's 6.5 s (stop, link latency included)
    assert su.other_s(106.5) == 5.055 - sum(p.elapsed(106.5) or 0.0 for p in su.phases.values())


async def test_the_launch_screen_adds_up_to_the_startup_and_the_header_says_uptime() -> None:
    app = frozen_app("launch")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        view = app.screen.query_one(StartupPanel)
        title = str(view.query_one(".su-title", Static).render())
        rows = str(view.query_one(".su-phases", Static).render()).splitlines()
        startup = app.model.startup.startup_s
        assert startup is not None
        assert title.startswith("startup ready in 1m28s")  # the host's figure, not "total"
        assert rows[-1].split() == ["=", "startup", "1m28s", "launch", "→", "ready,", "wall",
                                    "clock", "on", "the", "host"]
        cols = {r[3:15].strip(): r[16:23].strip() for r in rows}  # " ✓ label(12) secs(7)"
        assert list(cols) == ["weights", "KV cache", "CUDA graphs", "HTTP server", "ready",
                              "other", "startup"]
        assert "python start, imports, gaps between phases" in rows[-2]
        parts = sum(_secs(v) for k, v in cols.items() if k != "startup")
        assert abs(parts - startup) < 2.0  # each row rounded as fmt_duration shows it
        assert _secs(cols["startup"]) == int(startup)
        bar = str(app.screen.query_one(HostBar).render())
        assert "ready · up 12m34s" in bar  # uptime, named (it read "ready 12m34s")


def _sweep(done_c1: int) -> m.SweepView:
    """C=1 x 8 requests of 4 s each (32 s), then C=16 x 160 (10 rounds of ~4 s: 40 s)."""
    sw = m.SweepView(status="running", label="x", output_len=256, started=0.0)
    c1 = m.LevelRow(1, 8, completed=done_c1, status="running", started=0.0)
    sw.levels = [c1, m.LevelRow(16, 160)]
    return sw


def test_the_bench_progress_is_time_with_an_eta_not_a_count_of_requests() -> None:
    """Before: the bar counted requests (4 of 168 = 2 % at 16 s of ~72 s)."""
    sw = _sweep(4)
    assert sw.eta(16.0) == 4 * 4.0 + 10 * 4.0  # 4 left at C=1, 10 rounds of 4 s at C=16
    bar = progress_of(sw, 16.0)
    assert bar["progress"] / bar["total"] == 16.0 / 72.0  # a fifth of the time, not 2 %
    assert sw.completed_requests / sw.total_requests < 0.03
    model = m.UiModel()
    model.sweep, model.frozen = sw, 16.0
    text = plan_markup(model, "x")
    assert "elapsed 16s · ETA 56s" in text
    # no request finished yet: no pace, said so; an ended sweep is full when done
    assert _sweep(0).eta(0.5) is None
    model.sweep = _sweep(0)
    model.frozen = 0.5
    assert "ETA after the first requests" in plan_markup(model, "x")
    sw.status, sw.ended = "done", 72.0
    assert progress_of(sw, 80.0) == {"total": 1.0, "progress": 1.0}
    assert "ETA" not in plan_markup(m.UiModel(sweep=sw, frozen=80.0), "x")


def test_a_rate_level_s_time_is_its_requests_over_its_rate() -> None:
    sw = _sweep(4)
    sw.levels.append(m.LevelRow(0, 120))
    sw.rates = [(4.0, 120)]
    assert sw.eta(16.0) == 4 * 4.0 + 10 * 4.0 + 120 / 4.0


def test_a_level_with_nothing_finished_yet_is_paced_by_the_level_before() -> None:
    """The demo at 1m03s: C=1 done, C=8 running with 0 of 16 finished. Before: "ETA after the
    first requests" and a bar at 0 % a third of the way in; now the C=1 pace in rounds of C."""
    sw = m.SweepView(status="running", label="x", output_len=64, started=0.0)
    sw.levels = [m.LevelRow(1, 4, completed=4, status="done", started=0.0, ended=20.0),
                 m.LevelRow(8, 16, status="running", started=20.0), m.LevelRow(16, 32)]
    # 5 s a request at C=1; C=8: 2 rounds of 5 s, 3 s of them spent; C=16: 2 rounds
    assert sw.eta(23.0) == (2 * 5.0 - 3.0) + 2 * 5.0
    bar = progress_of(sw, 23.0)
    assert 0.5 < bar["progress"] / bar["total"] < 0.6
