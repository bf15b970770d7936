"""What keeps the dashboard responsive under a steady load (issue 25): full garbage collections
between keys, one clock for what ages (hidden bodies skipped), tables that keep their width
while hidden, a flooded log that scrolls without a layout pass, figures that change length
without moving their sparkline. Real Textual apps, headless; no mock."""

from __future__ import annotations

import gc
from typing import Any

from snapshot_apps.frozen import frozen_app
from test_ui_log_view import LogApp
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.signal import Signal
from textual.widgets import DataTable, Static

from dsv4tui.core.view.log_lines import WARNING, LogLines
from dsv4tui.tui import gc_policy
from dsv4tui.tui.clock import every_second
from dsv4tui.tui.gc_policy import GcPolicy
from dsv4tui.tui.screens.messages import ALL
from dsv4tui.tui.screens.runs import RunsBody
from dsv4tui.tui.widgets.log_view import LogView
from dsv4tui.tui.widgets.server_panel import ServerPanel


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


async def test_full_collections_wait_for_a_pause_in_typing_and_the_collector_is_put_back() -> None:
    before_threshold, before_frozen = gc.get_threshold(), gc.get_freeze_count()
    app: App[None] = App()
    async with app.run_test() as pilot:
        clock = Clock()
        policy = GcPolicy(app, clock=clock)
        policy.start()
        assert policy.active
        assert gc.get_threshold()[2] == gc_policy.NEVER  # CPython starts no full pass
        assert gc.get_freeze_count() > before_frozen  # what exists now is never scanned again
        clock.t += gc_policy.FULL_EVERY_S + 1
        policy.key()  # someone is typing: no full pass under their keys
        assert not policy.tick()
        clock.t += gc_policy.QUIET_S + 0.1  # a pause: now
        assert policy.tick() and policy.full_collections == 1
        assert not policy.tick()  # not again so soon
        for _ in range(int(gc_policy.FULL_MAX_S) + 1):  # keys all the time for a minute
            clock.t += 1
            policy.key()
            if policy.tick():
                break
        assert policy.full_collections == 2  # held a minute at most
        policy.stop()
        await pilot.pause()
    assert gc.get_threshold() == before_threshold
    assert gc.get_freeze_count() == 0


class Ticked(Static):
    def __init__(self) -> None:
        super().__init__("")
        self.ticks = 0

    def on_mount(self) -> None:
        every_second(self, self.tick)

    def tick(self) -> None:
        self.ticks += 1


class ClockApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.clock: Signal[float] = Signal(self, "clock")

    def compose(self) -> ComposeResult:
        yield Ticked()
        with Vertical(id="hidden"):
            yield Ticked()


async def test_the_clock_reaches_widgets_in_view_only() -> None:
    app = ClockApp()
    async with app.run_test() as pilot:
        shown, hidden = list(app.query(Ticked))
        app.query_one("#hidden").display = False
        await pilot.pause()
        for t in range(3):
            app.clock.publish(float(t))
        assert shown.ticks == 3 and hidden.ticks == 0
        app.query_one("#hidden").display = True
        app.clock.publish(3.0)
        assert hidden.ticks == 1


def _widths(table: DataTable[Any]) -> list[int]:
    return [column.width for column in table.columns.values()]


async def test_a_hidden_runs_table_keeps_its_columns_when_brought_up_to_date() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        body = app.screen.query_one(RunsBody)
        table = body.query_one("#runs-table", DataTable)
        wide = _widths(table)
        await pilot.press("1")
        await pilot.pause()
        assert table.size.width == 0  # hidden: Textual gives it no size
        body._shown = None  # as after a change of the runs: the table is filled again
        body.refresh_parts(ALL)  # what MainScreen.show does before it switches the body in
        assert _widths(table) == wide  # not the narrow columns of a width of 0
        await pilot.press("5")
        await pilot.pause()
        assert _widths(table) == wide


async def test_a_flooded_filtered_log_follows_to_its_end_with_the_bar_in_step() -> None:
    lines = LogLines(500)
    app = LogApp(lines)  # the log view's own test app
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.query_one(LogView)
        view.min_level = WARNING  # filtered: its rows come and go as the ring turns over
        for batch in range(6):
            for i in range(200):
                level = "WARNING: " if i % 3 == 0 else ""
                lines.append(f"[2026-03-02 09:16:00 TP0] {level}line {batch}-{i}")
            view.sync()
            await pilot.pause()
            rows = view.row_count
            assert rows > view.scrollable_content_region.height
            assert view.virtual_size.height == rows
            assert view.vertical_scrollbar.window_virtual_size == rows
            assert view.scroll_y == view.max_scroll_y  # following: the newest line in view
        assert view.max_scroll_y == rows - view.scrollable_content_region.height


async def test_a_figure_changing_length_does_not_move_its_sparkline() -> None:
    app = frozen_app("dashboard")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        cell = app.screen.query_one(ServerPanel).cells["running"]
        cell.show("run [b]128[/b]", [1.0, 2.0])
        await pilot.pause()
        x = cell.spark.region.x
        cell.show("run [b]7[/b]", [1.0, 2.0, 3.0])  # two columns shorter
        await pilot.pause()
        assert cell.spark.region.x == x
        cell.show("run [b]1,024,000[/b]", [1.0])  # longer: the text gets its room
        await pilot.pause()
        assert cell.spark.region.x == x + 6
        assert "1,024,000" in str(cell.text.render())
