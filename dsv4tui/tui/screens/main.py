"""The main screen: the frame composed once, the seven bodies switched inside it."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult

from dsv4tui.core.view.model import UiModel
from dsv4tui.tui.screens.base import ALL, Body, FramedScreen, KeyBar, NavBar
from dsv4tui.tui.widgets.focus_mark import FocusTable
from dsv4tui.tui.widgets.log_view import LogPanel


class MainScreen(FramedScreen):
    """Banner, host bar, tabs and key bar around the bodies, one shown at a time (its
    ``display``: what Textual's ContentSwitcher does, without a container of its own to
    redraw behind the body on every switch). Only the body in view redraws; one coming into
    view is brought up to date first, so its first frame shows current figures."""

    AUTO_FOCUS = ""  # the body in view takes the focus (Body.take_focus)

    def __init__(self, model: UiModel, bodies: Iterable[Body], current: str) -> None:
        self.bodies = {body.MODE: body for body in bodies}
        self.MODE = current if current in self.bodies else next(iter(self.bodies))
        for mode, body in self.bodies.items():
            body.display = mode == self.MODE
        super().__init__(model)

    def compose_frame_body(self) -> ComposeResult:
        yield from self.bodies.values()

    @property
    def body(self) -> Body:
        return self.bodies[self.MODE]

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self._shown)  # laid out: what can take the focus is known

    def show(self, mode: str) -> None:
        """Switch to the body of ``mode``: up to date before it is drawn."""
        if mode not in self.bodies:
            return
        if mode != self.MODE:
            left = self.body
            if self.focused is not None and left in self.focused.ancestors:
                left.last_focus = self.focused
            self.MODE = mode
            body = self.body
            if body.is_mounted:
                body.refresh_parts(ALL)
            left.display, body.display = False, True
        self._shown()

    def _shown(self) -> None:
        body = self.body
        self.one(NavBar).set_current(self.MODE)
        self.one(KeyBar).set_scopes(body.SCOPES, body.LEAD_KEYS)
        body.take_focus()
        if self.focus_mark is not None:  # a mark kept on this body while hidden, not focused
            self.focus_mark.update()
        for table in body.every(FocusTable):  # one left with the focus, shown without it
            table.catch_up()
        body.on_shown()

    def refresh_body(self, parts: frozenset[str]) -> None:
        body = self.body
        if body.is_mounted:
            body.refresh_parts(parts)

    def log_panel(self) -> LogPanel | None:
        return self.body.log_panel()
