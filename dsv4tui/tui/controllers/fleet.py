"""The dashboard's side of the fleet (several hosts at once, ``dsv4tui.tui.fleet_app``): a
dashboard opened from the Fleet watches the fleet's live connection rather than owning one
(:meth:`FleetMember.supervisor`), and ``0`` gives it back, its own streams removed, and ends
the dashboard with :data:`BACK` (the Fleet shows again, every host still connected)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from dsv4tui.core.view import model as m
from dsv4tui.tui.controllers.ui import Ui, start
from dsv4tui.tui.screens.modals import ConfirmScreen

BACK = "fleet"  # what a dashboard opened from the fleet exits with to go back to it


class FleetMember:
    """``join(supervisor)``: the fleet's connection to share; ``back()``: the ``0`` key
    (``leave(BACK)`` releases the link and ends the dashboard)."""

    def __init__(self, ui: Ui, model: m.UiModel,
                 leave: Callable[[str], Awaitable[None]]) -> None:
        self.ui, self.model, self.leave = ui, model, leave
        self._supervisor: Any = None

    def join(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    def supervisor(self) -> Any:
        """The fleet's supervisor to watch (None: not opened from a fleet)."""
        if self._supervisor is not None:
            self.ui.notify(f"{self.ui.key_of('screen.fleet')}: back to the fleet (every host "
                           "stays connected)", timeout=6, markup=False)
        return self._supervisor

    def back(self) -> None:
        if self._supervisor is None:
            self.ui.notify("this dashboard was not opened from a fleet (dsv4tui connect HOST "
                           "HOST ... opens one)", timeout=4)
            return
        busy = self.model.busy
        if busy is None:
            start(self.ui, self.leave(BACK), "", "quit")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                start(self.ui, self.leave(BACK), "", "quit")
        self.ui.push_screen(ConfirmScreen(
            "back to the fleet?", f"a {busy} is running on the host: it goes on there; this "
            "host's dashboard picks it up again when you open it", yes="Back"), answer)
