"""Keys through Textual's public bindings (dsv4tui/tui/keymap.py): text typed
into a box stays text, escape leaves a box before anything else, keys typed faster than the
dashboard answers keep their order, dialogs keep their own keys, a remapped key is the key."""

from __future__ import annotations

from plugins.pilot import until
from snapshot_apps.frozen import FrozenApp, frozen_app, frozen_model
from textual import events
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input

from dsv4tui.core.config import Settings
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.modals import ConfirmScreen
from dsv4tui.tui.screens.runs import RunsBody
from dsv4tui.tui.widgets.log_view import LogPanel, LogView


def typed(app: FrozenApp, *keys: str) -> None:
    """Keys queued back to back, as a terminal delivers fast typing."""
    for key in keys:
        char = key if len(key) == 1 else {"space": " ", "slash": "/"}.get(key)
        app.post_message(events.Key(key, char))


async def test_text_typed_into_the_log_search_is_text_and_escape_closes_the_box() -> None:
    app = frozen_app("logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.body.query_one(LogPanel)
        box = panel.query_one(Input)
        follow = panel.view.follow
        # every one of these is a key of the dashboard outside the box
        await pilot.press("slash", *"flood 1q?w", "N")
        assert box.value == "flood 1q?wN" and box.has_focus
        assert panel.view.follow is follow and app.view == "logs"
        assert not isinstance(app.screen, HelpScreen) and app.is_running
        await pilot.press("escape")
        assert not panel.search_open and isinstance(app.focused, LogView)
        await pilot.press("escape")  # no box open: nothing to close, still here
        assert app.view == "logs" and app.is_running
        await pilot.press("f")  # out of the box the keys are the dashboard's again
        assert panel.view.follow is not follow


async def test_runs_filter_takes_text_and_escape_clears_it() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        table = app.screen.query_one("#runs-table", DataTable)
        assert table.row_count == 4
        await pilot.press("slash", *"nvfp4")
        assert app.screen.query_one("#runs-filter", Input).value == "nvfp4"
        assert table.row_count == 2
        await pilot.press("escape")
        assert app.model.runs.filter == "" and table.row_count == 4 and table.has_focus
        assert not app.screen.query_one("#runs-filter", Input).has_class("-visible")


async def test_keys_typed_faster_than_answered_keep_their_order() -> None:
    """A key that goes through the widgets (arrows in a table, text into a box) is answered
    after the widgets had it; the keys behind it wait for it, or a priority binding would
    overtake it (space would mark the row the cursor was leaving)."""
    app = frozen_app("runs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        screen = app.body
        assert isinstance(screen, RunsBody)
        table = screen.query_one("#runs-table", DataTable)
        second = table.coordinate_to_cell_key(Coordinate(1, 0)).row_key.value
        app.model.runs.marked.clear()
        assert table.cursor_row == 0
        typed(app, "down", "space")
        await pilot.pause(0.3)
        assert [str(run_id) for run_id in app.model.runs.marked] == [second]

        typed(app, "slash", "n", "v", "escape")  # into the box, then out of it, cleared
        await pilot.pause(0.3)
        box = screen.query_one("#runs-filter", Input)
        assert box.value == "" and app.model.runs.filter == "" and table.row_count == 4

    app = frozen_app("logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.body.query_one(LogPanel)
        follow = panel.view.follow
        typed(app, "slash", "f", "o")  # "fo" in the box
        await pilot.pause(0.3)
        await pilot.press("escape", "f")  # out of it (the key after escape: once it is out)
        await pilot.pause(0.3)
        assert panel.query_one(Input).value == "fo" and not panel.search_open
        assert panel.view.follow is not follow


async def test_a_key_typed_right_after_escape_or_a_tab_key_goes_where_the_focus_went() -> None:
    """Escape closes the search box, a tab key switches the body, ? opens Help: the keys typed
    right behind (queued together, as a terminal delivers them) are answered where the focus
    is after it, never by the widget that had the focus before (tui/key_order.py)."""
    app = frozen_app("logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.body.query_one(LogPanel)
        follow = panel.view.follow
        typed(app, "slash", "f", "o", "escape", "f")  # out of the box, then f: follow, not text
        await until(pilot, lambda: panel.view.follow is not follow, 10, "f toggling follow")
        assert panel.query_one(Input).value == "fo" and not panel.search_open
        assert isinstance(app.focused, LogView)

    app = frozen_app("dashboard")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        logs = app.main.bodies["logs"].query_one(LogPanel)
        dash = app.main.bodies["dashboard"].query_one(LogPanel)
        follow = logs.view.follow, dash.view.follow
        typed(app, "2", "f")  # the Logs body's f, not the Dashboard's
        await until(pilot, lambda: logs.view.follow is not follow[0], 10, "the Logs body's f")
        assert app.view == "logs" and dash.view.follow is follow[1]
        typed(app, "1", "slash", "x")  # the Dashboard's search box gets the x
        await until(pilot, lambda: dash.query_one(Input).value == "x", 10, "x in its box")
        assert app.view == "dashboard" and not logs.search_open
        typed(app, "escape", "question_mark", "escape", "4")  # the box shut, Help, shut, Bench
        await until(pilot, lambda: app.view == "bench", 10, "the Bench body")
        assert not isinstance(app.screen, HelpScreen) and not dash.search_open


async def test_dialogs_keep_their_keys() -> None:
    """Under a dialog the dashboard's keys wait (a dialog's q, n or 1 is its own)."""
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("1", "4")
        assert isinstance(app.screen, HelpScreen) and app.view == "dashboard"
        await pilot.press("q")  # closes Help, does not quit
        assert not isinstance(app.screen, HelpScreen) and app.is_running
        await pilot.press("q")  # the frozen sweep runs: asks first
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("4", "q")
        assert isinstance(app.screen, ConfirmScreen) and app.view == "dashboard"
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen) and app.is_running
        await pilot.press("4")
        await pilot.pause()
        assert app.view == "bench"


async def test_a_remapped_key_is_the_key_everywhere() -> None:
    settings = Settings(keymap={"log.follow": "ctrl+f", "screen.logs": "L"})
    app = FrozenApp(settings=settings, model=frozen_model())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("L")
        await pilot.pause()
        assert app.view == "logs"
        panel = app.body.query_one(LogPanel)
        follow = panel.view.follow
        await pilot.press("f")
        assert panel.view.follow is follow
        await pilot.press("ctrl+f")
        assert panel.view.follow is not follow
        await pilot.press("2")
        await pilot.pause()
        assert app.view == "logs"  # 2 is no key of the dashboard any more
