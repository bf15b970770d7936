"""Something the dashboard tells the user in a notification, as the core words it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    text: str
    title: str = ""
    severity: Severity = "information"
    timeout: float = 6.0
