"""The console side: ``dsv4tui server|logs`` on host ``local`` and server_control over SSH."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import free_port, reap_server, sim_profile
from plugins.ssh_server import SshHost

from dsv4tui import main as cli
from dsv4tui.core import config, paths
from dsv4tui.core.hosts import resolve
from dsv4tui.core.server import control as server_control
from dsv4tui.core.store import RunStore


def write_config(port: int) -> None:
    """[hosts.local] with a simulator profile, written as TOML like a user would."""
    prof = sim_profile(port)
    lines = ["[hosts.local]", 'default_profile = "sim"', "[hosts.local.profiles.sim]"]
    for key in ("python", "module", "model_path", "served_model_name", "port", "tp_size",
                "moe_runner_backend", "checkpoint"):
        lines.append(f"{key} = {json.dumps(getattr(prof, key))}")
    lines.append(f"extra_args = {json.dumps(prof.extra_args)}")
    lines.append(f"env = {{ PYTHONPATH = {json.dumps(prof.env['PYTHONPATH'])} }}")
    paths.config_file().write_text("\n".join(lines) + "\n")


@pytest.fixture
def local_sim() -> Any:
    port = free_port()
    write_config(port)
    yield port
    reap_server(paths.local_agent_state_dir())


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_startup_is_one_figure_in_start_status_and_the_phases(
        local_sim: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Startup = launch to ready, wall clock on the host. Before: ``server start`` said the
    agent's wall clock (5.055 s), ``server status`` the log's timestamps (4.0 s), and the
    phases did not add up to it."""
    code, out, err = run_cli(capsys, "server", "start", "local", "--json")
    assert code == 0, err
    res = json.loads(out)
    code, out, _ = run_cli(capsys, "server", "status", "local", "--json")
    st = json.loads(out)
    assert code == 0 and st["state"] == "ready"
    assert st["startup_s"] == res["startup_s"] > 0
    spent = sum(p["duration_s"] for p in res["phases"])
    assert res["other_s"] >= 0 and spent + res["other_s"] == pytest.approx(res["startup_s"],
                                                                         abs=0.01)
    code, out, _ = run_cli(capsys, "server", "status", "local")
    assert f"startup {res['startup_s']:.1f} s" in out
    with RunStore() as store:
        assert store.launches("local")[0].startup_s == res["startup_s"]


def test_restart_switch_backend_logs_stop(local_sim: int, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    code, out, err = run_cli(capsys, "server", "restart", "local")
    assert code == 0, out + err
    for name in ("load_weights", "kv_cache", "cuda_graph", "http_up", "ready"):
        assert f"  {name}" in out
    assert "ready: startup " in out and "(launch -> ready, wall clock on the host)" in out
    assert "  other " in out  # the phases add up to the startup with it

    code, out, _ = run_cli(capsys, "server", "status", "local", "--json")
    st = json.loads(out)
    assert code == 0 and st["state"] == "ready" and st["port"] == local_sim
    assert st["profile"]["name"] == "sim"

    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend", "marlin",
                             "--json", "--grace", "10")
    assert code == 0, err
    res = json.loads(out)
    assert res["ok"] and res["ready"] and res["startup_s"] > 0
    assert res["changes"] == {"moe_runner_backend": {"from": "triton", "to": "marlin"}}
    assert res["previous_stop"]["how"] == "sigterm"
    assert [p["name"] for p in res["phases"]] == ["load_weights", "kv_cache", "cuda_graph",
                                                  "http_up", "ready"]

    with RunStore() as store:
        launches = store.launches("local")
    assert [(la.backend, la.ok) for la in launches] == [("marlin", True), ("triton", True)]
    assert launches[0].changes == res["changes"] and launches[0].startup_s == res["startup_s"]

    code, out, _ = run_cli(capsys, "logs", "local", "--lines", "4")
    assert code == 0 and len(out.splitlines()) == 4

    code, out, _ = run_cli(capsys, "server", "stop", "local")
    assert code == 0 and "by SIGTERM after a" in out
    code, out, _ = run_cli(capsys, "server", "status", "local")
    assert f"local: stopped (port {local_sim} free)" in out


def test_restart_failure_prints_log_excerpt(local_sim: int, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    # flashinfer_trtllm_routed does not fit the sim profile's MXFP4: refused before launching
    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend",
                             "flashinfer_trtllm_routed")
    assert code == 2 and "runs NVFP4 checkpoints, not MXFP4" in err and out == ""
    with RunStore() as store:
        assert store.launches("local") == []
    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend",
                             "flashinfer_trtllm_routed", "--force")
    assert code == 1 and "warning: backend flashinfer_trtllm_routed" in err
    assert "FAILED: the server exited with exit code 1 during startup" in out
    assert "log excerpt:" in out and "no kernel image is available" in out
    with RunStore() as store:
        (launch,) = store.launches("local")
    assert not launch.ok and "no kernel image" in (launch.error or "")


def test_start_refused_when_port_taken(local_sim: int, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", local_sim))
        s.listen()
        code, out, err = run_cli(capsys, "server", "start", "local")
    assert code == 1 and out.startswith("start local:") and len(err.strip().splitlines()) == 1
    assert f"port {local_sim} is taken by pid" in err and "will not stop it" in err


async def test_restart_stop_over_ssh(ssh_server: SshHost) -> None:
    port = free_port()
    settings = config.Settings(hosts={"box": config.HostConfig(
        ssh="testbox", profiles={"sim": sim_profile(port)})})
    steps: list[server_control.StartupStep] = []
    try:
        async with resolve.open_host("box", settings) as host:
            result = await server_control.restart(host, "sim", "marlin", steps.append, grace=10)
            assert result.ready and result.startup_s and result.pid
            assert [s.name for s in steps if s.kind == "phase"] == [
                "load_weights", "kv_cache", "cuda_graph", "http_up", "ready"]
            assert steps[0].kind == "started" and steps[-1].kind == "ready"
            st = await server_control.status(host, "sim")
            assert st["state"] == "ready" and st["pid"] == result.pid
            stopped = await server_control.stop(host, grace=10)
            assert stopped["how"] == "sigterm" and stopped["leftover_pids"] == []
            assert stopped["gpu_mem_freed_mib"] is None and stopped["gpu_mem_reason"]
    finally:
        reap_server(Path(ssh_server.remote_home) / ".cache" / "dsv4tui")
