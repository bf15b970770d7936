"""Versioned JSON-lines event protocol between the agent and the console.

Every event is one JSON object on one line of stdout with at least ``type`` and ``v``.
A failing command ends with an ``error`` event and a non-zero exit code.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional

if TYPE_CHECKING:
    import asyncio

PROTOCOL_VERSION = 1

# Exit codes shared by agent and console.
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and the answer is "no" (sanity failed, server crashed ...)
EXIT_USAGE = 2
EXIT_NO_DRIVER = 3
EXIT_BUSY = 4

_lock = threading.Lock()
# Where events go: stdout, unless a host-side campaign runner points them at its journal.
_writer: Optional[Callable[[Dict[str, Any]], None]] = None
# Fields stamped on every event (the runner sets the run/variant an event belongs to, by
# rebinding the name to a new dict: threads that emit meanwhile see the old one or the new).
context: Dict[str, Any] = {}


def set_writer(writer: Optional[Callable[[Dict[str, Any]], None]]) -> None:
    """Send every event to ``writer(event)`` instead of stdout (None: back to stdout)."""
    global _writer
    _writer = writer


def make_event(type_: str, **fields: Any) -> Dict[str, Any]:
    event: Dict[str, Any] = {"type": type_, "v": PROTOCOL_VERSION}
    event.update(fields)
    return event


def emit(type_: str, **fields: Any) -> None:
    """Write one event line to stdout and flush it (thread-safe); with a writer set
    (:func:`set_writer`), hand the event to it instead."""
    ctx = context  # the runner rebinds it (never mutates it): this is one consistent dict
    event = make_event(type_, **ctx) if ctx else make_event(type_)
    event.update(fields)
    with _lock:
        if _writer is not None:
            _writer(event)
            return
    line = json.dumps(event, separators=(",", ":"), allow_nan=False, default=str)
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def write_lines(lines: Iterable[str]) -> None:
    """Write lines that are events already (a campaign journal's, as its runner wrote them)
    as they are, together: no event of another thread lands between them or inside one
    (thread-safe, as :func:`emit`). With a writer set, each goes to it as an event (lines
    that are no event are dropped)."""
    with _lock:
        if _writer is not None:
            for line in lines:
                event = parse_event(line)
                if event is not None:
                    _writer(event)
            return
        for line in lines:
            sys.stdout.write(line.rstrip("\n") + "\n")
        sys.stdout.flush()


class AgentError(Exception):
    """A failure the agent reports as an ``error`` event and exit code."""

    def __init__(self, kind: str, message: str, exit_code: int = EXIT_FAILED,
                 **details: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.exit_code = exit_code
        self.details = details


def emit_error(err: AgentError) -> None:
    emit("error", kind=err.kind, message=err.message, **err.details)


def cancel_event_on_signals() -> "asyncio.Event":
    """An event set by SIGINT/SIGTERM (and so by the console closing stdin, see
    ``--cancel-on-eof``): async commands stop at a clean point and keep what finished."""
    import asyncio
    import signal

    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, cancel.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return cancel


def parse_event(line: str) -> Optional[Dict[str, Any]]:
    """Parse one line from the agent; None for blank or non-event lines."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "type" not in obj:
        return None
    return obj
