"""Connection lost and regained, over real SSH (asyncssh's server in-process, the agent
uploaded as a zipapp, commands in real subprocesses): the banner shows the reconnect
countdown, the panels go stale, and after the reconnect the telemetry stream runs again."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugins.pilot import until
from plugins.ssh_server import SshHost

from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.hosts.resolve import HostSpec
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.widgets.host_bar import ConnectionBanner

pytestmark = pytest.mark.timeout(120)



async def test_connection_lost_and_regained(ssh_server: SshHost, tmp_path: Path) -> None:
    spec = HostSpec("testbox", HostConfig(ssh="testbox"), "ssh", target="testbox",
                    env={"DSV4TUI_SIM_STATE": str(tmp_path / "sim-state.json"),
                         "DSV4TUI_SIM_GPUS": "8"})
    settings = Settings()
    settings.telemetry.interval_s = 0.25
    app = Dsv4App(spec, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        m = app.model
        await until(pilot, lambda: m.conn.connected, 30, "connected over SSH")
        await until(pilot, lambda: m.telemetry.frames > 2, 30, "telemetry frames")
        banner = app.screen.query_one(ConnectionBanner)
        assert not banner.has_class("-visible")

        ssh_server.refusing = True  # the link stays down until we say so
        ssh_server.drop_connections()
        await until(pilot, lambda: m.conn.state in ("lost", "reconnecting"), 15, "link lost")
        await until(pilot, lambda: banner.has_class("-visible"), 5, "the banner")
        assert "lost" in str(banner.render())
        assert m.conn.retry_in is not None
        assert app.screen.has_class("-stale")

        frames = m.telemetry.frames
        await pilot.pause(1.5)  # a reconnect attempt or two fails meanwhile
        assert not m.conn.connected and banner.has_class("-visible")
        ssh_server.refusing = False
        await until(pilot, lambda: m.conn.connected, 30, "reconnected")
        await until(pilot, lambda: m.telemetry.frames > frames + 2, 30, "frames again")
        await pilot.pause(0.2)
        assert not banner.has_class("-visible")
        assert not app.screen.has_class("-stale")
        assert any("reconnected" in line for line in m.logs.tail(200))
        assert app.last_error is None
