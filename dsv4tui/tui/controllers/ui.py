"""What a controller asks of the dashboard it serves (:class:`Ui`, the App is one): dialogs,
notices, workers, the body in view, redraws; and the two gates every key passes first
(:func:`need_live`, :func:`refused`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker
from textual.worker_manager import WorkerManager

from dsv4tui.core.view import model as m
from dsv4tui.core.view.notice import Notice
from dsv4tui.tui.screens.main import MainScreen


class Ui(Protocol):
    """The dashboard as the controllers see it (``Dsv4App`` is one, structurally)."""

    main: MainScreen | None  # the main screen, once the app runs

    @property
    def screen(self) -> Screen[Any]: ...

    @property
    def workers(self) -> WorkerManager: ...

    @property
    def view(self) -> str: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def push_screen(self, screen: Screen[Any],
                    callback: Callable[[Any], None] | None = None) -> Any: ...

    def push_screen_wait(self, screen: Screen[Any]) -> Awaitable[Any]: ...

    def run_worker(self, work: Any, name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True, start: bool = True,
                   exclusive: bool = False, thread: bool = False) -> Worker[Any]: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any,
                         **kwargs: Any) -> Any: ...

    def set_timer(self, delay: float, callback: Any = None, *, name: str | None = None,
                  pause: bool = False) -> Timer: ...

    def set_interval(self, interval: float, callback: Any = None, *, name: str | None = None,
                     repeat: int = 0, pause: bool = False) -> Timer: ...

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...

    def mark(self, *parts: str) -> None:
        """Parts of the model changed: the screen redraws them soon."""

    def tell(self, notice: Notice | None) -> None:
        """A notification in the core's words."""

    def show_body(self, mode: str) -> None: ...

    def auto_show(self, mode: str, since: int, what: str) -> bool: ...

    def show_error(self, title: str, message: str, details: list[str] | None = None) -> None: ...

    def key_of(self, binding_id: str) -> str: ...


def start(ui: Ui, work: Any, name: str, group: str, *, exclusive: bool = False,
          thread: bool = False) -> Worker[Any]:
    """A worker on the App (a failure becomes its one error dialog, titled by ``group``)."""
    return ui.run_worker(work, name=name, group=group, exclusive=exclusive, thread=thread,
                         exit_on_error=False)


def need_live(ui: Ui, model: m.UiModel, live: bool) -> bool:
    """A key that needs the host: say why not when there is none, or it is not connected."""
    if not live:
        ui.notify("no host attached", severity="warning")
    elif not model.conn.connected:
        ui.notify(f"{model.conn.host} is not connected", severity="warning", markup=False)
    return live and model.conn.connected


def refused(ui: Ui, why: str | None) -> bool:
    """``why`` a key does nothing now (None: it goes on), said as a warning."""
    if why:
        ui.notify(why, severity="warning")
    return bool(why)
