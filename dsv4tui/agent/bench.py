"""Agent command: bench (being built)."""

from __future__ import annotations

from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("bench", help="(not yet built)")
