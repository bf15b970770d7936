"""A bounded ring of server-log lines, each classified once (level, TP rank) on arrival.

Pure Python (no textual): the App appends batches from the ``logs --follow`` stream, the
:class:`~dsv4tui.tui.widgets.log_view.LogView` reads lines by absolute sequence number. Memory is
bounded by ``capacity`` whatever the log's size or rate; the oldest lines fall off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from dsv4tui.core.campaign.labels import safe_line

INFO, WARNING, ERROR = 0, 1, 2
LEVEL_NAMES = {INFO: "all", WARNING: "warnings+", ERROR: "errors"}
MAX_LINE = 2000  # longer lines are cut (a 1 MB line must not become a 1 MB strip)

_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?P<prefix>(?: [A-Z]{2,4}\d+)*)\]")
_TP = re.compile(r"\bTP(\d+)\b")
# a host made of nodes: the console puts each line's node in a column, ``h200b │ [...] ...``
_NODE = re.compile(r"^(?P<node>[\w.@-]{1,40}) *│ ")
_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\bERROR\b|\bCRITICAL\b|\bFATAL\b|"
    r"^\s*[A-Za-z_][\w.]*(?:Error|Exception)\b|\b[A-Z]\w*(?:Error|Exception): |"
    r"CUDA out of memory|NCCL error|no kernel image|Killed|core dumped|"
    r"[Ff]ailed to|exited with code [1-9]|Received sigquit")
_WARNING = re.compile(r"\bWARNING\b|\bWARN\b|\bWarning\b|\bdeprecated\b", re.IGNORECASE)
_ERROR_HINTS = ("error", "exception", "traceback", "critical", "fatal", "out of memory", "nccl",
                "no kernel", "killed", "core dumped", "failed to", "exited with code", "sigquit")
_TRACE_CONT = re.compile(r"^(?:\s+\S|File \"|During handling|The above exception)")


class LogLine(NamedTuple):
    """One classified line. The ring keeps plain ``(text, level, tp)`` tuples (tuples of
    atoms are untracked by the cyclic GC, unlike any class instance: 20,000 kept lines must
    not lengthen every full collection); ``get`` hands out this named view of one."""

    text: str
    level: int
    tp: int | None
    node: str | None = None  # a host made of nodes: the node the line came from


class LogLines:
    """Lines ``first .. next-1`` (absolute numbers) are kept; older ones are gone."""

    def __init__(self, capacity: int = 20_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._ring: list[tuple[str, int, int | None, str | None] | None] = [None] * capacity
        self.first = 0
        self.next = 0
        self.max_width = 0
        self.ranks: set[int] = set()
        self.nodes: list[str] = []  # in the order first seen
        self.errors = 0
        self._in_traceback = False

    def __len__(self) -> int:
        return self.next - self.first

    def classify(self, text: str) -> LogLine:
        full, node = text, None
        if "│" in text:
            n = _NODE.match(text)
            if n:
                node, text = n.group("node"), text[n.end():]
        line = self._classify(text)
        return LogLine(full, line.level, line.tp, node)

    def _classify(self, text: str) -> LogLine:
        m = _PREFIX.match(text) if text.startswith("[") else None
        tp: int | None = None
        if m and m.group("prefix"):
            t = _TP.search(m.group("prefix"))
            if t:
                tp = int(t.group(1))
        if self._in_traceback and not m and _TRACE_CONT.match(text):
            return LogLine(text, ERROR, tp)
        self._in_traceback = False
        low = text.lower()
        # cheap substring checks first: most lines are neither (a flood is 2,000 lines/s)
        if any(k in low for k in _ERROR_HINTS) and _ERROR.search(text):
            self._in_traceback = "Traceback" in text
            return LogLine(text, ERROR, tp)
        if ("warn" in low or "deprecat" in low) and _WARNING.search(text):
            return LogLine(text, WARNING, tp)
        return LogLine(text, INFO, tp)

    def append(self, text: str) -> LogLine:
        text = text.rstrip("\r\n")
        if "\r" in text:  # tqdm repaints: show what a terminal would
            text = text.rsplit("\r", 1)[-1]
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + " …"
        if "\t" in text:
            text = text.expandtabs(4)
        if not text.isprintable():  # colour codes dropped, other controls shown as escapes:
            text = safe_line(text)  # a server's log line cannot drive the terminal
        line = self.classify(text)
        self._ring[self.next % self.capacity] = (line[0], line[1], line[2], line[3])
        self.next += 1
        if self.next - self.first > self.capacity:
            self.first = self.next - self.capacity
        if len(text) > self.max_width:
            self.max_width = len(text)
        if line.tp is not None:
            self.ranks.add(line.tp)
        if line.node is not None and line.node not in self.nodes:
            self.nodes.append(line.node)
        if line.level == ERROR:
            self.errors += 1
        return line

    def extend(self, texts: Iterable[str]) -> int:
        n = 0
        for text in texts:
            self.append(text)
            n += 1
        return n

    def get(self, seq: int) -> LogLine | None:
        if seq < self.first or seq >= self.next:
            return None
        raw = self._ring[seq % self.capacity]
        return None if raw is None else LogLine(*raw)

    def clear(self) -> None:
        self._ring = [None] * self.capacity
        self.first = self.next = self.max_width = self.errors = 0
        self.ranks.clear()
        self.nodes.clear()
        self._in_traceback = False

    def tail(self, n: int, min_level: int = INFO) -> list[str]:
        out: list[str] = []
        seq = self.next - 1
        while seq >= self.first and len(out) < n:
            raw = self._ring[seq % self.capacity]
            if raw is not None and raw[1] >= min_level:
                out.append(raw[0])
            seq -= 1
        out.reverse()
        return out
