"""Cheap Static updates: nothing when the text is the same, no layout pass when the height
cannot change (a layout pass reflows the whole screen; at 10 updates/s that is the UI's
biggest cost under load)."""

from __future__ import annotations

from rich.text import Text
from textual.markup import escape
from textual.widgets import Static

from dsv4tui.core.campaign.labels import safe_text


def update_static(widget: Static, text: str, *, fixed_height: bool = False) -> bool:
    """Show ``text``; True when it changed. ``fixed_height``: the CSS fixes the height."""
    last: str | None = getattr(widget, "_dsv_text", None)
    if last == text:
        return False
    layout = not fixed_height and (last is None or last.count("\n") != text.count("\n")
                                   or len(last) != len(text))
    widget._dsv_text = text  # type: ignore[attr-defined]
    widget.update(text, layout=layout)
    return True


def esc(text: object) -> str:
    """A user- or server-supplied string for a markup string: its control characters shown
    as escapes (``\\x1b``) and its ``[`` escaped, so it can neither drive the terminal nor
    inject markup."""
    return escape(safe_text(text))


def plain(text: object) -> Text:
    """A user- or server-supplied string as a DataTable cell / renderable: never parsed as
    markup (a DataTable parses str cells), control characters shown as escapes."""
    return Text(safe_text(text), no_wrap=True, overflow="ellipsis")
