"""The private parts of Textual the dashboard uses: all in dsv4tui/tui/textual_hooks.py, each
checked against the installed Textual (a failure names the version, the missing name and the
hook to look at), each one can be turned off, and nowhere else in the UI is one used."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from snapshot_apps.frozen import frozen_app
from textual import events
from textual.app import App
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from dsv4tui.tui import keymap, textual_hooks
from dsv4tui.tui.widgets.log_view import LogPanel

UI = Path(textual_hooks.__file__).parent


@pytest.mark.parametrize("hook", sorted(textual_hooks.HOOKS))
def test_the_installed_textual_has_what_the_hook_needs(hook: str) -> None:
    found = textual_hooks.problems(hook)
    assert not found, "\n".join(found)


def test_a_missing_name_is_named_with_the_version_and_the_hook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(Screen, "_on_timer_update")
    monkeypatch.delattr(App, "_load_screen_css")
    version = textual_hooks.VERSION
    assert (f"textual {version}: Screen._on_timer_update is gone; "
            "dsv4tui/tui/textual_hooks.py:draw_now needs a look") in textual_hooks.problems(
        "draw_now")
    assert (f"textual {version}: App._load_screen_css is gone; "
            "dsv4tui/tui/textual_hooks.py:warm_mode needs a look") in textual_hooks.problems(
        "warm_modes")


def test_a_changed_textual_function_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def switch_mode(self: App[object], mode: str) -> None:  # no delay_update any more
        self.screen.post_message(events.ScreenResume())

    monkeypatch.setattr(App, "switch_mode", switch_mode)
    found = textual_hooks.problems("no_switch_delay")
    assert any("App.switch_mode no longer uses delay_update" in line for line in found), found


def test_hooks_turn_off_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(textual_hooks.ENV, "draw_now, warm_modes")
    assert not textual_hooks.enabled("draw_now") and not textual_hooks.enabled("warm_modes")
    assert textual_hooks.enabled("same_size_resize")
    monkeypatch.setenv(textual_hooks.ENV, "all")
    assert not any(textual_hooks.enabled(name) for name in textual_hooks.HOOKS)
    monkeypatch.delenv(textual_hooks.ENV)
    assert all(textual_hooks.enabled(name) for name in textual_hooks.HOOKS
               if name not in textual_hooks.OPT_IN)
    assert textual_hooks.unknown_names("draw_now,drawnow") == ["drawnow"]
    with pytest.raises(KeyError, match="no hook named 'drawnow'"):
        textual_hooks.enabled("drawnow")


async def test_the_dashboard_works_with_every_hook_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks only make frames sooner: without them keys switch screens and type text."""
    monkeypatch.setenv(textual_hooks.ENV, "all")
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        for key, mode in zip("12345", keymap.SCREENS, strict=True):
            await pilot.press(key)
            await pilot.pause()
            assert app.current_mode == mode
        await pilot.press("2", "slash", *"flood")
        await pilot.pause()
        panel = app.screen.query_one(LogPanel)
        assert panel.query_one(Input).value == "flood"
        await pilot.press("escape")
        assert not panel.search_open


def _textual_private_names() -> set[str]:
    from textual.containers import Vertical
    from textual.scroll_view import ScrollView
    from textual.strip import Strip
    from textual.widgets import DataTable, OptionList, Static

    probes: list[object] = [App(), Screen(), Widget(), events.Key("a", "a"), Strip([]), Input(),
                            DataTable(), Static(), Vertical(), ScrollView(), OptionList()]
    return {name for probe in probes for name in dir(probe)
            if name.startswith("_") and not name.startswith("__")}


# Private Textual names allowed outside the hooks module: none (the dashboard's keymap is
# public as ``ResponsiveApp.active_keymap``).
ELSEWHERE: set[tuple[str, str]] = set()


def test_no_private_textual_name_outside_the_hooks_module() -> None:
    private = _textual_private_names()
    found: list[tuple[str, str, int]] = []
    for path in sorted(UI.rglob("*.py")):
        if path.name == "textual_hooks.py":
            continue
        rel = path.relative_to(UI).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in private:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("os", "sys")):
                    name = node.attr
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                    and node.name in private:
                name = node.name  # overriding a private method is using it
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in private):
                name = str(node.args[1].value)
            if name is not None and (rel, name) not in ELSEWHERE:
                found.append((rel, name, getattr(node, "lineno", 0)))
    unexpected = [f"dsv4tui/tui/{rel}:{line}: {name}" for rel, name, line in found]
    assert not unexpected, ("private Textual names outside dsv4tui/tui/textual_hooks.py "
                            f"(textual {textual_hooks.VERSION}):\n" + "\n".join(unexpected))


def test_the_stale_first_frame_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A returning screen's first frame has current figures unless asked otherwise."""
    monkeypatch.delenv(textual_hooks.ON_ENV, raising=False)
    monkeypatch.delenv(textual_hooks.ENV, raising=False)
    assert not textual_hooks.enabled("switch_then_update")
    assert textual_hooks.enabled("draw_now")
    monkeypatch.setenv(textual_hooks.ON_ENV, "switch_then_update")
    assert textual_hooks.enabled("switch_then_update")


@pytest.mark.parametrize("off", ["", "switch_then_update", "all"])
async def test_a_screen_back_in_view_shows_what_changed_while_it_was_away(
        off: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the screen in view redraws on model updates; one coming back is brought up to
    date (after answering the switch with the frame it showed when it was left)."""
    from dsv4tui.tui.screens.messages import CONN
    from dsv4tui.tui.widgets.host_bar import ConnectionBanner

    monkeypatch.setenv(textual_hooks.ENV, off)
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        dashboard = app.screen
        banner = dashboard.query_one(ConnectionBanner)
        assert not banner.has_class("-visible")
        await pilot.press("2")
        await pilot.pause(0.2)
        app.model.conn.state = "reconnecting"
        app.model.conn.attempts = 2
        app.model.conn.retry_in = lambda: 7.4
        app.mark(CONN)
        await pilot.pause(0.3)
        assert not banner.has_class("-visible")  # away: not redrawn
        await pilot.press("1")
        await pilot.pause(0.3)
        assert app.screen is dashboard and not dashboard.catching_up  # type: ignore[attr-defined]
        assert banner.has_class("-visible") and "reconnecting in 7s" in str(banner.render())
