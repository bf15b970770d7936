"""The app shell with frozen data (no host), one scenario a test: keys and their remapping,
the help screen and the command palette, themes, the error dialog, the connection banner,
quitting, the runs list and the compare screen."""

from __future__ import annotations

from typing import Any

from plugins.pilot import toasts
from snapshot_apps.frozen import FrozenApp, frozen_app, frozen_model
from textual.worker import Worker

from dsv4tui.core.config import Settings
from dsv4tui.core.errors import UserError
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.messages import CONN
from dsv4tui.tui.screens.modals import ConfirmScreen, ErrorScreen
from dsv4tui.tui.screens.runs import CompareScreen, RunsBody
from dsv4tui.tui.widgets.charts import Chart
from dsv4tui.tui.widgets.host_bar import ConnectionBanner
from dsv4tui.tui.widgets.log_view import LogPanel


def config_with_mistakes() -> Settings:
    """A keymap with a typo and an unknown theme: a config file with them does not load
    (tests/test_config.py), settings built in code can still hold them."""
    settings = Settings(keymap={"help": "f1", "screen.bench": "ctrl+u"})
    return settings.model_copy(update={"keymap": {**settings.keymap, "nope": "x"},
                                       "theme": "no-such-theme"})


async def test_number_keys_switch_screens() -> None:
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        for key, mode in zip("12345", keymap.SCREENS, strict=True):
            await pilot.press(key)
            await pilot.pause()
            assert app.view == mode


async def test_help_lists_every_binding_and_escape_closes_it() -> None:
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("DataTable")
        ids = {str(table.get_row_at(i)[3]) for i in range(table.row_count)}  # type: ignore[attr-defined]
        assert ids == {a.id for a in keymap.ACTIONS}
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_text_is_shown_whole_and_down_scrolls_it() -> None:
    """Brackets in a description are text, not markup; a description longer than its column
    wraps instead of being cut; Down moves through the list to its last row."""
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        table = app.screen.query_one("DataTable")
        await pilot.press(*["down"] * table.row_count)  # type: ignore[attr-defined]
        await pilot.pause()
        assert table.cursor_row == table.row_count - 1  # type: ignore[attr-defined]
        assert table.scroll_y > 0  # type: ignore[attr-defined]
        campaign = next(a for a in keymap.ACTIONS if "[campaigns]" in a.help)
        table.move_cursor(row=[str(table.get_row_at(i)[3])  # type: ignore[attr-defined]
                               for i in range(table.row_count)].index(campaign.id))  # type: ignore[attr-defined]
        await pilot.pause()
        text = app.export_screenshot().replace("&#160;", " ")
        assert "[campaigns]" in text, "the config's [campaigns] shown as written"
        assert "its own)" in text, "the end of the description is on screen"


async def test_the_command_palette_lists_every_action_and_theme() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        titles = " | ".join(c.title for c in app.get_system_commands(app.screen))
        for action in keymap.ACTIONS:
            if action.scope in ("app", "runs") and action.palette:
                assert action.description in titles, action.id
        for name in ("dark", "light", "high-contrast"):
            assert f"Theme: {name}" in titles


async def test_quit_asks_while_a_campaign_or_a_sweep_runs() -> None:
    app = frozen_app()  # the frozen campaign and sweep are running
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "campaign" in str(app.screen.message)
        await pilot.press("n")
        assert app.is_running
        app.model.campaign.state = "done"
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "sweep" in str(app.screen.message)
        await pilot.press("n")
        assert app.is_running


async def test_quit_with_nothing_running_exits_at_once() -> None:
    app = frozen_app()
    app.model.campaign.state = app.model.sweep.status = "done"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("q")
        await pilot.pause(0.3)
    assert app.return_code == 0


async def test_a_bad_keymap_entry_is_dropped_with_a_warning() -> None:
    app = FrozenApp(settings=config_with_mistakes(), model=frozen_model())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause(0.3)
        assert "keymap.nope: unknown binding id 'nope'" in toasts(app)


async def test_keys_remapped_in_the_config_replace_the_defaults() -> None:
    app = FrozenApp(settings=config_with_mistakes(), model=frozen_model())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("4")
        await pilot.pause()
        assert app.view == "dashboard"
        await pilot.press("ctrl+u")
        await pilot.pause()
        assert app.view == "bench"


async def test_an_unknown_theme_falls_back_to_dark_with_a_warning() -> None:
    app = FrozenApp(settings=config_with_mistakes(), model=frozen_model())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause(0.3)
        assert app.theme == "dark" and app.has_class("-theme-dark")
        assert "unknown theme" in toasts(app)


async def test_charts_and_the_theme_classes_follow_a_theme_switch() -> None:
    app = frozen_app("bench")
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.screen.query_one(Chart)
        dark = chart.series_colors()
        app.theme = "light"
        await pilot.pause()
        assert chart.series_colors() != dark
        assert app.has_class("-theme-light") and not app.has_class("-theme-dark")


async def test_a_failed_worker_shows_one_error_dialog() -> None:
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        def boom() -> None:
            raise UserError("the agent said no")

        worker: Worker[None] = app.run_worker(boom, thread=True, group="sanity",
                                              exit_on_error=False)
        await pilot.pause(0.3)
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        assert app.screen.title_text == "sanity check could not run"
        assert app.screen.message == "the agent said no"
        await pilot.press("enter")
        assert not isinstance(app.screen, ErrorScreen)
        assert app.is_running
        assert worker.is_finished


async def test_a_lost_connection_shows_the_countdown_and_greys_the_panels() -> None:
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        banner = app.screen.query_one(ConnectionBanner)
        assert not banner.has_class("-visible")
        app.model.conn.state = "reconnecting"
        app.model.conn.attempts = 2
        app.model.conn.retry_in = lambda: 7.4
        app.mark(CONN)
        for _ in range(50):  # the next refresh shows it (a wait, not a timing claim)
            await pilot.pause(0.1)
            if banner.has_class("-visible"):
                break
        assert banner.has_class("-visible")
        text = str(banner.render())
        assert "reconnecting in 7s" in text and "attempt 3" in text
        assert app.screen.has_class("-stale")
        app.model.conn.state = "connected"
        app.mark(CONN)
        for _ in range(50):  # the banner's own countdown tick may hide it a frame earlier
            await pilot.pause(0.1)
            if not banner.has_class("-visible") and not app.screen.has_class("-stale"):
                break
        assert not banner.has_class("-visible")
        assert not app.screen.has_class("-stale")


async def test_the_runs_filter_narrows_the_list() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.body, RunsBody)
        table = app.screen.query_one("#runs-table")
        assert table.row_count == 4  # type: ignore[attr-defined]
        await pilot.press("slash", *"nvfp4", "enter")
        await pilot.pause()
        assert table.row_count == 2  # type: ignore[attr-defined]


async def test_space_marks_runs_and_B_makes_the_highlighted_one_the_baseline() -> None:
    app = frozen_app("runs")
    app.model.runs.marked.clear()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("space", "space")  # each mark moves the cursor to the next run
        assert app.model.runs.marked == [4, 3]
        await pilot.press("B")
        assert app.model.runs.baseline == 2


async def test_the_compare_screen_changes_metric_and_escape_goes_back() -> None:
    app = frozen_app("runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.model.runs.compare is not None
        app.runs.show_compare(app.model.runs.compare)
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        await pilot.press("m", "B")
        assert app.screen.metric == 1
        await pilot.press("escape")
        assert isinstance(app.body, RunsBody)


async def model_frame(pilot: Any, app: Any) -> None:
    """Wait for the model's next frame (FLUSH_S, or STEADY_S after the last one): a wait,
    not a timing claim."""
    for _ in range(50):
        await pilot.pause(0.05)
        if not app.flush.pending:
            break
    await pilot.pause()


async def test_dashboard_gpu_panel_shows_each_new_frame() -> None:
    """The panel draws from cached rows (Line API): a new frame must reach the screen, not
    only the next once-a-second tick."""
    from snapshot_apps.frozen import T0

    from dsv4tui.core.telemetry import Frame
    from dsv4tui.tui.screens.messages import GPU
    from dsv4tui.tui.widgets.gpu_panel import GpuPanel

    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(GpuPanel)
        before = [panel.render_line(y).text for y in range(panel.size.height)]
        assert any(" 97% " in row or " 98% " in row for row in before)
        gpus = [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                 "util_gpu": 12, "gpm": True, "tensor_active": 55.0} for i in range(8)]
        frame = Frame.from_event({"type": "frame", "seq": 99, "time": T0, "interval": 1.0,
                                  "source": "simulated", "driver": "580.95.05", "gpus": gpus})
        app.model.telemetry.add(frame, received=T0)
        app.mark(GPU)
        await model_frame(pilot, app)
        after = [panel.render_line(y).text for y in range(panel.size.height)]
        assert sum(" 12% " in row for row in after) == 8
        assert sum("55%" in row for row in after) == 8


async def test_a_chart_that_cannot_be_drawn_says_so_once() -> None:
    """plotext failing in the drawing thread shows one line in the chart: no error dialog,
    no endless redraw."""
    app = frozen_app("bench")
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.screen.query_one(Chart)
        calls = []

        def broken(spec: object) -> list[object]:
            calls.append(spec)
            raise ValueError("bad figure")

        chart._draw_strips = broken  # type: ignore[method-assign,assignment]
        chart.show_data(["C1"], [], title="x")
        for _ in range(50):
            await pilot.pause(0.02)
            if chart.settled and calls:
                break
        await pilot.pause(0.3)
        # drawn once, or once more when the body's first frame in view redraws it: never again
        assert 1 <= len(calls) <= 2, len(calls)
        shown = " ".join(chart.render_line(y).text.strip() for y in range(3))
        assert "chart failed: ValueError: bad figure" in shown
        assert app.last_error is None and not isinstance(app.screen, ErrorScreen)


async def test_keys_typed_quickly_keep_their_order() -> None:
    """What a terminal delivers for fast typing (keys queued back to back): `/fo` types "fo"
    into the search box (follow unchanged); escape then `m` on the compare screen leaves it
    before `m` could change its metric."""
    from textual import events
    from textual.widgets import Input

    app = frozen_app("logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        panel = app.body.query_one(LogPanel)
        follow = panel.view.follow
        for key, char in (("slash", "/"), ("f", "f"), ("o", "o")):
            app.post_message(events.Key(key, char))
        await pilot.pause(0.3)
        assert panel.query_one(Input).value == "fo"
        assert panel.view.follow is follow

    app = frozen_app("compare")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        app.post_message(events.Key("escape", None))
        app.post_message(events.Key("m", "m"))
        await pilot.pause(0.3)
        assert isinstance(app.body, RunsBody)
        assert compare.metric == 0


async def test_the_key_bar_shows_x_while_a_sweep_runs_and_keeps_w_at_80_columns() -> None:
    from dsv4tui.core.view.parts import CAMPAIGN, SWEEP
    from dsv4tui.tui.screens.base import KeyBar

    app = frozen_app("bench")  # its sweep is in its second level
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        bar = str(app.screen.query_one(KeyBar).render())
        assert "x Cancel" in bar and "w Sweep" in bar, bar
        app.model.sweep.status = "done"
        app.model.campaign.state = "done"  # the frozen model's campaign ends too
        app.mark(SWEEP, CAMPAIGN)
        await model_frame(pilot, app)
        bar = str(app.screen.query_one(KeyBar).render())
        assert "x Cancel" not in bar and "w Sweep" in bar, bar


def test_a_sanity_result_says_when_it_was_taken() -> None:
    import time

    from dsv4tui.core.view.model import SanityCaseView, SanityView
    from dsv4tui.tui.widgets.startup import sanity_markup

    at = time.mktime((2026, 12, 2, 9, 41, 7, 0, 0, -1))
    first = SanityView(status="passed", cases=[SanityCaseView("arith", True, "391")], at=at)
    again = SanityView(status="passed", cases=[SanityCaseView("arith", True, "391")],
                       at=at + 60)
    assert "at 09:41:07" in sanity_markup(first)
    assert sanity_markup(first) != sanity_markup(again)  # a re-run never looks like the old one
    assert " at " not in sanity_markup(SanityView(status="running"))
