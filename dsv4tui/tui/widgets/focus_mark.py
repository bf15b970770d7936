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
    class or the theme changed, or a body was shown.

    A panel left marked on a body that was hidden keeps its mark while nobody sees it: a
    change of a panel's border repaints every line of it (its blank lines under its children
    too), so unmarking it on the way out and marking it again on the way back, when the focus
    returns to it, cost two full repaints of the panel per visit (~45 lines, 4 to 6 ms on a
    2-core VM). A kept mark is taken off when its panel is in view without the focus."""

    def __init__(self, screen: Screen[Any]) -> None:
        self.screen = screen
        self.panel: Widget | None = None  # the panel the focus is in, marked
        self.kept: set[Widget] = set()  # marked panels on hidden bodies
        screen.watch(screen, "focused", self._moved, init=False)
        screen.app.theme_changed_signal.subscribe(screen, self._theme)  # its CSS is applied

    def _moved(self, _focused: Widget | None) -> None:
        self.update()

    def _theme(self, _theme: object) -> None:
        for panel in [*self.kept, *([self.panel] if self.panel is not None else [])]:
            self._clear(panel)
        self.kept.clear()
        self.panel = None
        self.update()

    def update(self) -> None:
        screen = self.screen
        panel = None if screen.has_class("-stale") else panel_of(screen.focused)
        if self.panel is not None and self.panel is not panel:
            self.kept.add(self.panel)  # cleared below if it is in view
        for kept in list(self.kept):
            if kept is panel:
                self.kept.discard(kept)
            elif not kept.is_attached or in_view(kept):
                self.kept.discard(kept)
                self._clear(kept)
        if panel is not None and panel is not self.panel and not self._marked(panel):
            primary = self._primary()
            edge = panel.styles.border_top[0] or "round"
            panel.styles.border = (edge, primary)
            panel.styles.border_title_color = primary
        self.panel = panel

    def _primary(self) -> Color:
        return Color.parse(self.screen.app.theme_variables.get("primary", "ansi_blue"))

    @staticmethod
    def _marked(panel: Widget) -> bool:
        return panel.styles.inline.has_rule("border_title_color")

    @staticmethod
    def _clear(panel: Widget) -> None:
        """The panel gets its stylesheet colours back (the inline ones go; its edges stay, so
        no layout pass)."""
        if not FocusMark._marked(panel):
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
