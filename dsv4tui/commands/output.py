"""Printing helpers shared by the CLI commands."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from dsv4tui import config
from dsv4tui.campaign.labels import safe_text
from dsv4tui.errors import EXIT_INTERRUPTED, UserError

T = TypeVar("T")


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        raise UserError("interrupted", EXIT_INTERRUPTED) from None


def load_settings(args: Any) -> tuple[config.Settings, Path]:
    path = Path(args.config).expanduser() if getattr(args, "config", None) else None
    return config.load(path)


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
