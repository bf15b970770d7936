"""What forking a detached child needs (the server's watcher, the campaign runner): the
handshake the child writes on a pipe before it closes it, closing the fds it inherited, and
SIGTERM/SIGINT held off while a step must not be cut in half."""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Dict


def close_fds_except(keep: Any) -> None:
    """In a forked child: close every fd above stderr but ``keep``."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    try:
        high = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        high = 1 << 16
    os.closerange(low, max(high, low))


class signals_deferred:
    """SIGTERM/SIGINT wait until the block ends (then they take effect, as usual)."""

    _SIGS = (signal.SIGTERM, signal.SIGINT)

    def __enter__(self) -> "signals_deferred":
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, self._SIGS)
        except (AttributeError, OSError, ValueError):
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self._SIGS)
        except (AttributeError, OSError, ValueError):
            pass


def read_handshake(fd: int, pid: int) -> Dict[str, Any]:
    """What a forked child wrote on ``fd`` before closing it (a JSON object; {} if nothing
    readable), the fd closed; the child is reaped if it already ended."""
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    try:
        os.waitpid(pid, os.WNOHANG)
    except OSError:
        pass
    try:
        reply = json.loads(data.decode() or "{}")
    except ValueError:
        return {}
    return reply if isinstance(reply, dict) else {}
