"""Fixtures for the simulator and the agent's server/logs commands (real subprocesses).

- ``free_port()``: a free loopback port (bind to port 0).
- ``sim_argv(port, ...)``: the simulator's command line (fast startup for tests).
- ``sim_profile(port, ...)``: a ServerProfile that launches the simulator.
- ``SimProcess`` / ``start_sim(...)``: a simulator started directly (its own process group,
  stopped by PID at teardown), with ``wait_ready()`` and ``url``.
- ``agent_env`` fixture: an environment for ``python -m dsv4tui.agent`` (own agent home,
  simulator state file, PYTHONPATH); ``run_agent(env, *args)`` runs one agent command and
  returns ``(exit code, events)``.
- ``reap_server(agent_home)``: kill by process group a server an agent left running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsv4tui.agent.protocol import parse_event
from dsv4tui.core.config import ServerProfile

REPO = Path(__file__).resolve().parents[2]
TEST_SPEED = 200.0  # startup ~0.5 s (1.0 = a realistic ~95 s)
TEST_DECODE_SPEED = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sim_args(port: int, *extra: str, backend: str = "triton", speed: float = TEST_SPEED,
             decode_speed: float = TEST_DECODE_SPEED,
             model: str = "/models/DeepSeek-V4-Flash") -> list[str]:
    return ["--model-path", model, "--served-model-name", "dsv4-sim", "--port", str(port),
            "--tp-size", "8", "--moe-runner-backend", backend, "--enable-metrics",
            "--decode-log-interval", "5", "--sim-speed", f"{speed:g}",
            "--sim-decode-speed", f"{decode_speed:g}", *extra]


def sim_argv(port: int, *extra: str, **kw: Any) -> list[str]:
    return [sys.executable, "-m", "dsv4tui.sim.sglang", *sim_args(port, *extra, **kw)]


def sim_profile(port: int, *extra: str, backend: str = "triton", speed: float = TEST_SPEED,
                checkpoint: str = "MXFP4", **fields: Any) -> ServerProfile:
    nvfp4 = checkpoint == "NVFP4"
    base: dict[str, Any] = dict(
        python=sys.executable, module="dsv4tui.sim.sglang",
        model_path="/models/DeepSeek-V4-Flash-NVFP4" if nvfp4 else "/models/DeepSeek-V4-Flash",
        served_model_name="dsv4-sim", port=port, tp_size=8, moe_runner_backend=backend,
        quantization="modelopt_fp4" if nvfp4 else None, checkpoint=checkpoint,
        env={"PYTHONPATH": str(REPO)},
        extra_args=["--sim-speed", f"{speed:g}", "--sim-decode-speed", f"{TEST_DECODE_SPEED:g}",
                    "--decode-log-interval", "5", *extra])
    base.update(fields)
    return ServerProfile(**base)


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    env.update(extra)
    return env


@dataclass
class SimProcess:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited {self.proc.returncode}:\n"
                                     f"{self.log_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"simulator not ready after {timeout} s:\n{self.log_text()[-2000:]}")

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """SIGKILL the process group we started (the simulator made it: start_new_session)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def start_sim(tmp: Path, *extra: str, port: int | None = None, env: dict[str, str] | None = None,
              **kw: Any) -> SimProcess:
    port = port or free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"sim-{port}.log"
    argv = sim_argv(port, *extra, **kw)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                env=env or subprocess_env(), start_new_session=True, cwd=tmp)
    return SimProcess(port, proc, log, argv)


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[list[SimProcess]]:
    """A list to put started simulators in; all are killed (by process group) at teardown."""
    started: list[SimProcess] = []
    yield started
    for sim in started:
        sim.stop()


# -- the agent as a subprocess ---------------------------------------------------------------

@dataclass
class AgentEnv:
    env: dict[str, str]
    home: Path  # the agent's cache dir
    sim_state: Path

    def run(self, *args: str, timeout: float = 60.0,
            stdin: str | None = None) -> tuple[int, list[dict[str, Any]]]:
        out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], env=self.env,
                             capture_output=True, text=True, timeout=timeout, input=stdin,
                             cwd=self.home)
        events = [ev for line in out.stdout.splitlines() if (ev := parse_event(line))]
        assert not out.stderr.strip() or "Traceback" not in out.stderr, out.stderr
        return out.returncode, events

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "dsv4tui.agent", *args], env=self.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.home)

    def state(self) -> dict[str, Any]:
        return json.loads((self.home / "server.json").read_text())

    def start_args(self, argv: list[str], port: int, *more: str) -> list[str]:
        return ["server", "start", "--argv-json", json.dumps(argv), "--port", str(port),
                "--env-json", json.dumps({"DSV4TUI_SIM_STATE": str(self.sim_state)}), *more]


@pytest.fixture
def agent_env(tmp_path: Path) -> Iterator[AgentEnv]:
    """An agent home of its own; at teardown, any server it started is killed by its group."""
    home = tmp_path / "agent-home"
    home.mkdir()
    state = tmp_path / "sim-state.json"
    env = subprocess_env(DSV4TUI_AGENT_HOME=str(home), DSV4TUI_SIM_STATE=str(state))
    agent = AgentEnv(env, home, state)
    yield agent
    reap_server(home)


def reap_server(agent_home: Path) -> None:
    """Kill (by its process group) a server an agent with this home started and left running."""
    try:
        st = json.loads((agent_home / "server.json").read_text())
    except (OSError, ValueError):
        return
    pgid = int(st.get("pgid") or 0)
    if pgid and not st.get("stopped_at") and group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def event(events: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    found = [e for e in events if e.get("type") == type_]
    assert found, f"no {type_!r} event in {[e.get('type') for e in events]}"
    return found[-1]


def group_alive(pgid: int) -> list[int]:
    """PIDs still in process group ``pgid`` (zombies excluded)."""
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2:].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            left.append(int(name))
    return left
