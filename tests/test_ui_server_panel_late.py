"""The server panel greys out when /metrics stops, not at every sample a loaded host sends late."""

from __future__ import annotations

from typing import Any

from snapshot_apps.frozen import frozen_app

from dsv4tui.tui.widgets.server_panel import STALE_GRACE_S, ServerPanel


async def _settle(pilot: Any) -> None:
    await pilot.pause()
    await pilot.pause()


async def test_a_late_sample_greys_the_panel_only_after_a_grace() -> None:
    app = frozen_app("dashboard")
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        panel = app.screen.query_one(ServerPanel)
        win = app.model.server_metrics
        assert win.samples and not panel.has_class("-stale")
        last_t, last = win.samples[-1]
        too_old = last_t + max(3.0 * win.interval, 3.0) + 0.5
        app.model.frozen = too_old  # the sample is late: its numbers go, the panel stays
        panel.refresh_model()
        assert "run —" in str(panel.cells["running"].text.render())
        assert not panel.has_class("-stale")
        app.model.frozen = too_old + STALE_GRACE_S  # still nothing: now it says so
        panel.refresh_model()
        assert panel.has_class("-stale")
        win.add(dict(last), too_old + STALE_GRACE_S)  # a sample again: current at once
        panel.refresh_model()
        assert not panel.has_class("-stale")
        app.model.conn.state = "lost"  # the link down: grey at once
        panel.refresh_model()
        assert panel.has_class("-stale")
