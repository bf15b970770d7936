"""What the agent keeps of the server it runs, in its cache dir: the state file (the record of
the last server it started or adopted), the exit record its watcher writes, and the server
lock (an flock, so two consoles cannot start/stop/adopt at once; its holder described beside
it). Read by ``server``, ``logs``, ``adopt``, ``target`` and the campaign runner.
"""

from __future__ import annotations

import fcntl
import os
import time
from typing import Any, Dict, Optional

from dsv4tui.agent import protocol, state
from dsv4tui.agent.host import bench_lock, procs
from dsv4tui.agent.state import cache_dir

STATE_FILE = "server.json"
EXIT_FILE = "server.exit.json"
LOCK_FILE = "server.lock"


def path(name: str) -> str:
    return str(cache_dir() / name)


def read_json(name: str) -> Optional[Dict[str, Any]]:
    return state.read_json(str(path(name)))


def write_json(name: str, data: Dict[str, Any]) -> None:
    state.write_json(str(path(name)), data)


def read_state() -> Optional[Dict[str, Any]]:
    """The record of the last server this agent started (None if never)."""
    return read_json(STATE_FILE)


def write_state(state: Dict[str, Any]) -> None:
    write_json(STATE_FILE, state)


def startup_s(state: Dict[str, Any], ready_at: Optional[float] = None) -> Optional[float]:
    """THE startup time of a server, wherever it is shown (server start and status, the
    campaign runner, the dashboard): launch to ready, on the host's wall clock -- from the
    agent spawning the server (``started_at``) to the agent seeing it ready (``ready_at``:
    its log's ready line or /health 200, recorded by :func:`mark_ready`). ``ready_at``
    given: that moment instead (the log's ready line for a server no start waited for)."""
    start = state.get("started_at")
    end = ready_at if ready_at is not None else state.get("ready_at")
    if not isinstance(start, (int, float)) or not isinstance(end, (int, float)):
        return None
    return round(max(0.0, float(end) - float(start)), 3)


def mark_ready(state: Dict[str, Any]) -> None:
    """The server of ``state`` is ready now: record it once (``ready_at``) in ``state`` and in
    the state file (when the file still records that launch), so status says the same
    startup as the start that saw it."""
    if state.get("ready_at") is not None:
        return
    state["ready_at"] = time.time()
    fresh = read_state()
    if fresh and fresh.get("pid") == state.get("pid") and \
            fresh.get("started_at") == state.get("started_at") and fresh.get("ready_at") is None:
        fresh["ready_at"] = state["ready_at"]
        write_state(fresh)


def ours_alive(state: Optional[Dict[str, Any]]) -> bool:
    """Is the server the state file records running (not stopped, the same process)?"""
    if not state or state.get("stopped_at"):
        return False
    return procs.alive(state.get("pid"), state.get("proc_start"))


def forget_exit() -> None:
    """A new server's record starts clean: the previous one's exit record is not its."""
    try:
        os.unlink(path(EXIT_FILE))
    except OSError:
        pass


def exit_record(pid: int, wait_s: float = 0.0) -> Dict[str, Any]:
    """How server ``pid`` ended, as its watcher recorded it ({} when not (yet) recorded)."""
    deadline = time.monotonic() + wait_s
    while True:
        rec = read_json(EXIT_FILE)
        if rec and rec.get("pid") == pid:
            return rec
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.05)


# -- the lock --------------------------------------------------------------------------------

class ServerLock:
    """An exclusive, non-blocking flock; its owner is described in ``server.lock.json``."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.fd: Optional[int] = None

    def __enter__(self) -> "ServerLock":
        fd = os.open(path(LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            owner = read_json(LOCK_FILE + ".json") or {}
            raise protocol.AgentError(
                "busy", "busy: %s in progress by %s" % (owner.get("action", "a server command"),
                                                        owner_text(owner)),
                protocol.EXIT_BUSY, owner=owner) from None
        self.fd = fd
        ssh = os.environ.get("SSH_CLIENT", "").split()
        write_json(LOCK_FILE + ".json", {
            "action": "server " + self.action, "pid": os.getpid(), "since": time.time(),
            "user": bench_lock.user_name(),
            "client": ssh[0] if ssh else "this host"})
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            try:
                os.unlink(path(LOCK_FILE + ".json"))
            except OSError:
                pass
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def owner_text(owner: Dict[str, Any]) -> str:
    """Who holds the server lock, for a ``busy`` message."""
    if not owner:
        return "another dsv4tui agent"
    since = time.strftime("%H:%M:%S", time.localtime(owner.get("since") or time.time()))
    return "agent pid %s (user %s, from %s) since %s" % (
        owner.get("pid"), owner.get("user") or "?", owner.get("client") or "?", since)


def lock_busy() -> Optional[Dict[str, Any]]:
    """Who holds the server lock (a start/stop/restart in progress), else None."""
    fd = os.open(path(LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return read_json(LOCK_FILE + ".json") or {}
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
