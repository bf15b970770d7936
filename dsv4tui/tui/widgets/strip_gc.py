"""Light Strips for the cyclic GC: now :func:`dsv4tui.tui.textual_hooks.light_strips` (every
private part of Textual the dashboard uses lives there); ``install`` is its old name."""

from __future__ import annotations

from dsv4tui.tui.textual_hooks import light_strips as install

__all__ = ["install"]
