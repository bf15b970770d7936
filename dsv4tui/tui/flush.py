"""Model changes to frames (:class:`ModelFlush`): parts marked dirty reach the screen on top as
one :class:`ModelUpdated` within FLUSH_S of a quiet moment, at most every STEADY_S while
changes keep coming (a flood, a sweep); the running level's live figures are refreshed on that
flush (at most every LIVE_LEVEL_S), and the App's ``clock`` signal (tui/clock.py) is published
on it about once a second, so what ages redraws on a frame that is drawn anyway."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.app import App, ScreenStackError
from textual.signal import Signal

from dsv4tui.core.view import model as m
from dsv4tui.core.view.parts import SWEEP
from dsv4tui.tui.clock import CLOCK_S
from dsv4tui.tui.screens.base import FramedScreen
from dsv4tui.tui.screens.messages import ModelUpdated

FLUSH_S = 0.1  # a model change after a quiet moment reaches the screen this soon
STEADY_S = 0.5  # changes that keep coming (a flood, a sweep): one frame this often at most
# (0.25 drew 5 frames/s on a flooded dashboard at 13 % of a core; 0.5: 3 frames/s, 9.6 %)
LIVE_LEVEL_S = 0.5  # the running level's live TTFT/TPOT/tok/s are recomputed this often


class ModelFlush:
    """``mark(*parts)`` from anywhere on the App's loop; ``pending`` while a flush is due."""

    def __init__(self, app: App[Any], model: m.UiModel, clock: Signal[float], *,
                 live: Callable[[], Any], stopping: Callable[[], bool]) -> None:
        self.app, self.model, self.clock = app, model, clock
        self.live, self.stopping = live, stopping  # the sweeps' live levels; the visit ends
        self.dirty: set[str] = set()
        self.pending = False
        self.flushed_at = self.live_at = self.clock_at = 0.0

    def mark(self, *parts: str) -> None:
        self.dirty.update(parts)
        if not self.pending:
            self.pending = True
            wait = max(FLUSH_S, self.flushed_at + STEADY_S - time.monotonic())
            self.app.set_timer(wait, self.flush)

    def flush(self) -> None:
        self.pending = False
        self.flushed_at = now = time.monotonic()
        live = self.live()
        if live and now - self.live_at >= LIVE_LEVEL_S:
            self.live_at = now  # from the level's aggregates: at most 2 per second
            if m.refresh_live_levels(self.model.sweep, live):
                self.dirty.add(SWEEP)
        parts, self.dirty = frozenset(self.dirty), set()
        if self.stopping() or not self.app.is_running:
            return
        if now - self.clock_at >= CLOCK_S * 0.9:
            self.clock_at = now
            self.clock.publish(now)
        if not parts:
            return
        try:
            screen = self.app.screen
        except ScreenStackError:  # no screen yet / any more (start-up, shutdown)
            return
        if isinstance(screen, FramedScreen):
            screen.post_message(ModelUpdated(parts))
