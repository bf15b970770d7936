"""Who owns a ``running`` run: the console process that writes it, named by a token.

A token is ``host:pid:start`` (``start``: the process's start time in clock ticks on Linux, so
a reused pid is not mistaken for the owner). Only a token of this machine can be checked; a
run owned by a console on another machine is "elsewhere", never "alive" or "gone".
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Literal

OwnerState = Literal["alive", "gone", "elsewhere"]


def _proc_start(pid: int) -> str:
    """The process's start time in clock ticks (Linux), so a reused pid is not mistaken."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_token(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_proc_start(pid)}"


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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "alive"
    except OSError:  # pid out of range and the like: nothing can own the run
        return "gone"
    return "alive" if not start or _proc_start(pid) == start else "gone"


def owner_alive(token: str | None) -> bool:
    """False when the owner ran on this machine and is gone; True when unsure (elsewhere)."""
    return owner_state(token) != "gone"
