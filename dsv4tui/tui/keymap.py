"""The dashboard's key bindings, built from :mod:`dsv4tui.core.actions` (the textual-free table
of every action, its binding id, default key and description).

The screens build their ``BINDINGS`` with :func:`bindings`; the config's ``[keymap]`` is
validated by the config itself (``dsv4tui.core.actions.keymap_problems``) and applied with
``App.set_keymap``.
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

__all__ = ["ACTIONS", "BY_ID", "SCREENS", "Action", "bindings", "check_keymap", "display_key",
           "effective", "keymap_problems"]


def bindings(scope: str) -> list[BindingType]:
    return [Binding(a.key, a.action, a.description, show=a.show, id=a.id, tooltip=a.help,
                    key_display=a.key_display)
            for a in ACTIONS if a.scope == scope]


def check_keymap(keymap: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(usable keymap, warnings)``. A config file's keymap was validated when it loaded
    (a typo is exit 2 there); this is for keymaps built in code: a bad entry is dropped and
    named, with what to do about it."""
    bad = dict(keymap_problems(keymap))
    good = {binding_id: ",".join(split_keys(keys)) for binding_id, keys in keymap.items()
            if binding_id not in bad}
    warnings = [f"keymap.{binding_id}: {why} (ignored)" for binding_id, why in bad.items()]
    return good, warnings
