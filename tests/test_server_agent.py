"""The agent's ``server`` and ``logs`` commands as real subprocesses against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from plugins.sim import AgentEnv, event, free_port, group_alive, sim_argv, sim_profile

from dsv4tui.agent.protocol import EXIT_BUSY, EXIT_USAGE, parse_event
from dsv4tui.core.server.launch import build_launch


def phases(events: list[dict]) -> list[str]:
    return [e["event"]["name"] for e in events
            if e["type"] == "log_event" and e["event"]["kind"] == "phase"]


def test_lifecycle_start_phases_ready_logs_stop(agent_env: AgentEnv) -> None:
    port = free_port()
    log = agent_env.home / "sim.log"
    follower = agent_env.popen("logs", str(log), "--follow", "--from-start")
    code, events = agent_env.run(*agent_env.start_args(sim_argv(port, speed=40), port, "--log",
                                                       str(log)))
    assert code == 0, events
    started = event(events, "started")
    pid = started["pid"]
    assert started["pgid"] == pid and started["port"] == port and started["log"] == str(log)
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid  # its own session and group

    code, events = agent_env.run("server", "status")
    st = event(events, "status")
    assert st["state"] == "starting" and st["ours"] and st["health"] is None
    assert st["phase"] in ("init", "load_weights", "kv_cache", "cuda_graph") and st["phase_label"]

    code, events = agent_env.run(*agent_env.start_args(sim_argv(port), port))
    assert code == 1 and event(events, "error")["kind"] == "already_running"

    code, events = agent_env.run("server", "status", "--wait-ready", "--timeout", "30")
    assert code == 0 and event(events, "status")["state"] == "ready"
    assert "ready" in phases(events)
    code, events = agent_env.run("server", "status")
    st = event(events, "status")
    assert st["state"] == "ready" and st["health"] == 200 and st["pid"] == pid
    members = group_alive(pid)
    assert len(members) == 10  # main + 8 scheduler stand-ins + detokenizer
    state = agent_env.state()
    assert state["pid"] == pid and state["argv"][0] == sys.executable
    assert log.read_text().count("Load weight end") == 8
    httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=10,
               json={"prompt": "x", "max_tokens": 12, "ignore_eos": True})

    code, events = agent_env.run("logs", "--lines", "3")
    lines = [ln for e in events if e["type"] == "lines" for ln in e["lines"]]
    assert code == 0 and len(lines) == 3 and event(events, "log_end")

    code, events = agent_env.run("server", "stop", "--grace", "10")
    assert code == 0
    assert event(events, "stopping")["group"] == members
    stopped = event(events, "stopped")
    assert stopped["how"] == "sigterm" and stopped["drain_s"] < 10
    assert stopped["exit_code"] == 0 and stopped["leftover_pids"] == []
    assert stopped["gpu_mem_source"] == "simulated" and stopped["gpu_mem_freed_mib"] > 500_000
    assert group_alive(pid) == []
    assert json.loads(agent_env.sim_state.read_text())["mem_used_frac"] == 0.0
    code, events = agent_env.run("server", "status", "--port", str(port))
    assert event(events, "status")["state"] == "stopped"
    code, events = agent_env.run("server", "stop")
    assert code == 0 and event(events, "stopped")["how"] == "not_running"

    time.sleep(0.3)
    follower.terminate()  # the agent ends a stream on SIGTERM like on a cancel
    out, err = follower.communicate(timeout=10)
    assert "Traceback" not in err and follower.returncode == 130
    events = [e for line in out.splitlines() if (e := parse_event(line))]
    assert events[-1]["type"] == "log_end"
    lines = [ln for e in events if e["type"] == "lines" for ln in e["lines"]]
    assert any("Load weight begin" in ln for ln in lines) and any("SIGTERM" in ln for ln in lines)
    kinds = {e["event"]["kind"] for e in events if e["type"] == "log_event"}
    assert {"load_weights_begin", "load_weights_progress", "kv_cache", "cuda_graph_end",
            "http_up", "ready", "phase", "decode", "prefill", "sigterm"} <= kinds


def test_restart_with_another_backend(agent_env: AgentEnv) -> None:
    port = free_port()
    first = build_launch(sim_profile(port), profile_name="p")
    code, events = agent_env.run(*first.agent_args(wait_ready=True, timeout=30))
    assert code == 0, events
    old_pid = event(events, "started")["pid"]
    second = build_launch(sim_profile(port, checkpoint="NVFP4"), "marlin", "p")
    code, events = agent_env.run(*second.agent_args(replace=True, wait_ready=True, grace=10,
                                                    timeout=30))
    assert code == 0, events
    kinds = [e["type"] for e in events]
    assert kinds.index("stopped") < kinds.index("started") < kinds.index("status")
    assert event(events, "stopped")["how"] == "sigterm"
    assert event(events, "started")["pid"] != old_pid and group_alive(old_pid) == []
    assert event(events, "status")["state"] == "ready"
    state = agent_env.state()
    assert state["profile"]["changes"] == {"moe_runner_backend": {"from": "triton", "to": "marlin"}}
    info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).json()
    assert info["simulated"]["backend"] == "marlin" and info["simulated"]["checkpoint"] == "NVFP4"
    assert Path(state["log"] + ".1").exists()  # the previous launch's log is kept
    agent_env.run("server", "stop")


def test_sigkill_fallback_and_lock_contention(agent_env: AgentEnv) -> None:
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args(
        sim_argv(port, "--sim-fault", "ignore-sigterm"), port, "--wait-ready"))
    assert code == 0, events
    pid = event(events, "started")["pid"]
    # a grace long enough for two more agent runs while it waits, on a loaded machine too
    stopper = agent_env.popen("server", "stop", "--grace", "6")
    try:
        deadline = time.monotonic() + 10  # the stop holds the lock while waiting for the drain
        while not (agent_env.home / "server.lock.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        code, events = agent_env.run(*agent_env.start_args(sim_argv(port), port))
        err = event(events, "error")
        assert code == EXIT_BUSY and err["kind"] == "busy"
        assert err["message"].startswith("busy: server stop in progress by agent pid "
                                         f"{stopper.pid}")
        code, events = agent_env.run("server", "stop")
        assert code == EXIT_BUSY
    finally:
        out, _ = stopper.communicate(timeout=30)
    stopped = [e for line in out.splitlines() if (e := parse_event(line))][-1]
    assert stopped["type"] == "stopped" and stopped["how"] == "sigkill"
    assert stopped["drain_s"] is None and stopped["leftover_pids"] == []
    assert stopper.returncode == 0 and group_alive(pid) == []


def test_crash_is_detected_with_exit_code_and_errors(agent_env: AgentEnv) -> None:
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args(
        sim_argv(port, "--sim-fault", "crash-after:0"), port, "--wait-ready"))
    assert code == 0
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": "x"}, timeout=10)
    deadline = time.monotonic() + 10
    while True:
        code, events = agent_env.run("server", "status")
        st = event(events, "status")
        if st["state"] == "crashed" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert st["state"] == "crashed" and st["exit_code"] == 1
    assert any("illegal memory access" in e for e in st["last_errors"])
    assert st["tail"]


def test_startup_failure_reported_with_excerpt(agent_env: AgentEnv) -> None:
    """(flashinfer_trtllm_routed on sm_120 and warmup failures: test_server_cli, test_sim)."""
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args(sim_argv(port, "--no-such-flag"), port,
                                                       "--wait-ready"))
    err = event(events, "error")
    assert code == 1 and err["kind"] == "crashed"
    assert "exit code 2" in err["message"]
    assert any("unrecognized arguments: --no-such-flag" in t for t in err["tail"])
    st = event(events, "status")
    assert st["state"] == "crashed" and st["exit_code"] == 2


def test_port_taken_and_foreign_server_left_alone(agent_env: AgentEnv, tmp_path: Path) -> None:
    port = free_port()
    foreign = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                                "127.0.0.1"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        code, events = agent_env.run(*agent_env.start_args(sim_argv(port), port))
        err = event(events, "error")
        assert code == 1 and err["kind"] == "port_taken"
        assert f"port {port} is taken by pid {foreign.pid}" in err["message"]
        assert "http.server" in err["message"] and err["owner"]["pid"] == foreign.pid
        code, events = agent_env.run("server", "status", "--port", str(port))
        st = event(events, "status")
        assert st["state"] == "foreign" and st["foreign"]["pid"] == foreign.pid
        assert st["health"] == 404  # http.server answers, but it is not SGLang
        code, events = agent_env.run("server", "stop")
        assert event(events, "stopped")["how"] == "not_running"
        assert foreign.poll() is None  # never touched
    finally:
        foreign.kill()
        foreign.wait()


def test_foreign_sglang_is_described(agent_env: AgentEnv, tmp_path: Path) -> None:
    from plugins.sim import start_sim

    proc = start_sim(tmp_path)
    try:
        proc.wait_ready()
        code, events = agent_env.run("server", "status", "--port", str(proc.port))
        st = event(events, "status")
        assert code == 0
        assert st["state"] == "foreign" and st["foreign"]["pid"] == proc.proc.pid
        assert st["health"] == 200 and st["server_info"]["version"].startswith("0.5")
        assert st["model_info"]["model_path"] == "/models/DeepSeek-V4-Flash"
    finally:
        proc.stop()


def test_injection_attempts_run_nothing_and_api_key_stays_secret(agent_env: AgentEnv,
                                                                 tmp_path: Path) -> None:
    port = free_port()
    marker = tmp_path / "pwned"
    nasty = f"/models/x; touch {marker}; $(touch {marker}2) `touch {marker}3`"
    secret = "sk-very-secret-123"
    agent_env.env["SIM_KEY"] = secret
    profile = sim_profile(port, "--chat-template", f"$(touch {marker}4)", model_path=nasty,
                          served_model_name=f"m|touch {marker}5", api_key_env="SIM_KEY")
    launch = build_launch(profile, profile_name=f"p; touch {marker}6")
    code, events = agent_env.run(*launch.agent_args(wait_ready=True, timeout=30))
    assert code == 0, events
    auth = {"Authorization": f"Bearer {secret}"}
    info = httpx.get(f"http://127.0.0.1:{port}/model_info", headers=auth, timeout=5).json()
    assert info["model_path"] == nasty  # one literal argument, never a shell
    assert not list(tmp_path.glob("pwned*")) and not list(agent_env.home.glob("pwned*"))
    # The key was read from the host's env and given to the server, never echoed or stored.
    url = f"http://127.0.0.1:{port}/v1/models"
    assert httpx.get(url, timeout=5).status_code == 401
    assert httpx.get(url, headers=auth, timeout=5).status_code == 200
    assert secret not in json.dumps(events)
    assert secret not in (agent_env.home / "server.json").read_text()
    code, events = agent_env.run("server", "status")
    assert event(events, "status")["state"] == "ready" and secret not in json.dumps(events)
    assert secret in Path(agent_env.state()["log"]).read_text()  # SGLang logs its server_args
    code, events = agent_env.run("logs", "--from-start")
    text = json.dumps(events)
    assert code == 0 and "server_args=" in text and secret not in text and "'***'" in text
    code, events = agent_env.run("server", "stop")
    assert code == 0 and secret not in json.dumps(events)
    del agent_env.env["SIM_KEY"]
    code, events = agent_env.run(*launch.agent_args())
    assert code == 1 and "SIM_KEY is not set on this host" in event(events, "error")["message"]


@pytest.mark.parametrize(("args", "kind", "code"), [
    (["server", "start", "--argv-json", "not json"], "usage", EXIT_USAGE),
    (["server", "start", "--argv-json", "[1, 2]"], "usage", EXIT_USAGE),
    (["server", "start", "--argv-json", "[]"], "usage", EXIT_USAGE),
    (["server", "start", "--argv-json", '["/nope/python3", "-m", "x"]'], "not_found", 1),
    (["server", "start", "--argv-json", json.dumps([sys.executable]), "--workdir", "/nope/dir"],
     "not_found", 1),
    (["server", "start", "--argv-json", json.dumps([sys.executable]), "--env-json", "[1]"],
     "usage", EXIT_USAGE),
    (["server", "bogus"], "usage", EXIT_USAGE),
    (["logs", "/nope/server.log"], "not_found", 1),
    (["logs"], "not_found", 1),
])
def test_bad_input_one_error_event(agent_env: AgentEnv, args: list[str], kind: str,
                                   code: int) -> None:
    rc, events = agent_env.run(*args)
    assert rc == code
    assert [e["type"] for e in events] == ["error"] and events[0]["kind"] == kind


def test_status_without_http_reads_processes_and_log_only(agent_env: AgentEnv) -> None:
    """The node-group watcher polls every second with --no-http: it must not put two access-log
    lines a second into the server's log, and must still tell ready from crashed."""
    port = free_port()
    log = agent_env.home / "sim.log"
    code, events = agent_env.run(*agent_env.start_args(sim_argv(port), port, "--log", str(log),
                                                       "--wait-ready"))
    assert code == 0, events
    before = log.read_text().count('"GET /health')
    assert before > 0  # the simulator logs every request, as uvicorn's access log does
    for _ in range(3):
        code, events = agent_env.run("server", "status", "--no-http")
        status = event(events, "status")
        assert code == 0 and status["state"] == "ready" and status["health"] is None
    time.sleep(0.3)
    assert log.read_text().count('"GET /health') == before  # no request reached the server
    code, events = agent_env.run("server", "status")  # without it: the health probe
    assert event(events, "status")["health"] == 200
    agent_env.run("server", "stop")
