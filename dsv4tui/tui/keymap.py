"""The dashboard's key bindings, built from :mod:`dsv4tui.core.actions` (the textual-free table
of every action, its binding id, default key and description).

The screens build their ``BINDINGS`` with :func:`bindings`; the config's ``[keymap]`` is
validated by the config itself (``dsv4tui.core.actions.keymap_problems``) and applied with
``App.set_keymap`` (Textual remaps every binding with that id, wherever it is declared).

Every key is an ordinary binding: the App's (the tabs, help, quit ...) and each body's and
dialog's own, answered where the focus is (a body takes the focus when it is shown), so keys
typed quickly are answered in the order they came. A printable key that the focused widget
takes as text (an Input) lands in the box; the keys that open a box are answered as they
arrive (:func:`bindings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType

from dsv4tui.core.actions import (
    ACTIONS,
    BY_ID,
    SCREENS,
    Action,
    display_key,
    effective,
    keymap_problems,
    keys_of,
    split_keys,
)

__all__ = ["ACTIONS", "BY_ID", "SCREENS", "Action", "answered_here", "app_keys", "bindings",
           "check_keymap", "display_key", "effective", "escape_binding", "keymap_problems"]


PALETTE_SCOPES = {"logs", "runs", "compare"}  # the bodies' key scopes the palette lists too
OPEN_A_BOX = frozenset({"log.search", "runs.filter"})  # what is typed next goes into the box


def bindings(scope: str) -> list[BindingType]:
    """The bindings of ``scope``'s actions: ordinary ones, answered where the focus is, except
    the keys that open a text box (:data:`OPEN_A_BOX`): priority ones, answered as the key
    arrives, so that text typed right after it lands in the box."""
    return [Binding(a.key, a.action, a.description, show=a.show, id=a.id, tooltip=a.help,
                    key_display=a.key_display, priority=a.id in OPEN_A_BOX)
            for a in ACTIONS if a.scope == scope]


def answered_here(binding_id: str, action: str) -> Binding:
    """An app-wide action's binding (its id, key and description) that a body answers with
    its own ``action``: ``compare`` on the Kernels body compares the two marked captures.
    Remapping the id moves both, since Textual remaps every binding with that id."""
    a = BY_ID[binding_id]
    return Binding(a.key, action, a.description, show=a.show, id=a.id, tooltip=a.help,
                   key_display=a.key_display)


def app_keys(keymap: Mapping[str, str]) -> frozenset[str]:
    """The keys of the App's own actions under ``keymap`` (the tabs, help, the dialogs ...)."""
    keys = keys_of(keymap)
    return frozenset(k for a in ACTIONS if a.scope == "app" for k in keys[a.id])


def escape_binding(action: str) -> Binding:
    """Escape for ``action`` (closing a search or filter box): an ordinary binding, after
    the text typed before it; ``check_action`` says whether a box is open, and when none is
    the key goes on as usual. Not remappable, not listed: the box says "esc"."""
    return Binding("escape", action, "Close", show=False)


def check_keymap(keymap: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(usable keymap, warnings)``. A config file's keymap was validated when it loaded
    (a typo is exit 2 there); this is for keymaps built in code: a bad entry is dropped and
    named, with what to do about it."""
    bad = dict(keymap_problems(keymap))
    good = {binding_id: ",".join(split_keys(keys)) for binding_id, keys in keymap.items()
            if binding_id not in bad}
    warnings = [f"keymap.{binding_id}: {why} (ignored)" for binding_id, why in bad.items()]
    return good, warnings


def palette(app: App[Any], holder: Any, active: Mapping[str, str]) -> Iterable[SystemCommand]:
    """The command palette's entries for the keys of ``app`` and of ``holder`` (the body in
    view, or the screen on top), under the ``active`` keymap, then one per theme."""
    from dsv4tui.tui import themes

    scopes = {"app", *PALETTE_SCOPES.intersection(getattr(holder, "SCOPES", ()))}
    for action, keys in effective(active):
        if action.palette and action.scope in scopes:
            target = app if action.scope == "app" else holder
            yield SystemCommand(f"{action.description} ({keys})", action.help,
                                partial(app.call_later, app.run_action, action.action, target))
    for name in themes.THEMES:
        yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme",
                            partial(setattr, app, "theme", name))
