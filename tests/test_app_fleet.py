"""The Fleet view with real hosts (Textual pilot): ``local`` and the in-process asyncssh
server (the agent uploaded over SFTP, run in real subprocesses), both with simulated GPUs,
beside hosts that cannot be reached -- a closed port, and a port that accepts TCP but never
speaks SSH. The others are live while those fail or hang; ``enter`` opens a host's dashboard
on the fleet's own connection and ``0`` goes back with every host still connected."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.pilot import toasts, until
from plugins.sim import free_port, sim_profile
from plugins.ssh_server import SshHost
from textual.widgets import Static

from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.fleet.model import STREAM, Fleet
from dsv4tui.core.hosts.resolve import host_spec
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.commands.dashboard import browse
from dsv4tui.tui.controllers.fleet import BACK
from dsv4tui.tui.fleet_app import FleetApp
from dsv4tui.tui.screens.fleet import FleetScreen
from dsv4tui.tui.widgets.fleet_table import FleetTable

pytestmark = pytest.mark.timeout(150)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def sim_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "no-server-yet.json"))
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "8")
    monkeypatch.setenv("PYTHONPATH", str(REPO))


@pytest.fixture
def silent_port() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def _settings(silent_port: int) -> Settings:
    """``refused``, ``hangs``, and ``local``/``testbox`` with a profile on a free port (so
    their status is about that port, whatever else runs on this machine)."""
    settings = Settings()
    settings.hosts["local"] = HostConfig(profiles={"sim": sim_profile(free_port())})
    settings.hosts["testbox"] = HostConfig(ssh="testbox",
                                           profiles={"sim": sim_profile(free_port())})
    settings.hosts["refused"] = HostConfig(ssh="nobody@127.0.0.1:1")
    settings.hosts["hangs"] = HostConfig(ssh=f"nobody@127.0.0.1:{silent_port}",
                                         connect_timeout_s=60)
    return settings


def _cell(table: FleetTable, row: str, column: str) -> str:
    return table.cell(row, column)


async def test_fleet_view_live_beside_unreachable_hosts(sim_gpus: None, ssh_server: SshHost,
                                                        silent_port: int) -> None:
    settings = _settings(silent_port)
    names = ["local", "refused", "testbox", "hangs"]
    fleet = Fleet([host_spec(n, settings) for n in names], interval=0.5)
    fleet.start()
    app = FleetApp(fleet, settings=settings)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            table = screen.query_one(FleetTable)
            await until(pilot, lambda: table.row_count == 4, 10, "a row per host")
            await until(pilot, lambda: "refused" in str(
                screen.query_one("#fleet-problems", Static).render()), 20, "the reason")
            await until(pilot, lambda: _cell(table, "local", "gpus") == "8"
                        and _cell(table, "testbox", "gpus") == "8", 60, "both hosts' GPUs")
            await until(pilot, lambda: _cell(table, "testbox", "server") == "stopped", 30,
                        f"the server status over SSH {fleet.summary('testbox')}")
            # live: frames keep coming while one host is refused and one hangs
            frames = {n: fleet.summary(n).frames for n in ("local", "testbox")}
            await until(pilot, lambda: all(fleet.summary(n).frames >= frames[n] + 3
                                           for n in frames), 20, "more frames")
            assert _cell(table, "local", "state") == "connected"
            assert _cell(table, "testbox", "model") == "H200 SIMULATED"
            assert _cell(table, "local", "util") == "0%"  # idle simulated GPUs: 0, not n/a
            assert _cell(table, "hangs", "state") == "connecting"
            assert _cell(table, "refused", "state").startswith(("lost", "reconnecting"))
            problems = str(screen.query_one("#fleet-problems", Static).render())
            line = next(x for x in problems.splitlines() if "refused" in x)
            assert line.startswith("✗ refused: connection refused by 127.0.0.1:1")
            assert "hangs" not in problems  # still waiting, not failed
            title = str(screen.query_one("#fleet-title", Static).render())
            assert "4 hosts · 2 connected" in title and "SIMULATED" in title
    finally:
        await fleet.stop()


async def test_enter_opens_the_dashboard_and_back_keeps_the_connections(
        sim_gpus: None, ssh_server: SshHost, silent_port: int) -> None:
    settings = _settings(silent_port)
    settings.telemetry.interval_s = 0.5
    fleet = Fleet([host_spec(n, settings) for n in ("refused", "testbox", "local")],
                  interval=0.5)
    seen: list[str] = []
    hosts_before: dict[str, Any] = {}

    async def run(app: Any) -> Any:
        async with app.run_test(size=(160, 48)) as pilot:
            if isinstance(app, FleetApp):
                seen.append("fleet")
                table = app.screen.query_one(FleetTable)
                if seen.count("fleet") == 1:
                    await until(pilot, lambda: table.row_count == 3
                                and _cell(table, "testbox", "gpus") == "8"
                                and _cell(table, "local", "gpus") == "8", 60, "hosts up")
                    hosts_before.update({n: fleet.supervisor(n).host
                                         for n in ("testbox", "local")})
                    await pilot.press("down", "enter")  # row 2: testbox
                else:  # back: the same row is highlighted, every host still connected
                    await until(pilot, lambda: table.row_count == 3, 10, "rows again")
                    assert app.screen.highlighted() == "testbox"
                    await pilot.press("q")
            else:
                assert isinstance(app, Dsv4App)
                seen.append(app.model.conn.host)
                m = app.model
                await until(pilot, lambda: m.conn.connected, 10, "connected at once")
                await until(pilot, lambda: m.telemetry.frames > 2, 30, "the dashboard's GPUs")
                await until(pilot, lambda: m.server.state == "stopped", 30, "its status")
                sup = fleet.supervisor("testbox")
                assert {"telemetry", STREAM} <= set(sup._streams)
                await pilot.press("0")
            await until(pilot, lambda: app.return_value is not None or not app.is_running,
                        20, "the app ended")
        return app.return_value

    code = await browse(fleet, settings=settings, run=run)
    assert code == 0
    assert seen == ["fleet", "testbox", "fleet"]
    # browse closes the fleet at the end; before that the link was never re-made


@pytest.mark.e2e
async def test_back_gives_the_connection_back_with_its_streams_removed(
        sim_gpus: None) -> None:
    """A dashboard on the fleet's supervisor: ``0`` ends it with BACK; the supervisor is the
    same object, still connected, the dashboard's streams gone, the fleet's one running."""
    fleet = Fleet([host_spec("local", Settings())], interval=0.5)
    fleet.start()
    try:
        sup = fleet.supervisor("local")
        host = await sup.wait_connected(30)
        app = Dsv4App(fleet.spec("local"), settings=Settings())
        app.fleet.join(sup)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.model.telemetry.frames > 1, 30, "frames")
            assert "telemetry" in sup._streams
            await pilot.press("0")
            await until(pilot, lambda: app.return_value is not None, 20, "back")
        assert app.return_value == BACK
        assert sup.host is host and sup.state.value == "connected"
        assert set(sup._streams) == {STREAM}
        frames = fleet.summary("local").frames
        await until(_Sleeper(), lambda: fleet.summary("local").frames > frames + 1, 20,
                    "the fleet's frames go on")
    finally:
        await fleet.stop()


class _Sleeper:
    async def pause(self, delay: float = 0.0) -> None:
        import asyncio

        await asyncio.sleep(delay)


async def test_zero_outside_a_fleet_says_so() -> None:
    app = Dsv4App()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.press("0")
        await pilot.pause(0.2)
        assert app.is_running
        assert "not opened from a fleet" in toasts(app)


async def test_a_dropped_link_reconnects_and_the_others_go_on(sim_gpus: None,
                                                              ssh_server: SshHost) -> None:
    """The SSH link of one host drops: its row says so (figures not shown as current), the
    other host's frames keep coming, and the fleet reconnects it by itself."""
    from dsv4tui.core.fleet.rows import cells

    fleet = Fleet([host_spec(n, Settings()) for n in ("testbox", "local")], interval=0.5)
    fleet.start()
    tick = _Sleeper()
    try:
        box, local = fleet.summary("testbox"), fleet.summary("local")
        await until(tick, lambda: box.frames > 1 and local.frames > 1, 60, "both streaming")
        ssh_server.drop_connections()
        await until(tick, lambda: box.state in ("lost", "reconnecting"), 20, "the drop seen")
        assert cells(box)["util"] == "—" and "lost" in (box.error or "")
        frames = local.frames
        await until(tick, lambda: local.frames > frames + 2, 20, "local goes on")
        got = box.frames
        await until(tick, lambda: box.connected and box.frames > got + 1, 60, "reconnected")
        assert box.error is None and cells(box)["util"] != "—"
    finally:
        await fleet.stop()
