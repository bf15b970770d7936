"""Runs record the server they measured -- SGLang version, GPUs, driver, the server args SGLang
reports -- and ``runs show`` / ``runs compare`` say how two runs' servers differ: two real
sweeps on host local (real agents, the simulator), the backend switched between them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import free_port, reap_server, sim_profile

from dsv4tui import main as cli
from dsv4tui.core import paths
from dsv4tui.core.campaign.compare import server_args_differences


def test_differences_name_each_run() -> None:
    a = {"sglang_version": "0.5.22", "args": {"moe_runner_backend": "triton", "tp_size": 8,
                                              "random_seed": 1, "launch_command": "x"},
         "host": {"gpus": ["NVIDIA H200"] * 8, "driver": "580.1", "compute_capability": "9.0"}}
    b = {"sglang_version": "0.5.23", "args": {"moe_runner_backend": "marlin", "tp_size": 8,
                                              "random_seed": 2, "launch_command": "y"},
         "host": {"gpus": ["NVIDIA H200"] * 8, "driver": "590.4", "compute_capability": "9.0"}}
    assert server_args_differences({3: a, 4: b}) == [
        "SGLang version: #3 0.5.22, #4 0.5.23", "driver: #3 580.1, #4 590.4",
        "moe_runner_backend: #3 triton, #4 marlin"]
    old = {"sglang_version": None, "args": {}, "host": {}, "gpu_names": []}
    told = server_args_differences({2: old, 4: b})  # an older or imported run: no facts
    assert any(line.startswith("no server facts for #2") for line in told)
    assert not any(line.startswith("SGLang version") for line in told), told  # unknown: no diff
    many = {"args": {f"k{i}": i for i in range(30)}}
    lines = server_args_differences({1: many, 2: {"args": {f"k{i}": -i for i in range(30)}}},
                                    limit=5)
    assert len(lines) == 5 and lines[-1] == "... and 25 more differences"
    assert server_args_differences({1: a}) == []


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def local_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "sim.json"))  # simulated GPUs
    monkeypatch.setenv("DSV4TUI_SIM_GPU_NAME", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    port = free_port()
    prof = sim_profile(port)
    lines = ["[hosts.local]", 'default_profile = "sim"', "[hosts.local.profiles.sim]"]
    for key in ("python", "module", "model_path", "served_model_name", "port", "tp_size",
                "moe_runner_backend", "checkpoint"):
        lines.append(f"{key} = {json.dumps(getattr(prof, key))}")
    lines.append(f"extra_args = {json.dumps(prof.extra_args)}")
    lines.append(f"env = {{ PYTHONPATH = {json.dumps(prof.env['PYTHONPATH'])} }}")
    paths.config_file().write_text("\n".join(lines) + "\n")
    yield port
    reap_server(paths.local_agent_state_dir())


@pytest.mark.e2e
def test_two_runs_say_how_their_servers_differ(local_sim: int,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ids = []
    for backend in ("triton", "marlin"):
        code, out, err = run_cli(capsys, "server", "restart", "local", "--backend", backend,
                                 "--grace", "10")
        assert code == 0, out + err
        code, out, err = run_cli(capsys, "sweep", "local", "--label", backend, "--levels",
                                 "1:1", "--output-len", "4", "--no-sanity", "--json")
        assert code == 0, err
        ids.append(json.loads(out)["run_id"])
    first, second = ids

    code, out, err = run_cli(capsys, "runs", "show", str(second))
    assert code == 0, err
    assert ("server   SGLang 0.5.23 · 8 x NVIDIA RTX PRO 6000 Blackwell Server Edition "
            "(sm_120) SIMULATED · driver simulated · ") in out
    assert f"differs from run #{first} (the previous run there):" in out
    assert f"moe_runner_backend: #{first} triton, #{second} marlin" in out
    code, out, _ = run_cli(capsys, "runs", "show", str(second), "--diff", str(second), "--json")
    detail = json.loads(out)
    assert detail["server"]["host"]["driver"] == "simulated"
    assert detail["server"]["args"]["moe_runner_backend"] == "marlin"
    assert "api_key" not in detail["server"]["args"]
    assert detail["server_args_differences"] == {"against": None, "lines": []}

    code, out, _ = run_cli(capsys, "runs", "compare", str(first), str(second))
    assert code == 0 and "the servers differ:" in out
    assert f"  moe_runner_backend: #{first} triton, #{second} marlin" in out
    code, out, _ = run_cli(capsys, "runs", "compare", str(first), str(second), "--json")
    assert f"moe_runner_backend: #{first} triton, #{second} marlin" in \
        json.loads(out)["server_args_differences"]
    run_cli(capsys, "server", "stop", "local", "--grace", "5")
