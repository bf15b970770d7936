"""One clock for what ages on screen (:func:`every_second`).

Figures that age without a new sample (a GPU frame's age, a /metrics window, elapsed time)
are redrawn once a second. A 1 s timer per widget made a frame of its own per widget, at its
own phase: under load, on the dashboard, three extra frames a second besides the model's.
The App publishes one ``clock`` signal (Textual's public :class:`~textual.signal.Signal`)
inside its model flush, so these redraws ride on a frame that is drawn anyway. An App without
that signal (the fleet view, a test harness) gets a timer per widget, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.signal import Signal
from textual.widget import Widget

CLOCK_S = 1.0


def in_view(widget: Widget) -> bool:
    """Whether ``widget`` is on a body in view: no node above it is ``display: none`` (a
    hidden body's widgets are brought up to date when it is shown; a redraw of one meanwhile
    only makes Textual map the whole screen again at the next frame)."""
    node: object = widget
    while isinstance(node, Widget):
        if not node.display:
            return False
        node = node.parent
    return True


def every_second(widget: Widget, callback: Callable[[], object]) -> None:
    """Call ``callback`` about once a second while ``widget`` is mounted and in view (from its
    on_mount)."""

    def tick(_now: object = None) -> None:
        if in_view(widget):
            callback()

    signal = getattr(widget.app, "clock", None)
    if isinstance(signal, Signal):
        signal.subscribe(widget, tick, immediate=True)  # in the flush: on its frame
    else:
        widget.set_interval(CLOCK_S, tick)
