"""The frame: connection banner, host bar, screen tabs, key bar (:class:`FramedScreen`), and
the bodies switched inside it (:class:`Body`, :class:`LogBody`)."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar, cast

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.containers import Container
from textual.content import Content
from textual.reactive import Reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from dsv4tui.core.view.model import UiModel
from dsv4tui.tui import keymap
from dsv4tui.tui.screens.messages import (
    ALL,
    CAMPAIGN,
    CONN,
    LOGS,
    PROFILES,
    SANITY,
    SERVER,
    SWEEP,
    ModelUpdated,
)
from dsv4tui.tui.widgets.focus_mark import FocusMark, SameLookFocused
from dsv4tui.tui.widgets.host_bar import ConnectionBanner, HostBar
from dsv4tui.tui.widgets.log_view import LogPanel
from dsv4tui.tui.widgets.text import esc as escape  # markup- and control-safe

W = TypeVar("W", bound=Widget)

TAB_TITLES = {"dashboard": "Dashboard", "logs": "Logs", "launch": "Launch", "bench": "Bench",
              "runs": "Runs"}


class _KeysBar(Static):
    """A one-line bar drawn from the app's keymap and tabs and the bar's state (the current
    tab; the body's keys). Each state's text is parsed once and kept: a switch shows the kept
    one (parsing the markup again was ~2 ms per bar and switch)."""

    def __init__(self) -> None:
        super().__init__("", markup=True)
        self._sign: tuple[object, ...] | None = None
        # bounded: a terminal resized many times adds a row per width
        self._texts: LRUCache[tuple[object, ...], Content] = LRUCache(64)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(64)

    def on_mount(self) -> None:
        self.refresh_keys()

    def state(self) -> tuple[object, ...]:
        """What the bar shows besides the keymap (subclasses)."""
        return ()

    def refresh_keys(self) -> None:
        app = self.app
        km = getattr(app, "active_keymap", None) or {}
        sign = (tuple(sorted(km.items())), tuple(getattr(app, "extra_tabs", {})), self.state())
        if sign != self._sign:
            self._sign = sign
            text = self._texts.get(sign)
            if text is None:
                text = self._texts[sign] = Content.from_markup(self.markup_for(km))
            self.update(text, layout=False)  # one row (the CSS): no layout pass

    def render_line(self, y: int) -> Strip:
        # Drawn once per state, size and theme and kept (drawing the styled text was 1 to 2 ms
        # per bar and switch, for one row)
        key = (self._sign, self.content_size, self.app.theme, y)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = super().render_line(y)
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def markup_for(self, km: dict[str, str]) -> str:
        raise NotImplementedError


class NavBar(_KeysBar):
    """``1 Dashboard  2 Logs  3 Launch  4 Bench  5 Runs  ? help`` with the current one lit."""

    DEFAULT_CSS = """
    NavBar { height: 1; padding: 0 1; background: $boost; color: $foreground-muted; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def state(self) -> tuple[object, ...]:
        return (self.current,)

    def set_current(self, current: str) -> None:
        if current != self.current:
            self.current = current
            self.refresh_keys()

    def markup_for(self, km: dict[str, str]) -> str:
        keys = dict(keymap.effective(km))
        by_id = {a.id: k for a, k in keys.items()}
        parts = []
        for mode in keymap.SCREENS:
            key = by_id.get(f"screen.{mode}", "")
            title = TAB_TITLES[mode]
            if mode == self.current:
                parts.append(f"[reverse $primary] {key} {title} [/]")
            else:
                parts.append(f"[$primary]{key}[/] {title}")
        extra = getattr(self.app, "extra_tabs", {})
        for key, (mode, title) in extra.items():
            parts.append(f"[reverse $primary] {key} {title} [/]" if mode == self.current
                         else f"[$primary]{key}[/] {title}")
        help_key = by_id.get("help", "?")
        return "  ".join(parts) + f"   [$primary]{help_key}[/] help"


class KeyBar(_KeysBar):
    """The keys of this screen (after the config's keymap). Built once per screen: unlike
    Textual's Footer it does not recompose on every focus or screen change."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom; height: 1; padding: 0 1; background: $panel; color: $foreground;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    def __init__(self, scopes: tuple[str, ...], lead: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.scopes = scopes
        self.lead = lead  # this screen's own main keys, right after help and quit
        self.cancellable = False  # a sweep, campaign or sanity runs: x is shown (second)

    def state(self) -> tuple[object, ...]:
        return self.scopes, self.lead, self.cancellable

    def set_scopes(self, scopes: tuple[str, ...], lead: tuple[str, ...]) -> None:
        if (scopes, lead) != (self.scopes, self.lead):
            self.scopes, self.lead = scopes, lead
            self.refresh_keys()

    def show_cancel(self, cancellable: bool) -> None:
        if cancellable != self.cancellable:
            self.cancellable = cancellable
            self.refresh_keys()

    def markup_for(self, km: dict[str, str]) -> str:
        # on a narrow terminal the end of the bar is cut off: what matters most comes first
        first = ("help", "quit", *(("cancel",) if self.cancellable else ()), *self.lead)
        keys_of = dict((a.id, k) for a, k in keymap.effective(km))
        parts = [f"[b $accent]{escape(keys_of[i])}[/] {keymap.BY_ID[i].description}"
                 for i in first]
        for scope in self.scopes:
            for action, keys in keymap.effective(km):
                if action.scope == scope and action.show and action.id not in first:
                    parts.append(f"[b $accent]{escape(keys)}[/] {escape(action.description)}")
        parts.append("[b $accent]^p[/] palette")
        return "  ".join(parts)


class Parts:
    """What a frame and a body share: the model, widgets found once."""

    model: UiModel
    _found: dict[tuple[type[Widget], str | None], Widget]
    _every: dict[type[Widget], list[Widget]]

    def one(self, kind: type[W], selector: str | None = None) -> W:
        """``query_one([selector,] kind)``, remembered: the widgets live as long as their
        parent, and a CSS query on every model update adds up under load."""
        key = (kind, selector)
        found = self._found.get(key)
        if found is None:
            node = cast(Widget, self)
            found = node.query_one(selector, kind) if selector else node.query_one(kind)
            self._found[key] = found
        return cast(W, found)

    def every(self, kind: type[W]) -> list[W]:
        """``query(kind)``, remembered as :meth:`one` is."""
        if kind not in self._every:
            self._every[kind] = list(cast(Widget, self).query(kind))
        return cast(list[W], self._every[kind])

    def log_panel(self) -> LogPanel | None:
        key = (LogPanel, None)
        if key not in self._found:
            panels = cast(Widget, self).query(LogPanel)
            if not panels:
                return None
            self._found[key] = panels.first()
        return cast(LogPanel, self._found[key])


class FramedScreen(Parts, Screen[Any]):
    """A screen inside the frame: the main screen (its bodies switch) and the compare view
    pushed over it. Subclasses compose their body and redraw their parts."""

    MODE = ""  # the tab shown as current
    SCOPES: ClassVar[tuple[str, ...]] = ("app",)  # whose keys the key bar shows, in order
    LEAD_KEYS: ClassVar[tuple[str, ...]] = ()  # binding ids the key bar shows first
    AUTO_FOCUS: ClassVar[str | None] = None
    # Textual's Screen repaints all of itself when the focus moves (its ``focused`` reactive);
    # what looks different focused repaints itself (:focus styles, the panel mark), so a tab
    # key or a switch redraws the body, not the frame around it too.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, model: UiModel) -> None:
        super().__init__(name=self.MODE or None)
        self.model = model
        self._found, self._every = {}, {}
        self.focus_mark: FocusMark | None = None  # the focused panel's border (on mount)

    def compose(self) -> ComposeResult:
        yield ConnectionBanner(self.model)
        yield HostBar(self.model)
        yield NavBar(self.MODE)
        yield from self.compose_frame_body()
        yield KeyBar(self.SCOPES, self.LEAD_KEYS)

    def compose_frame_body(self) -> ComposeResult:
        with Container(classes="body"):
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.focus_mark = FocusMark(self)
        self.refresh_parts(ALL)

    def on_screen_resume(self) -> None:
        self.one(NavBar).refresh_keys()
        self.one(KeyBar).refresh_keys()
        self.refresh_parts(ALL)  # it may have missed updates while covered

    def on_model_updated(self, message: ModelUpdated) -> None:
        if self.is_current:
            self.refresh_parts(message.parts)

    def refresh_parts(self, parts: frozenset[str]) -> None:
        if CONN in parts:
            self.one(ConnectionBanner).refresh_model()
            stale = self.model.conn.down
            self.set_class(stale, "-stale")
            if self.focus_mark is not None:
                self.focus_mark.update()
            for panel in self.every(LogPanel):
                panel.set_stale(stale)
        if parts & {CONN, SERVER, PROFILES}:
            self.one(HostBar).refresh_model()
        if parts & {SANITY, SWEEP, CAMPAIGN}:
            m = self.model
            self.one(KeyBar).show_cancel(m.sweep.running or m.campaign.running
                                         or m.sanity.status == "running")
        self.refresh_body(parts)

    def refresh_body(self, parts: frozenset[str]) -> None:
        """Redraw the body's widgets that show ``parts``."""


class Body(SameLookFocused, Parts, Container):
    """One of the main screen's bodies (a tab): its widgets, its keys (ordinary bindings:
    they answer while the focus is inside it; shown, it takes the focus), its redraws."""

    MODE = ""
    # what takes the focus when first shown (None: its first focusable widget, else itself)
    AUTO_FOCUS: ClassVar[str | None] = None
    SCOPES: ClassVar[tuple[str, ...]] = ("app",)
    LEAD_KEYS: ClassVar[tuple[str, ...]] = ()
    can_focus = True

    def __init__(self, model: UiModel) -> None:
        super().__init__(id=self.MODE, classes="body")
        self.model = model
        self._found, self._every = {}, {}
        self.last_focus: Widget | None = None  # focused when it was left: focused again

    def compose(self) -> ComposeResult:
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    @property
    def is_current(self) -> bool:
        """Shown: the body in view, on the screen on top."""
        return self.display and self.is_attached and self.screen.is_current

    def set_focus(self, widget: Widget | None) -> None:
        self.screen.set_focus(widget)

    def take_focus(self) -> None:
        """Shown: the focus goes into the body (its keys answer), unless it is there."""
        screen = self.screen
        if screen.focused is not None and self in screen.focused.ancestors_with_self:
            return
        target: Widget | None = self.last_focus
        if target is None or not target.is_attached:
            found = self.query(self.AUTO_FOCUS) if self.AUTO_FOCUS else None
            mine = [w for w in self.query("*") if w.focusable]
            target = found.first() if found else (mine[0] if mine else self)
        screen.set_focus(target, scroll_visible=False)  # where it was: nothing to scroll

    def refresh_parts(self, parts: frozenset[str]) -> None:
        self.refresh_body(parts)

    def refresh_body(self, parts: frozenset[str]) -> None:
        """Redraw the widgets that show ``parts``."""

    def on_shown(self) -> None:
        """Called when the body came into view (subclasses)."""


class LogBody(Body):
    """A body with a LogPanel: the log keys (``/``, n/N, f, v, t) work anywhere in it."""

    BINDINGS: ClassVar[list[BindingType]] = keymap.bindings("logs")
    SCOPES = ("logs", "app")

    def _panel(self) -> LogPanel | None:
        return self.log_panel()

    def refresh_parts(self, parts: frozenset[str]) -> None:
        super().refresh_parts(parts)
        if LOGS in parts and (panel := self._panel()) is not None:
            if parts == ALL:  # coming into view: current on its first frame
                panel.sync()
            else:
                panel.sync_soon()

    def action_search(self) -> None:
        if (panel := self._panel()) is not None:
            panel.start_search()

    def action_next_match(self) -> None:
        if (panel := self._panel()) is not None:
            panel.next_match(True)

    def action_previous_match(self) -> None:
        if (panel := self._panel()) is not None:
            panel.next_match(False)

    def action_toggle_follow(self) -> None:
        if (panel := self._panel()) is not None:
            panel.toggle_follow()

    def action_cycle_level(self) -> None:
        if (panel := self._panel()) is not None:
            panel.cycle_level()

    def action_cycle_rank(self) -> None:
        if (panel := self._panel()) is not None:
            panel.cycle_rank()

    def action_cycle_node(self) -> None:
        if (panel := self._panel()) is not None:
            panel.cycle_node()
