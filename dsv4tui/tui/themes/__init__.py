"""dsv4tui's themes: dark, light and high-contrast :class:`textual.theme.Theme` objects.

Each theme defines, besides Textual's colour system, the variables the dashboard's own
widgets use (``$chart-1`` .. ``$chart-6`` for run series, ``$stale`` for greyed data,
``$sim-badge`` for the SIMULATED badge). Charts read the same variables through
:func:`chart_colors`, so a theme switch recolours them too.

Names accepted by ``--theme`` and the config's ``theme``: ``dark``, ``light``,
``high-contrast`` and any of Textual's built-in themes (``nord``, ``gruvbox`` ...), which get
the dark or light chart palette.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.theme import BUILTIN_THEMES, Theme

from dsv4tui.core import theme_names as _names
from dsv4tui.core.theme_names import ALIASES, DEFAULT_THEME

TCSS = Path(__file__).with_name("themes.tcss")

_DARK_CHART = ("#4ea1ff", "#ffb347", "#5fd38d", "#ff6b8b", "#c792ea", "#4dd0e1")
_LIGHT_CHART = ("#0b62c4", "#c25e00", "#1a8a43", "#c2185b", "#6a3fb0", "#00838f")
_HC_CHART = ("#00ffff", "#ffff00", "#00ff00", "#ff00ff", "#ffffff", "#ff8000")


def _chart_vars(palette: tuple[str, ...]) -> dict[str, str]:
    return {f"chart-{i}": c for i, c in enumerate(palette, 1)}


DARK = Theme(
    name="dark",
    primary="#4ea1ff",
    secondary="#7b8cff",
    accent="#ffb347",
    warning="#ffb347",
    error="#ff5f6d",
    success="#5fd38d",
    foreground="#dde3ea",
    background="#0f1419",
    surface="#161d24",
    panel="#1e2731",
    dark=True,
    variables={
        **_chart_vars(_DARK_CHART),
        "stale": "#6b7480",
        "sim-badge": "#c792ea",
        "footer-key-foreground": "#4ea1ff",
        "block-cursor-text-style": "none",
    },
)

LIGHT = Theme(
    name="light",
    primary="#0b62c4",
    secondary="#4a5bd4",
    accent="#c25e00",
    warning="#b35900",
    error="#c62828",
    success="#1a7f3c",
    foreground="#1c232b",
    background="#f7f8fa",
    surface="#ffffff",
    panel="#e6eaf0",
    dark=False,
    variables={
        **_chart_vars(_LIGHT_CHART),
        "stale": "#9aa3ad",
        "sim-badge": "#6a3fb0",
        "footer-key-foreground": "#0b62c4",
        "block-cursor-text-style": "none",
    },
)

HIGH_CONTRAST = Theme(
    name="high-contrast",
    primary="#00ffff",
    secondary="#ffff00",
    accent="#ffff00",
    warning="#ffff00",
    error="#ff3030",
    success="#00ff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#000000",
    boost="#333333",
    dark=True,
    luminosity_spread=0.3,
    text_alpha=1.0,
    variables={
        **_chart_vars(_HC_CHART),
        "stale": "#a0a0a0",
        "sim-badge": "#ff00ff",
        "footer-key-foreground": "#ffff00",
        "border": "#ffffff",
        "border-blurred": "#a0a0a0",
        "block-cursor-text-style": "bold",
    },
)

THEMES: dict[str, Theme] = {t.name: t for t in (DARK, LIGHT, HIGH_CONTRAST)}
__all__ = [
    "ALIASES",
    "DEFAULT_THEME",
    "TCSS",
    "THEMES",
    "chart_colors",
    "resolve",
    "theme_names",
    "variable_defaults",
]


def variable_defaults(dark: bool = True) -> dict[str, str]:
    """Our variables for themes that do not define them (Textual's built-in themes)."""
    palette = _DARK_CHART if dark else _LIGHT_CHART
    return {**_chart_vars(palette), "stale": "#7a828c", "sim-badge": "#c792ea"}


def theme_names() -> list[str]:
    """Ours first, then Textual's built-ins."""
    return [*THEMES, *sorted(n for n in BUILTIN_THEMES if n not in THEMES)]


def resolve(name: str | None) -> tuple[str, str | None]:
    """``(theme name to use, warning or None)``. An unknown name falls back to dark."""
    if not name:
        return DEFAULT_THEME, None
    key = _names.canonical(name)
    if key is not None and (key in THEMES or key in BUILTIN_THEMES):
        return key, None
    return DEFAULT_THEME, (f"unknown theme {name!r}; using {DEFAULT_THEME!r}. Fix the "
                           f"config's theme (valid: {', '.join(_names.valid_names())})")


def chart_colors(variables: dict[str, str], dark: bool = True) -> list[str]:
    """The run-series colours of the active theme, as hex strings."""
    fallback = _DARK_CHART if dark else _LIGHT_CHART
    return [variables.get(f"chart-{i}", c) for i, c in enumerate(fallback, 1)]


def install(app: App[Any], requested: str | None) -> str | None:
    """``app`` gets dsv4tui's themes and shows ``requested`` (a bad name: the default); its
    ``-theme-NAME`` class follows every switch (the palette's too). Returns what was wrong
    with the name, if anything."""
    def follow(name: str) -> None:
        for t in THEMES:
            app.set_class(t == name, f"-theme-{t}")
    for theme in THEMES.values():
        app.register_theme(theme)
    name, warning = resolve(requested)
    app.theme = name
    follow(name)
    app.theme_changed_signal.subscribe(app, lambda t: follow(t.name))
    return warning


def app_variable_defaults(app: App[Any]) -> dict[str, str]:
    """``App.get_theme_variable_defaults`` for ``app``: the palette of its current theme."""
    theme = app.current_theme if app.is_running else None
    return variable_defaults(theme.dark if theme is not None else True)
