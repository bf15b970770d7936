"""Help: every binding (with the keys it has after the config's keymap) and what it does."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from dsv4tui import keymap

SCOPE_TITLES = {"app": "everywhere", "logs": "log view", "runs": "Runs",
                "compare": "compare", "modal": "dialogs"}


def help_rows(km: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
    """(where, keys, description, binding id) for every action, in display order."""
    rows = []
    for scope in SCOPE_TITLES:
        for action, keys in keymap.effective(km):
            if action.scope == scope:
                rows.append((SCOPE_TITLES[scope], keys, action.help, action.id))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape,question_mark,q", "dismiss", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 100; max-width: 100%; height: 90%; border: thick $primary; background: $surface;
    }
    HelpScreen DataTable { height: 1fr; }
    HelpScreen .help-foot { height: auto; padding: 0 1; color: $foreground-muted; }
    """

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "keys"
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield Static("remap keys in the config: [keymap] binding-id = \"keys\" · every "
                         "action is also in the command palette (ctrl+p) · esc closes",
                         classes="help-foot", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("where", key="where")
        table.add_column("keys", key="keys")
        table.add_column("does", key="does")
        table.add_column("binding id", key="id")
        km: Mapping[str, str] = getattr(self.app, "_keymap", {}) or {}
        last = None
        for where, keys, text, binding_id in help_rows(km):
            table.add_row(where if where != last else "", keys, text, binding_id)
            last = where
        table.focus()
