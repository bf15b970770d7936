"""Waiting for what a user would see, in Textual pilot tests: ``await until(pilot, cond)``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(pilot: object, cond: Callable[[], bool], timeout: float = 30.0,
                what: str = "") -> None:
    """Let the app run until ``cond()`` holds; an AssertionError naming ``what`` after
    ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await pilot.pause(0.05)  # type: ignore[attr-defined]


def toasts(app: object) -> str:
    """What the notifications on screen say (the app runs with ``notifications=True``):
    read from the Toast widgets, Textual's public view of them."""
    screen = app.screen  # type: ignore[attr-defined]
    return " | ".join(str(toast.render()) for toast in screen.query("Toast"))
