"""SIGHUP (the terminal closed) and SIGTERM (someone asked us to stop) on the running event
loop: the dashboards quit as ``q`` does -- a running sweep is marked, the demo's simulated
server is stopped -- instead of dying with the server still running."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import NoReturn

HANGUP = signal.SIGHUP
QUIT_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


def on_quit_signals(callback: Callable[[int], None]) -> None:
    """``callback(signal number)`` on SIGHUP and SIGTERM (where the loop can take them)."""
    loop = asyncio.get_running_loop()
    for sig in QUIT_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, callback, sig)


def end_after_hangup() -> NoReturn:
    """The terminal is gone, so there is no screen to restore: end the process now, as a
    hangup would have (128 + SIGHUP)."""
    os._exit(128 + signal.SIGHUP)
