"""Who owns a ``running`` run: the console process that writes it, named by a token.

A token is ``host:pid:start`` (``start``: the process's start time in clock ticks on Linux, so
a reused pid is not mistaken for the owner). Only a token of this machine can be checked; a
run owned by a console on another machine is "elsewhere", never "alive" or "gone".
"""

from __future__ import annotations

import os
import socket
from typing import Literal

from dsv4tui.agent.host import procs

OwnerState = Literal["alive", "gone", "elsewhere"]


def owner_token(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    start = procs.proc_start(pid)
    return f"{socket.gethostname()}:{pid}:{'' if start is None else start}"


def parse_owner(token: str | None) -> tuple[str, int, str] | None:
    """``(host, pid, start)`` of a token; None when there is none or it is malformed."""
    if not token:
        return None
    try:
        host, pid_s, start = str(token).rsplit(":", 2)
        return host, int(pid_s), start
    except ValueError:
        return None


def owner_state(token: str | None) -> OwnerState:
    """``alive`` / ``gone`` for an owner on this machine, ``elsewhere`` for another's."""
    parsed = parse_owner(token)
    if parsed is None:
        return "gone"
    host, pid, start = parsed
    if host != socket.gethostname():
        return "elsewhere"
    if start and not start.isdigit():  # no process started at that time: not the owner
        return "gone"
    return "alive" if procs.alive(pid, int(start) if start else None) else "gone"


def owner_alive(token: str | None) -> bool:
    """False when the owner ran on this machine and is gone; True when unsure (elsewhere)."""
    return owner_state(token) != "gone"
