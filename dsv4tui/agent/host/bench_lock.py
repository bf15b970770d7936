"""The host's one load generator: a lock held for the whole life of a campaign runner (a
single sweep is a one-variant campaign), so a second console, a second campaign or an orphan
never measures beside the first, and a manual restart never pulls the server from under it.

``flock`` on ``bench.lock`` in the agent's cache dir (released by the kernel when the holder
dies, so a killed runner never leaves a stale lock); who holds it is in ``bench.lock.json``.
Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from typing import Any, Dict, Optional

from dsv4tui.agent import protocol
from dsv4tui.agent.state import cache_dir

LOCK_FILE = "bench.lock"
_held: Optional[int] = None  # our fd while this process holds the lock


def _path(name: str) -> str:
    return str(cache_dir() / name)


def holder() -> Dict[str, Any]:
    try:
        with open(_path(LOCK_FILE + ".json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def holder_text(info: Dict[str, Any]) -> str:
    if not info:
        return "another dsv4tui load generator"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since") or time.time()))
    what = "%s %r" % (info.get("kind") or "campaign", info.get("name") or "?")
    who = ("id %s, runner pid %s" % (info["id"], info.get("pid")) if info.get("id")
           else "agent pid %s" % info.get("pid"))
    return "%s (%s, user %s, from %s) since %s" % (
        what, who, info.get("user") or "?", info.get("client") or "?", since)


def busy_error(info: Dict[str, Any], doing: str) -> protocol.AgentError:
    hint = ("wait for it, attach to it, or cancel it (dsv4tui campaign cancel HOST %s)"
            % info["id"] if info.get("id") else "wait for it to end")
    return protocol.AgentError(
        "busy", "busy: %s is running on this host, so %s would disturb it; %s" % (
            holder_text(info), doing, hint), protocol.EXIT_BUSY, holder=info)


def acquire(info: Dict[str, Any], wait_s: float = 2.0) -> bool:
    """Take the lock for this process (False when someone else holds it ``wait_s`` long:
    a probe of :func:`held_by_other` holds it for an instant, never that long)."""
    global _held
    if _held is not None:
        return True
    fd = os.open(_path(LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return False
            time.sleep(0.05)
    _held = fd
    ssh = os.environ.get("SSH_CLIENT", "").split()
    record = dict(info, pid=os.getpid(), since=time.time(), user=user_name(),
                  client=ssh[0] if ssh else "this host")
    tmp = _path(LOCK_FILE + ".json.%d.tmp" % os.getpid())
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, _path(LOCK_FILE + ".json"))
    return True


def user_name() -> str:
    """Who runs this process (the environment may not say under sshd)."""
    name = os.environ.get("USER") or os.environ.get("LOGNAME")
    if name:
        return name
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def release() -> None:
    global _held
    if _held is None:
        return
    try:
        os.unlink(_path(LOCK_FILE + ".json"))
    except OSError:
        pass
    fcntl.flock(_held, fcntl.LOCK_UN)
    os.close(_held)
    _held = None


def held_by_other() -> Optional[Dict[str, Any]]:
    """The holder's record when another process holds the lock, else None."""
    if _held is not None:
        return None
    fd = os.open(_path(LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return holder() or {"id": None}
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_free(doing: str) -> None:
    """Raise ``busy`` (naming the holder) when another process runs a campaign here."""
    info = held_by_other()
    if info is not None:
        raise busy_error(info, doing)
