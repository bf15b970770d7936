"""The fleet's table: one line per host, drawn with Textual's line API.

A DataTable re-renders every cell of every row whenever one cell changes (its row caches are
keyed on one update counter), which at eight hosts whose power and utilisation change every
second cost ~8 % of a core; here each row is one cached :class:`Strip`, rebuilt only when its
text changed, and only that line is repainted. Columns are as wide as their widest cell.

``set_rows(columns, rows)`` with ``rows`` = ``[(key, {column: Text})]``; the cursor moves with
up/down (home/end), ``enter`` (or a click on the highlighted row) posts :class:`Selected`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

GAP = 2


class FleetTable(Widget, can_focus=True):
    BINDINGS = [Binding("up", "cursor(-1)", "Up", show=False),
                Binding("down", "cursor(1)", "Down", show=False),
                Binding("home", "cursor(-1000)", show=False),
                Binding("end", "cursor(1000)", show=False),
                Binding("enter", "select", "Open", show=False)]
    COMPONENT_CLASSES = {"fleet-table--header", "fleet-table--cursor"}
    DEFAULT_CSS = """
    FleetTable { height: auto; width: 1fr; }
    FleetTable > .fleet-table--header { text-style: bold; color: $primary; }
    FleetTable > .fleet-table--cursor { background: $block-cursor-blurred-background; }
    FleetTable:focus > .fleet-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    """

    class Selected(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._columns: list[tuple[str, str]] = []
        self._keys: list[str] = []
        self._cells: dict[str, dict[str, Text]] = {}
        self._plain: dict[str, tuple[str, ...]] = {}
        self._widths: list[int] = []
        self._strips: dict[int, Strip] = {}  # line -> its strip at the widths now (0: header)
        self.cursor = 0

    # -- data -------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._keys)

    def cell(self, key: str, column: str) -> str:
        return self._cells[key][column].plain

    def highlighted(self) -> str | None:
        return self._keys[self.cursor] if self._keys else None

    def move_to(self, key: str | None) -> None:
        if key in self._keys:
            self._move(self._keys.index(key))

    def set_rows(self, columns: list[tuple[str, str]], rows: list[tuple[str, dict[str, Text]]]
                 ) -> None:
        """The table now: lines whose text changed are rebuilt and repainted, nothing else."""
        keys = [key for key, _ in rows]
        relayout = columns != self._columns or keys != self._keys
        if relayout:
            self._columns, self._keys = list(columns), keys
            self._strips.clear()
            self._plain.clear()
            self.cursor = min(self.cursor, max(0, len(keys) - 1))
        changed: list[int] = []
        for i, (key, cells) in enumerate(rows):
            plain = tuple(cells[c].plain for c, _ in columns)
            self._cells[key] = cells
            if self._plain.get(key) != plain:
                self._plain[key] = plain
                self._strips.pop(i + 1, None)
                changed.append(i + 1)
        widths = [max([len(title), *(len(self._plain[k][n]) for k in keys)])
                  for n, (_, title) in enumerate(columns)]
        if widths != self._widths:
            self._widths = widths
            self._strips.clear()
            relayout = True
        if relayout:
            self.refresh(layout=True)
        else:
            width = self.size.width
            for line in changed:
                self.refresh(Region(0, line, width, 1))

    # -- drawing ----------------------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._keys) + 1

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return sum(self._widths) + GAP * max(0, len(self._widths) - 1) + 2

    def _line_text(self, line: int) -> Text:
        out = Text(" ")
        for n, (column, title) in enumerate(self._columns):
            if n:
                out.append(" " * GAP)
            width = self._widths[n]
            if line == 0:
                cell = Text(title)
                right = False
            else:
                cell = self._cells[self._keys[line - 1]][column]
                right = cell.justify == "right"
            pad = " " * max(0, width - cell.cell_len)
            if right:
                out.append(pad)
            out.append_text(cell)
            if not right:
                out.append(pad)
        return out

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y > len(self._keys):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(y)
        if strip is None:
            segments = list(self._line_text(y).render(self.app.console))
            strip = Strip(segments)
            self._strips[y] = strip
        base = self.rich_style
        if y == 0:
            base = base + self.get_component_rich_style("fleet-table--header")
        line = strip.extend_cell_length(width).crop(0, width).apply_style(base)
        if y - 1 == self.cursor and y:
            # over the cells' own colours: the highlighted row reads in the cursor's colours
            cursor = self.get_component_rich_style("fleet-table--cursor")
            line = Strip([Segment(text, (style or Style()) + cursor, control)
                          for text, style, control in line], line.cell_length)
        return line

    # -- keys and the mouse -----------------------------------------------------------------
    def _move(self, row: int) -> None:
        if not self._keys:
            return
        row = max(0, min(len(self._keys) - 1, row))
        if row != self.cursor:
            old, self.cursor = self.cursor, row
            width = self.size.width
            self.refresh(Region(0, old + 1, width, 1), Region(0, row + 1, width, 1))

    def action_cursor(self, step: int) -> None:
        self._move(self.cursor + step)

    def action_select(self) -> None:
        key = self.highlighted()
        if key is not None:
            self.post_message(self.Selected(key))

    def on_click(self, event: events.Click) -> None:
        row = event.y - 1
        if 0 <= row < len(self._keys):
            if row == self.cursor or event.chain > 1:
                self._move(row)
                self.action_select()
            else:
                self._move(row)

