"""A bounded ring of server-log lines with their class (level, TP rank, node).

The class comes from the agent, which classifies each line as it reads it
(:class:`dsv4tui.agent.host.logparse.LineLevels`); a line of the console's own goes through the same
classifier here.

Pure Python (no textual): the App appends batches from the ``logs --follow`` stream, the
:class:`~dsv4tui.tui.widgets.log_view.LogView` reads lines by absolute sequence number. Memory is
bounded by ``capacity`` whatever the log's size or rate; the oldest lines fall off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from dsv4tui.agent.host.logparse import LEVEL_ERROR as ERROR
from dsv4tui.agent.host.logparse import LEVEL_INFO as INFO
from dsv4tui.agent.host.logparse import LEVEL_WARNING as WARNING
from dsv4tui.agent.host.logparse import LineLevels
from dsv4tui.core.campaign.labels import safe_line

LEVEL_NAMES = {INFO: "all", WARNING: "warnings+", ERROR: "errors"}
MAX_LINE = 2000  # longer lines are cut (a 1 MB line must not become a 1 MB strip)
# a host made of nodes: the console puts each line's node in a column, ``h200b │ [...] ...``
_NODE = re.compile(r"^(?P<node>[\w.@-]{1,40}) *│ ")
Class = tuple[int, "int | None"]  # (level, TP rank), as the agent's ``lines`` events carry it


def _shown_text(text: str) -> str:
    """A raw log line as the view shows it: one row, cut at MAX_LINE, no control characters."""
    text = text.rstrip("\r\n")
    if "\r" in text:  # tqdm repaints: show what a terminal would
        text = text.rsplit("\r", 1)[-1]
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE] + " …"
    if "\t" in text:
        text = text.expandtabs(4)
    if not text.isprintable():  # colour codes dropped, other controls shown as escapes:
        text = safe_line(text)  # a server's log line cannot drive the terminal
    return text


def classes_of(ev: dict) -> list[Class] | None:
    """The classes a ``lines`` event carries (``levels``, ``tps``), or None (an older agent)."""
    levels, tps, lines = ev.get("levels"), ev.get("tps"), ev.get("lines") or []
    if not isinstance(levels, list) or not isinstance(tps, list) \
            or not len(levels) == len(tps) == len(lines):
        return None
    return [(int(lv), None if tp is None else int(tp)) for lv, tp in zip(levels, tps, strict=True)]


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
        self._levels = LineLevels()  # lines that did not come through the agent's classifier

    def __len__(self) -> int:
        return self.next - self.first

    def append(self, text: str, cls: Class | None = None) -> LogLine:
        """Keep one line; ``cls``: its class from the agent (else the same classifier, here)."""
        text = _shown_text(text)
        node, own = None, text
        n = _NODE.match(text) if "│" in text else None
        if n:
            node, own = n.group("node"), text[n.end():]
        if cls is None:
            cls = self._levels.classify(own)
        line = LogLine(text, cls[0], cls[1], node)
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

    def extend(self, texts: Iterable[str], classes: Sequence[Class] | None = None) -> int:
        """Keep a batch of lines (``classes``: theirs from the agent); returns how many.

        Same result as :meth:`append` line by line; the batch of a 2,000 lines/s flood is
        taken in on the UI loop, so the usual line (classified, printable, short, no node
        column) takes a path without a call per line."""
        if classes is None or self.nodes:
            n = 0
            for i, text in enumerate(texts):
                self.append(text, None if classes is None else classes[i])
                n += 1
            return n
        ring, cap, seq = self._ring, self.capacity, self.next
        start = seq
        widest, errors, ranks = self.max_width, 0, self.ranks
        for raw, (level, tp) in zip(texts, classes, strict=False):
            text = raw.rstrip("\r\n")
            if len(text) > MAX_LINE or not text.isprintable():
                text = _shown_text(text)
            if "│" in text and _NODE.match(text):  # a node column: the full path
                self.next = seq
                self.max_width = max(self.max_width, widest)
                self.errors += errors
                self.append(raw, (level, tp))
                widest, errors, seq = self.max_width, 0, self.next
                continue
            ring[seq % cap] = (text, level, tp, None)
            seq += 1
            if len(text) > widest:
                widest = len(text)
            if tp is not None and tp not in ranks:
                ranks.add(tp)
            if level == ERROR:
                errors += 1
        self.next, self.max_width = seq, widest
        self.errors += errors
        if self.next - self.first > cap:
            self.first = self.next - cap
        return seq - start

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
        self._levels = LineLevels()

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
