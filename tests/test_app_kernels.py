"""The Kernels screen in the dashboard: its stored captures reach it even when it was
mounted in the background (the App mounts every screen ahead of its first visit)."""

from __future__ import annotations

from pathlib import Path

from snapshot_apps.frozen import frozen_app
from textual.widgets import Static

from dsv4tui.tui.screens.kernels import KernelsBody


async def test_a_kernels_body_mounted_in_the_background_shows_its_captures(
        isolated_env: Path) -> None:
    app = frozen_app()  # the run store: the test's own, empty
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)  # every body is mounted with the main screen
        assert app.view == "dashboard"
        await pilot.press("6")
        await pilot.pause(0.3)
        assert isinstance(app.body, KernelsBody)
        head = str(app.screen.query_one("#kern-head", Static).render())
        assert "no kernel captures yet" in head  # not "loading…"
