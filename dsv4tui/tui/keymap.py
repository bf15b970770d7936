"""The dashboard's key bindings, built from :mod:`dsv4tui.core.actions` (the textual-free table
of every action, its binding id, default key and description).

The screens build their ``BINDINGS`` with :func:`bindings`; the config's ``[keymap]`` is
validated by the config itself (``dsv4tui.core.actions.keymap_problems``) and applied with
``App.set_keymap`` (Textual remaps every binding with that id, wherever it is declared).

A screen's keys are priority bindings: Textual answers them the moment the key arrives, where
a plain binding waits until the key has bubbled from the focused widget up to the App, one
message hop per widget, each behind whatever the event loop has queued (a log repaint is
10-15 ms). A printable key that the focused widget takes as text (an Input:
``check_consume_key``) is left out of every binding above that widget, so ``/flood`` typed
into the log search box lands in the box. The app-wide keys are declared twice: as the App's
plain bindings (under a dialog they wait for it, as before: a dialog's ``q`` or ``n`` is
its own) and as priority bindings of every main screen (:func:`app_keys`), answered at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.binding import Binding, BindingType

from dsv4tui.core.actions import (
    ACTIONS,
    BY_ID,
    SCREENS,
    Action,
    display_key,
    effective,
    keymap_problems,
    split_keys,
)

__all__ = ["ACTIONS", "BY_ID", "SCREENS", "Action", "app_keys", "bindings", "check_keymap",
           "display_key", "effective", "escape_binding", "keymap_problems"]


def bindings(scope: str, *, priority: bool | None = None) -> list[BindingType]:
    """The bindings of ``scope``'s actions; priority ones except for the App's own
    (``scope="app"``), unless ``priority`` says otherwise."""
    first = scope != "app" if priority is None else priority
    return [Binding(a.key, a.action, a.description, show=a.show, id=a.id, tooltip=a.help,
                    key_display=a.key_display, priority=first)
            for a in ACTIONS if a.scope == scope]


def app_keys() -> list[BindingType]:
    """The app-wide keys as a main screen's priority bindings (their actions name the App)."""
    return bindings("app", priority=True)


def escape_binding(action: str) -> Binding:
    """Escape for ``action`` (closing a search or filter box), answered first; the screen's
    ``check_action`` says whether a box is open, and when none is the key goes on as
    usual (the screen's own escape). Not remappable, not listed: the box says "esc"."""
    return Binding("escape", action, "Close", show=False, priority=True)


def check_keymap(keymap: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(usable keymap, warnings)``. A config file's keymap was validated when it loaded
    (a typo is exit 2 there); this is for keymaps built in code: a bad entry is dropped and
    named, with what to do about it."""
    bad = dict(keymap_problems(keymap))
    good = {binding_id: ",".join(split_keys(keys)) for binding_id, keys in keymap.items()
            if binding_id not in bad}
    warnings = [f"keymap.{binding_id}: {why} (ignored)" for binding_id, why in bad.items()]
    return good, warnings
