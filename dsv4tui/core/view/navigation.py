"""Who chooses the screen: the user's keys win over the dashboard's automatic moves.

The dashboard moves on its own at a few moments (a first look at the startup phases after
connecting, the compare view once it is loaded). Such a move happens only if the user has not
chosen a screen since the event that asked for it (for the first look: since the app started);
otherwise the user stays where they are and is told what happened instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsv4tui.core.view.notice import Notice


@dataclass
class Navigation:
    """A count of the screens the user chose (keys, the palette); a token is its value at the
    moment an automatic move was asked for."""

    choices: int = 0

    def chose(self) -> None:
        """The user asked for a screen (a key, the palette)."""
        self.choices += 1

    def token(self) -> int:
        """Taken when the event that may move the screen happens."""
        return self.choices

    def may_move(self, since: int = 0) -> bool:
        """True when no screen was chosen since ``token`` (0: since the app started)."""
        return self.choices == since


def stayed(what: str, screen: str, key: str) -> Notice:
    """The notification for a move that did not happen: what it would have shown, and how."""
    return Notice(f"{what}: {key} shows it on {screen}", title="stayed on your screen")
