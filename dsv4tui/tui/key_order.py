"""Keys answered in their order, each where the focus is once a key before it that may move the
focus (Escape, tab, a tab key, a key that opens a dialog) has been answered (:class:`KeyOrder`).

Textual hands a key to the focused widget's own queue and goes on with the next key at once,
so a key typed a few milliseconds after Escape (closing a box) or a tab key (switching the
body) would still reach the widget that had the focus before. Here the App lets a key through
only when the one before it has passed every node it bubbles to (a ``call_later`` on each, in
turn: the widget, its parents, the screen, the App, then the screen on top, which may be one
the key pushed or uncovered and has set its focus by then); the keys typed meanwhile wait, in
their order, and then go where the focus went. Public Textual API only (``App.on_event``,
``call_later``, ``events.Key``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from textual import events
from textual.app import App, ScreenStackError
from textual.dom import DOMNode

from dsv4tui.tui.keymap import app_keys

STUCK_S = 1.0  # a key whose way was cut (a node removed meanwhile) lets the next ones go
MOVES_FOCUS = frozenset({"escape", "tab", "shift+tab"})  # besides the App's own keys


class KeyOrder:
    """``await order.answer(key, handle)``: ``handle`` (Textual's own key handling) runs for
    ``key`` once the key before it has been answered, if that one may move the focus: Escape,
    tab, and the App's keys under ``keymap()`` (tabs, help, the dialogs) unless the focused
    widget takes it as text. Other keys (text, arrows, a body's keys) are not held up."""

    def __init__(self, app: App[Any], keymap: Callable[[], Mapping[str, str]]) -> None:
        self.app, self.keymap = app, keymap
        self._app_keys: tuple[tuple[tuple[str, str], ...], frozenset[str]] | None = None
        self._waiting: list[events.Key] | None = None  # None: no key on its way
        self._gen = 0  # the key on its way (a late step of an earlier one is ignored)

    def app_keys(self) -> frozenset[str]:
        """The App's keys under the keymap now (read again after a remap)."""
        sign = tuple(sorted(self.keymap().items()))
        if self._app_keys is None or self._app_keys[0] != sign:
            self._app_keys = sign, app_keys(dict(sign))
        return self._app_keys[1]

    def _may_move_focus(self, key: events.Key, target: DOMNode) -> bool:
        return key.key in MOVES_FOCUS or (key.key in self.app_keys() and not
                                          target.check_consume_key(key.key, key.character))

    async def answer(self, key: events.Key,
                     handle: Callable[[events.Key], Awaitable[None]]) -> None:
        if self._waiting is not None:
            self._waiting.append(key)  # a key before it is still on its way
            return
        try:
            target: DOMNode = self.app.focused or self.app.screen  # where Textual sends it
        except ScreenStackError:  # no screen any more: nothing answers it
            return
        if not self._may_move_focus(key, target):
            await handle(key)
            return
        self._gen += 1
        self._waiting = []
        way = target.ancestors_with_self  # the widget, its parents, the screen, the App
        self.app.set_timer(STUCK_S, partial(self._done, self._gen))
        await handle(key)
        # answered by a priority binding: it is done here; else it is on its way up from target
        self._step(way if key.is_forwarded else [], 0, self._gen)

    def _step(self, way: Sequence[DOMNode], index: int, gen: int) -> None:
        """The key has passed ``way[index - 1]``: wait for the next node (after what it has
        queued, the key among it), or let the next keys go."""
        if gen != self._gen:
            return
        for i in range(index, len(way)):
            if way[i].call_later(self._step, way, i + 1, gen):
                return
        self._settled(gen)

    def _settled(self, gen: int) -> None:
        """Last, the screen on top now (one the key pushed or uncovered) takes its focus."""
        try:  # back on the App's own queue: a key the App posts bubbles up to it again
            if self.app.screen.call_later(self.app.call_later, self._done, gen):
                return
        except ScreenStackError:
            pass
        self._done(gen)

    def _done(self, gen: int) -> None:
        if gen != self._gen or self._waiting is None:
            return
        waiting, self._waiting = self._waiting, None
        if not self.app.is_running:
            return
        for key in waiting:  # in their order; each may hold the ones after it again
            self.app.post_message(events.Key(key.key, key.character))
