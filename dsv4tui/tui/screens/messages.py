"""Messages the App posts to the screens. Screens never fetch: they redraw from the model."""

from __future__ import annotations

from textual.message import Message

# Parts of the model a screen may redraw.
CONN, SERVER, DECODE, LOGS, GPU, METRICS = ("conn", "server", "decode", "logs", "gpu",
                                            "metrics")
STARTUP, SANITY, SWEEP, RUNS, COMPARE, PROFILES, CAMPAIGN = (
    "startup", "sanity", "sweep", "runs", "compare", "profiles", "campaign")
ALL = frozenset({CONN, SERVER, DECODE, LOGS, GPU, METRICS, STARTUP, SANITY, SWEEP, RUNS, COMPARE,
                 CAMPAIGN, PROFILES})


class ModelUpdated(Message):
    """Parts of the UiModel changed; the screen redraws the widgets showing them.

    The App batches changes (at most ~10 per second) and sends one message to the screen
    on top; a screen that comes back into view redraws everything (``on_screen_resume``).
    """

    def __init__(self, parts: frozenset[str]) -> None:
        super().__init__()
        self.parts = parts
