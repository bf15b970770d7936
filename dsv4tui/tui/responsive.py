"""What keeps the dashboard quick to answer keys under load (docs/ui-performance.md).

:class:`ResponsiveApp` is the Textual App the dashboard builds on. Each part here answers a
measured cost (benchmarks/ui_latency.py, a 2-core machine with a C=64 sweep, 8 GPUs at 2 Hz
and a 2,000 lines/s log flood):

- screen switches without Textual's 50 ms update delay when the screen is already mounted;
- the screens not shown yet mounted in the background after startup;
- keys answered in one callback: bindings run at once when no widget takes the key itself
  (in the order the keys came), and what they changed is drawn there (:func:`draw_now`);
- the cyclic GC paused while a key is answered, tuned for small pauses, and the long-lived
  heap frozen;
- Textual Strips that make no reference cycles and build their caches only when used
  (:mod:`dsv4tui.tui.widgets.strip_gc`).

These hook private parts of Textual (``_modes``, ``_screen_stacks``, ``_get_screen``,
``_load_screen_css``, ``_check_bindings``, ``_forward_event``, ``Key._stop_propagation``,
``Screen._on_timer_update``, ``_dirty_widgets``, ``_compositor``, and in the screens
``_css_update_count``, ``_repaint_regions``, ``Screen._key_escape``); textual is pinned below 9
and they need a look on upgrade.
"""

from __future__ import annotations

import asyncio
import gc
import time
from contextlib import suppress
from typing import Any

from textual import events
from textual.app import App
from textual.dom import DOMNode, NoScreen
from textual.message import Message
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.widget import AwaitMount, Widget

from dsv4tui.tui.widgets import strip_gc


class ResponsiveApp(App[int]):
    GC_PAUSE_MAX_S = 0.5  # the cyclic GC waits at most this long after a key
    GC_AFTER_FRAME_S = 0.02  # and runs this long after the frame answering it
    SLOW_KEY_MAX_S = 0.5  # a key sent through the widgets counts as on its way this long

    def __init__(self) -> None:
        strip_gc.install()
        super().__init__()
        self._no_delay = False  # set while switching to a mode whose screen is mounted
        # the screen being left by that switch (Textual refreshes it on the way out)
        self.leaving_screen: Screen[object] | None = None
        self._gc_paused = False  # the cyclic GC waits while a key's frame is being made
        self._gc_timer: asyncio.TimerHandle | None = None  # resumes the cyclic GC
        self._keys_in_flight = 0  # keys posted and not handled yet
        self._slow_key: events.Key | None = None  # the last key sent through the widgets
        self._slow_key_at = 0.0
        self._gc_threshold: tuple[int, ...] | None = None  # before tune_gc

    def _mode_names(self) -> list[str]:
        """The modes to mount ahead of their first visit (subclasses)."""
        return list(self._modes)

    def _warm_modes(self) -> None:
        """Mount the screens not shown yet in the background, one every 0.3 s after startup.

        A mode's first visit composes and mounts its screen and runs Textual's stylesheet pass
        over it: 100-250 ms on a small machine, the slowest key press of a session. Done here,
        the first press of ``4`` is as quick as the second."""
        if getattr(self, "_stopping", False):
            return  # quitting (or back to the fleet): a screen mounting now would be torn down
        for mode in self._mode_names():
            if mode in self._screen_stacks:
                continue
            factory = self._modes[mode]
            screen, _ = self._get_screen(factory() if callable(factory) else factory)
            self._load_screen_css(screen)
            self._screen_stacks[mode] = [screen]
            self.set_timer(0.3, self._warm_modes)
            return
        self.call_after_refresh(self._freeze_heap)

    async def settle_screens(self, timeout: float = 2.0) -> None:
        """Wait (a little) for a screen mounting in the background to finish: an App that
        exits while one mounts tears it down under its own on_mount (NoMatches)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and any(
                not screen.is_mounted for stack in self._screen_stacks.values()
                for screen in stack):
            await asyncio.sleep(0.02)

    def _freeze_heap(self) -> None:
        """Move what exists now (screens, widgets, caches) out of the cyclic GC's sight.

        With ~200,000 tracked objects a full collection takes 150-250 ms on a small machine,
        and a log flood triggers one every few seconds: the UI's worst stalls. The screens
        live as long as the app, so they need not be scanned again (``gc.freeze``)."""
        gc.freeze()

    def tune_gc(self) -> None:
        """Young collections every 5,000 allocations (Python: 700) under a high allocation
        rate (JSON events, strips): ~4 ms each here, where 20,000 made fewer but 15-60 ms
        pauses (the key latency's tail); older generations rarely. Undone when the app
        exits (:meth:`restore_gc`): the process may go on (tests, an embedding program)."""
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

    def post_message(self, message: Message) -> bool:
        """Keys pause the cyclic GC from the moment they are posted (the terminal driver's
        input thread hands them to the event loop) until their answer is on screen -- Textual
        does the same while it scrolls: a collection started in between adds its whole pause
        to the key's latency. It runs again right after the frame (:meth:`_key_answered`),
        when a person's next key is furthest away, or GC_PAUSE_MAX_S after the last key at
        the latest. (A key bubbling back up from the widgets is the same key: not counted.)"""
        is_key = isinstance(message, events.Key) and not message.is_forwarded
        if is_key:
            self._keys_in_flight += 1
            if gc.isenabled() and not self._closing:
                gc.disable()
                self._gc_paused = True
        posted = super().post_message(message)
        if is_key and not posted:  # the app is closing: nothing is in flight any more
            self._keys_in_flight = 0
            self._resume_gc()
        return posted

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key):
            await super().on_event(event)
            return
        screen = self.screen
        if event.is_forwarded:  # back from the widgets: the bindings run now (App._on_key)
            if event is self._slow_key:
                self._slow_key = None
            await super().on_event(event)
        else:
            if self._gc_paused:
                self._resume_gc_in(self.GC_PAUSE_MAX_S)
            try:
                if self._bindings_first(event):
                    await self._answer_key(event)
                else:
                    await super().on_event(event)
            finally:
                self._keys_in_flight = max(0, self._keys_in_flight - 1)
            if event.is_forwarded:  # on its way through the widgets: answered when back
                self._slow_key, self._slow_key_at = event, time.monotonic()
                return
        if self.screen is screen and screen.is_attached:
            # the key's answer is drawn now; a new screen draws itself when it resumes
            # (DsvScreen) and then calls _key_answered
            draw_now(screen)
            self._key_answered()

    def _key_on_its_way(self) -> bool:
        """True while the last key sent through the widgets has not come back to the App
        (nor been stopped by one of them): a later key must follow it the same way, or its
        bindings would run first (``escape`` then ``m`` would change the metric of the
        screen that escape was leaving). At most SLOW_KEY_MAX_S, in case it never returns
        (its widget was removed)."""
        key = self._slow_key
        if key is None:
            return False
        if key._stop_propagation or time.monotonic() - self._slow_key_at > self.SLOW_KEY_MAX_S:
            self._slow_key = None
            return False
        return True

    def _bindings_first(self, event: events.Key) -> bool:
        """True when no widget between the focused one and the screen handles this key itself
        (``key_<name>``, ``on_key``, ``_on_key`` like Input, ``@on(Key)``, its own
        ``on_event``) and no earlier key is still on its way through them: then the bindings
        are all that can answer it, and the App can run them at once.

        Textual forwards a non-priority key to the focused widget and runs the bindings when
        the key has bubbled back up to the App, one message hop per widget; under load each
        hop waits behind whatever the event loop has queued (a log repaint is 10-15 ms)."""
        if event.is_forwarded or self.screen.maximized is not None or self._key_on_its_way():
            return False
        methods = [f"{prefix}key_{alias}" for alias in event.name_aliases
                   for prefix in ("", "_")]
        node: DOMNode | None = self.focused or self.screen
        while node is not None and node is not self:
            kind = type(node)
            if (getattr(kind, "_on_key", None) is not Widget._on_key
                    or getattr(kind, "on_event", None) is not MessagePump.on_event
                    or callable(getattr(node, "on_key", None))
                    or any(hasattr(node, name) for name in methods)
                    or _handles_keys_with_on(kind)):
                return False
            node = node.parent
        return True

    async def _answer_key(self, event: events.Key) -> None:
        """What Textual's ``App.on_event`` does with a key, with the non-priority bindings
        checked right after the priority ones; a key no binding takes goes to the widgets as
        usual (and so on to the App's ``key_`` methods)."""
        self.app_focus = True
        if self.focused is not None:
            with suppress(NoScreen):
                self.screen._clear_tooltip()
        if not (await self._check_bindings(event.key, priority=True)
                or await self._check_bindings(event.key)):
            (self.focused or self.screen)._forward_event(event)

    def _key_answered(self) -> None:
        """The frame answering the last key is composed: the cyclic GC runs again shortly
        after (it has the young objects of the pause to go through; GC_AFTER_FRAME_S lets the
        driver's writer thread put the frame on the terminal first), unless more keys are
        queued."""
        if self._gc_paused and self._keys_in_flight == 0:
            self._resume_gc_in(self.GC_AFTER_FRAME_S)

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

    def switch_mode(self, mode: str) -> AwaitMount:
        """Textual's switch_mode, minus its 50 ms update delay when the mode's screen is
        already mounted: the delay masks a half-composed first frame, and a mounted screen
        has none, so it only made every screen switch 50 ms slower."""
        self._no_delay = mode in self._screen_stacks
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


def draw_now(screen: Screen[Any]) -> None:
    """Draw what changed on ``screen`` in this callback.

    Textual learns which widgets changed a few message hops after they did (each widget's
    idle handler posts an Update to its screen, the screen wakes its update timer, the timer
    fires); under load each hop waits behind whatever the event loop has queued (a log
    repaint is 10-15 ms), so a key's answer came two or three frames late. Here the changed
    widgets are handed to the screen directly, as those hops would, and the screen draws.
    A widget waiting for a new layout is left to Textual's own path (it follows a frame
    later); so is one scrolled while it waits for a layout."""
    dirty = screen._dirty_widgets
    for widget in screen._compositor.visible_widgets:
        if widget._layout_required:
            continue
        if widget._repaint_required:
            widget._repaint_required = False
            if widget.display:
                dirty.add(widget)
        if widget._scroll_required:
            widget._scroll_required = False
            if widget.styles.keyline[0] != "none":  # as Widget._check_refresh does
                widget._set_dirty()
            screen._scroll_required = True
    screen._on_timer_update()


def _handles_keys_with_on(kind: type) -> bool:
    """True when ``kind`` or a base class has an ``@on`` handler that a Key would reach
    (Textual keeps one ``_decorated_handlers`` dict per class)."""
    for cls in kind.__mro__:
        handlers = cls.__dict__.get("_decorated_handlers")
        if handlers and any(isinstance(t, type) and issubclass(events.Key, t) for t in handlers):
            return True
    return False
