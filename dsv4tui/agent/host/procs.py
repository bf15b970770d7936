"""Processes of this host as /proc shows them: is a PID alive (and still the process we
recorded: its start time, against PID reuse), its start time, its process group and session,
its environment (a launch's identity, ``LAUNCH_ID_VAR``, is read from it), the title it shows. One answer for the agent (the server it started, the simulator's
process) and for the console (core/store/owner: the console that owns a run).

Stdlib only: the agent is deployed on its own (Python 3.9).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

_PROCESS_NAME_MAX = 48
# Every server the agent launches gets this variable (a random id of that launch) in its
# environment; each descendant inherits it, whatever it does to its parentage (setsid, double
# fork), so the whole tree is found by it -- and only processes that carry it are ours.
LAUNCH_ID_VAR = "DSV4TUI_LAUNCH_ID"


def stat_fields(pid: int) -> Optional[List[str]]:
    """/proc/PID/stat fields after the command name: [state, ppid, pgrp, session, ...]
    (the start time is [19]); None when there is no such process (or no /proc)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def proc_start(pid: int) -> Optional[int]:
    """The process's start time in clock ticks after boot (None: not there)."""
    st = stat_fields(pid)
    return int(st[19]) if st and len(st) > 19 else None


def alive(pid: Any, start: Optional[int] = None) -> bool:
    """Is ``pid`` running (not a zombie), and, with ``start``, the same process (its start
    time) that was recorded? Anything that is not a positive PID is not alive.

    Where /proc does not show the process (no /proc: not Linux; or another user's process
    under hidepid) a signal 0 answers whether it runs, and it counts as the same process: its
    start time cannot be checked there."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    st = stat_fields(pid)
    if st is not None:
        if st[0] in ("Z", "X"):
            return False
        return start is None or (len(st) > 19 and int(st[19]) == int(start))
    try:
        os.kill(pid, 0)
    except PermissionError:  # it runs, as another user
        pass
    except OSError:  # no such process (or a PID out of range)
        return False
    return True


def proc_table() -> Dict[int, Tuple[int, int, int, int, str]]:
    """Every process: pid -> (ppid, pgrp, session, start time, state)."""
    table: Dict[int, Tuple[int, int, int, int, str]] = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit():
            continue
        st = stat_fields(int(name))
        if st and len(st) > 19:
            table[int(name)] = (int(st[1]), int(st[2]), int(st[3]), int(st[19]), st[0])
    return table


def group_members(pgid: int, start: Optional[int]) -> List[int]:
    """PIDs in process group or session ``pgid``, started no earlier than ``start``."""
    return sorted(p for p, (_, pgrp, sid, began, state) in proc_table().items()
                  if state not in ("Z", "X") and pgid in (pgrp, sid)
                  and (start is None or began >= int(start)))


def environ(pid: int) -> Dict[str, str]:
    """The process's environment (empty when unreadable: another user's process, gone)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    env: Dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def same_user(pid: int) -> bool:
    """Does ``pid`` run as this process's user (its /proc entry is ours)?"""
    try:
        return os.stat("/proc/%d" % pid).st_uid == os.getuid()
    except OSError:
        return False


def launch_id(pid: int) -> Optional[str]:
    """The launch identity ``pid`` carries (``LAUNCH_ID_VAR``); read only for processes of
    our own user (None: none, another user's, gone)."""
    return environ(pid).get(LAUNCH_ID_VAR) if same_user(pid) else None


def process_title(pid: int) -> Optional[str]:
    """argv[0] as the process shows it (``sglang::scheduler_TP0`` after setproctitle).

    None when the process is not visible here (another PID namespace, gone, no permission).
    """
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    args = [a for a in raw.split(b"\0") if a]
    if not args:
        return None
    first = os.path.basename(args[0].decode(errors="replace").split(" ")[0])
    # python3 -m sglang.launch_server ...: name the module, not the interpreter
    if first.startswith("python") and len(args) >= 3 and args[1] == b"-m":
        first = "%s -m %s" % (first, args[2].decode(errors="replace"))
    return first[:_PROCESS_NAME_MAX]
