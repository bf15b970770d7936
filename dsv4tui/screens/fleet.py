"""The Fleet screen: one row per host, redrawn live from the fleet's summaries.

It draws only what it is given (:meth:`FleetScreen.show`, with :class:`dsv4tui.fleet.HostSummary`
rows: the same cells as ``dsv4tui fleet``); the App owns the fleet and its connections.
``enter`` on a row posts :class:`FleetScreen.Open` with the host's name.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Container
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from dsv4tui.campaign.labels import safe_text
from dsv4tui.fleet import HostSummary
from dsv4tui.fleet_rows import WIDE, cells, columns, problems
from dsv4tui.widgets.text import esc, update_static

_STATE_STYLE = {"connected": "bold green", "connecting": "yellow", "reconnecting": "yellow",
                "lost": "bold red", "failed": "bold red", "closed": "dim"}
_SERVER_STYLE = {"ready": "bold green", "starting": "yellow", "stopping": "yellow",
                 "crashed": "bold red", "failed": "bold red", "foreign": "magenta",
                 "stopped": "dim"}


def _styled(key: str, value: str, s: HostSummary) -> Text:
    if key == "state":
        style = "yellow" if s.connected and s.stale else _STATE_STYLE.get(s.state, "")
        return Text(value, style=style)
    if key == "server":
        return Text(value, style=_SERVER_STYLE.get(s.server or "", ""))
    if key == "host":
        return Text(value, style="bold")
    if key == "model" and s.telemetry_error and not s.frames:
        return Text(value, style="red")
    if key in ("util", "tensor", "gpus", "mem", "power", "best"):
        return Text(value, justify="right")
    return Text(value)


class FleetScreen(Screen[None]):
    """Every host of the fleet; ``enter`` opens the highlighted host's dashboard."""

    BINDINGS = [("q", "app.quit", "Quit"), ("r", "refresh", "Refresh")]

    DEFAULT_CSS = """
    FleetScreen { layout: vertical; }
    FleetScreen #fleet-title { height: 1; padding: 0 1; background: $boost; }
    FleetScreen #fleet-body { height: 1fr; }
    FleetScreen DataTable { height: auto; max-height: 100%; }
    FleetScreen #fleet-problems { height: auto; padding: 0 1; color: $error; }
    FleetScreen #fleet-keys {
        dock: bottom; height: 1; padding: 0 1; background: $panel; color: $foreground;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    class Open(Message):
        """Open this host's dashboard."""

        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, *, title: str = "fleet", selected: str | None = None) -> None:
        super().__init__(name="fleet")
        self.fleet_title = title
        self._selected = selected
        self._rows: dict[str, tuple[str, ...]] = {}
        self._problems: list[str] = []
        self._compact = False
        self._last: list[HostSummary] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-title", markup=True)
        with Container(id="fleet-body"):
            table: DataTable[Text] = DataTable(id="fleet-table", cursor_type="row",
                                               zebra_stripes=True)
            yield table
            yield Static("", id="fleet-problems", markup=False)
        yield Static("[b $accent]enter[/] open the host's dashboard ([b $accent]0[/] there: "
                     "back here)  [b $accent]↑↓[/] host  [b $accent]q[/] quit", id="fleet-keys",
                     markup=True)

    def on_mount(self) -> None:
        self._set_columns(self.app.size.width < WIDE)
        self.query_one(DataTable).focus()

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < WIDE
        if compact != self._compact and self._last:
            self._set_columns(compact)
            self.show(self._last)

    def _set_columns(self, compact: bool) -> None:
        """The full table from WIDE columns on, the compact one below (rows re-added)."""
        table: DataTable[Text] = self.query_one(DataTable)
        if self._rows:
            self._selected = self.highlighted() or self._selected
        self._compact = compact
        self._rows.clear()
        table.clear(columns=True)
        for key, title in columns(compact):
            table.add_column(title, key=key)

    def show(self, summaries: Sequence[HostSummary]) -> None:
        """Redraw: new rows added, changed cells updated, nothing else touched."""
        self._last = list(summaries)
        table: DataTable[Text] = self.query_one(DataTable)
        cols = columns(self._compact)
        with self.app.batch_update():
            for s in summaries:
                row = {k: safe_text(v) for k, v in cells(s, self._compact).items()}
                values = tuple(row[key] for key, _ in cols)
                old = self._rows.get(s.host)
                if old is None:
                    table.add_row(*(_styled(k, row[k], s) for k, _ in cols), key=s.host)
                    if s.host == self._selected:
                        table.move_cursor(row=table.get_row_index(s.host))
                elif old != values:
                    for (key, _), before, now in zip(cols, old, values, strict=True):
                        if before != now or key in ("state", "server"):
                            table.update_cell(s.host, key, _styled(key, now, s),
                                              update_width=True)
                self._rows[s.host] = values
            connected = sum(1 for s in summaries if s.connected)
            sim = " · [b $warning]SIMULATED[/] hosts marked" if any(
                s.simulated for s in summaries) else ""
            update_static(self.query_one("#fleet-title", Static),
                          f"[b]dsv4tui[/] · {esc(self.fleet_title)} · {len(summaries)} hosts · "
                          f"{connected} connected{sim}", fixed_height=True)
            lines = problems(summaries)
            if lines != self._problems:
                self._problems = lines
                self.query_one("#fleet-problems", Static).update(
                    "\n".join(f"✗ {safe_text(line)}" for line in lines))

    def highlighted(self) -> str | None:
        table: DataTable[Text] = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    @on(DataTable.RowSelected)
    def _selected_row(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(self.Open(str(event.row_key.value)))

    def action_refresh(self) -> None:
        self.app.refresh()
