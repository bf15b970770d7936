"""A kernel capture measures the batch it names (issue 23, point 6): it starts once the
server runs the load's concurrency, records the batch it measured, and a batch far from the
load is flagged wherever the load is shown. Real simulator processes on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import AgentEnv, SimProcess, event, start_sim, subprocess_env

from dsv4tui.agent.kernels import capture as agent_kernels
from dsv4tui.cli import kernels as cmd
from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import kernels as kernel_store
from dsv4tui.main import main
from dsv4tui.tui.screens.kernels import CaptureItem, header_text


def _sim(tmp: Path, agent_env: AgentEnv, *extra: str) -> SimProcess:
    proc = start_sim(tmp, *extra, env=subprocess_env(
        DSV4TUI_SIM_STATE=str(agent_env.sim_state)), decode_speed=50.0)
    proc.wait_ready()
    return proc


@pytest.fixture
def sim(tmp_path: Path, agent_env: AgentEnv) -> Iterator[SimProcess]:
    proc = _sim(tmp_path / "sim", agent_env)
    try:
        yield proc
    finally:
        proc.stop()


def _capture(agent_env: AgentEnv, url: str, out: Path, *more: str) -> dict[str, Any]:
    code, events = agent_env.run("kernels", "run", "--url", url, "--steps", "5",
                                 "--output-dir", str(out), "--telemetry", "off", *more,
                                 timeout=120)
    assert code == 0, events
    return {"final": event(events, "kernels"),
            "phases": [e for e in events if e["type"] == "kernels_phase"]}


def test_the_capture_waits_until_the_streams_ramped_up(sim: SimProcess, agent_env: AgentEnv,
                                                       tmp_path: Path) -> None:
    """Long prompts: the server admits the 8 streams one prefill at a time. Before, the
    profile started after the fixed warm-up (here 0 s) at batch 1 and was stored as C=8."""
    got = _capture(agent_env, sim.url, tmp_path / "t", "-c", "8", "--warmup", "0",
                   "--input-len", "12000")
    prof, load = got["final"], got["final"]["load"]
    assert prof["steps"]["decode"]["mean_bs"] >= 6, prof["steps"]["decode"]
    assert load["concurrency"] == 8 and load["measured_bs"] == prof["steps"]["decode"]["mean_bs"]
    assert load["measured_bs_source"] == "trace" and load["batch_far"] is False
    ramp = load["ramp"]
    assert ramp["source"] == "metrics" and ramp["reached"] and ramp["running"] >= 8 * 0.9
    assert any(p["phase"] == "ramp" and "waiting for the server's batch" in p["message"]
               for p in got["phases"])


def test_a_batch_far_from_the_load_is_flagged_and_shown(tmp_path: Path, agent_env: AgentEnv,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """A server that runs at most 2 requests under a C=16 load: the capture says bs 2, FAR
    from C=16, in the agent's record, the CLI's header, the listing and the Kernels screen."""
    proc = _sim(tmp_path / "sim", agent_env, "--max-running-requests", "2")
    try:
        t0 = time.monotonic()
        got = _capture(agent_env, proc.url, tmp_path / "t", "-c", "16", "--warmup", "0",
                       "--ramp-timeout", "30")
        assert time.monotonic() - t0 < 60  # the server's own cap: no wait for the timeout
    finally:
        proc.stop()
    prof = got["final"]
    load = prof["load"]
    assert load["measured_bs"] == 2 and load["batch_far"] is True
    assert "far from the load's C=16" in load["batch_note"]
    assert "at most 2 requests" in load["batch_note"]
    assert any(p["phase"] == "flagged" for p in got["phases"])
    # the console: stored with its batch, and flagged wherever the load is shown
    prof = {k: v for k, v in prof.items() if k not in ("type", "v")}
    with RunStore() as store:
        cid, _ = cmd.store_capture(store, prof, cmd.ServerContext(host="local"))
        item = kernel_store.get_capture(store, cid)
    assert item is not None and item.batch_far and item.load and item.load["measured_bs"] == 2
    assert "C=16, bs 2 measured: FAR from C=16" in item.launch_text
    assert main(["kernels", "--list"]) == 0
    assert "bs 2 measured: FAR from C=16" in capsys.readouterr().out
    assert main(["kernels", "--show", str(cid)]) == 0
    shown = capsys.readouterr().out
    assert "load C=16, bs 2 measured: FAR from C=16" in shown
    assert "WARNING: measured batch 2 is far from the load's C=16" in shown
    text = header_text(CaptureItem.of(item))
    assert "FAR from C=16" in text and "at most 2 requests" in text


def test_measured_batch_rules() -> None:
    """The trace's batch wins; without it the server's running requests at the start; a
    capture from before the batch was recorded says only its C."""
    ramp = {"running": 16.0, "source": "metrics", "reached": True, "waited_s": 1.0,
            "max_running_requests": None}
    out = agent_kernels.measured_batch({"steps": {"decode": {"mean_bs": 1}}}, 16, ramp)
    assert out["measured_bs"] == 1 and out["batch_far"] and "not ramped up" in out["batch_note"]
    out = agent_kernels.measured_batch({"steps": {}}, 16, ramp)
    assert (out["measured_bs"], out["measured_bs_source"], out["batch_far"]) == \
        (16.0, "metrics", False)
    late = dict(ramp, running=3.0, reached=False, waited_s=60.0)
    out = agent_kernels.measured_batch({}, 16, late)
    assert out["batch_far"] and "within 60 s" in out["batch_note"]
    assert load_text(16, {"concurrency": 16}) == "C=16"
    assert load_text(None, {}) is None


def test_without_metrics_the_loads_own_streams_say_the_batch(agent_env: AgentEnv,
                                                            tmp_path: Path) -> None:
    """A server without /metrics (the torch stand-in, --fake): the ramp is read from the
    load's own streams whose answer has begun, and that is the batch recorded."""
    import subprocess
    import sys

    import httpx
    from plugins.sim import free_port

    standin = Path(__file__).parent / "data" / "traces" / "torch_standin.py"
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(standin), "--port", str(port), "--fake"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        got = _capture(agent_env, f"http://127.0.0.1:{port}", tmp_path / "t", "-c", "4",
                       "--warmup", "0", "--steps", "3")
    finally:
        proc.kill()
        proc.wait(5)
    load = got["final"]["load"]
    assert load["ramp"]["source"] == "streams" and load["ramp"]["reached"]
    assert load["measured_bs"] == 4 and not load["batch_far"]
