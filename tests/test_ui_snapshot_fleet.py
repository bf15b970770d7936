"""The Fleet screen with frozen data (tests/snapshot_apps/fleet.py), at 160x48, 120x40 and
80x24, dark and light: pytest-textual-snapshot's ``snap_compare`` (as test_ui_snapshots.py).

Update after an intended change: ``pytest tests/test_ui_snapshot_fleet.py --snapshot-update``,
then look at the SVGs in tests/__snapshots__/test_ui_snapshot_fleet/ before committing them.
"""

from __future__ import annotations

import pytest
from snapshot_apps.fleet import frozen_fleet_app
from textual.pilot import Pilot

SIZES = ((160, 48), (120, 40), (80, 24))


async def settle(pilot: Pilot[object]) -> None:
    for _ in range(3):
        await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", ("dark", "light"))
def test_fleet_screen(snap_compare: object, theme: str, size: tuple[int, int]) -> None:
    app = frozen_fleet_app(theme)
    assert snap_compare(app, terminal_size=size, run_before=settle)  # type: ignore[operator]


async def test_frozen_rows() -> None:
    """What the snapshot shows, said in words: the reasons, n/a and — where nothing is known."""
    app = frozen_fleet_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        from textual.widgets import Static

        from dsv4tui.tui.widgets.fleet_table import FleetTable

        table = app.screen.query_one(FleetTable)
        assert table.row_count == 5
        assert app.screen.highlighted() == "h200b"  # type: ignore[attr-defined]
        assert table.cell("b200", "state") == "reconnecting · retry 12s"
        assert table.cell("ct200", "state") == "connected · stale"
        assert table.cell("ct200", "model") == "RTX PRO 6000"
        assert table.cell("gpu-old", "model") == "no NVIDIA driver on gpu-old"
        assert table.cell("h200a", "best") == "2,875"
        problems = str(app.screen.query_one("#fleet-problems", Static).render())
        assert problems.splitlines() == ["✗ b200: connection refused by 10.0.0.7:22",
                                         "✗ gpu-old: telemetry: no NVIDIA driver on gpu-old"]
