"""The server log: a bounded, filterable, searchable tail that follows until you scroll up.

:class:`LogView` draws lines straight from a shared :class:`~dsv4tui.core.view.log_lines.LogLines`
ring (the Line API: only the visible rows are rendered, memory is the ring's). The App appends
batches to the ring and calls :meth:`LogView.sync` at most every ~100 ms, so a 2,000 lines/s
flood costs one refresh per batch. Scrolling up pauses following and counts the new lines;
``f`` (or scrolling back to the bottom) follows again.

:class:`LogPanel` wraps the view with a one-line status (follow state, "N new lines", filters,
search) and the ``/`` search box.
"""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input, Static

from dsv4tui.core.view.log_lines import (
    ERROR,
    INFO,
    LEVEL_NAMES,
    MAX_LINE,
    WARNING,
    LogLine,
    LogLines,
)
from dsv4tui.tui import keymap
from dsv4tui.tui.widgets.focus_mark import SameLookFocused
from dsv4tui.tui.widgets.text import update_static

_MAX_VIRTUAL_WIDTH = MAX_LINE + 4  # every character of a kept line can be scrolled to
_CUT_RIGHT = "\u203a"  # single angle quote: the row's line goes on to the right
_CUT_LEFT = "\u2039"  # and to the left (scrolled)
# a flood's batches come every ~100 ms; the view in sight takes them in at most this often
# (each take-in redraws every row of the view): 2 redraws a second instead of 10
REDRAW_S = 0.45  # under the App's STEADY_S: a flood's take-in rides on its model frame


class LogView(SameLookFocused, ScrollView, can_focus=True):
    """Rows of a :class:`LogLines` ring, optionally filtered by level and TP rank."""

    COMPONENT_CLASSES = {"logview--error", "logview--warning", "logview--match",
                         "logview--current", "logview--hit", "logview--cut", "logview--empty"}

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        overflow-x: auto;
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 0;  /* a row for the log instead; left/right still scroll */
        & > .logview--error { color: $error; text-style: bold; }
        & > .logview--warning { color: $warning; }
        & > .logview--match { background: $accent 40%; }
        & > .logview--current { background: $accent 25%; }
        & > .logview--hit { background: $accent; color: $background; text-style: bold; }
        & > .logview--cut { color: $foreground-muted; }
        & > .logview--empty { color: $foreground-muted; }
        &.-stale { color: $text-disabled; }
        &.-stale > .logview--error { color: $text-disabled; }
        &.-stale > .logview--warning { color: $text-disabled; }
    }
    """

    follow: reactive[bool] = reactive(True, init=False)
    min_level: reactive[int] = reactive(INFO, init=False)
    rank: reactive[int | None] = reactive(None, init=False)
    node: reactive[str | None] = reactive(None, init=False)  # a host made of nodes

    class Changed(Message):
        """Follow state, pending count, filters or search changed (for the status line)."""

        def __init__(self, view: LogView) -> None:
            super().__init__()
            self.view = view

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogView.Changed) and message.view is self.view

    def __init__(self, lines: LogLines, *, empty_text: str = "no log lines yet",
                 name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.lines = lines
        self.empty_text = empty_text
        self.pending = 0  # lines that arrived while paused
        self.search_text: str | None = None
        self.match_seq: int | None = None  # the line of the current match
        self._index: deque[int] | None = None  # seqs of the rows when filtered
        self._seen = lines.first  # the next seq not yet looked at
        self._first_seen = lines.first
        self._auto = False  # True while we scroll programmatically
        self._cache: LRUCache[tuple[object, ...], Strip] = LRUCache(512)

    # -- rows ---------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        if self._index is not None:
            return len(self._index)
        return max(0, self._seen - self.lines.first)

    def seq_at(self, row: int) -> int | None:
        if row < 0:
            return None
        if self._index is not None:
            return self._index[row] if row < len(self._index) else None
        seq = self.lines.first + row
        return seq if seq < self._seen else None

    def row_of(self, seq: int) -> int | None:
        if self._index is None:
            row = seq - self.lines.first
            return row if 0 <= row < self.row_count else None
        # the index is sorted: bisect over the deque
        lo, hi = 0, len(self._index)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._index[mid] < seq:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self._index) and self._index[lo] == seq else None

    def _wanted(self, line: LogLine) -> bool:
        if line.level < self.min_level:
            return False
        if self.node is not None and line.node != self.node:
            return False
        return self.rank is None or line.tp is None or line.tp == self.rank

    @property
    def filtered(self) -> bool:
        return self.min_level != INFO or self.rank is not None or self.node is not None

    def _rebuild_index(self) -> None:
        if not self.filtered:
            self._index = None
        else:
            index: deque[int] = deque()
            get = self.lines.get
            for seq in range(self.lines.first, self._seen):
                line = get(seq)
                if line is not None and self._wanted(line):
                    index.append(seq)
            self._index = index
        self._cache.clear()
        self._update_size()

    def _update_size(self) -> None:
        new = Size(min(_MAX_VIRTUAL_WIDTH, self.lines.max_width + 1), self.row_count)
        old = self.virtual_size
        if new == old:
            return
        view = self.scrollable_content_region
        if (new.width == old.width and old.height > view.height and new.height > view.height
                and self.show_vertical_scrollbar):
            # Only the number of rows changed and the vertical bar stays (a flood, a filtered
            # view whose rows come and go): nothing moves, so no layout pass of the screen
            # (a reactive with layout=True costs one a frame); the bar's thumb follows.
            self.set_reactive(Widget.virtual_size, new)
            self.vertical_scrollbar.window_virtual_size = new.height
            return
        self.virtual_size = new

    # -- new lines ----------------------------------------------------------------------
    def sync(self) -> int:
        """Take in the lines appended to the ring since the last call; returns new rows."""
        lines = self.lines
        if lines.next < self._seen:  # the ring was cleared
            self._seen = self._first_seen = lines.first
            self._index = deque() if self.filtered else None
            self.pending = 0
        # rows that fell off the top while we were not looking
        dropped = 0
        if lines.first > self._first_seen:
            if self._index is not None:
                while self._index and self._index[0] < lines.first:
                    self._index.popleft()
                    dropped += 1
            else:
                dropped = min(lines.first, self._seen) - self._first_seen
            self._first_seen = lines.first
        start = max(self._seen, lines.first)
        added = 0
        if self._index is not None:
            get = lines.get
            for seq in range(start, lines.next):
                line = get(seq)
                if line is not None and self._wanted(line):
                    self._index.append(seq)
                    added += 1
        else:
            added = lines.next - start
        self._seen = lines.next
        if not dropped and not added:
            return 0
        self._update_size()
        if self.follow:
            self._scroll_to_end()
        else:
            self.pending += added
            if dropped:  # keep the rows under the user's eyes where they are
                self._auto = True
                self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
                self._auto = False
            self.post_message(self.Changed(self))
        self.refresh()
        return added

    def _scroll_to_end(self) -> None:
        self._auto = True
        try:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        finally:
            self._auto = False

    def reset(self) -> None:
        """Re-read the whole ring (after a reconnect, or a new ring)."""
        self._seen = self._first_seen = self.lines.first
        self.pending = 0
        self._index = deque() if self.filtered else None
        self._cache.clear()
        self.sync()
        self._update_size()
        self.refresh()

    # -- follow -------------------------------------------------------------------------
    def on_resize(self) -> None:
        self.post_message(self.Changed(self))  # the status says whether ←/→ scroll
        if self.follow:
            self.call_after_refresh(self._scroll_to_end)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._auto:
            return
        # Only the user's own scrolling changes follow: down to the end resumes it, up pauses.
        # (A clamp after a resize moves scroll_y too; it never moves down to the end.)
        at_end = new_value >= self.max_scroll_y - 0.5
        if at_end and new_value > old_value and not self.follow:
            self.follow = True
        elif not at_end and new_value < old_value and self.follow:
            self.follow = False

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.sync()  # the lines the panel has not taken in yet: to the end means all
            self.pending = 0
            self._scroll_to_end()
        self.post_message(self.Changed(self))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if self.follow and self.max_scroll_y > 0:
            self.follow = False

    # -- filters ------------------------------------------------------------------------
    def watch_min_level(self) -> None:
        self._refilter()

    def watch_rank(self) -> None:
        self._refilter()

    def watch_node(self) -> None:
        self._refilter()

    def cycle_node(self) -> None:
        """All nodes -> node 0 -> node 1 ... -> all (a host made of nodes)."""
        nodes = list(self.lines.nodes)
        if self.node is None:
            self.node = nodes[0] if nodes else None
        elif self.node in nodes and nodes.index(self.node) + 1 < len(nodes):
            self.node = nodes[nodes.index(self.node) + 1]
        else:
            self.node = None

    def _refilter(self) -> None:
        anchor = self.match_seq if self.match_seq is not None else self.seq_at(int(self.scroll_y))
        self._rebuild_index()
        if self.follow:
            self._scroll_to_end()
        elif anchor is not None:
            self._scroll_near(anchor)
        self.refresh()
        self.post_message(self.Changed(self))

    def cycle_level(self) -> None:
        order = [INFO, WARNING, ERROR]
        self.min_level = order[(order.index(self.min_level) + 1) % len(order)]

    def cycle_rank(self) -> None:
        ranks = sorted(self.lines.ranks)
        if not ranks:
            self.rank = None
            return
        if self.rank is None:
            self.rank = ranks[0]
        elif self.rank in ranks and ranks.index(self.rank) + 1 < len(ranks):
            self.rank = ranks[ranks.index(self.rank) + 1]
        else:
            self.rank = None

    # -- search -------------------------------------------------------------------------
    def set_search(self, text: str | None) -> bool:
        """Search for ``text`` from the end backwards; False when nothing matches."""
        self.search_text = text or None
        self.match_seq = None
        self._cache.clear()
        found = self.find(forward=False, start_row=self.row_count) if self.search_text else True
        self.refresh()
        self.post_message(self.Changed(self))
        return found

    def find(self, forward: bool = True, start_row: int | None = None) -> bool:
        """Move to the next (or previous) line containing the search text."""
        if not self.search_text:
            return False
        needle = self.search_text.lower()
        if start_row is None:
            current = self.row_of(self.match_seq) if self.match_seq is not None else None
            if current is None:
                current = int(self.scroll_y) + (0 if forward else self.size.height)
                current = current - 1 if forward else current
            start_row = current
        rows = self.row_count
        step = 1 if forward else -1
        row = start_row + step
        while 0 <= row < rows:
            seq = self.seq_at(row)
            line = self.lines.get(seq) if seq is not None else None
            if seq is not None and line is not None and needle in line.text.lower():
                self.match_seq = seq
                self.follow = False
                self._scroll_near(seq)
                self._cache.clear()
                self.refresh()
                self.post_message(self.Changed(self))
                return True
            row += step
        return False

    def _scroll_near(self, seq: int) -> None:
        """The matched line in view, and its hit: a match far to the right scrolls there."""
        row = self.row_of(seq)
        if row is None:
            return
        height = max(1, self.size.height)
        width = max(1, self.scrollable_content_region.width)
        line = self.lines.get(seq)
        hit = line.text.lower().find(self.search_text.lower()) if (
            line is not None and self.search_text) else -1
        x = self.scroll_x
        if hit >= 0 and not (x <= hit and hit + len(self.search_text or "") < x + width - 1):
            x = max(0, hit - width // 3)
        y = self.scroll_y
        if not (y <= row < y + height):
            y = max(0, row - height // 2)
        if (x, y) != (self.scroll_x, self.scroll_y):
            self._auto = True
            self.scroll_to(x=x, y=y, animate=False, immediate=True)
            self._auto = False

    def action_scroll_right(self) -> None:
        """Right / left: half a view at a time (a log line can be 2,000 characters)."""
        self.scroll_to(x=self.scroll_x + max(1, self.scrollable_content_region.width // 2),
                       animate=False)

    def action_scroll_left(self) -> None:
        self.scroll_to(x=max(0, self.scroll_x - max(1, self.scrollable_content_region.width // 2)),
                       animate=False)

    def action_scroll_home(self) -> None:
        self.scroll_to(x=0, animate=False)

    # -- rendering ----------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._base_style = None

    _base_style: Style | None = None

    _view: tuple[int, int, int] | None = None  # scroll x, scroll y, width: per render pass

    def render_lines(self, crop: Region) -> list[Strip]:
        # measured once for the rows drawn together (each costs ~0.1 ms: once per row was
        # half the log view's drawing under a flood)
        self._view = self._measure()
        try:
            return super().render_lines(crop)
        finally:
            self._view = None

    def _measure(self) -> tuple[int, int, int]:
        scroll_x, scroll_y = self.scroll_offset
        return scroll_x, scroll_y, self.scrollable_content_region.width  # not the scrollbar

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y, width = self._view or self._measure()
        row = scroll_y + y
        base = self._base_style
        if base is None:  # rich_style walks the ancestors: once per style change, not per row
            base = self._base_style = self.rich_style
        if self.row_count == 0:
            if y == 0:
                style = self.get_component_rich_style("logview--empty")
                return Strip([Segment(self.empty_text, base + style)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        seq = self.seq_at(row)
        line = self.lines.get(seq) if seq is not None else None
        if line is None:
            return Strip.blank(width, base)
        key = (seq, scroll_x, width, seq == self.match_seq)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_strip(line, seq == self.match_seq, base, scroll_x, width)
            self._cache[key] = strip
        return strip

    def _render_strip(self, line: LogLine, current: bool, base: Style, scroll_x: int,
                      width: int) -> Strip:
        """One row, already cropped to the view (a Strip costs; make one, not three)."""
        style = base
        if line.level == ERROR:
            style = base + self.get_component_rich_style("logview--error")
        elif line.level == WARNING:
            style = base + self.get_component_rich_style("logview--warning")
        text = line.text
        if current:
            style = style + self.get_component_rich_style("logview--current")
        needle = self.search_text
        if text.isascii() and (not needle or needle.lower() not in text.lower()):
            visible = text[scroll_x:scroll_x + width]
            pad = width - len(visible)
            segments = [Segment(visible, style)]
            if pad > 0:
                segments.append(Segment(" " * pad, base))
            return self._mark_cut(Strip(segments, width), len(text), scroll_x, width, base)
        if not needle:
            strip = Strip([Segment(text, style)]).crop_extend(scroll_x, scroll_x + width, base)
            return self._mark_cut(strip, len(text), scroll_x, width, base)
        low, n = text.lower(), needle.lower()
        segments = []
        match_style = style + self.get_component_rich_style(
            "logview--hit" if current else "logview--match")
        pos = 0
        while True:
            hit = low.find(n, pos)
            if hit < 0:
                break
            if hit > pos:
                segments.append(Segment(text[pos:hit], style))
            segments.append(Segment(text[hit:hit + len(n)], match_style))
            pos = hit + len(n)
        if pos < len(text):
            segments.append(Segment(text[pos:], style))
        strip = Strip(segments).crop_extend(scroll_x, scroll_x + width, base)
        return self._mark_cut(strip, len(text), scroll_x, width, base)

    def _mark_cut(self, strip: Strip, length: int, scroll_x: int, width: int,
                  base: Style) -> Strip:
        """A row whose line goes on past the view's edge says so in that edge's cell."""
        right, left = length > scroll_x + width, scroll_x > 0 and length > 0
        if not (right or left) or width < 3:
            return strip
        cut = base + self.get_component_rich_style("logview--cut")
        parts = [Strip([Segment(_CUT_LEFT, cut)], 1)] if left else []
        parts.append(strip.crop(1 if left else 0, width - (1 if right else 0)))
        if right:
            parts.append(Strip([Segment(_CUT_RIGHT, cut)], 1))
        return Strip.join(parts)

    def status_text(self) -> str:
        parts = []
        if self.follow:
            parts.append("following")
        elif self.pending:
            parts.append(f"paused — {self.pending:,} new line{'s' if self.pending != 1 else ''}"
                         " (f: follow)")
        else:
            parts.append("paused (f: follow)")
        if self.min_level != INFO:
            parts.append(f"level: {LEVEL_NAMES[self.min_level]}")
        if self.node is not None:
            parts.append(f"node: {self.node}")
        if self.rank is not None:
            parts.append(f"rank: TP{self.rank}")
        if self.search_text:
            parts.append(f"/{self.search_text}" + ("" if self.match_seq is not None
                                                   else " (no match)"))
        if self.lines.max_width > self.scrollable_content_region.width > 0:
            parts.append("←/→ scroll" if self.scroll_x == 0 else f"col {self.scroll_x + 1:,} "
                         "(←/→, home)")
        if self.filtered:
            parts.append(f"{self.row_count:,}/{len(self.lines):,} lines")
        else:
            parts.append(f"{len(self.lines):,} lines")
        return "  ·  ".join(parts)


class LogPanel(Vertical):
    """A LogView, its status line and the ``/`` search box (escape closes it)."""

    BINDINGS: ClassVar[list[BindingType]] = [keymap.escape_binding("close_search")]

    DEFAULT_CSS = """
    LogPanel { height: 1fr; }
    LogPanel > LogView { height: 1fr; }
    LogPanel > .log-status {
        height: 1; padding: 0 1; background: $panel; color: $foreground-muted;
    }
    LogPanel > .log-status.-paused { background: $warning 30%; color: $foreground; }
    LogPanel > Input { display: none; height: 3; border: tall $accent; }
    LogPanel > Input.-visible { display: block; }
    """

    def __init__(self, lines: LogLines, *, title: str = "log", empty_text: str = "no log lines yet",
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines = lines
        self.border_title = title
        self._empty_text = empty_text
        self._view: LogView | None = None
        self._synced_at = 0.0  # time.monotonic() of the last take-in
        self._sync_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield LogView(self.lines, empty_text=self._empty_text)
        yield Static("following", classes="log-status", markup=False)
        yield Input(placeholder="search the log (enter: find, esc: close)", id="log-search")

    @property
    def view(self) -> LogView:
        view = self._view
        if view is None:
            view = self._view = self.query_one(LogView)
        return view

    def on_mount(self) -> None:
        self._update_status()

    def sync(self) -> None:
        """Take in the ring's new lines now (a body coming into view, a test)."""
        if self._sync_timer is not None:
            self._sync_timer.stop()
            self._sync_timer = None
        self._synced_at = time.monotonic()
        self.view.sync()
        self._update_status()

    def sync_soon(self) -> None:
        """Take in new lines now, or, when the last take-in was less than REDRAW_S ago, at
        REDRAW_S after it: a flood moves the view twice a second, in order, following."""
        wait = self._synced_at + REDRAW_S - time.monotonic()
        if wait <= 0:
            self.sync()
        elif self._sync_timer is None:
            self._sync_timer = self.set_timer(wait, self._deferred_sync)

    def _deferred_sync(self) -> None:
        self._sync_timer = None
        self.sync()

    def reset(self) -> None:
        self.view.reset()
        self._update_status()

    @on(LogView.Changed)
    def _changed(self, event: LogView.Changed) -> None:
        event.stop()
        self._update_status()

    def _update_status(self) -> None:
        view = self.view
        status = self.query_one(".log-status", Static)
        update_static(status, view.status_text(), fixed_height=True)
        status.set_class(not view.follow and view.pending > 0, "-paused")

    def set_stale(self, stale: bool) -> None:
        self.view.set_class(stale, "-stale")

    # -- actions (called by the screens' bindings) --------------------------------------
    def start_search(self) -> None:
        box = self.query_one(Input)
        box.add_class("-visible")
        box.value = self.view.search_text or ""
        # focused now, not via focus()'s deferred callback: the keys typed right after `/`
        # (already queued) must land in the box
        self.screen.set_focus(box)

    @on(Input.Submitted, "#log-search")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        found = self.view.set_search(event.value.strip())
        event.input.remove_class("-visible")
        self.view.focus()
        if event.value.strip() and not found:
            self.app.notify(f"not found: {event.value.strip()}", severity="warning", timeout=3,
                            markup=False)

    @property
    def search_open(self) -> bool:
        return self.query_one(Input).has_class("-visible")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_search":  # escape: closes an open box, else goes on as usual
            return self.search_open
        return True

    def action_close_search(self) -> None:
        self.query_one(Input).remove_class("-visible")
        self.screen.set_focus(self.view)  # now: the next key goes to the view's bindings

    def next_match(self, forward: bool = True) -> None:
        view = self.view
        if not view.search_text:
            self.start_search()
            return
        if not view.find(forward=forward):
            self.app.notify("no more matches" + ("" if forward else " above"), timeout=2)

    def toggle_follow(self) -> None:
        self.view.follow = not self.view.follow
        self._update_status()  # in the same frame as the key, not after a message round trip

    def cycle_level(self) -> None:
        self.view.cycle_level()

    def cycle_rank(self) -> None:
        self.view.cycle_rank()

    def cycle_node(self) -> None:
        self.view.cycle_node()
