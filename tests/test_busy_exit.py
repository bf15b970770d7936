"""Busy has its own exit code: ``dsv4tui server restart|stop HOST`` while another agent holds
the host's server lock exits 8 (not 4, the connection code), naming the holder. Locally and
over SSH (asyncssh's server in-process, the agent deployed for real)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.sim import REPO, free_port, sim_profile, subprocess_env
from plugins.ssh_server import SshHost

from dsv4tui.core import paths
from dsv4tui.core.errors import EXIT_BUSY
from dsv4tui.core.hosts.agent_runner import AgentRunner
from dsv4tui.core.hosts.local import LocalSession

HOLD = ("import sys; from dsv4tui.agent.host.server import ServerLock; "
        "lock = ServerLock('restart').__enter__(); print('held', flush=True); sys.stdin.read()")


def write_config(host: str, port: int, ssh: str | None = None) -> None:
    prof = sim_profile(port)
    lines = [f"[hosts.{host}]"] + ([f'ssh = "{ssh}"'] if ssh else []) + [
        'default_profile = "sim"', f"[hosts.{host}.profiles.sim]"]
    for key in ("python", "module", "model_path", "served_model_name", "port", "tp_size",
                "moe_runner_backend", "checkpoint"):
        lines.append(f"{key} = {json.dumps(getattr(prof, key))}")
    lines.append(f"extra_args = {json.dumps(prof.extra_args)}")
    lines.append(f"env = {{ PYTHONPATH = {json.dumps(prof.env['PYTHONPATH'])} }}")
    paths.config_file().write_text("\n".join(lines) + "\n")


def hold_lock(agent_home: Path) -> subprocess.Popen[str]:
    """Another agent holding the server lock of ``agent_home`` (as during a restart)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=REPO,
                              env=subprocess_env(DSV4TUI_AGENT_HOME=str(agent_home)))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.fixture
def holder_of(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    held: list[subprocess.Popen[str]] = []
    yield held
    for p in held:
        p.kill()
        p.wait()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsv4tui", *args], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def assert_busy(res: subprocess.CompletedProcess[str], holder: subprocess.Popen[str]) -> None:
    assert res.returncode == EXIT_BUSY, (res.returncode, res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in res.stderr
    assert err[0].startswith("dsv4tui: error: busy: server restart in progress by agent pid "
                             f"{holder.pid} (user ")


def test_restart_and_stop_while_locked_exit_8_locally(holder_of: list) -> None:
    write_config("local", free_port())
    holder = hold_lock(paths.local_agent_state_dir())
    holder_of.append(holder)
    assert_busy(cli("server", "restart", "local"), holder)
    assert_busy(cli("server", "stop", "local"), holder)
    res = cli("server", "restart", "local", "--json")
    assert res.returncode == EXIT_BUSY and f"agent pid {holder.pid}" in res.stderr


async def test_restart_while_locked_exit_8_over_ssh(ssh_server: SshHost, holder_of: list) -> None:
    write_config("box", free_port(), ssh="testbox")
    holder = hold_lock(ssh_server.remote_home / ".cache" / "dsv4tui")
    holder_of.append(holder)
    assert_busy(await asyncio.to_thread(cli, "server", "restart", "box"), holder)
    assert_busy(await asyncio.to_thread(cli, "server", "stop", "box"), holder)


async def test_agent_exit_code_4_without_event_is_busy_not_connection() -> None:
    """The agent's own 4 is busy; a console 4 would say 'connection problem'."""
    runner = AgentRunner(LocalSession(), [sys.executable, "-c", "import sys; sys.exit(4)"])
    from dsv4tui.core.errors import AgentFailed

    with pytest.raises(AgentFailed) as err:
        await runner.call("server", "stop")
    assert err.value.exit_code == EXIT_BUSY
