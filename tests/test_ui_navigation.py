"""The screen belongs to the user: the dashboard's automatic moves (the first look at the
startup phases after connecting, the compare view once loaded) never override a screen the user
chose since the event that asked for the move. Real agent and simulator (the demo host)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.pilot import toasts, until
from plugins.sim import free_port, sim_profile

from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.hosts.resolve import HostSpec, demo_env
from dsv4tui.core.view.navigation import Navigation
from dsv4tui.tui.app import Dsv4App

pytestmark = pytest.mark.timeout(120)


def test_a_move_waits_for_no_choice_since_its_token() -> None:
    nav = Navigation()
    assert nav.may_move(0)  # nothing chosen since the start: the first look may happen
    token = nav.token()
    nav.chose()
    assert not nav.may_move(0) and not nav.may_move(token)
    later = nav.token()
    assert nav.may_move(later)  # a move asked for after the last choice still happens


@pytest.fixture
def autostart_spec(isolated_env: Path) -> Iterator[HostSpec]:
    port = free_port()
    config = HostConfig(profiles={"mxfp4": sim_profile(port, checkpoint="MXFP4")},
                        default_profile="mxfp4")
    spec = HostSpec("demo", config, "demo", env=demo_env())
    yield spec
    env = dict(os.environ, **spec.env)
    subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace", "3"],
                   env=env, capture_output=True, timeout=60)


@pytest.mark.e2e
async def test_a_key_pressed_before_the_first_look_keeps_its_screen(
        autostart_spec: HostSpec) -> None:
    app = Dsv4App(autostart_spec, settings=Settings(), autostart=True)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        m = app.model
        await pilot.press("2", "1")  # before the connection: the user wants the GPUs
        await until(pilot, lambda: m.startup.status == "ready", 60, "the server ready")
        await pilot.pause(0.3)
        assert app.view == "dashboard"
        assert "the server is starting: 3 shows it on Launch" in toasts(app)


@pytest.mark.e2e
async def test_the_first_look_happens_when_no_key_was_pressed(autostart_spec: HostSpec) -> None:
    app = Dsv4App(autostart_spec, settings=Settings(), autostart=True)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until(pilot, lambda: app.view == "launch", 30, "the first look")
        await until(pilot, lambda: app.model.startup.status == "ready", 60, "the server ready")
        assert app.view == "launch"
        assert "stayed on your screen" not in toasts(app)


async def test_a_comparison_loaded_after_a_screen_key_stays_behind_it() -> None:
    """c, then 1 before the comparison is read from the store: the Dashboard stays, and the
    notification says where the comparison is."""
    from snapshot_apps.frozen import frozen_app

    from dsv4tui.tui.screens.runs import CompareScreen

    app = frozen_app("runs")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        view = app.model.runs.compare
        assert view is not None
        asked = app.nav.token()  # c pressed: the store read starts
        await pilot.press("1")
        app.runs.show_compare(view, asked)  # the read ends
        await pilot.pause()
        assert app.view == "dashboard" and not isinstance(app.screen, CompareScreen)
        assert "the comparison is ready: c shows it on Runs" in toasts(app)
        app.runs.show_compare(view, app.nav.token())  # no key since: it is shown
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
