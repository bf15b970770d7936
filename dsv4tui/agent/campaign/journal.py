"""A campaign's journal: append-only JSON lines on the host, the truth until the console has
stored it.

Every line is one event (``type``, ``v``, plus ``seq``: the line's number in the journal, and
``t``: the host's wall clock), ASCII only (``json.dumps`` escapes the rest), written with one
``write`` and flushed at once, so a runner killed at any moment leaves at most one torn last
line. :func:`read_lines` hands out complete lines only and reports a torn line instead of
raising; a runner that resumes a journal ending in a torn line starts a new line first, so the
torn one stays on its own and is reported once.

A full disk (ENOSPC, or EDQUOT: over quota) is not a torn line: the writer keeps a
:class:`Reserve` (a file of real bytes beside the journal), frees it at the first refused
write, finishes that line with the space it gave back and from then on refuses every event
(:class:`DiskFull`) but the runner's last words (``last=True``): where it stopped and why.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

# Events after which the journal is fsync'ed (the end of something worth a disk flush).
_SYNC_EVENTS = ("level", "run_end", "variant_end", "campaign_end", "launch_end", "kernels")
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
RESERVE_BYTES = 256 << 10  # the runner's last event, runner.json and its log line fit in it


def disk_full(exc: BaseException) -> bool:
    """The disk (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def free_bytes(path: str) -> Optional[int]:
    """Bytes this user may still write on the file system of ``path`` (None: unknown)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return int(st.f_bavail) * int(st.f_frsize)


def size_text(n: Optional[int]) -> str:
    if n is None:
        return "an unknown amount"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d bytes" % n


class DiskFull(OSError):
    """A journal write refused because the disk is full (every later one is refused too)."""


class Reserve:
    """Room kept for the runner's last words: ``size`` real bytes (random, so no file system
    stores them as a hole or compresses them away) in a file, given back when the disk fills."""

    def __init__(self, path: str, size: int = RESERVE_BYTES) -> None:
        self.path = path
        self.size = size

    def make(self) -> None:
        """Write the file; OSError (the file removed) when the disk cannot hold it."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                left = self.size
                while left > 0:
                    left -= os.write(fd, os.urandom(min(left, 65536)))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            self.free()
            raise

    def free(self) -> bool:
        try:
            os.unlink(self.path)
        except OSError:
            return False
        return True


class Journal:
    """The writer. One per runner process; thread-safe."""

    def __init__(self, path: str, reserve: Optional[Reserve] = None) -> None:
        self.path = path
        self.reserve = reserve
        self.full: Optional[str] = None  # why writes stopped: the disk is full
        self._lock = threading.Lock()
        self.seq, torn_tail = _scan(path)
        # unbuffered: a write the disk refuses leaves nothing half in a buffer to be flushed
        # later; what reached the file is known to the byte
        self._fh = open(path, "ab", buffering=0)  # noqa: SIM115 - open for the runner's life
        if torn_tail:
            self._append(b"\n")  # keep the torn line apart: the next event starts clean
        self.bytes_written = 0

    def note_full(self, exc: BaseException, doing: str) -> str:
        """The disk is full (found while ``doing``): free the reserve, refuse later events;
        returns (and keeps) the reason, the first one found."""
        if self.full is None:
            where = os.path.dirname(os.path.abspath(self.path))
            free = free_bytes(where)  # before the reserve goes back
            freed = self.reserve.free() if self.reserve is not None else False
            self.full = "host disk full: %s while %s (%s free in %s)" % (
                getattr(exc, "strerror", None) or exc, doing, size_text(free), where)
            if not freed and self.reserve is not None:
                self.full += "; no reserve to give back"
        return self.full

    def _append(self, data: bytes) -> None:
        """All of ``data`` at the journal's end; on a full disk, once, the reserve freed and
        the rest written with the room it gave back."""
        done = 0
        retried = False
        while done < len(data):
            try:
                done += self._fh.write(data[done:]) or 0
            except OSError as exc:
                if not disk_full(exc):
                    raise
                self.note_full(exc, "writing the journal")
                if retried:
                    raise DiskFull(exc.errno, self.full) from None
                retried = True

    def write(self, event: Dict[str, Any], last: bool = False) -> None:
        """Append ``event``. DiskFull once the disk is full (after this event is written
        in full if the reserve made room for it); ``last``: the runner's last words, written
        even then."""
        with self._lock:
            if self.full is not None and not last:
                raise DiskFull(errno.ENOSPC, self.full)
            event["seq"] = self.seq
            self.seq += 1  # first: an interrupt below can leave a gap, never a repeat
            event.setdefault("t", round(time.time(), 6))
            data = (json.dumps(event, separators=(",", ":"), allow_nan=False, default=str)
                    + "\n").encode("ascii")
            self._append(data)
            self.bytes_written += len(data)
            if event.get("type") in _SYNC_EVENTS or last:
                try:
                    os.fsync(self._fh.fileno())
                except OSError as exc:
                    if not disk_full(exc):
                        raise
                    self.note_full(exc, "syncing the journal")
            if self.full is not None and not last:
                raise DiskFull(errno.ENOSPC, self.full)

    def close(self) -> None:
        with self._lock:
            try:
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
