"""Simulated GPUs (``source: "simulated"``) driven by the simulator's state file
(docs/CONTRACTS.md), including the file written by the simulator's own StatePublisher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.host.gpu_source import GPM_FIELDS, GPU_FIELDS
from dsv4tui.agent.host.sim_source import DEFAULT_MEM_MIB, SimSource

REPO = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def state(**over: Any) -> dict[str, Any]:
    base = {"v": 1, "pid": os.getpid(), "time": 1764460000.0, "phase": "ready", "tp_size": 8,
            "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "mem_total_mib": 97887,
            "backend": "triton", "checkpoint": "MXFP4", "running_requests": 3,
            "queue_requests": 0, "gen_tok_s": 23.2, "mem_used_frac": 0.88,
            "busy": {"util_gpu": 98, "tensor_active": 0.8, "sm_active": 92, "dram_active": 35}}
    base.update(over)
    return base


def source(tmp_path: Path, st: dict[str, Any] | None, gpus: int = 8,
           clock: Clock | None = None) -> tuple[SimSource, Path]:
    path = tmp_path / "sim-state.json"
    if st is not None:
        path.write_text(json.dumps(st))
    src = SimSource(str(path), gpus=gpus, seed=1, clock=clock or Clock())
    src.open(1.0)
    return src, path


def test_no_state_file_idle_gpus(tmp_path: Path) -> None:
    src, _ = source(tmp_path, None)
    gpus = src.sample()
    assert gpus is not None and len(gpus) == 8
    assert all(set(g) == set(GPU_FIELDS) for g in gpus)
    assert all(g["mem_used_mib"] == 0 and g["util_gpu"] == 0 for g in gpus)
    assert all(g["mem_total_mib"] == DEFAULT_MEM_MIB and g["gpm"] is True for g in gpus)
    assert src.driver == "simulated" and src.processes() == []


@pytest.mark.e2e
def test_dead_pid_is_idle(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    src, _ = source(tmp_path, state(pid=proc.pid))
    gpus = src.sample()
    assert gpus is not None and all(g["mem_used_mib"] == 0 and g["util_gpu"] == 0 for g in gpus)


def test_serving_follows_busy_and_memory_fraction(tmp_path: Path) -> None:
    src, _ = source(tmp_path, state(tp_size=4))
    for _ in range(5):
        gpus = src.sample()
    assert gpus is not None
    busy, idle = gpus[:4], gpus[4:]
    for g in busy:
        assert g["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        assert 95 <= g["util_gpu"] <= 100
        assert 0.05 <= g["tensor_active"] < 1.5  # triton MXFP4: tensor pipe ~1 %
        assert 85 <= g["sm_active"] <= 99 and 30 <= g["dram_active"] <= 40
        assert abs(g["mem_used_mib"] - 0.88 * 97887) < 600
        assert g["power_w"] > 200 and g["sm_clock_mhz"] > 2000
    for g in idle:  # beyond tp_size
        assert g["mem_used_mib"] == 0 and g["util_gpu"] == 0 and g["tensor_active"] == 0.0
    procs = src.processes()
    assert procs is not None and [p["gpu"] for p in procs] == [0, 1, 2, 3]
    assert all(p["pid"] == os.getpid() for p in procs)
    json.dumps(gpus, allow_nan=False)
    assert all(g[f] is not None for g in gpus for f in GPM_FIELDS)


def test_no_requests_is_idle_but_memory_stays(tmp_path: Path) -> None:
    src, _ = source(tmp_path, state(running_requests=0))
    gpus = src.sample()
    assert gpus is not None
    assert all(g["util_gpu"] == 0 and g["mem_used_mib"] > 80000 for g in gpus)


def test_load_weights_ramps_memory(tmp_path: Path) -> None:
    clock = Clock()
    src, _ = source(tmp_path, state(phase="load_weights", running_requests=0), clock=clock)
    seen = []
    for _ in range(4):
        gpus = src.sample()
        assert gpus is not None
        seen.append(gpus[0]["mem_used_mib"])
        clock.t += 2.0
    assert seen == sorted(seen) and seen[0] < seen[-1] < 0.88 * 97887
    # the simulator's own file carries load_progress and ramps mem_used_frac itself
    (tmp_path / "sim-state.json").write_text(json.dumps(
        state(phase="load_weights", running_requests=0, load_progress=0.25,
              mem_used_frac=0.2)))
    own = src.sample()
    assert own is not None and abs(own[0]["mem_used_mib"] - 0.2 * 97887) < 600


def test_gpu_ids_choose_the_server_gpus(tmp_path: Path) -> None:
    src, _ = source(tmp_path, state(tp_size=2, gpu_ids=[4, 5]))
    gpus = src.sample()
    assert gpus is not None
    assert [g["index"] for g in gpus if g["util_gpu"] > 0] == [4, 5]
    assert [g["index"] for g in gpus if g["mem_used_mib"] > 0] == [4, 5]


@pytest.mark.parametrize("phase", ["stopped", "crashed"])
def test_stopped_or_crashed_frees_memory(tmp_path: Path, phase: str) -> None:
    src, _ = source(tmp_path, state(phase=phase))
    gpus = src.sample()
    assert gpus is not None and all(g["mem_used_mib"] == 0 for g in gpus)


def test_garbage_state_file_is_idle(tmp_path: Path) -> None:
    src, path = source(tmp_path, None)
    path.write_text("{not json")
    gpus = src.sample()
    assert gpus is not None and all(g["util_gpu"] == 0 for g in gpus)


def test_reads_the_simulators_own_state_file(tmp_path: Path) -> None:
    """The file as dsv4tui.sim's StatePublisher writes it (the other side of the contract)."""
    publish = pytest.importorskip("dsv4tui.sim.publish")
    path = tmp_path / "state.json"
    pub = publish.StatePublisher(str(path), lambda: {k: v for k, v in state(tp_size=2).items()
                                                     if k not in ("v", "pid", "time")})
    pub.publish()
    src = SimSource(str(path), gpus=4, seed=3)
    src.open(1.0)
    gpus = src.sample()
    assert gpus is not None
    assert [g["util_gpu"] > 90 for g in gpus] == [True, True, False, False]


@pytest.mark.e2e
def test_agent_picks_the_simulator_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "sim-state.json"
    path.write_text(json.dumps(state()))
    env = dict(os.environ, PYTHONPATH=str(REPO), DSV4TUI_SIM_STATE=str(path),
               DSV4TUI_SIM_GPUS="2")
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "telemetry", "--count", "1"],
                         capture_output=True, text=True, env=env, timeout=30, cwd=REPO)
    assert out.returncode == 0, out.stderr
    frame = json.loads(out.stdout)
    assert frame["source"] == "simulated" and len(frame["gpus"]) == 2
    assert frame["gpus"][0]["util_gpu"] > 90  # the state's pid (this test) is alive, serving
