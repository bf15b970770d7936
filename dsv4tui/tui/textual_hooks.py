"""Every private part of Textual the dashboard uses (textual is pinned <9), all here.

Keys go through Textual's public bindings (:mod:`dsv4tui.tui.responsive`,
:mod:`dsv4tui.tui.keymap`); what is here only makes frames come sooner or cost less, each
part measured under load (``benchmarks/ui_latency.py``; what each buys, in milliseconds, is
in docs/ui-performance.md). Without any of them the dashboard works the same, more slowly.

The hooks, by the name ``DSV4TUI_NO_HOOK=name,name`` (or ``all``) turns them off with (the
last two are dsv4tui's own measures, switchable here so that the benchmark can weigh them):

- ``draw_now``: a key's answer is drawn in the callback that answered it (:func:`draw_now`).
- ``no_switch_delay``: a switch to a screen already mounted skips Textual's 50 ms update
  delay (:func:`mode_is_mounted`).
- ``keep_styles``: a screen coming back into view keeps its styles (public
  ``ScreenResume.refresh_styles``; what it relies on is checked here too).
- ``resume_from_cache``: a screen coming back into view is drawn from its widgets' cached
  lines, its own included (:func:`resume_from_cache`, :class:`SwitchScreen`).
- ``same_size_resize``: a mode switch lays the screen out once, not twice
  (:class:`SwitchScreen`).
- ``warm_modes``: the screens not shown yet are mounted in the background (:func:`warm_mode`).
- ``styled_on_mount``: such a screen counts as styled with the stylesheet it mounted with
  (:func:`mark_styled`).
- ``light_strips``: Textual's Strips make no reference cycles and build their caches only
  when used (:func:`light_strips`).
- ``switch_then_update``: not Textual, and off unless ``$DSV4TUI_HOOK_ON`` names it: a
  screen shown before answers its switch key with the frame it showed when it was left,
  then brings its parts up to date (DsvScreen).
- ``gc_tuning``: not Textual: the cyclic GC paused while a key is answered, tuned for short
  pauses, the long-lived heap frozen (ResponsiveApp).

:func:`problems` says, per hook, which Textual names it needs are gone or changed in the
installed Textual: tests/test_textual_hooks.py fails with that message after an upgrade.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from types import FunctionType
from typing import Any, Self

import textual
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.app import App
from textual.cache import FIFOCache
from textual.geometry import Region, Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

ENV = "DSV4TUI_NO_HOOK"
HOOKS: dict[str, str] = {
    "draw_now": "a key's answer drawn in the callback that answered it",
    "no_switch_delay": "no 50 ms update delay when switching to a mounted screen",
    "keep_styles": "a screen keeps its styles when it comes back into view",
    "resume_from_cache": "a screen coming back into view drawn from cached lines",
    "same_size_resize": "one layout per mode switch instead of two",
    "warm_modes": "screens mounted in the background before their first visit",
    "styled_on_mount": "a screen mounted in the background counts as styled",
    "light_strips": "Strips without reference cycles, caches built when used",
    "switch_then_update": "a returning screen drawn as it was left, then updated (not Textual)",
    "gc_tuning": "cyclic GC paused per key, small young generation, heap frozen (not Textual)",
}
VERSION = getattr(textual, "__version__", "?")
_HERE = "dsv4tui/tui/textual_hooks.py"
_off_cache: tuple[str, frozenset[str]] = ("", frozenset())


# Off unless $DSV4TUI_HOOK_ON names them: ``switch_then_update`` answers a screen switch with
# the frame the screen showed when it was left -- figures that may be minutes old, on screen
# for 5-30 ms before the current ones. Without it key -> screen is still under 50 ms at p99
# (docs/ui-performance.md), and every frame shows current figures.
OPT_IN = frozenset({"switch_then_update"})
ON_ENV = "DSV4TUI_HOOK_ON"


def enabled(name: str) -> bool:
    """False when ``$DSV4TUI_NO_HOOK`` names the hook (or says ``all``); an :data:`OPT_IN`
    hook only when ``$DSV4TUI_HOOK_ON`` names it."""
    global _off_cache
    if name not in HOOKS:
        raise KeyError(f"no hook named {name!r}; hooks: {', '.join(HOOKS)}")
    if name in OPT_IN and name not in {n.strip() for n in os.environ.get(ON_ENV, "").split(",")}:
        return False
    raw = os.environ.get(ENV, "")
    if raw != _off_cache[0]:
        _off_cache = (raw, frozenset(n.strip() for n in raw.split(",") if n.strip()))
    off = _off_cache[1]
    return not off or (name not in off and "all" not in off)


def unknown_names(raw: str) -> list[str]:
    """The names in a ``DSV4TUI_NO_HOOK`` value that are no hook (for the benchmark)."""
    return [n.strip() for n in raw.split(",") if n.strip() and n.strip() not in (*HOOKS, "all")]


# -- draw_now -------------------------------------------------------------------------------
def draw_now(screen: Screen[Any]) -> None:
    """Draw what changed on ``screen`` in this callback.

    Textual learns which widgets changed a few message hops after they did (each widget's
    idle handler posts an Update to its screen, the screen wakes its update timer, the timer
    fires); under load each hop waits behind whatever the event loop has queued (a log
    repaint is 10-15 ms), so a key's answer came two or three frames late. Here the changed
    widgets are handed to the screen directly, as those hops would (``Widget._check_refresh``,
    ``Screen._on_update``), and the screen draws (``Screen._on_timer_update``). A widget
    waiting for a new layout is left to Textual's own path (it follows a frame later)."""
    if not enabled("draw_now"):
        return
    dirty = screen._dirty_widgets
    for widget in screen._compositor.visible_widgets:
        if widget._layout_required:
            continue
        if widget._repaint_required:
            widget._repaint_required = False
            if widget.display:
                dirty.add(widget)
        if widget._scroll_required:
            widget._scroll_required = False
            if widget.styles.keyline[0] != "none":  # as Widget._check_refresh does
                widget._set_dirty()
            screen._scroll_required = True
    screen._on_timer_update()


# -- no_switch_delay, warm_modes, styled_on_mount --------------------------------------------
def mode_is_mounted(app: App[Any], mode: str) -> bool:
    """True when ``mode`` has its screen already (shown before, or warmed): a switch to it
    needs no 50 ms update delay, which only masks a half-composed first frame. False when
    the hook is off (the delay stays)."""
    return enabled("no_switch_delay") and mode in app._screen_stacks


def warm_mode(app: App[Any], mode: str) -> Screen[Any] | None:
    """Mount ``mode``'s screen in the background, as Textual's first switch to it would,
    without switching (``App._init_mode`` minus the switch); None when it has one already
    or the hook is off.

    A mode's first visit composes and mounts its screen and runs the stylesheet over it:
    100-250 ms on a small machine, the slowest key press of a session."""
    if not enabled("warm_modes") or mode in app._screen_stacks or mode not in app._modes:
        return None
    factory = app._modes[mode]
    screen, _ = app._get_screen(factory() if callable(factory) else factory)
    app._load_screen_css(screen)
    app._screen_stacks[mode] = [screen]
    return screen


def mark_styled(screen: Screen[Any]) -> None:
    """Count ``screen`` as styled with the app's current stylesheet (call it when mounted).

    Textual marks a mode's screen as styled only when it was mounted at the time of the
    switch; one mounted in the background was not, so its first switch re-parsed and
    re-applied the whole stylesheet (``App.refresh_css``: 100-250 ms)."""
    if enabled("styled_on_mount"):
        screen._css_update_count = screen.app._css_update_count


# -- keep_styles, same_size_resize ------------------------------------------------------------
def keep_styles(event: events.ScreenResume) -> None:
    """A screen coming back into view keeps its styles (public: ``refresh_styles``).

    Switching modes re-applies every CSS rule to every node of the screen and so throws away
    every widget's cached lines (~50 ms apply + a ~80 ms cold render at 160x48 on a small
    machine). Nothing restyles the dashboard's screens while they are away: a theme change
    reaches them at the switch (``App.refresh_css``), the breakpoint classes on resize."""
    if enabled("keep_styles"):
        event.refresh_styles = False


def resume_from_cache(screen: Screen[Any], event: events.ScreenResume) -> bool:
    """Textual's ``Screen._on_screen_resume``, step by step, except that the screen is
    repainted from its widgets' cached lines: ``refresh()`` would also throw away the
    screen's own lines (48 rows at 160x48, and the compositor's cuts of them, rebuilt on
    every switch). True when done (Textual's own handler is then left out); False when the
    hook is off. The styles are refreshed when the event asks (see :func:`keep_styles`)."""
    if not enabled("resume_from_cache"):
        return False
    event.prevent_default()
    app = screen.app
    if app.SUSPENDED_SCREEN_CLASS:
        screen.remove_class(app.SUSPENDED_SCREEN_CLASS)
    screen.stack_updates += 1
    app._refresh_notifications()
    screen._update_auto_focus()
    if screen.is_attached:
        if event.refresh_styles:
            screen.update_node_styles(animate=False)
        if screen._size != app.size:
            screen._refresh_layout(app.size)
        screen._repaint_regions.add(screen.outer_size.region)
        screen._repaint_required = True
        screen.check_idle()
    return True


class SwitchScreen(Screen[None]):
    """A Screen that a mode switch lays out and paints once.

    - Textual calls ``_screen_resized`` on every mode switch, and it reflows and repaints
      the whole screen at once, with what the screen showed when it was left; the resume
      then repaints it again with current data. When the size is the one the screen was
      laid out for, the first pass is skipped (``same_size_resize``): one repaint, already
      current (a layout asked for while the screen was away is done by that repaint).
    - Textual refreshes the screen it switches away from, which throws away the screen's
      own lines; :func:`resume_from_cache` repaints from cached lines when it comes back,
      so that one call is skipped (the app names the screen being left in
      ``leaving_screen`` during the switch)."""

    def _screen_resized(self, size: Size) -> None:
        if enabled("same_size_resize") and size == self._compositor.size:
            return
        super()._screen_resized(size)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if (not (regions or layout or recompose) and enabled("resume_from_cache")
                and getattr(self.app, "leaving_screen", None) is self):
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


# -- light_strips ---------------------------------------------------------------------------
_MARK = "_dsv4tui_light_strips"
_EAGER = ("_segments", "_cell_length")
_TEXTUAL_STRIP_INIT = Strip.__init__  # before any patch: what the checks read


def light_strips() -> bool:
    """Keep Textual's Strips (one per rendered line) light for the cyclic GC; True when the
    patch is (now) in place. Idempotent; it stays for the life of the process.

    - Every Strip is built with seven small caches (``FIFOCache``: GC-tracked objects)
      whether or not it is ever cropped, divided or filtered: a one-segment strip cost the
      collector 10 objects instead of 3, 40 % of the young generation under load. Here a
      cache is built the first time it is asked for, with the size Textual gives it.
    - ``divide`` and ``crop_extend`` cache their result on the strip, and when the result is
      the strip unchanged (the compositor divides almost every line at its own width) the
      cache holds the strip itself: a reference cycle per rendered line (~7,000 a second).
      That case returns the strip without caching it (the same result).

    The patch reads the slots and cache sizes from a Strip built by Textual's own
    ``__init__`` and leaves a Strip it does not recognise alone."""
    if getattr(Strip, _MARK, False):
        return True
    if not enabled("light_strips"):
        return False
    divide: Callable[[Strip, Iterable[int]], Sequence[Strip]] | None = getattr(
        Strip, "divide", None)
    crop_extend: Callable[[Strip, int, int, Style | None], Strip] | None = getattr(
        Strip, "crop_extend", None)
    layout = _strip_slots()
    if divide is None or crop_extend is None or layout is None or "__getattr__" in vars(Strip):
        return False
    lazy, plain = layout

    def divide_no_cycle(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        length = self.cell_length
        cuts = list(cuts)
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]
        return divide(self, cuts)

    def crop_extend_no_cycle(self: Strip, start: int, end: int, style: Style | None) -> Strip:
        if start <= 0 and end == self.cell_length:
            return self
        return crop_extend(self, start, end, style)

    def light_init(self: Any, segments: Iterable[Segment], cell_length: int | None = None
                   ) -> None:
        self._segments = list(segments)
        self._cell_length = cell_length
        for name, value in plain:
            setattr(self, name, value)

    def lazy_cache(self: Strip, name: str) -> FIFOCache[Any, Any]:
        """Only called for a slot not set yet (Python's fallback after AttributeError)."""
        size = lazy.get(name)
        if size is None:
            raise AttributeError(f"'Strip' object has no attribute {name!r}")
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache

    strip: Any = Strip
    strip.divide = divide_no_cycle
    strip.crop_extend = crop_extend_no_cycle
    strip.__init__ = light_init
    strip.__getattr__ = lazy_cache
    setattr(Strip, _MARK, True)
    return True


def _strip_slots() -> tuple[dict[str, int], tuple[tuple[str, None], ...]] | None:
    """``({cache slot: maxsize}, ((other slot, None), ...))`` from a Strip built by Textual,
    or None when its slots hold anything else (a Textual this module does not know)."""
    probe = Strip.__new__(Strip)
    _TEXTUAL_STRIP_INIT(probe, [], 0)
    lazy: dict[str, int] = {}
    plain: list[tuple[str, None]] = []
    for name in getattr(Strip, "__slots__", ()):
        if name in _EAGER:
            continue
        value = getattr(probe, name, None)
        if isinstance(value, FIFOCache) and isinstance(getattr(value, "_maxsize", None), int):
            lazy[name] = value._maxsize
        elif value is None:
            plain.append((name, None))
        else:
            return None
    return (lazy, tuple(plain)) if lazy else None


# -- what each hook needs from Textual --------------------------------------------------------
def problems(hook: str) -> list[str]:
    """What ``hook`` needs from Textual and the installed Textual lacks, one line each, e.g.
    ``textual 9.0.0: Screen._compositor is gone; dsv4tui/tui/textual_hooks.py:draw_now needs
    a look``. Empty when all is there."""
    where, check = _CHECKS[hook]
    return [f"textual {VERSION}: {what}; {_HERE}:{where} needs a look" for what in check()]


def _attrs(obj: object, label: str, *names: str) -> list[str]:
    return [f"{label}.{name} is gone" for name in names if not hasattr(obj, name)]


def _calls(func: object, label: str, *names: str) -> list[str]:
    """``func`` (a plain function) still refers to each of ``names``."""
    code = getattr(func, "__code__", None) if isinstance(func, FunctionType) else None
    if code is None:
        return [f"{label} is no plain function any more"]
    return [f"{label} no longer uses {name}" for name in names if name not in code.co_names]


def _same_steps(func: object, label: str, hook: str, names: set[str]) -> list[str]:
    """``func`` (whose steps the hook copies) refers to exactly ``names`` still."""
    code = getattr(func, "__code__", None) if isinstance(func, FunctionType) else None
    if code is None:
        return [f"{label} is no plain function any more"]
    now = set(code.co_names)
    if now == names:
        return []
    change = ", ".join([*(f"+{n}" for n in sorted(now - names)),
                        *(f"-{n}" for n in sorted(names - now))])
    return [f"{label} changed ({change}); {hook} copies its steps"]


_RESUME_STEPS = {"SUSPENDED_SCREEN_CLASS", "_refresh_layout", "_refresh_notifications", "_size",
                 "_update_auto_focus", "app", "is_attached", "refresh", "refresh_styles",
                 "remove_class", "size", "stack_updates", "update_node_styles"}
_CHECK_REFRESH_STEPS = {"Layout", "NoScreen", "Update", "UpdateScroll", "Widget",
                        "_clear_arrangement_cache", "_closing", "_layout_required",
                        "_layout_updates", "_parent", "_refresh_styles_required",
                        "_repaint_required", "_scroll_required", "_set_dirty", "ancestors",
                        "auto_dimensions", "call_later", "display", "isinstance", "keyline",
                        "messages", "post_message", "screen", "styles", "update_node_styles"}
_ON_UPDATE_STEPS = {"Widget", "_compositor", "_dirty_widgets", "add", "check_idle",
                    "isinstance", "prevent_default", "stop", "widget"}
_INIT_MODE_STEPS = {"AwaitMount", "Screen", "ScreenResume", "TypeError", "__name__",
                    "_css_update_count", "_get_screen", "_load_screen_css", "_modes",
                    "_register", "_screen_resized", "_screen_stacks", "append", "callable",
                    "events", "get", "get_default_screen", "isinstance", "post_message",
                    "refresh_css", "size", "type"}


def _check_draw_now() -> list[str]:
    screen, widget = Screen[Any](), Widget()
    out = _attrs(screen, "Screen", "_dirty_widgets", "_compositor", "_scroll_required",
                 "_on_timer_update")
    if hasattr(screen, "_compositor"):
        out += _attrs(type(screen._compositor), "Compositor", "visible_widgets")
    out += _attrs(widget, "Widget", "_layout_required", "_repaint_required",
                  "_scroll_required", "_set_dirty")
    if not isinstance(getattr(screen, "_dirty_widgets", None), set):
        out.append("Screen._dirty_widgets is no set any more")
    out += _calls(getattr(Screen, "_on_timer_update", None), "Screen._on_timer_update",
                  "_dirty_widgets", "_compositor")
    out += _same_steps(getattr(Widget, "_check_refresh", None), "Widget._check_refresh",
                       "draw_now", _CHECK_REFRESH_STEPS)
    out += _same_steps(getattr(Screen, "_on_update", None), "Screen._on_update", "draw_now",
                       _ON_UPDATE_STEPS)
    return out


def _check_resume_from_cache() -> list[str]:
    screen = Screen[Any]()
    out = _attrs(screen, "Screen", "_repaint_regions", "_repaint_required", "_size",
                 "_refresh_layout", "_update_auto_focus", "stack_updates")
    out += _attrs(App, "App", "_refresh_notifications")
    out += _same_steps(getattr(Screen, "_on_screen_resume", None), "Screen._on_screen_resume",
                       "resume_from_cache", _RESUME_STEPS)
    out += _calls(App.switch_mode, "App.switch_mode", "refresh")  # the screen it leaves
    return out


def _check_no_switch_delay() -> list[str]:
    out = _attrs(App, "App", "delay_update")
    out += _calls(App.switch_mode, "App.switch_mode", "delay_update", "_screen_stacks")
    if not isinstance(getattr(App(), "_screen_stacks", None), dict):
        out.append("App._screen_stacks is no dict any more")
    return out


def _check_keep_styles() -> list[str]:
    out = [] if hasattr(events.ScreenResume(), "refresh_styles") else [
        "ScreenResume.refresh_styles is gone"]
    out += _calls(getattr(Screen, "_on_screen_resume", None), "Screen._on_screen_resume",
                  "refresh_styles")
    return out


def _check_same_size_resize() -> list[str]:
    out = _attrs(Screen, "Screen", "_screen_resized")
    out += _calls(App.switch_mode, "App.switch_mode", "_screen_resized")
    compositor = getattr(Screen[Any](), "_compositor", None)
    if not isinstance(getattr(compositor, "size", None), Size):
        out.append("Screen._compositor.size is gone")
    return out


def _check_warm_modes() -> list[str]:
    app = App[Any]()
    out = _attrs(app, "App", "_modes", "_screen_stacks", "_get_screen", "_load_screen_css")
    out += _same_steps(getattr(App, "_init_mode", None), "App._init_mode", "warm_mode",
                       _INIT_MODE_STEPS)
    return out


def _check_styled_on_mount() -> list[str]:
    out = _attrs(App[Any](), "App", "_css_update_count")
    out += _attrs(Screen[Any](), "Screen", "_css_update_count")
    out += _calls(App.switch_mode, "App.switch_mode", "_css_update_count")
    return out


def _check_light_strips() -> list[str]:
    if _strip_slots() is None:
        return ["Strip's slots are not the FIFOCache caches and plain fields this patch knows"]
    return _attrs(Strip, "Strip", "divide", "crop_extend")


_CHECKS: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "draw_now": ("draw_now", _check_draw_now),
    "no_switch_delay": ("mode_is_mounted", _check_no_switch_delay),
    "keep_styles": ("keep_styles", _check_keep_styles),
    "resume_from_cache": ("resume_from_cache", _check_resume_from_cache),
    "same_size_resize": ("SwitchScreen", _check_same_size_resize),
    "warm_modes": ("warm_mode", _check_warm_modes),
    "styled_on_mount": ("mark_styled", _check_styled_on_mount),
    "light_strips": ("light_strips", _check_light_strips),
    "switch_then_update": ("", list),  # dsv4tui's own
    "gc_tuning": ("", list),  # the gc module only
}
