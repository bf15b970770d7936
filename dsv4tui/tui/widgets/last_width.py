"""The width a widget will have when it is shown again (:class:`LastWidth`).

A widget of a body that is not in view has no region, so Textual gives its size as 0. A body
brought up to date just before it is shown (``MainScreen.show``) would lay its table out for
a width of 0 (narrow columns on its first frame) and again for its real width at the Resize
that follows: two rebuilds of every row on each switch, and a wrong first frame. Its width did
not change while it was hidden, so the last width it had in view is the one to use.
"""

from __future__ import annotations


class LastWidth:
    """``self._width.keep(measured)``: ``measured`` when the widget is in view (> 0), else the
    last width it had in view (0 if it was never shown)."""

    def __init__(self) -> None:
        self.width = 0

    def keep(self, measured: int) -> int:
        if measured > 0:
            self.width = measured
        return self.width
