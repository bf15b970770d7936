"""``logs [FILE] [--follow] [--from-start | --lines N]``: stream a server log, raw and parsed.

Events: ``lines`` (a batch of raw lines, with each one's class: ``levels`` 0 info / 1 warning /
2 error and ``tps`` the TP rank or null, from :class:`~dsv4tui.agent.host.logparse.LineLevels`), ``log_event`` (one parsed event from
:mod:`dsv4tui.agent.host.logparse`), ``log_rotated`` (the file was replaced or truncated),
``log_waiting`` (following a file that does not exist yet), ``log_end`` (not following).
FILE defaults to the log of the server this agent started (or adopted), else -- ``--port`` --
the log file the server on that port writes to (its stdout/stderr: a server someone started
by hand with ``> server.log 2>&1``), else the last server's log. tqdm progress (``\\r`` repaints
without a newline) is parsed as it arrives, so weight loading shows live.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent import protocol
from dsv4tui.agent.host import adopt, health, logparse, server_state

BATCH_S = 0.2
BATCH_LINES = 500
POLL_S = 0.1
_MAX_LINE = 1 << 20
_READ_MAX = 4 << 20
_PROGRESS = ("load_weights_progress", "cuda_graph_progress")


class LogTail:
    """Reads a file incrementally: complete lines, plus progress from unfinished tqdm lines.

    Survives rotation (a new inode at the path: reopen from its start) and truncation.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fh: Optional[Any] = None
        self._inode: Optional[int] = None
        self._pending = b""
        self.rotated = False

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open while following
        except OSError:
            return False
        self._fh = fh
        self._inode = os.fstat(fh.fileno()).st_ino
        self._pending = b""
        return True

    def exists(self) -> bool:
        return self._fh is not None or self._open()

    def seek_tail(self, lines: int) -> None:
        """Start ``lines`` lines before the end (0: at the end)."""
        if not self.exists():
            return
        assert self._fh is not None
        end = self._fh.seek(0, os.SEEK_END)
        if lines <= 0:
            return
        pos, data = end, b""
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(pos, 64 * 1024)
            pos -= step
            self._fh.seek(pos)
            data = self._fh.read(step) + data
        parts = data.split(b"\n")
        if data.endswith(b"\n"):
            parts = parts[:-1]
        keep = parts[-lines:]
        start = end - len(b"\n".join(keep)) - (1 if data.endswith(b"\n") else 0)
        self._fh.seek(max(start, 0))

    def _check_rotation(self) -> None:
        assert self._fh is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if st.st_ino != self._inode or st.st_size < self._fh.tell():
            self._fh.close()
            self._fh = None
            self.rotated = True
            self._open()

    def read(self) -> Tuple[List[str], Optional[str]]:
        """``(complete lines, the unfinished last line or None)``; lines keep inner ``\\r``."""
        if self._fh is None and not self._open():
            return [], None
        self._check_rotation()
        if self._fh is None:
            return [], None
        chunk = self._fh.read(_READ_MAX)
        data = self._pending + (chunk or b"")
        parts = data.split(b"\n")
        self._pending = parts.pop()
        if len(self._pending) > _MAX_LINE:
            parts.append(self._pending)
            self._pending = b""
        lines = [p.decode("utf-8", "replace") for p in parts]
        partial = self._pending.decode("utf-8", "replace") if self._pending else None
        return lines, partial

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def redactor(secrets: List[str]) -> Any:
    """A function hiding ``secrets`` (the API key: SGLang logs its server_args) in a line."""
    secrets = [s for s in secrets if s and len(s) >= 4]

    def redact(line: str) -> str:
        for secret in secrets:
            line = line.replace(secret, "***")
        return line

    return redact


def server_secrets(state: Optional[Dict[str, Any]]) -> List[str]:
    """Secrets of the server we started: the API key, read from the env var it names."""
    name = (state or {}).get("api_key_env")
    value = os.environ.get(name) if name else None
    return [value] if value else []


class ParsedTail:
    """A LogTail + LogParser: new lines and their parsed events, progress deduplicated."""

    def __init__(self, path: str, secrets: Optional[List[str]] = None) -> None:
        self.tail = LogTail(path)
        self.redact = redactor(secrets or [])
        self.parser = logparse.LogParser()
        self.levels = logparse.LineLevels()
        self._progress: Dict[Tuple[str, Any], int] = {}

    def _keep(self, ev: Dict[str, Any]) -> bool:
        """Progress events once per (bar, percent): live repaints and the finished line agree."""
        if ev["kind"] not in _PROGRESS:
            return True
        key = (ev["kind"], ev.get("line"))
        if ev["percent"] <= self._progress.get(key, -1):
            return False
        self._progress[key] = ev["percent"]
        return True

    def poll(self) -> Tuple[List[str], List[Dict[str, Any]]]:
        lines, partial = self.tail.read()
        lines = [self.redact(line) for line in lines]
        partial = self.redact(partial) if partial else partial
        if self.tail.rotated:
            self.parser = logparse.LogParser()
            self.levels = logparse.LineLevels()
            self._progress = {}
        events: List[Dict[str, Any]] = []
        for line in lines:
            events.extend(e for e in self.parser.feed(line) if self._keep(e))
        if partial and "\r" in partial:
            # tqdm repaints start with '\r'; the text after the last one may be half written.
            done = [s for s in partial.split("\r")[:-1] if s.strip()]
            ev = logparse.classify(done[-1]) if done else None
            if ev is not None and ev["kind"] in _PROGRESS:
                ev.update(time=None, prefix="", line=self.parser.line_no + 1)
            if ev is not None and ev["kind"] in _PROGRESS and self._keep(ev):
                if ev["kind"] == "load_weights_progress":
                    self.parser.load_percent = ev["percent"]
                events.append(ev)
        return lines, events


def add_parser(sub: Any) -> None:
    p = sub.add_parser("logs", help="print or follow a server log, with parsed events")
    p.add_argument("file", nargs="?", help="log file (default: the log of our server)")
    p.add_argument("--follow", "-f", action="store_true", help="keep streaming new lines")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--from-start", action="store_true", help="start at the first line")
    where.add_argument("--lines", "-n", type=int, default=200,
                       help="start this many lines before the end (default 200)")
    p.add_argument("--no-parse", action="store_true", help="raw lines only")
    p.add_argument("--port", type=int, help="without FILE: the server on this port (one we did "
                   "not start: the file its output goes to)")
    p.add_argument("--host", help="that server's --host")
    p.set_defaults(func=run)


def _default_log(state: Optional[Dict[str, Any]], port: Optional[int] = None,
                 host: Optional[str] = None) -> str:
    if server_state.ours_alive(state):
        assert state is not None
        if state.get("log"):
            return str(state["log"])
        raise protocol.AgentError("not_found", "the server dsv4tui adopted (pid %s) writes its "
                                  "output to no file; give the log file" % state.get("pid"))
    if port:
        owner = health.port_owner(port, health.probe_host(host))
        log = adopt.foreign_log(owner)
        if log:
            return log
        if owner is not None:
            raise protocol.AgentError(
                "not_found", "no log file given; port %d is served by %s, whose output is not "
                "a file we can read (started with its output to a terminal, or another "
                "user's)" % (port, health.owner_text(owner)))
    if not state or not state.get("log"):
        raise protocol.AgentError("not_found", "no log file given and no server was started by "
                                  "dsv4tui on this host" + (" and nothing listens on port %d"
                                                            % port if port else ""))
    return str(state["log"])


def run(args: Any) -> int:
    state = server_state.read_state()
    path = os.path.expanduser(args.file) if args.file else _default_log(
        state, getattr(args, "port", None), getattr(args, "host", None))
    if args.lines < 0:
        raise protocol.AgentError("usage", "--lines must be >= 0", protocol.EXIT_USAGE)
    if os.path.isdir(path):
        raise protocol.AgentError("not_found", "%s is a directory, not a log file" % path)
    tail = ParsedTail(path, server_secrets(state))
    if not tail.tail.exists():
        if not args.follow:
            raise protocol.AgentError("not_found", "log file not found: %s" % path)
        protocol.emit("log_waiting", path=path)
    elif not args.from_start:
        tail.tail.seek_tail(args.lines)
    try:
        return _stream(tail, path, args.follow, not args.no_parse)
    except KeyboardInterrupt:
        protocol.emit("log_end", path=path, lines=tail.parser.line_no, cancelled=True)
        return 130
    finally:
        tail.tail.close()


def _stream(tail: ParsedTail, path: str, follow: bool, parse: bool) -> int:
    batch: List[str] = []
    classes: List[Tuple[int, Optional[int]]] = []
    events: List[Dict[str, Any]] = []
    batch_start = time.monotonic()
    first_line = 1
    while True:
        lines, evs = tail.poll()
        if tail.tail.rotated:
            tail.tail.rotated = False
            _flush(path, batch, classes, events, first_line, parse)
            first_line = 1 + tail.parser.line_no - len(lines)
            batch, classes, events = [], [], []
            protocol.emit("log_rotated", path=path)
        batch.extend(lines)
        classes.extend(tail.levels.classify(line) for line in lines)
        events.extend(evs)
        full = len(batch) >= BATCH_LINES
        if full or ((batch or events) and time.monotonic() - batch_start >= BATCH_S) or \
                (not follow and not lines):
            _flush(path, batch, classes, events, first_line, parse)
            first_line += len(batch)
            batch, classes, events = [], [], []
            batch_start = time.monotonic()
        if not follow and not lines:
            protocol.emit("log_end", path=path, lines=tail.parser.line_no)
            return 0
        if not lines:
            time.sleep(POLL_S)


def _flush(path: str, batch: List[str], classes: List[Tuple[int, Optional[int]]],
           events: List[Dict[str, Any]], first_line: int, parse: bool) -> None:
    for i in range(0, len(batch), BATCH_LINES):
        part = classes[i:i + BATCH_LINES]
        protocol.emit("lines", path=path, first_line=first_line + i,
                      lines=batch[i:i + BATCH_LINES], levels=[c[0] for c in part],
                      tps=[c[1] for c in part])
    if parse:
        for ev in events:
            protocol.emit("log_event", event=ev)
