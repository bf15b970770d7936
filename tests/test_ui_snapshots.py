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
        if not pilot.app.flush.pending:  # type: ignore[attr-defined]
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


async def _kernels_listed(pilot: Pilot[object]) -> None:
    from dsv4tui.tui.screens.kernels import KernelsBody

    body = pilot.app.body  # type: ignore[attr-defined]
    assert isinstance(body, KernelsBody)
    for _ in range(200):  # the stored captures load in a worker thread
        if len(body.items) == 2:
            break
        await pilot.pause(0.02)
    await settle(pilot)


async def _kernels_compared(pilot: Pilot[object]) -> None:
    await _kernels_listed(pilot)
    await pilot.press("down", "space", "up", "space", "c")  # A: MXFP4/triton, B: NVFP4/marlin
    await settle(pilot)


@pytest.mark.parametrize("view, size", [("list", (160, 48)), ("list", (80, 24)),
                                        ("compare", (160, 48))],
                         ids=["list-160x48", "list-80x24", "compare-160x48"])
def test_kernels(snap_compare: object, view: str, size: tuple[int, int]) -> None:
    """The Kernels screen with two captures in the run store (the simulator's MXFP4/triton
    and NVFP4/marlin traces), and the comparison of the two."""
    from snapshot_apps.frozen import store_kernel_captures

    store_kernel_captures()
    app = frozen_app("kernels", "dark")
    run_before = _kernels_compared if view == "compare" else _kernels_listed
    assert snap_compare(app, terminal_size=size, run_before=run_before)  # type: ignore[operator]
