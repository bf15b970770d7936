"""The focused panel is marked without restyling anything (issue 25): its border and title take
the theme's primary colour as the focus moves (tab, a switch, back), no panel is marked while
the link is down (the stale colour shows), a theme change recolours the mark, and a switch
between bodies restyles no node, and the tab bar drawn once per state still shows the
current tab at each width. Real headless apps (tests/snapshot_apps/frozen.py); no mock."""

from __future__ import annotations

from typing import Any

import pytest
from snapshot_apps.frozen import frozen_app
from textual.app import App, ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.css.stylesheet import Stylesheet
from textual.widget import Widget

from dsv4tui.tui.clock import in_view
from dsv4tui.tui.screens.messages import CONN
from dsv4tui.tui.widgets.focus_mark import FocusTable, panel_of


def primary(app: Any) -> Color:
    return Color.parse(app.theme_variables["primary"])


def marked(app: Any) -> list[str]:
    """The panels on screen drawn with the focus colour."""
    return [str(w.id) for w in app.screen.query(".panel")
            if in_view(w) and w.styles.border_top[1] == primary(app)]


async def test_the_mark_follows_the_focus_across_tab_switch_and_back() -> None:
    app = frozen_app("dashboard", "dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert marked(app) == ["gpu-box"]
        assert app.screen.query_one("#gpu-box").styles.border_title_color == primary(app)
        await pilot.press("tab")
        await pilot.pause()
        assert panel_of(app.screen.focused) is not None
        now = marked(app)
        assert now == [str(panel_of(app.screen.focused).id)] and now != ["gpu-box"]  # type: ignore[union-attr]
        gpu_box = app.screen.query_one("#gpu-box")
        assert gpu_box.styles.border_top[1] != primary(app)  # the stylesheet's colour again
        assert gpu_box.styles.border_top[0] == "round"
        await pilot.press("2")
        await pilot.pause()
        assert marked(app) == ["logs-log"]
        left = app.screen.query_one(f"#{now[0]}")
        assert left.styles.border_top[1] == primary(app)  # kept while hidden: no repaint
        await pilot.press("1")
        await pilot.pause()
        assert marked(app) == now  # the focus it had when left, and its mark


async def test_a_mark_kept_on_a_hidden_body_goes_when_it_is_shown_focused_elsewhere() -> None:
    app = frozen_app("dashboard", "dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert marked(app) == ["gpu-box"]
        await pilot.press("2")
        await pilot.pause()
        dash = app.screen.bodies["dashboard"]
        dash.last_focus = dash.query_one("#dash-log LogView")  # it comes back elsewhere
        await pilot.press("1")
        await pilot.pause()
        assert marked(app) == ["dash-log"]
        assert app.screen.query_one("#gpu-box").styles.border_top[1] != primary(app)


async def test_no_mark_while_the_link_is_down_and_a_theme_change_recolours_it() -> None:
    app = frozen_app("dashboard", "dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.model.conn.state = "lost"
        app.screen.refresh_parts(frozenset({CONN}))
        await pilot.pause()
        assert app.screen.has_class("-stale") and marked(app) == []
        app.model.conn.state = "connected"
        app.screen.refresh_parts(frozenset({CONN}))
        await pilot.pause()
        assert marked(app) == ["gpu-box"]
        dark = primary(app)
        app.theme = "high-contrast"
        await pilot.pause()
        assert primary(app) != dark and marked(app) == ["gpu-box"]
        assert app.screen.query_one("#gpu-box").styles.border_top[0] == "heavy"  # its edge


@pytest.mark.parametrize("keys", ["2", "3", "21", "414", "545"])
async def test_a_switch_restyles_no_node(monkeypatch: pytest.MonkeyPatch, keys: str) -> None:
    """Before, the focus moving on a switch restyled the panel it left and the one it entered
    with everything inside them (5 to 15 ms), the log view (~4 ms), and the Bench and Runs
    tables twice (leaving and coming back), each time with all their rows rendered again."""
    app = frozen_app("dashboard", "dark")
    restyled: list[Widget] = []
    update_nodes = Stylesheet.update_nodes

    def counting(self: Stylesheet, nodes: Any, animate: bool = False) -> None:
        nodes = list(nodes)
        restyled.extend(nodes)
        update_nodes(self, nodes, animate)

    async with app.run_test(size=(160, 48)) as pilot:
        for key in "23451":  # each body seen once (a table's first focus restyles it)
            await pilot.press(key)
            await pilot.pause()
        monkeypatch.setattr(Stylesheet, "update_nodes", counting)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        assert app.view == {"1": "dashboard", "2": "logs", "3": "launch", "4": "bench",
                            "5": "runs"}[keys[-1]]
        assert restyled == []


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        with Vertical(id="a-box"):
            yield FocusTable[str](id="a")
        with Vertical(id="b-box"):
            yield FocusTable[str](id="b")

    def on_mount(self) -> None:
        for table in self.query(FocusTable):
            table.add_columns("x")
            table.add_rows([["1"], ["2"]])


def cursor(app: App[None], table_id: str) -> Any:
    return app.query_one(f"#{table_id}", FocusTable).get_component_rich_style("datatable--cursor")


async def test_a_table_keeps_its_look_while_hidden_and_catches_up_when_shown_blurred() -> None:
    """The Bench and Runs tables: leaving the body (the table blurred, hidden) and coming back
    (focused again) restyled each and rendered all its rows twice; a table shown without the
    focus still gets the blurred look."""
    app = Tables()
    async with app.run_test() as pilot:
        app.query_one("#a", FocusTable).focus()
        await pilot.pause()
        focused_look, blurred_look = cursor(app, "a"), cursor(app, "b")
        assert focused_look != blurred_look
        app.query_one("#a-box").display = False
        app.query_one("#b", FocusTable).focus()
        await pilot.pause()
        assert cursor(app, "a") == focused_look  # hidden: not restyled
        assert cursor(app, "b") == focused_look  # seen: restyled
        app.query_one("#a-box").display = True
        app.query_one("#a", FocusTable).catch_up()
        await pilot.pause()
        assert cursor(app, "a") == blurred_look
        app.query_one("#a", FocusTable).focus()
        await pilot.pause()
        assert cursor(app, "a") == focused_look and cursor(app, "b") == blurred_look


async def test_the_tab_bar_drawn_once_per_state_still_follows_switches_and_resizes() -> None:
    """The nav bar keeps each state's drawn row: the current tab is still the lit one after
    switches back and forth, and a narrower terminal gets a row of its own width."""
    from dsv4tui.tui.screens.base import NavBar

    def lit(app: Any) -> list[str]:
        strip = app.screen.query_one(NavBar).render_line(0)
        return [seg.text.strip() for seg in strip if seg.style and seg.style.reverse]

    app = frozen_app("dashboard", "dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert lit(app) == ["1 Dashboard"]
        for key, title in (("2", "2 Logs"), ("1", "1 Dashboard"), ("2", "2 Logs")):
            await pilot.press(key)
            await pilot.pause()
            assert lit(app) == [title]
        wide = app.screen.query_one(NavBar).render_line(0).cell_length  # its natural width
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        bar = app.screen.query_one(NavBar)
        assert bar.content_size.width < wide  # too narrow for the whole row now
        assert bar.render_line(0).cell_length <= bar.content_size.width  # drawn for it
        assert lit(app) == ["2 Logs"]
