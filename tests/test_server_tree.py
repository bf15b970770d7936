"""``server stop`` ends every process the server started, also one that moved itself into its
own session (setsid) and one that ignores SIGTERM; real subprocesses through the real agent."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from plugins.sim import AgentEnv, event, free_port

from dsv4tui.agent import procs
from dsv4tui.agent import server as agent_server

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
