"""``server stop`` ends every process the server started, also one that moved itself into its
own session (setsid) and one that ignores SIGTERM; real subprocesses through the real agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import AgentEnv, event, free_port, group_alive, sim_argv, subprocess_env

from dsv4tui import main as cli
from dsv4tui.agent.host import procs
from dsv4tui.agent.host import server as agent_server
from dsv4tui.cli import server as server_cli
from dsv4tui.core import paths

# The stand-in: main (HTTP-less) forks a child that calls setsid() and forks a grandchild that
# ignores SIGTERM; a fourth process stays in the group. All write their PIDs to a file.
STAND_IN = textwrap.dedent('''
    import os, signal, sys, time
    out = sys.argv[1]
    def note(tag):
        with open(out, "a") as fh:
            fh.write("%s %d %d\\n" % (tag, os.getpid(), os.getsid(0)))
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            note("grandchild")
            while True:
                time.sleep(1)
        note("setsid-child")
        while True:
            time.sleep(1)
    if os.fork() == 0:
        note("group-child")
        while True:
            time.sleep(1)
    note("main")
    while True:
        time.sleep(1)
''')


def tree_pids(path: Path, want: int = 4, timeout: float = 10.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= want:
            return {ln.split()[0]: int(ln.split()[1]) for ln in lines}
        time.sleep(0.05)
    raise AssertionError(f"the stand-in wrote {path.read_text() if path.exists() else ''!r}")


def running(pid: int) -> bool:
    return procs.alive(pid)


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return script, tmp_path / "pids.txt"


def test_stop_ends_the_whole_tree_also_setsid_children(agent_env: AgentEnv,
                                                       stand_in: tuple[Path, Path]) -> None:
    script, pids_file = stand_in
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args([sys.executable, str(script),
                                                        str(pids_file)], port))
    assert code == 0, events
    pid = event(events, "started")["pid"]
    pids = tree_pids(pids_file)
    try:
        assert pids["main"] == pid
        assert os.getsid(pids["setsid-child"]) == pids["setsid-child"] != os.getsid(pid)
        assert os.getsid(pids["grandchild"]) == pids["setsid-child"]
        assert os.getpgid(pids["group-child"]) == pid

        code, events = agent_env.run("server", "stop", "--grace", "5", timeout=60)
        stopping, stopped = event(events, "stopping"), event(events, "stopped")
        assert sorted(stopping["group"]) == sorted(pids.values())  # recorded before SIGTERM
        assert code == 0, events
        assert stopped["how"] == "sigterm" and stopped["leftover_pids"] == []
        assert [tag for tag, p in pids.items() if running(p)] == []
    finally:
        for p in pids.values():
            if running(p):
                os.kill(p, 9)


def test_stop_leaves_alone_what_it_did_not_start(agent_env: AgentEnv, tmp_path: Path,
                                                 stand_in: tuple[Path, Path]) -> None:
    """A process of the same user that is not in the tree survives; a recorded PID whose
    start time differs (reused) is not touched."""
    import subprocess

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 start_new_session=True)
    script, pids_file = stand_in
    port = free_port()
    try:
        code, events = agent_env.run(*agent_env.start_args([sys.executable, str(script),
                                                            str(pids_file)], port))
        assert code == 0, events
        pid = event(events, "started")["pid"]
        tree_pids(pids_file)
        # a state file whose record points at the bystander with another start time
        fake = {"pid": bystander.pid, "pgid": bystander.pid,
                "proc_start": (procs.proc_start(bystander.pid) or 0) + 1}
        tree = agent_server.ServerTree(fake["pid"], fake["proc_start"], fake["pgid"])
        assert tree.scan() == []
        tree.signal([bystander.pid], 9)
        assert bystander.poll() is None
        code, events = agent_env.run("server", "stop", "--grace", "5")
        assert code == 0 and event(events, "stopped")["leftover_pids"] == []
        assert bystander.poll() is None and bystander.pid not in event(events, "stopping")["group"]
        assert not running(pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_leftovers_are_reported_and_exit_non_zero(agent_env: AgentEnv,
                                                  stand_in: tuple[Path, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """When a process cannot be ended (here: SIGKILL is not sent), the stop says which."""
    script, pids_file = stand_in
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args([sys.executable, str(script),
                                                        str(pids_file)], port))
    assert code == 0, events
    pids = tree_pids(pids_file)
    state = json.loads((agent_env.home / "server.json").read_text())
    monkeypatch.setenv("DSV4TUI_AGENT_HOME", str(agent_env.home))
    monkeypatch.setattr(agent_server, "KILL_WAIT_S", 0.3)
    real = agent_server._signal_if_same

    def no_sigkill(pid: int, start: int, sig: int) -> None:
        if sig != 9:
            real(pid, start, sig)

    monkeypatch.setattr(agent_server, "_signal_if_same", no_sigkill)
    try:
        result = agent_server.stop_server(state, grace=2.0, gpu_wait=0.0)
        assert result["leftover_pids"] == [pids["grandchild"]]  # it ignores SIGTERM
        assert result["how"] == "sigterm"
    finally:
        for p in pids.values():
            if running(p):
                os.kill(p, 9)


# -- issue 23: a crash and PID reuse, a daemon that left the tree --------------------------

# main double-forks a daemon (fork, setsid, fork, the middle one exits): the daemon has no
# parent link to the server and a session of its own; only its environment says whose it is.
DAEMON = textwrap.dedent('''
    import os, signal, sys, time
    out, ignore_term = sys.argv[1], sys.argv[2:] == ["ignore-sigterm"]
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if ignore_term:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(out, "a") as fh:
                fh.write("daemon %d\\n" % os.getpid())
            while True:
                time.sleep(1)
        os._exit(0)
    os.wait()
    with open(out, "a") as fh:
        fh.write("main %d\\n" % os.getpid())
    while True:
        time.sleep(1)
''')


def wait_until(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    return sorted(p for p, row in procs.proc_table().items() if row[0] == pid)


@pytest.fixture
def daemon_server(agent_env: AgentEnv, tmp_path: Path) -> Any:
    """Start the double-forking stand-in through the agent; -> (pids by tag, start events)."""
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    pids_file = tmp_path / "daemon-pids.txt"
    started: list[dict[str, int]] = []

    def start(*extra: str) -> dict[str, int]:
        port = free_port()
        code, events = agent_env.run(*agent_env.start_args(
            [sys.executable, str(script), str(pids_file), *extra], port))
        assert code == 0, events
        pids = tree_pids(pids_file, want=2)
        assert pids["main"] == event(events, "started")["pid"]
        started.append(pids)
        return pids

    yield start
    for pids in started:
        for p in pids.values():
            if running(p):
                os.kill(p, 9)


def test_a_double_forked_setsid_daemon_is_stopped_too(agent_env: AgentEnv,
                                                      daemon_server: Any) -> None:
    """Before: the daemon survived and stop said clean (leftover_pids [], exit 0)."""
    pids = daemon_server()
    daemon = pids["daemon"]
    assert os.getsid(daemon) != os.getsid(pids["main"]) == pids["main"]  # a session of its own
    assert procs.stat_fields(daemon)[1] != str(pids["main"])  # no parent link to the server
    code, events = agent_env.run("server", "stop", "--grace", "5", timeout=60)
    assert daemon in event(events, "stopping")["group"]
    stopped = event(events, "stopped")
    assert code == 0 and stopped["leftover_pids"] == [], events
    wait_until(lambda: not running(daemon), "the daemon survived the stop", 5)
    assert not running(pids["main"])


def test_a_daemon_that_cannot_be_stopped_is_reported(agent_env: AgentEnv, daemon_server: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """It ignores SIGTERM and (here) SIGKILL is not sent: the stop names it, exit non-zero."""
    pids = daemon_server("ignore-sigterm")
    state = agent_env.state()
    monkeypatch.setenv("DSV4TUI_AGENT_HOME", str(agent_env.home))
    monkeypatch.setattr(agent_server, "KILL_WAIT_S", 0.3)
    monkeypatch.setattr(agent_server, "STRAGGLER_GRACE_S", 0.3)
    real = agent_server._signal_if_same
    monkeypatch.setattr(agent_server, "_signal_if_same",
                        lambda pid, start, sig: real(pid, start, sig) if sig != 9 else None)
    result = agent_server.stop_server(state, grace=2.0, gpu_wait=0.0)
    assert result["how"] == "sigterm" and result["leftover_pids"] == [pids["daemon"]]
    assert running(pids["daemon"]) and not running(pids["main"])


def test_stop_after_a_crash_and_pid_reuse_leaves_the_bystander_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``server stop local`` after the server's group was SIGKILLed and its PID now belongs to
    an unrelated process-group leader. Before: it SIGTERMed and SIGKILLed the bystander
    ("killed pid ... with SIGKILL", exit 0)."""
    home = paths.local_agent_state_dir()
    sim_state = tmp_path / "sim-state.json"
    agent = AgentEnv(subprocess_env(DSV4TUI_AGENT_HOME=str(home),
                                    DSV4TUI_SIM_STATE=str(sim_state)), home, sim_state)
    port = free_port()
    code, events = agent.run(*agent.start_args(sim_argv(port), port, "--wait-ready"))
    assert code == 0, events
    pid = event(events, "started")["pid"]
    os.killpg(pid, signal.SIGKILL)  # the crash
    wait_until(lambda: not group_alive(pid) and not running(pid), "the server outlived SIGKILL")
    # an unrelated process-group leader (with a child in its group) ...
    bystander = subprocess.Popen(["setsid", "sh", "-c", "sleep 600 & wait"])
    try:
        wait_until(lambda: children(bystander.pid), "the bystander's child did not start")
        child = children(bystander.pid)[0]
        assert os.getpgid(child) == bystander.pid == os.getsid(bystander.pid)
        # ... gets the crashed server's PID in server.json: what kernel PID reuse looks like
        state = agent.state()
        state.update(pid=bystander.pid, pgid=bystander.pid)
        (home / "server.json").write_text(json.dumps(state))

        code = cli.main(["server", "status", "local"])
        out = capsys.readouterr().out
        assert code == 0 and "crashed" in out, out
        code = cli.main(["server", "stop", "local", "--grace", "2"])
        out = capsys.readouterr().out
        assert bystander.poll() is None and running(child), out
        assert code == 0 and "SIGKILL" not in out and "SIGTERM" not in out, out
        assert f"pid {bystander.pid} is another process now" in out, out
        assert f"it and pids [{child}] of its process group were left alone" in out, out
    finally:
        os.killpg(bystander.pid, signal.SIGKILL)
        bystander.wait()


def test_a_crashed_servers_orphans_are_stopped_and_said_so(agent_env: AgentEnv,
                                                           stand_in: tuple[Path, Path]) -> None:
    """The main process died (SIGKILL) and left its children running: the stop ends them
    (they carry the launch's identity) and says the server had already exited."""
    script, pids_file = stand_in
    port = free_port()
    code, events = agent_env.run(*agent_env.start_args([sys.executable, str(script),
                                                        str(pids_file)], port))
    assert code == 0, events
    pids = tree_pids(pids_file)
    try:
        os.kill(pids["main"], signal.SIGKILL)
        wait_until(lambda: not running(pids["main"]), "main outlived SIGKILL")
        wait_until(lambda: procs.stat_fields(pids["group-child"])[1] != str(pids["main"]),
                   "the group child was not reparented")
        code, events = agent_env.run("server", "stop", "--grace", "5", timeout=60)
        stopped = event(events, "stopped")
        assert code == 0 and stopped["how"] == "orphans" and stopped["leftover_pids"] == []
        assert sorted(event(events, "stopping")["group"]) == sorted(
            p for tag, p in pids.items() if tag != "main")
        assert [tag for tag, p in pids.items() if running(p)] == []
        assert "already exited" in server_cli.stop_text(stopped)
    finally:
        for p in pids.values():
            if running(p):
                os.kill(p, 9)
