"""Cheap Static updates: nothing when the text is the same, no layout pass when the height
cannot change (a layout pass reflows the whole screen; at 10 updates/s that is the UI's
biggest cost under load)."""

from __future__ import annotations

from textual.widgets import Static


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
