"""A campaign's journal: append-only JSON lines on the host, the truth until the console has
stored it.

Every line is one event (``type``, ``v``, plus ``seq``: the line's number in the journal, and
``t``: the host's wall clock), ASCII only (``json.dumps`` escapes the rest), written with one
``write`` and flushed at once, so a runner killed at any moment leaves at most one torn last
line. :func:`read_lines` hands out complete lines only and reports a torn line instead of
raising; a runner that resumes a journal ending in a torn line starts a new line first, so the
torn one stays on its own and is reported once.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

# Events after which the journal is fsync'ed (the end of something worth a disk flush).
_SYNC_EVENTS = ("level", "run_end", "variant_end", "campaign_end", "launch_end")


class Journal:
    """The writer. One per runner process; thread-safe."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.seq, torn_tail = _scan(path)
        self._fh = open(path, "ab")  # noqa: SIM115 - open for the runner's life
        if torn_tail:
            self._fh.write(b"\n")  # keep the torn line apart: the next event starts clean
            self._fh.flush()
        self.bytes_written = 0

    def write(self, event: Dict[str, Any]) -> None:
        with self._lock:
            event["seq"] = self.seq
            self.seq += 1  # first: an interrupt below can leave a gap, never a repeat
            event.setdefault("t", round(time.time(), 6))
            data = (json.dumps(event, separators=(",", ":"), allow_nan=False, default=str)
                    + "\n").encode("ascii")
            self._fh.write(data)
            self._fh.flush()
            self.bytes_written += len(data)
            if event.get("type") in _SYNC_EVENTS:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except (OSError, ValueError):
                pass
            self._fh.close()


def _scan(path: str) -> Tuple[int, bool]:
    """``(number of lines, whether the last one is torn)`` of an existing journal."""
    try:
        with open(path, "rb") as fh:
            lines = 0
            last = b""
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return 0, False
    torn = bool(last) and last != b"\n"
    return lines + (1 if torn else 0), torn


def parse_line(raw: bytes) -> Optional[Dict[str, Any]]:
    """One journal line (without its newline) as an event, or None when it is not one."""
    try:
        obj = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) and "type" in obj else None


def read_lines(path: str, offset: int = 0, limit: int = 8 << 20, final: bool = False,
               max_events: Optional[int] = None
               ) -> Tuple[List[Tuple[bytes, Optional[Dict[str, Any]]]], int,
                          List[Dict[str, Any]]]:
    """Complete lines from byte ``offset``: ``(lines, new_offset, torn)``.

    ``lines``: ``(raw line without newline, its event)`` for each line that is an event.
    ``torn``: ``{"offset", "end", "text"}`` for each line that is not (a torn write); with
    ``final`` (the runner is gone) a last line without a newline counts as torn too, otherwise
    it is left for the next read (it may still be being written). ``max_events``: stop after
    that many events (``new_offset`` is then just past the last one), so a reader can store
    its position chunk by chunk.
    """
    out: List[Tuple[bytes, Optional[Dict[str, Any]]]] = []
    torn: List[Dict[str, Any]] = []
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(limit)
    except OSError:
        return out, offset, torn
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        raw = data[pos:nl]
        if raw:
            ev = parse_line(raw)
            if ev is None:
                torn.append({"offset": offset + pos, "end": offset + nl + 1,
                             "text": raw[:200].decode("ascii", "replace")})
            else:
                out.append((raw, ev))
        pos = nl + 1
        if max_events is not None and len(out) >= max_events:
            return out, offset + pos, torn
    rest = data[pos:]
    if final and rest and len(data) < limit:
        ev = parse_line(rest)
        if ev is None:
            torn.append({"offset": offset + pos, "end": offset + len(data),
                         "text": rest[:200].decode("ascii", "replace")})
        else:  # a complete event whose newline never made it
            out.append((rest, ev))
        pos = len(data)
    return out, offset + pos, torn


def events(path: str) -> Iterator[Dict[str, Any]]:
    """Every event of a journal, in order (torn lines skipped)."""
    offset = 0
    while True:
        lines, new, _ = read_lines(path, offset, final=True)
        for _, ev in lines:
            if ev is not None:
                yield ev
        if new == offset:
            return
        offset = new
