"""The Fleet screen: one row per host, redrawn live from the fleet's summaries.

It draws only what it is given (:meth:`FleetScreen.show`, with :class:`dsv4tui.core.fleet.model.HostSummary`
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
from textual.widgets import Static

from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.fleet.model import HostSummary
from dsv4tui.core.fleet.rows import cells, columns_for, problems
from dsv4tui.tui.widgets.fleet_table import FleetTable
from dsv4tui.tui.widgets.text import esc, update_static

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

    BINDINGS = [("q", "app.quit", "Quit")]

    DEFAULT_CSS = """
    FleetScreen { layout: vertical; }
    FleetScreen #fleet-title { height: 1; padding: 0 1; background: $boost; }
    FleetScreen #fleet-body { height: 1fr; overflow-x: auto; overflow-y: auto; }
    FleetScreen #fleet-problems { height: auto; padding: 1 1 0 1; color: $error; }
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
        self._problems: list[str] = []
        self._width = 0
        self._last: list[HostSummary] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-title", markup=True)
        with Container(id="fleet-body"):
            yield FleetTable(id="fleet-table")
            yield Static("", id="fleet-problems", markup=False)
        yield Static("[b $accent]enter[/] open the host's dashboard ([b $accent]0[/] there: "
                     "back here)  [b $accent]↑↓[/] host  [b $accent]q[/] quit", id="fleet-keys",
                     markup=True)

    def on_mount(self) -> None:
        self._width = self.app.size.width
        self.query_one(FleetTable).focus()

    def on_resize(self, event: events.Resize) -> None:
        if columns_for(event.size.width) != columns_for(self._width):
            self._width = event.size.width
            if self._last:
                self.show(self._last)
        self._width = event.size.width

    def show(self, summaries: Sequence[HostSummary]) -> None:
        """Redraw: only the rows whose text changed are drawn again."""
        self._last = list(summaries)
        table = self.query_one(FleetTable)
        compact, chosen = columns_for(self._width)
        cols = list(chosen)
        rows = []
        for s in summaries:
            row = {k: safe_text(v) for k, v in cells(s, compact).items()}
            rows.append((s.host, {k: _styled(k, row[k], s) for k, _ in cols}))
        first = table.row_count == 0
        table.set_rows(cols, rows)
        if first and self._selected:
            table.move_to(self._selected)
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
        return self.query_one(FleetTable).highlighted()

    @on(FleetTable.Selected)
    def _selected_row(self, event: FleetTable.Selected) -> None:
        self.post_message(self.Open(event.key))
