"""Servers we did not start: a simulator started by hand (a real subprocess, its output in a
file as with ``nohup ... > server.log 2>&1 &``) is inspected, adopted into a real config file
(comments kept, re-read) and restarted with one backend changed; its log is followed without
``--file``; a stop ends only it and what it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import (
    REPO,
    SimProcess,
    free_port,
    reap_server,
    sim_argv,
    start_sim,
    subprocess_env,
)

from dsv4tui import main as cli
from dsv4tui.core import config, config_edit, paths
from dsv4tui.core.errors import ConfigError, UserError
from dsv4tui.core.server import adopt

CONFIG = """\
# my dsv4tui config: this comment stays
theme = "dark"

[hosts.local]
default_profile = "mine"   # what I usually run

[hosts.local.profiles.mine]
python = "{python}"
module = "dsv4tui.sim.sglang"
model_path = "/models/DeepSeek-V4-Flash"
port = {port}
tp_size = 8
moe_runner_backend = "marlin"   # the note on my backend

[sweep]
levels = [[1, 2]]
"""


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def by_hand(tmp_path: Path, sims: list[SimProcess]) -> Any:
    """A simulator started by hand in its own session (nohup ... &), a config whose local
    default profile is on its port; the agent's server record is reaped at the end."""
    port = free_port()
    sim_state = tmp_path / "sim-state.json"
    sim = start_sim(tmp_path / "by-hand", port=port,
                    env=subprocess_env(DSV4TUI_SIM_STATE=str(sim_state)))
    sims.append(sim)
    sim.wait_ready()
    paths.config_file().write_text(CONFIG.format(python=sys.executable, port=port))
    yield sim
    reap_server(paths.local_agent_state_dir())


# -- the command line -> a profile ------------------------------------------------------------

@pytest.mark.parametrize(("argv", "module", "args"), [
    (["/v/bin/python", "-m", "sglang.launch_server", "--port", "1"], "sglang.launch_server",
     ["--port", "1"]),
    (["python3", "-u", "-X", "dev", "-m", "sglang.launch_server", "--tp", "8"],
     "sglang.launch_server", ["--tp", "8"]),
    (["/v/bin/python", "/v/bin/sglang", "serve", "deepseek-ai/DeepSeek-V4-Flash",
      "--model-type", "llm", "--tp", "8"], "sglang.launch_server",
     ["--model-path", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8"]),
    (["python", "/src/sglang/launch_server.py", "--port", "2"], "sglang.launch_server",
     ["--port", "2"]),
])
def test_launch_forms(argv: list[str], module: str, args: list[str]) -> None:
    python, got_module, got_args, _ = adopt.split_launch(argv)
    assert (python, got_module, got_args) == (argv[0], module, args)


def test_not_an_sglang_launch() -> None:
    with pytest.raises(adopt.AdoptError, match="not an SGLang launch: /usr/bin/nginx"):
        adopt.split_launch(["/usr/bin/nginx", "-g", "daemon off;"])


def test_flags_become_fields_the_rest_stays_in_order() -> None:
    fields, extra, notes = adopt.parse_args([
        "--model-path=/m", "--tp", "8", "--port", "30001", "--mem-fraction-static", "0.88",
        "--trust-remote-code", "--cuda-graph-bs", "1", "2", "4", "--api-key", "s3cret",
        "--dsv4-attn-backend", "flashmla", "--speculative-algo", "EAGLE",
        "--watchdog-timeout", "-1", "--enable-metrics"])
    assert fields == {"model_path": "/m", "tp_size": 8, "port": 30001,
                      "mem_fraction_static": 0.88, "trust_remote_code": True,
                      "dsv4_attn_backend": "flashmla", "speculative_algorithm": "EAGLE",
                      "enable_metrics": True}
    assert extra == ["--cuda-graph-bs", "1", "2", "4", "--watchdog-timeout", "-1"]
    assert "s3cret" not in json.dumps([fields, extra, notes])
    assert "--tp read as --tp-size (argparse's abbreviation)" in notes
    with pytest.raises(adopt.AdoptError, match="--tp-size 'eight' is not a number"):
        adopt.parse_args(["--tp-size", "eight"])


def foreign(**kw: Any) -> adopt.Foreign:
    base: dict[str, Any] = dict(
        port=30000, host="127.0.0.1", pid=4242, command="python -m sglang.launch_server",
        user="me", same_user=True, python="/opt/venv/bin/python",
        argv=["python", "-m", "sglang.launch_server", "--model-path", "/m/DeepSeek-V4-Flash",
              "--tp", "8", "--quantization", "modelopt_fp4"], cwd="/home/me", log="/home/me/s.log",
        proc_start=1, started_at=time.time(), group_leader=True,
        server_info={"version": "0.5.20"})
    base.update(kw)
    return adopt.Foreign(**base)


def test_a_proposal_against_the_config() -> None:
    cfg = config.HostConfig.model_validate({
        "default_profile": "nv", "profiles": {"nv": {"model_path": "/m/DeepSeek-V4-Flash",
                                                     "tp_size": 8, "quantization": "modelopt_fp4",
                                                     "moe_runner_backend": "marlin"}}})
    p = adopt.propose("ct200", cfg, foreign())
    assert p.name == "adopted" and not p.replaces and p.against == "nv"
    assert ("moe_runner_backend", "marlin", None) in p.changes
    assert ("python", "python3", "/opt/venv/bin/python") in p.changes
    assert ("enable_metrics", True, False) in p.changes  # SGLang's default is off
    assert p.data["checkpoint"] == "NVFP4" and p.data["log_file"] == "/home/me/s.log"
    text = "\n".join(adopt.proposal_lines(p))
    assert "~ python: \"python3\" -> \"/opt/venv/bin/python\"" in text
    assert "default_profile: nv -> adopted" in text
    assert "launches are checked against 0.5.20's choices" in text


@pytest.mark.parametrize(("kw", "pattern"), [
    ({"same_user": False, "user": "bob"}, "served by pid 4242 of user bob: dsv4tui adopts only"),
    ({"pid": None}, "a process this user cannot see"),
    ({"secret_flags": ["--api-key"]}, "pass --api-key-env NAME"),
    ({"argv": ["python", "-m", "sglang.launch_server", "--model-path", "/m",
               "--cuda-graph-max-bs", "8"]}, "--cuda-graph-max-bs: use --cuda-graph-max-bs-decode"),
])
def test_refusals(kw: dict[str, Any], pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        adopt.propose("ct200", config.HostConfig(), foreign(**kw))
    with pytest.raises(UserError, match="built in"):
        adopt.propose("demo", config.HostConfig(), foreign())


# -- the config file ------------------------------------------------------------------------

def test_config_edit_keeps_the_file_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG.format(python="/usr/bin/python3", port=30000))
    path.chmod(0o640)
    data = {"python": "/v/bin/python", "model_path": "/m", "port": 30001,
            "extra_args": ["--a", "1"], "env": {"CUDA_VISIBLE_DEVICES": "0,1"}}
    text, settings = config_edit.set_profile(path, "local", "adopted", data, make_default=True,
                                             comment="adopted by a test")
    assert path.read_text() == text and oct(path.stat().st_mode & 0o777) == "0o640"
    for kept in ("# my dsv4tui config: this comment stays", "# the note on my backend",
                 "# what I usually run", "[sweep]"):
        assert kept in text
    loaded, _ = config.load(path)
    assert loaded.hosts["local"].default_profile == "adopted"
    assert loaded.hosts["local"].profiles["adopted"].env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert loaded.hosts["local"].profiles["mine"].moe_runner_backend == "marlin"
    assert loaded.sweep.levels == [(1, 2)] == settings.sweep.levels
    # replacing it keeps its place and everything else; an invalid one is never written
    config_edit.set_profile(path, "local", "adopted", {**data, "tp_size": 4})
    assert tomllib.loads(path.read_text())["hosts"]["local"]["profiles"]["adopted"]["tp_size"] == 4
    before = path.read_text()
    with pytest.raises(ConfigError, match="moe_runner_backend"):
        config_edit.set_profile(path, "local", "bad", {"model_path": "/m",
                                                      "moe_runner_backend": "fast"})
    assert path.read_text() == before
    # a host known only through [hosts.H.profiles.P]: its new [hosts.H] header gets no
    # copy of the comment on the profile's header (which keeps it, once)
    only = tmp_path / "only.toml"
    only.write_text('[hosts.box.profiles.main]   # the one I use\nmodel_path = "/m"\n')
    text, _ = config_edit.set_profile(only, "box", "adopted", data, make_default=True)
    assert text.count("# the one I use") == 1 and "[hosts.box]\n" in text
    assert "[hosts.box.profiles.main]   # the one I use" in text
    fresh = tmp_path / "new" / "config.toml"  # no file yet: created
    config_edit.set_profile(fresh, "ct200", "adopted", data, make_default=True)
    assert config.load(fresh)[0].hosts["ct200"].profile()[0] == "adopted"


# -- a simulator started by hand --------------------------------------------------------------

def status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "server", "status", "local", "--json")
    assert code == 0, err
    return dict(json.loads(out))


def test_adopt_then_restart_with_one_backend_changed(by_hand: SimProcess,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    sim = by_hand
    st = status(capsys)
    assert st["state"] == "foreign" and st["foreign"]["pid"] == sim.proc.pid
    assert st["log"] == str(sim.log)  # its stdout: the log is known without --file
    code, out, _ = run_cli(capsys, "logs", "local", "--lines", "3")
    assert code == 0 and out.splitlines() == sim.log_text().splitlines()[-3:]

    before = paths.config_file().read_text()
    code, out, err = run_cli(capsys, "server", "adopt", "local")  # no terminal, no --yes
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "without --yes" in err and paths.config_file().read_text() == before

    code, out, err = run_cli(capsys, "server", "adopt", "local", "--dry-run")
    assert code == 0, err
    assert f"port {sim.port} is served by pid {sim.proc.pid}" in out
    assert '~ moe_runner_backend: "marlin" -> "triton"' in out
    assert paths.config_file().read_text() == before

    code, out, err = run_cli(capsys, "server", "adopt", "local", "--yes")
    assert code == 0, err
    assert f"adopted pid {sim.proc.pid} on port {sim.port} as profile 'adopted'" in out
    text = paths.config_file().read_text()
    assert text.startswith(before.split("[sweep]")[0].replace('"mine"   #', '"adopted"   #'))
    settings, _ = config.load(paths.config_file())
    host = settings.hosts["local"]
    prof = host.profiles["adopted"]
    assert host.default_profile == "adopted" and host.profiles["mine"].moe_runner_backend == "marlin"
    assert prof.module == "dsv4tui.sim.sglang" and prof.python == sys.executable
    assert prof.moe_runner_backend == "triton" and prof.tp_size == 8 and prof.port == sim.port
    assert prof.enable_metrics and prof.log_file == str(sim.log)
    assert prof.extra_args[:2] == ["--decode-log-interval", "5"]
    assert prof.workdir == str(sim.log.parent) and "DSV4TUI_SIM_STATE" in prof.env

    st = status(capsys)
    assert st["state"] == "ready" and st["ours"] and st["pid"] == sim.proc.pid
    assert st["profile"]["name"] == "adopted"
    code, _, err = run_cli(capsys, "server", "adopt", "local", "--yes")
    assert code == 1 and "nothing to adopt" in err

    code, out, err = run_cli(capsys, "server", "restart", "local", "--backend", "marlin",
                             "--json", "--grace", "10")
    assert code == 0, err
    res = json.loads(out)
    assert res["ready"] and res["previous_stop"]["how"] == "sigterm"
    assert res["previous_stop"]["pid"] == sim.proc.pid
    assert res["changes"] == {"moe_runner_backend": {"from": "triton", "to": "marlin"}}
    assert sim.wait_exit(10) == 0  # the hand-started server drained and exited
    argv = res["argv"]
    assert argv[argv.index("--moe-runner-backend") + 1] == "marlin"
    assert argv[argv.index("--served-model-name") + 1] == "dsv4-sim"  # the rest unchanged
    assert {"--sim-speed", "--decode-log-interval", "--enable-metrics"} <= set(argv)
    assert res["log_file"] == str(sim.log)  # the same log file as before
    st = status(capsys)
    assert st["state"] == "ready" and st["pid"] == res["pid"] != sim.proc.pid
    code, out, _ = run_cli(capsys, "server", "stop", "local", "--grace", "10")
    assert code == 0 and "by SIGTERM" in out


@pytest.mark.e2e
def test_a_stop_ends_only_the_adopted_server_not_its_scripts_group(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Started from a script (no job control): the server shares the script's process group
    with a sleep the script started first. Stopping the adopted server leaves the sleep."""
    port = free_port()
    work = tmp_path / "script"
    work.mkdir()
    log = work / "server.log"
    argv = " ".join(sim_argv(port))
    script = work / "run.sh"
    script.write_text(f"#!/bin/sh\nsleep 120 &\necho $! > {work}/sleep.pid\n"
                      f"cd {work} && {argv} > {log} 2>&1 &\necho $! > {work}/server.pid\nwait\n")
    runner = subprocess.Popen(["/bin/sh", str(script)], env=subprocess_env(),
                              start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "ready to roll" not in (
                log.read_text() if log.exists() else ""):
            time.sleep(0.1)
        server_pid = int((work / "server.pid").read_text())
        sleep_pid = int((work / "sleep.pid").read_text())
        assert os.getpgid(server_pid) == os.getpgid(sleep_pid) == runner.pid != server_pid
        paths.config_file().write_text(CONFIG.format(python=sys.executable, port=port))
        code, out, err = run_cli(capsys, "server", "adopt", "local", "--yes", "--profile",
                                 "scripted")
        assert code == 0, err
        assert "shares its process group with whatever started it" in out
        code, out, err = run_cli(capsys, "server", "stop", "local", "--grace", "10")
        assert code == 0 and f"stopped pid {server_pid} by SIGTERM" in out, out + err
        os.kill(sleep_pid, 0)  # the script's sleep is not ours: still running
        assert runner.poll() is None
    finally:
        reap_server(paths.local_agent_state_dir())
        try:
            os.killpg(runner.pid, signal.SIGKILL)  # the script we started, and its group
        except ProcessLookupError:
            pass
        runner.wait(5)


def test_the_agent_refuses_a_changed_process_and_a_second_server(
        tmp_path: Path, sims: list[SimProcess]) -> None:
    env = subprocess_env(DSV4TUI_AGENT_HOME=str(tmp_path / "agent"))
    (tmp_path / "agent").mkdir()

    def agent(*args: str) -> tuple[int, list[dict[str, Any]]]:
        out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], env=env,
                             capture_output=True, text=True, timeout=60, cwd=str(REPO))
        assert "Traceback" not in out.stderr, out.stderr
        return out.returncode, [json.loads(x) for x in out.stdout.splitlines()]

    a, b = (start_sim(tmp_path / n) for n in ("a", "b"))
    sims.extend([a, b])
    a.wait_ready()
    b.wait_ready()
    code, events = agent("server", "inspect", "--port", str(a.port))
    ev = events[-1]
    assert code == 0 and ev["type"] == "foreign_server" and ev["owner"]["pid"] == a.proc.pid
    proc = ev["process"]
    assert proc["same_user"] and proc["group_leader"] and proc["log"] == str(a.log)
    assert proc["argv"] == a.argv and proc["python"] == sys.executable
    assert ev["server_info"]["version"] and "internal_states" not in ev["server_info"]
    profile = json.dumps({"name": "a"})
    code, events = agent("server", "adopt", "--port", str(a.port), "--pid", str(a.proc.pid),
                         "--proc-start", str(proc["proc_start"] + 1), "--profile-json", profile)
    assert code == 1 and "not the process inspected" in events[-1]["message"]
    code, events = agent("server", "adopt", "--port", str(a.port), "--pid", str(b.proc.pid),
                         "--profile-json", profile)
    assert code == 1 and f"no longer served by pid {b.proc.pid}" in events[-1]["message"]
    code, events = agent("server", "adopt", "--port", str(a.port), "--pid", str(a.proc.pid),
                         "--proc-start", str(proc["proc_start"]), "--profile-json", profile)
    assert code == 0 and events[-1]["type"] == "adopted"
    code, events = agent("server", "adopt", "--port", str(b.port), "--pid", str(b.proc.pid),
                         "--profile-json", profile)
    assert code == 1 and "stop it first" in events[-1]["message"]
    code, events = agent("server", "inspect", "--port", str(a.port))
    assert code == 1 and "nothing to adopt" in events[-1]["message"]
    code, events = agent("server", "status")
    assert events[-1]["state"] == "ready" and events[-1]["pid"] == a.proc.pid
    assert a.proc.poll() is None  # adopting never signals anything


def test_secrets_never_leave_the_process(tmp_path: Path, sims: list[SimProcess],
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-adopt-1234567890"
    sim = start_sim(tmp_path / "k", "--api-key", key)
    sims.append(sim)
    sim.wait_ready()
    paths.config_file().write_text(CONFIG.format(python=sys.executable, port=sim.port))
    code, out, err = run_cli(capsys, "server", "adopt", "local", "--dry-run")
    assert code == 2 and "pass --api-key-env NAME" in err and key not in out + err
    monkeypatch.setenv("SIM_KEY", key)
    code, out, err = run_cli(capsys, "server", "adopt", "local", "--yes", "--api-key-env",
                             "SIM_KEY")
    assert code == 0, err
    assert key not in out + err + paths.config_file().read_text()
    assert key not in (paths.local_agent_state_dir() / "server.json").read_text()
    prof = config.load(paths.config_file())[0].hosts["local"].profiles["adopted"]
    assert prof.api_key_env == "SIM_KEY" and "--api-key" not in prof.extra_args
    reap_server(paths.local_agent_state_dir())


def test_adopting_a_server_dsv4tui_once_started_keeps_its_launch_id(
        tmp_path: Path, sims: list[SimProcess], capsys: pytest.CaptureFixture[str]) -> None:
    """A server dsv4tui started whose record was lost (a wiped cache dir) still carries its
    launch's id, and so does a daemon it left outside its tree: adopted, a stop ends both."""
    from dsv4tui.agent.host.procs import LAUNCH_ID_VAR

    port = free_port()
    env = subprocess_env(**{LAUNCH_ID_VAR: "0123456789abcdef0123456789abcdef"})
    sim = start_sim(tmp_path / "lost-record", port=port, env=env)
    sims.append(sim)
    daemon = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True,
                              stdin=subprocess.DEVNULL)
    try:
        sim.wait_ready()
        paths.config_file().write_text(CONFIG.format(python=sys.executable, port=port))
        code, _out, err = run_cli(capsys, "server", "adopt", "local", "--yes")
        assert code == 0, err
        record = json.loads((paths.local_agent_state_dir() / "server.json").read_text())
        assert record["launch_id"] == "0123456789abcdef0123456789abcdef"
        code, out, err = run_cli(capsys, "server", "stop", "local", "--grace", "10")
        assert code == 0, out + err
        assert daemon.wait(10) is not None  # the daemon carried the launch's id: ended too
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(5)
        reap_server(paths.local_agent_state_dir())
