"""The dashboard after a failed start (the demo host: the real agent and simulator): the
Launch screen says the cause and the next move, ``m`` asks, then restarts with it to ready."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.pilot import until
from plugins.sim import free_port, sim_profile
from textual.widgets import Static

from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.hosts.resolve import HostSpec, demo_env
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.screens.modals import ConfirmScreen, ErrorScreen

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def demo_spec(isolated_env: Path) -> Iterator[HostSpec]:
    port = free_port()
    config = HostConfig(profiles={"graphs": sim_profile(port, "--sim-fault", "graph-oom:32")},
                        default_profile="graphs")
    spec = HostSpec("demo", config, "demo", env=demo_env())
    yield spec
    env = dict(os.environ, **spec.env)
    subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace", "3"],
                   env=env, capture_output=True, timeout=60)


async def test_m_restarts_a_failed_start_with_its_next_move(demo_spec: HostSpec) -> None:
    app = Dsv4App(demo_spec, settings=Settings())
    async with app.run_test(size=(120, 40)) as pilot:
        m = app.model
        await until(pilot, lambda: m.conn.connected, 20, "connected")
        await until(pilot, lambda: m.server.state == "stopped", 20, "server status")
        await pilot.press("m")  # nothing failed yet: it says so, nothing restarts
        await pilot.press("3", "r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, ErrorScreen), 60, "error dialog")
        await pilot.press("enter")
        await pilot.pause()
        text = str(app.screen.query_one("#launch-next-move", Static).render())
        assert "CUDA out of memory while capturing CUDA graphs (batch sizes up to 64)" in text
        assert "m try --cuda-graph-max-bs-decode 64 -> 32" in text
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready", 60, "ready")
        await pilot.pause()
        assert str(app.screen.query_one("#launch-next-move", Static).render()) == ""
