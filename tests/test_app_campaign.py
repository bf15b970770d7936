"""The Campaign screen, driven by keys, against this machine as the host (the real agent, a
detached runner, the simulator as SGLang): start a campaign (7, n, pick, y), quit while it
runs — it goes on on the host — and a second console that connects later sees the same
campaign, fills its matrix in from the journal without a key press, and compares the
variants (c)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.campaigns import campaign_dirs
from plugins.pilot import until
from plugins.sim import REPO, free_port, sim_profile

from dsv4tui.core import paths
from dsv4tui.core.config import CampaignConfig, CampaignVariant, HostConfig, Settings
from dsv4tui.core.hosts.resolve import HostSpec
from dsv4tui.core.store import RunStore
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.screens.campaign import CampaignBody
from dsv4tui.tui.screens.modals import ConfirmScreen, PickerScreen
from dsv4tui.tui.screens.runs import CompareScreen

pytestmark = pytest.mark.timeout(240)



@pytest.fixture
def local_spec(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostSpec]:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    port = free_port()
    config = HostConfig(profiles={
        "mxfp4": sim_profile(port, checkpoint="MXFP4"),
        "nvfp4": sim_profile(port, checkpoint="NVFP4", backend="marlin"),
    }, default_profile="mxfp4")
    home = paths.local_agent_state_dir()
    spec = HostSpec("local", config, "local", env={"DSV4TUI_AGENT_HOME": str(home)})
    yield spec
    subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace", "3"],
                   env=dict(os.environ, DSV4TUI_AGENT_HOME=str(home)), capture_output=True,
                   timeout=60)


def settings() -> Settings:
    s = Settings()
    s.telemetry.interval_s = 0.5
    s.campaigns = {"quick": CampaignConfig(
        host="local", profile="mxfp4",
        sweep={"levels": [(1, 2), (2, 60)], "output_len": 48, "input_len": 8, "warmup": 0},
        variants=[CampaignVariant(name="MXFP4_triton"),
                  CampaignVariant(name="NVFP4_marlin", profile="nvfp4"),
                  CampaignVariant.model_validate({
                      "name": "NVFP4_trtllm_routed", "profile": "nvfp4",
                      "moe_runner_backend": "flashinfer_trtllm_routed"})])}
    return s


async def test_a_campaign_outlives_its_console_and_a_second_one_sees_it(
        local_spec: HostSpec) -> None:
    app = Dsv4App(local_spec, settings=settings())
    async with app.run_test(size=(160, 48)) as pilot:
        cv = app.model.campaign
        await until(pilot, lambda: app.model.conn.connected, 20, "connected")
        await pilot.press("7")
        await until(pilot, lambda: isinstance(app.body, CampaignBody), 5, "campaign screen")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "campaign picker")
        assert isinstance(app.screen, PickerScreen)
        names = [c.value for c in app.screen.choices]
        assert "quick" in names and "story" not in names  # the demo's is for host demo
        await pilot.press(*(["down"] * names.index("quick")), "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "confirm")
        await pilot.press("y")
        cv_now = lambda: app.model.campaign  # noqa: E731 - the view is replaced on start
        await until(pilot, lambda: cv_now().state == "running" and cv_now().variants
                    and cv_now().variants[0].state == "running", 60, "the first sweep")
        cv = cv_now()
        assert [v.name for v in cv.variants] == ["MXFP4_triton", "NVFP4_marlin",
                                                 "NVFP4_trtllm_routed"]
        assert app.model.startup.status == "ready"  # the variant's restart, on Launch too
        # quit while it runs: on a real host the campaign goes on without the console
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "quit confirm")
        await pilot.press("y")
    [cdir] = campaign_dirs(paths.data_dir())
    assert (cdir / "runner.json").exists()
    second = Dsv4App(local_spec, settings=settings(), start_mode="campaign")
    async with second.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: second.model.campaign.id == cdir.name, 30,
                    "the second console attached by itself")
        assert second.model.campaign.state == "running"  # mid-campaign
        assert [v.name for v in second.model.campaign.variants] == [
            "MXFP4_triton", "NVFP4_marlin", "NVFP4_trtllm_routed"]
        await until(pilot, lambda: second.model.campaign.state == "done", 150, "the end")
        cv = second.model.campaign
        assert [v.state for v in cv.variants] == ["done", "done", "failed"]
        assert "no kernel image" in (cv.variants[2].reason or "")
        for v in cv.variants[:2]:
            assert all(c.state == "done" and c.tok_s for c in v.cells), v
            assert v.run_ids and v.startup_s
        screen = second.body
        assert isinstance(screen, CampaignBody)
        await pilot.pause(0.3)
        # c on the Campaign screen: the variants side by side (the existing compare view)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(second.screen, CompareScreen), 10, "compare")
        cmp = second.model.runs.compare
        assert cmp is not None and {r.label for r in cmp.runs} == {"MXFP4_triton",
                                                                   "NVFP4_marlin"}
        await pilot.press("escape")  # back where the comparison was asked for
        await until(pilot, lambda: isinstance(second.body, CampaignBody), 5, "campaign")
        assert second.view == "campaign"
    with RunStore() as store:
        runs = store.runs()
        assert sorted((r.label, r.status, r.backend) for r in runs) == [
            ("MXFP4_triton", "done", "triton"), ("NVFP4_marlin", "done", "marlin")]
        assert all(len(store.requests(r.id)) == 62 for r in runs)


async def test_a_console_that_only_watches_never_cancels_and_sees_a_cli_sweep(
        local_spec: HostSpec) -> None:
    """A sweep started elsewhere (here: through the core, as the CLI does) on a simulated
    host: the dashboard shows it live on the Bench screen, refuses to start another, and
    quitting leaves it running (only what a console started itself is its to cancel)."""
    from dsv4tui.core.campaign import session
    from dsv4tui.core.campaign.plan import bench_target, sweep_spec
    from dsv4tui.core.config import SweepPlan
    from dsv4tui.core.hosts.resolve import connect
    from dsv4tui.core.server.control import start as start_server

    spec = HostSpec("local", local_spec.config, "demo", env=local_spec.env)  # simulated
    host = await connect(spec)
    try:
        await start_server(host, "mxfp4")
        plan = SweepPlan(levels=[(2, 400)], output_len=48, warmup=0)
        started = await session.start(host, sweep_spec(
            label="from-cli", plan=plan, cases=None, target=bench_target(spec.config),
            host=host.name))
    finally:
        await host.session.close()
    cid = str(started["id"])
    app = Dsv4App(spec, settings=settings(), start_mode="bench")
    async with app.run_test(size=(160, 48)) as pilot:
        sw = lambda: app.model.sweep  # noqa: E731
        await until(pilot, lambda: sw().label == "from-cli" and sw().running, 30,
                    "the running sweep on the Bench screen")
        await until(pilot, lambda: sw().completed_requests > 0, 30, "its requests")
        assert app.model.busy == "sweep"
        await pilot.press("w")  # another sweep beside it: refused at once
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen) and sw().label == "from-cli"
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "quit confirm")
        assert "started elsewhere" in str(app.screen.message)  # type: ignore[attr-defined]
        await pilot.press("y")
    [cdir] = [d for d in campaign_dirs(paths.data_dir()) if d.name == cid]
    from plugins.campaigns import runner_alive

    assert runner_alive(cdir)  # still measuring on the host
