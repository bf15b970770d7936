"""The dashboard's attention backend picker (``a``) and its adopt step (``A``), driven by keys
against real agents and simulators: the demo host's simulated sm_120 GPUs mark the SM100-only
kernels; a simulator started by hand is offered for adoption, adopted into a real config file
and restarted from the picker with one attention flag changed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.pilot import toasts, until
from plugins.sim import SimProcess, free_port, reap_server, sim_profile, start_sim, subprocess_env

from dsv4tui.core import config, paths
from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.hosts.resolve import HostSpec, demo_env, host_spec
from dsv4tui.core.server import control as server_control
from dsv4tui.tui.app import Dsv4App
from dsv4tui.tui.screens.modals import ConfirmScreen, PickerScreen

pytestmark = pytest.mark.timeout(150)


async def pick(pilot: Any, app: Dsv4App, value: str) -> None:
    screen = app.screen
    assert isinstance(screen, PickerScreen), screen
    values = [c.value for c in screen.choices]
    index = values.index(value)
    start = next((i for i, c in enumerate(screen.choices) if c.current), 0)
    # the option list starts on the current choice; disabled headers are skipped by the keys,
    # so walk until the highlighted option is the one wanted
    from textual.widgets import OptionList

    ol = screen.query_one(OptionList)
    step = "down" if index >= start else "up"
    for _ in range(len(values) * 2):
        if ol.highlighted is not None and ol.get_option_at_index(ol.highlighted).id == value:
            break
        await pilot.press(step)
    assert ol.get_option_at_index(ol.highlighted).id == value
    await pilot.press("enter")


def settings() -> Settings:
    s = Settings()
    s.telemetry.interval_s = 0.5
    return s


@pytest.fixture
def demo_spec(isolated_env: Path) -> Iterator[HostSpec]:
    port = free_port()
    spec = HostSpec("demo", HostConfig(profiles={"mxfp4": sim_profile(port)},
                                       default_profile="mxfp4"), "demo", env=demo_env())
    yield spec
    env = dict(os.environ, **spec.env)
    subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace", "3"],
                   env=env, capture_output=True, timeout=60)


async def test_attention_picker_marks_sm100_kernels_and_restarts(demo_spec: HostSpec) -> None:
    app = Dsv4App(demo_spec, settings=settings())
    async with app.run_test(size=(120, 40)) as pilot:
        m = app.model
        await until(pilot, lambda: m.conn.connected and m.server.state == "stopped", 20,
                    "connected")
        await until(pilot, lambda: app.server.host_facts.sglang is not None, 20, "the host's facts")
        assert app.server.host_facts.capability == "12.0"  # the simulated RTX PRO 6000
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "attention picker")
        assert isinstance(app.screen, PickerScreen)
        by = {c.value: c for c in app.screen.choices}
        assert by["dsv4_attn_backend=trtllm"].note.startswith("✗ does not run on sm_120")
        assert by["dsv4_attn_backend=auto"].current and by["dsv4_prefill_backend=auto"].current
        await pick(pilot, app, "dsv4_prefill_backend=flashmla_sparse_q8")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "restart confirm")
        assert "--dsv4-prefill-backend" in str(app.screen.message)
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready", 60, "ready")
        status = await server_control.status(app.link.host())
        argv = status["argv"]
        assert argv[argv.index("--dsv4-prefill-backend") + 1] == "flashmla_sparse_q8"
        assert app.server.attention_current("mxfp4")["dsv4_prefill_backend"] == "flashmla_sparse_q8"
        # the SM100-only kernel on sm_120 fails to start as SGLang does, one error dialog
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "attention picker")
        assert isinstance(app.screen, PickerScreen)
        assert [c.value for c in app.screen.choices if c.current][1] == \
            "dsv4_prefill_backend=flashmla_sparse_q8"
        await pick(pilot, app, "dsv4_attn_backend=trtllm")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "restart confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "failed", 60, "the startup to fail")
        assert any("requires an SM100/SM103" in line for line in m.startup.error_lines)


@pytest.fixture
def by_hand(tmp_path: Path, sims: list[SimProcess]) -> Iterator[SimProcess]:
    port = free_port()
    sim = start_sim(tmp_path / "by-hand", port=port,
                    env=subprocess_env(DSV4TUI_SIM_STATE=str(tmp_path / "sim.json")))
    sims.append(sim)
    sim.wait_ready()
    paths.config_file().write_text(
        "# mine\n[hosts.local]\ndefault_profile = \"mine\"\n\n[hosts.local.profiles.mine]\n"
        f"python = \"{sys.executable}\"\nmodule = \"dsv4tui.sim.sglang\"\n"
        f"model_path = \"/models/DeepSeek-V4-Flash\"\nport = {port}\n")
    yield sim
    reap_server(paths.local_agent_state_dir())


async def test_dashboard_offers_adopt_then_restarts_it_from_the_picker(
        by_hand: SimProcess) -> None:
    settings_, path = config.load()
    app = Dsv4App(host_spec("local", settings_), settings=settings(), config_path=path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        m = app.model
        await until(pilot, lambda: m.conn.connected and m.server.state == "foreign", 20,
                    "the foreign server")
        await until(pilot, lambda: "press A to adopt it" in toasts(app), 10, "the adopt offer")
        await until(pilot, lambda: app.link.log.path == str(by_hand.log), 10, "its log followed")
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 20, "adopt confirm")
        text = str(app.screen.message)
        assert f"pid {by_hand.proc.pid}" in text and "adds profile 'adopted'" in text
        await pilot.press("y")
        await until(pilot, lambda: m.active_profile == "adopted" and m.server.state == "ready",
                    20, "adopted")
        loaded = config.load(path)[0].hosts["local"]
        assert loaded.default_profile == "adopted" and "# mine" in path.read_text()
        assert [p.name for p in m.profiles] == ["mine", "adopted"]
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, PickerScreen), 5, "attention picker")
        await pick(pilot, app, "dsv4_attn_backend=flashmla")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "restart confirm")
        await pilot.press("y")
        await until(pilot, lambda: m.startup.status == "ready", 60, "restarted")
        assert by_hand.wait_exit(10) == 0  # the hand-started server was stopped, by SIGTERM
        status = await server_control.status(app.link.host(), "adopted")
        argv = status["argv"]
        assert argv[argv.index("--dsv4-attn-backend") + 1] == "flashmla"
        assert argv[argv.index("--moe-runner-backend") + 1] == "triton"  # nothing else changed
        assert status["pid"] != by_hand.proc.pid and status["profile"]["name"] == "adopted"
