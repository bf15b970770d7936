"""Which panel holds the focus, drawn without a restyle (:class:`FocusMark`).

A ``.panel:focus-within`` rule made Textual restyle the panel and every node inside it each
time the focus entered or left it (``Stylesheet.update_nodes`` over the subtree: 5 to 15 ms on
a 2-core VM, on every screen switch). Here the screen watches its ``focused`` reactive and sets
the focused panel's border and title colour inline to the theme's ``$primary``, keeping the
border's edge (``round``; ``heavy`` in the high-contrast theme): a repaint of that one panel.
On a stale connection (the screen's ``-stale`` class) no panel is marked, as before, so the
stale colour shows. Public Textual API only (``watch``, ``styles``, ``theme_variables``, ``theme_changed_signal``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from textual.color import Color
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable

from dsv4tui.tui.clock import in_view

PANEL = "panel"
CellT = TypeVar("CellT")
MARKED = ("border_top", "border_right", "border_bottom", "border_left", "border_title_color")


def panel_of(widget: Widget | None) -> Widget | None:
    """The ``.panel`` that ``widget`` is in (itself included), if any."""
    if widget is None:
        return None
    for node in widget.ancestors_with_self:
        if isinstance(node, Widget) and node.has_class(PANEL):
            return node
    return None


class FocusMark:
    """``FocusMark(screen)`` from the screen's ``on_mount``; ``update()`` after its ``-stale``
    class or the theme changed."""

    def __init__(self, screen: Screen[Any]) -> None:
        self.screen = screen
        self.panel: Widget | None = None
        screen.watch(screen, "focused", self._moved, init=False)
        screen.app.theme_changed_signal.subscribe(screen, self._theme)  # its CSS is applied

    def _moved(self, _focused: Widget | None) -> None:
        self.update()

    def _theme(self, _theme: object) -> None:
        self._clear()
        self.update()

    def update(self) -> None:
        screen = self.screen
        panel = None if screen.has_class("-stale") else panel_of(screen.focused)
        if panel is self.panel:
            return
        self._clear()
        if panel is not None:
            primary = Color.parse(screen.app.theme_variables.get("primary", "ansi_blue"))
            edge = panel.styles.border_top[0] or "round"
            panel.styles.border = (edge, primary)
            panel.styles.border_title_color = primary
        self.panel = panel

    def _clear(self) -> None:
        """The marked panel gets its stylesheet colours back (the inline ones go; its edges
        stay, so no layout pass)."""
        panel, self.panel = self.panel, None
        if panel is None:
            return
        inline = panel.styles.inline
        for rule in MARKED:
            inline.clear_rule(rule)
        panel.refresh()


class SameLookFocused:
    """A widget that looks the same focused or not (the panel around it shows the focus):
    Textual restyles a widget each time its focus changes (``watch_has_focus``: 3 to 6 ms for
    one with component classes, such as the log view); this one skips that. A ``:focus`` rule
    for it would not apply: give such a widget its own look in ``watch_has_focus`` instead.
    A plain mixin, first among the bases (a Widget subclass would reset ``can_focus``)."""

    def watch_has_focus(self, _has_focus: bool) -> None:
        return


class PanelScroll(SameLookFocused, VerticalScroll):
    """A scrolling ``.panel`` that takes the focus itself (the GPU list, the profile)."""


class FocusTable(DataTable[CellT]):
    """A table, restyled for its focus only where that is seen. A DataTable looks different
    focused (its tint, its cursor), and a restyle clears its row caches, so every row is
    rendered again: 10 to 15 ms for the Bench or Runs table each time the body is left (the
    table loses the focus, hidden) and again when it is shown (it gets it back). Here a table
    that loses the focus while hidden keeps its look (nobody sees it), and one whose look
    already matches its focus is not restyled; :meth:`catch_up` restyles a table shown without
    the focus that still looks focused."""

    _styled_focused: bool | None = None  # the focus its styles were last computed for

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styled_focused = self.has_focus

    def watch_has_focus(self, has_focus: bool) -> None:
        if has_focus == self._styled_focused or (not has_focus and not in_view(self)):
            return
        super().watch_has_focus(has_focus)

    def catch_up(self) -> None:
        """After the focus was set (``has_focus`` follows on the Focus event, later)."""
        if self._styled_focused is not None and self._styled_focused != (
                self.screen.focused is self):
            self.update_node_styles()
