"""Help: every binding (with the keys it has after the config's keymap) and what it does."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from dsv4tui.tui import keymap
from dsv4tui.tui.widgets.text import plain

SCOPE_TITLES = {"app": "everywhere", "logs": "log view", "runs": "Runs",
                "compare": "compare", "kernels": "Kernels", "campaign": "Campaign",
                "modal": "dialogs"}


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
        width: 100%; max-width: 150; height: 90%; border: thick $primary; background: $surface;
    }
    HelpScreen DataTable { height: 1fr; }
    HelpScreen .help-foot { height: auto; padding: 0 1; color: $foreground-muted; }
    """

    def compose(self) -> ComposeResult:
        from dsv4tui.tui.screens.modals import banner

        yield from banner(self)
        with Vertical() as box:
            box.border_title = "keys"
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield Static("remap keys in the config: [keymap] binding-id = \"keys\" · every "
                         "action is also in the command palette (ctrl+p) · esc closes",
                         classes="help-foot", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        km: Mapping[str, str] = getattr(self.app, "active_keymap", {}) or {}
        rows = help_rows(km)
        # the binding id is what the config's [keymap] needs: its column is never cut, the
        # description takes what is left (and is cut first)
        id_w = max(len("binding id"), *(len(r[3]) for r in rows))
        keys_w = max(len("keys"), *(len(r[1]) for r in rows))
        where_w = max(len(w) for w in SCOPE_TITLES.values())
        room = (self.app.size.width if self.app.size.width else 100)
        box = min(150, room) - 2 - 2  # the border, the scrollbar
        does_w = max(20, box - (where_w + keys_w + id_w) - 8)
        table.add_column("where", key="where", width=where_w)
        table.add_column("keys", key="keys", width=keys_w)
        table.add_column("does", key="does", width=does_w)
        table.add_column("binding id", key="id", width=id_w)
        last = None
        for where, keys, text, binding_id in rows:
            # plain: a description may hold brackets ("the config's [campaigns]") that are no
            # markup; height None: a long one wraps onto a second line instead of being cut
            table.add_row(where if where != last else "", plain(keys), Text(text),
                          plain(binding_id), height=None)
            last = where
        table.focus()
