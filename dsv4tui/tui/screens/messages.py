"""Messages the App posts to the screens. Screens never fetch: they redraw from the model."""

from __future__ import annotations

from textual.message import Message

# Parts of the model a screen may redraw (the core's names: its model functions return them).
from dsv4tui.core.view.parts import (
    ALL,
    CAMPAIGN,
    COMPARE,
    CONN,
    DECODE,
    GPU,
    LOGS,
    METRICS,
    PROFILES,
    RUNS,
    SANITY,
    SERVER,
    STARTUP,
    SWEEP,
)

__all__ = ["ALL", "CAMPAIGN", "COMPARE", "CONN", "DECODE", "GPU", "LOGS", "METRICS", "PROFILES",
           "RUNS", "SANITY", "SERVER", "STARTUP", "SWEEP", "ModelUpdated"]


class ModelUpdated(Message):
    """Parts of the UiModel changed; the screen redraws the widgets showing them.

    The App batches changes (at most ~10 per second) and sends one message to the screen
    on top; a screen that comes back into view redraws everything (``on_screen_resume``).
    """

    def __init__(self, parts: frozenset[str]) -> None:
        super().__init__()
        self.parts = parts
