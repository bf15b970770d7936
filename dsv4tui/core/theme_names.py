"""The theme names ``--theme`` and the config's ``theme`` accept (no textual here: the config
validates against this list; ``dsv4tui.tui.themes`` builds the Theme objects).

Ours: ``dark``, ``light``, ``high-contrast`` (aliases ``hc`` ...); and Textual's built-in
themes, listed here by name (tests/test_config.py checks the list against Textual's).
"""

from __future__ import annotations

DEFAULT_THEME = "dark"
OURS: tuple[str, ...] = ("dark", "light", "high-contrast")
ALIASES: dict[str, str] = {"hc": "high-contrast", "highcontrast": "high-contrast",
                           "high_contrast": "high-contrast"}
TEXTUAL_BUILTIN: tuple[str, ...] = (
    "ansi-dark", "ansi-light", "atom-one-dark", "atom-one-light", "catppuccin-frappe",
    "catppuccin-latte", "catppuccin-macchiato", "catppuccin-mocha", "dracula", "flexoki",
    "gruvbox", "monokai", "nord", "rose-pine", "rose-pine-dawn", "rose-pine-moon",
    "solarized-dark", "solarized-light", "textual-dark", "textual-light", "tokyo-night",
)


def valid_names() -> list[str]:
    """Ours first, then Textual's built-ins."""
    return [*OURS, *(n for n in TEXTUAL_BUILTIN if n not in OURS)]


def canonical(name: str) -> str | None:
    """The theme ``name`` means (aliases, case and spaces forgiven), or None if none."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in OURS or key in TEXTUAL_BUILTIN else None


def check_theme(name: str) -> str:
    """The canonical name; ValueError naming the valid choices (and a near miss) if none."""
    found = canonical(name)
    if found is not None:
        return found
    near = [n for n in valid_names() if n.startswith(name.strip().lower()[:4])] if name else []
    hint = f" (did you mean {' or '.join(near[:3])}?)" if near else ""
    raise ValueError(f"unknown theme {name!r}{hint}; valid: {', '.join(valid_names())}")
