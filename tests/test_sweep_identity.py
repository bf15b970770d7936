"""A sweep measures only the server its record describes (issue 23, point 3): a real foreign
HTTP server -- a second simulator started by hand, not through ``server start`` -- on the
port the demo's profile or our launch record names is refused with one line, and nothing is
stored; the demo takes a free port when its own is taken, and says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.sim import AgentEnv, SimProcess, sim_profile, start_sim

from dsv4tui import main as cli
from dsv4tui.agent.host import procs
from dsv4tui.core import paths
from dsv4tui.core.hosts import demo, resolve
from dsv4tui.core.store import RunStore

pytestmark = pytest.mark.timeout(120)

SWEEP = ["--levels", "1:1", "--output-len", "4", "--input-len", "8"]
OTHER_MODEL = "/models/Other-Model"


@pytest.fixture
def foreign(tmp_path: Path) -> Iterator[SimProcess]:
    """A simulator nobody started through dsv4tui: marlin, another model."""
    sim = start_sim(tmp_path / "foreign", backend="marlin", model=OTHER_MODEL)
    sim.wait_ready()
    yield sim
    sim.stop()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def no_runs() -> bool:
    with RunStore() as store:
        return store.runs() == []


def test_demo_never_sweeps_a_server_it_did_not_start(
        foreign: SimProcess, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: measured and stored as SIMULATED, labelled with the demo's profile."""
    monkeypatch.setenv("DSV4TUI_DEMO_PORT", str(foreign.port))
    code, out, err = run_cli(capsys, "sweep", "demo", "--label", "MXFP4_triton", *SWEEP)
    assert code == 1, out + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"port {foreign.port} is served by pid {foreign.proc.pid}" in err
    assert "which dsv4tui did not start: the demo measures only" in err
    # aimed at one profile's port (``--profile``): the same check
    code, out, err = run_cli(capsys, "sweep", "demo", "--profile", "nvfp4", "--label", "x",
                             *SWEEP)
    assert code == 1 and "the demo measures only the simulated server it starts" in err
    assert no_runs()


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            start_new_session=True)


def _record(home: Path, pid: int, port: int, model: str = "/models/DeepSeek-V4-Flash") -> None:
    """A launch record as ``server start`` writes it: ``pid`` runs ``model`` on ``port``."""
    argv = [sys.executable, "-m", "dsv4tui.sim.sglang", "--model-path", model, "--port",
            str(port)]
    (home / "server.json").write_text(json.dumps({
        "v": 1, "pid": pid, "pgid": pid, "proc_start": procs.proc_start(pid), "argv": argv,
        "port": port, "host": "127.0.0.1", "log": str(home / "server.log"),
        "started_at": 1.0, "profile": {"name": "sim", "model_path": model},
        "stopped_at": None, "node_rank": 0}))


def test_a_record_whose_port_another_server_answers_is_refused(
        foreign: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """Our record's server is alive but does not serve its port: a foreign simulator does.
    Before: the sweep measured it as ours (backend and argv from the record)."""
    prof = sim_profile(foreign.port)
    paths.config_file().write_text(
        "[hosts.local.profiles.sim]\n" + "".join(
            f"{k} = {json.dumps(getattr(prof, k))}\n"
            for k in ("python", "module", "model_path", "served_model_name", "port")))
    sleeper = _sleeper()
    try:
        _record(paths.local_agent_state_dir(), sleeper.pid, foreign.port)
        code, out, err = run_cli(capsys, "sweep", "local", "--label", "x", *SWEEP)
    finally:
        sleeper.kill()
        sleeper.wait(5)
    assert code == 1, out + err
    assert len(err.strip().splitlines()) == 1
    assert (f"port {foreign.port} is served by pid {foreign.proc.pid}" in err
            and f"not by the server dsv4tui started (pid {sleeper.pid})" in err)
    assert no_runs()


def test_server_info_must_match_the_record(foreign: SimProcess, agent_env: AgentEnv) -> None:
    """The process is the recorded one, but its /server_info names another model than the
    launch record: refused on the host (the check every campaign variant goes through)."""
    _record(agent_env.home, foreign.proc.pid, foreign.port)
    code, events = agent_env.run("target", "--target-json", json.dumps({"mode": "ours"}))
    assert code != 0
    err = events[-1]
    assert err["type"] == "error" and err["kind"] == "not_ours"
    assert f"answers as model {OTHER_MODEL}" in err["message"]
    _record(agent_env.home, foreign.proc.pid, foreign.port, model=OTHER_MODEL)
    code, events = agent_env.run("target", "--target-json", json.dumps({"mode": "ours"}))
    assert code == 0 and events[-1]["target"]["ours"] is True


def test_a_foreign_server_with_another_model_is_not_the_profile(
        foreign: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """A real-SGLang profile whose port another model answers on: refused; the same server
    under a profile of its model is measured (as not ours), as before."""
    def config(model: str) -> None:
        paths.config_file().write_text(
            f'[hosts.local.profiles.p]\nmodel_path = "{model}"\nport = {foreign.port}\n')

    config("/models/DeepSeek-V4-Flash")
    code, out, err = run_cli(capsys, "sweep", "local", "--label", "x", *SWEEP)
    assert code == 1, out + err
    assert f"answers as model {OTHER_MODEL} (its /server_info), not the profile's" in err
    assert no_runs()
    config(OTHER_MODEL)
    code, out, err = run_cli(capsys, "sweep", "local", "--label", "x", *SWEEP, "--json")
    assert code == 0, out + err
    assert "which dsv4tui did not start" in err
    with RunStore() as store:
        (run,) = store.runs()
    assert run.backend == "marlin"


def test_demo_takes_a_free_port_when_its_own_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSV4TUI_DEMO_PORT", raising=False)
    first = demo.demo_port()
    assert first != 30000 and demo.demo_port() == first  # kept
    with socket.socket() as s:
        s.bind(("127.0.0.1", first))
        s.listen()
        port, note = resolve.claim_demo_port()
    assert port != first and demo.demo_port() == port
    assert note.startswith(f"port {first} is taken by pid {os.getpid()} (")
    assert note.endswith(f": the simulated server uses port {port} instead")
    again, note = resolve.claim_demo_port()  # free now: kept
    assert again == port and note.startswith(f"the simulated server uses port {port}")
    monkeypatch.setenv("DSV4TUI_DEMO_PORT", "31999")
    assert resolve.claim_demo_port()[0] == 31999 and demo.demo_port() == 31999
