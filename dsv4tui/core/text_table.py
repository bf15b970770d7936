"""A plain text table: what the CLI prints, and the roofline's text report."""

from __future__ import annotations

from dsv4tui.core.campaign.labels import safe_text


def _numeric(cell: str) -> bool:
    core = cell.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace("%", "")
    return core.replace("+", "").isdigit()


def table(rows: list[list[str]], headers: list[str]) -> str:
    """A plain left-aligned text table (numbers right-aligned). Every cell is shown with its
    control characters escaped (a label holding ESC or a newline cannot break the table)."""
    headers = [safe_text(h) for h in headers]
    rows = [[safe_text(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(row: list[str]) -> str:
        out = []
        for i, cell in enumerate(row):
            out.append(cell.rjust(widths[i]) if _numeric(cell) else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)
