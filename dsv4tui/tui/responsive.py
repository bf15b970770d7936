"""What keeps the dashboard quick to answer keys under load (docs/ui-performance.md).

:class:`ResponsiveApp` is the Textual App the dashboard builds on. Keys go through Textual's
public bindings only: the screens' keys are priority bindings (:mod:`dsv4tui.tui.keymap`),
which Textual answers the moment a key arrives, where a plain binding waits until the key
has bubbled from the focused widget back up to the App (one message hop per widget, each
behind whatever the event loop has queued). Text typed into an Input reaches the Input:
Textual leaves out the bindings of a printable key that the focused widget takes
(``Widget.check_consume_key``). What this class adds:

- keys keep their order: while a key is on its way through the widgets (text typed into a
  box, arrows in a table), the keys after it wait for it;
- the frame answering a key is drawn in the same callback
  (:func:`dsv4tui.tui.textual_hooks.draw_now`);
- the cyclic GC paused while a key is answered, tuned for small pauses, and the long-lived
  heap frozen;
- screen switches without Textual's 50 ms update delay when the screen is already mounted,
  and the screens not shown yet mounted in the background after startup;
- the keymap in use, as a public attribute (:attr:`active_keymap`).

The private parts of Textual this needs are all in :mod:`dsv4tui.tui.textual_hooks`.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Mapping
from typing import Any

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.widget import AwaitMount

from dsv4tui.tui import textual_hooks as hooks


class ResponsiveApp(App[int]):
    GC_PAUSE_MAX_S = 0.5  # the cyclic GC waits at most this long after a key
    GC_AFTER_FRAME_S = 0.02  # and runs this long after the frame answering it
    SLOW_KEY_MAX_S = 0.5  # a key sent through the widgets counts as on its way this long

    def __init__(self) -> None:
        hooks.light_strips()
        super().__init__()
        self.active_keymap: dict[str, str] = {}  # binding id -> keys, as set_keymap got it
        self._no_delay = False  # set while switching to a mode whose screen is mounted
        # the screen being left by that switch (Textual refreshes it on the way out: see
        # textual_hooks.SwitchScreen)
        self.leaving_screen: Screen[Any] | None = None
        self._warmed: list[Screen[Any]] = []  # screens mounted in the background
        self._gc_paused = False  # the cyclic GC waits while a key's frame is being made
        self._gc_timer: asyncio.TimerHandle | None = None  # resumes the cyclic GC
        self._keys_in_flight = 0  # keys posted and not answered yet
        self._on_its_way: object | None = None  # a token while a key goes through the widgets
        self._waiting: list[events.Key] = []  # keys that came meanwhile, in order
        self._gc_threshold: tuple[int, ...] | None = None  # before tune_gc

    # -- the keymap ------------------------------------------------------------------------
    def set_keymap(self, keymap: Mapping[str, str]) -> None:
        self.active_keymap = dict(keymap)
        super().set_keymap(keymap)

    def update_keymap(self, keymap: Mapping[str, str]) -> None:
        self.active_keymap = {**self.active_keymap, **keymap}
        super().update_keymap(keymap)

    # -- keys ------------------------------------------------------------------------------
    def post_message(self, message: Message) -> bool:
        """Keys pause the cyclic GC from the moment they are posted (the terminal driver's
        input thread hands them to the event loop) until their answer is on screen -- Textual
        does the same while it scrolls: a collection started in between adds its whole pause
        to the key's latency. It runs again right after the frame (:meth:`key_answered`),
        when a person's next key is furthest away, or GC_PAUSE_MAX_S after the last key at
        the latest. (A key bubbling back up from the widgets is the same key: not counted.)"""
        is_key = isinstance(message, events.Key) and not message.is_forwarded
        if is_key:
            self._keys_in_flight += 1
            if gc.isenabled() and hooks.enabled("gc_tuning"):
                gc.disable()
                self._gc_paused = True
        posted = super().post_message(message)
        if is_key and not posted:  # the app is closing: nothing is in flight any more
            self._keys_in_flight = 0
            self._resume_gc()
        return posted

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key) or event.is_forwarded:
            # a key back from the widgets: Textual runs the plain bindings (App._on_key)
            await super().on_event(event)
            return
        if self._gc_paused:
            self._resume_gc_in(self.GC_PAUSE_MAX_S)
        if self._on_its_way is not None:
            self._waiting.append(event)  # answered when the key before it is
            return
        await self._answer(event)

    async def _answer(self, key: events.Key) -> None:
        """Textual's own handling of a key: a priority binding answers it now, or it goes to
        the focused widget (and bubbles up to the plain bindings). Drawn now in the first
        case, when it is back in the second."""
        screen = self.screen
        try:
            await super().on_event(key)
        finally:
            self._keys_in_flight = max(0, self._keys_in_flight - 1)
        if key.is_forwarded:
            self._follow(self.focused or screen)
        elif self.screen is screen and screen.is_attached:
            # a new screen draws itself when it resumes (DsvScreen) and calls key_answered
            hooks.draw_now(screen)
            self.key_answered()

    def _follow(self, target: DOMNode) -> None:
        """The key just went to ``target``; keys after it wait until it has been through
        every node it can bubble to. A callback posted to each of them in turn runs after
        the key there (a node handles its messages in order, and a key bubbles up by being
        posted to the parent while the node handles it), so when the App runs it the key is
        done, stopped on the way or not. At most SLOW_KEY_MAX_S (a node may go away)."""
        path = list(target.ancestors_with_self)
        token = self._on_its_way = object()

        def hop(i: int) -> None:
            if self._on_its_way is not token:
                return
            while i < len(path):
                if path[i].call_later(hop, i + 1):
                    return
                i += 1  # closed: the key cannot be there either
            self.call_next(self._key_back, token)

        hop(0)
        asyncio.get_running_loop().call_later(
            self.SLOW_KEY_MAX_S, lambda: self.call_later(self._key_back, token))

    async def _key_back(self, token: object) -> None:
        if self._on_its_way is not token:
            return
        self._on_its_way = None
        screen = self.screen
        if screen.is_attached:
            hooks.draw_now(screen)
        self.key_answered()
        while self._waiting and self._on_its_way is None:
            await self._answer(self._waiting.pop(0))

    def key_answered(self) -> None:
        """The frame answering the last key is composed: the cyclic GC runs again shortly
        after (it has the young objects of the pause to go through; GC_AFTER_FRAME_S lets the
        driver's writer thread put the frame on the terminal first), unless more keys are
        queued."""
        if self._gc_paused and self._keys_in_flight == 0 and self._on_its_way is None:
            self._resume_gc_in(self.GC_AFTER_FRAME_S)

    # -- the cyclic GC -----------------------------------------------------------------------
    def _resume_gc_in(self, delay: float) -> None:
        if self._gc_timer is not None:
            self._gc_timer.cancel()
        self._gc_timer = asyncio.get_running_loop().call_later(delay, self._resume_gc)

    def _resume_gc(self) -> None:
        if self._gc_timer is not None:
            self._gc_timer.cancel()
            self._gc_timer = None
        if self._gc_paused:
            self._gc_paused = False
            gc.enable()

    def _freeze_heap(self) -> None:
        """Move what exists now (screens, widgets, caches) out of the cyclic GC's sight.

        With ~200,000 tracked objects a full collection takes 150-250 ms on a small machine,
        and a log flood triggers one every few seconds: the UI's worst stalls. The screens
        live as long as the app, so they need not be scanned again (``gc.freeze``)."""
        if hooks.enabled("gc_tuning"):
            gc.freeze()

    def tune_gc(self) -> None:
        """Young collections every 5,000 allocations (Python: 700) under a high allocation
        rate (JSON events, strips): ~4 ms each here, where 20,000 made fewer but 15-60 ms
        pauses (the key latency's tail); older generations rarely. Undone when the app
        exits (:meth:`restore_gc`): the process may go on (tests, an embedding program)."""
        if not hooks.enabled("gc_tuning"):
            return
        if self._gc_threshold is None:
            self._gc_threshold = gc.get_threshold()
        gc.set_threshold(5_000, 20, 50)

    def restore_gc(self) -> None:
        """The cyclic GC as it was before the app: on, its thresholds, nothing frozen."""
        self._resume_gc()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
        gc.unfreeze()

    # -- screens -------------------------------------------------------------------------------
    def _mode_names(self) -> list[str]:
        """The modes to mount ahead of their first visit (subclasses)."""
        return list(self.MODES)

    def _warm_modes(self) -> None:
        """Mount the screens not shown yet in the background, one every 0.3 s after startup:
        the first press of ``4`` is then as quick as the second."""
        if getattr(self, "_stopping", False):
            return  # quitting (or back to the fleet): a screen mounting now would be torn down
        for mode in self._mode_names():
            screen = hooks.warm_mode(self, mode)
            if screen is not None:
                self._warmed.append(screen)
                self.set_timer(0.3, self._warm_modes)
                return
        self.call_after_refresh(self._freeze_heap)

    async def settle_screens(self, timeout: float = 2.0) -> None:
        """Wait (a little) for a screen mounting in the background to finish: an App that
        exits while one mounts tears it down under its own on_mount (NoMatches)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and any(
                not screen.is_mounted for screen in (*self._warmed, *self.screen_stack)):
            await asyncio.sleep(0.02)

    def switch_mode(self, mode: str) -> AwaitMount:
        """Textual's switch_mode, minus its 50 ms update delay when the mode's screen is
        already mounted: the delay masks a half-composed first frame, and a mounted screen
        has none, so it only made every screen switch 50 ms slower."""
        self._no_delay = hooks.mode_is_mounted(self, mode)
        self.leaving_screen = self.screen if self._no_delay else None
        try:
            return super().switch_mode(mode)
        finally:
            self._no_delay = False
            self.leaving_screen = None

    def delay_update(self, delay: float = 0.05) -> None:
        if not self._no_delay:
            super().delay_update(delay)

    def on_mount(self) -> None:
        self.tune_gc()  # undone in on_unmount

    async def on_unmount(self) -> None:
        self.restore_gc()  # never leave the process with the cyclic GC off or retuned
