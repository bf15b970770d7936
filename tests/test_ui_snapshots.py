"""Every screen with frozen data (tests/snapshot_apps/frozen.py: no host, frozen clock), at
120x40 and 80x24, in each theme: pytest-textual-snapshot's ``snap_compare``.

Update after an intended change: ``pytest tests/test_ui_snapshots.py --snapshot-update``,
then look at the SVGs in tests/__snapshots__/test_ui_snapshots/ before committing them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from snapshot_apps.frozen import frozen_app
from textual.pilot import Pilot

from dsv4tui.tui.widgets.charts import Chart

SCREENS = ("dashboard", "logs", "launch", "bench", "runs", "compare", "help", "campaign")
THEMES = ("dark", "light", "high-contrast")
SIZES = ((120, 40), (80, 24))


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Dates in the runs table do not depend on the machine's time zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def settle(pilot: Pilot[object]) -> None:
    for _ in range(100):  # model changes reach the screen in batches (Dsv4App.mark)
        await pilot.pause()
        if not pilot.app._flush_pending:  # type: ignore[attr-defined]
            break
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    for _ in range(200):  # charts draw in a worker thread
        charts = pilot.app.screen.query(Chart)
        if all(chart.settled for chart in charts):
            break
        await pilot.pause(0.02)
    assert all(chart.settled for chart in pilot.app.screen.query(Chart)), "charts still drawing"
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("screen", SCREENS)
def test_screen(snap_compare: object, screen: str, theme: str, size: tuple[int, int]) -> None:
    app = frozen_app(screen, theme)
    assert snap_compare(app, terminal_size=size, run_before=settle)  # type: ignore[operator]
