"""What the store's modules write in SQL the same way: a column's JSON (in, and back out with
anything unreadable as None), the SELECT of a listing filtered by the columns a caller names
(newest first, at most ``limit``), and the UPDATE of the columns given for one row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps(obj: Any) -> str | None:
    """A JSON column's text (None stays NULL)."""
    return None if obj is None else json.dumps(obj, separators=(",", ":"), default=str)


def loads(text: Any) -> Any:
    """A JSON column's value; None for NULL, an empty text or one that is not JSON."""
    if not text or not isinstance(text, (str, bytes)):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def select(source: str, filters: Mapping[str, Any], *, order: str,
           limit: int | None = None) -> tuple[str, list[Any]]:
    """``SELECT ... WHERE col = ? AND ... ORDER BY order [LIMIT n]`` and its arguments.

    ``source`` is what comes before the WHERE (``SELECT * FROM kernels``); ``filters`` maps a
    column to the value it must equal, a None value filtering nothing; ``limit`` 0 or None:
    no limit. The columns are the caller's own names, never the user's text."""
    where = {col: value for col, value in filters.items() if value is not None}
    sql = source
    if where:
        sql += " WHERE " + " AND ".join(f"{col} = ?" for col in where)
    sql += f" ORDER BY {order}"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return sql, list(where.values())


def update(table: str, row_id: Any, cols: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """``UPDATE table SET col = ?, ... WHERE id = ?`` and its arguments (``cols`` not empty;
    their names the caller's, checked against what it allows)."""
    if not cols:
        raise ValueError("nothing to update")
    return (f"UPDATE {table} SET {', '.join(f'{col} = ?' for col in cols)} WHERE id = ?",
            [*cols.values(), row_id])
