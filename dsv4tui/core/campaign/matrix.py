"""A campaign as a matrix, variants x levels, from what the store collected (CLI tables; the
dashboard builds the same rows live from events: screens/model.CampaignView)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsv4tui.core.store import RunStore


@dataclass
class MatrixRow:
    name: str
    state: str
    cells: list[str]
    run_ids: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def run_text(self) -> str:
        return ",".join(f"#{i}" for i in self.run_ids) or "-"


@dataclass
class Matrix:
    concurrencies: list[int]
    rows: list[MatrixRow]


def _cell(level: Any, state: str) -> str:
    if level is None:
        return {"failed": "-", "skipped": "skip", "cancelled": "-"}.get(state, "·")
    tok = level.output_tok_s
    status = level.stats.get("status") or ("partial" if level.partial else "done")
    text = f"{tok:.1f}" if tok is not None else "n/a"
    return text if status == "done" else f"{text} ({status})"


def campaign_matrix(info: dict[str, Any], store: RunStore) -> Matrix:
    """``info``: a campaign status (host's or the store's) with ``run_ids`` per variant."""
    plan = info.get("plan") or {}
    cs = [int(c) for c, _ in plan.get("levels") or []]
    rows = []
    per_variant: list[dict[int, Any]] = []
    for v in info.get("variants") or []:
        by_c: dict[int, Any] = {}
        ids = [int(i) for i in v.get("run_ids") or []]
        if ids:
            for level in store.levels(ids[-1]):
                by_c[level.concurrency] = level
                if level.concurrency not in cs:
                    cs.append(level.concurrency)
        per_variant.append(by_c)
    cs = sorted(set(cs))
    for v, by_c in zip(info.get("variants") or [], per_variant, strict=True):
        state = str(v.get("state") or "pending")
        note = str(v.get("reason") or "")
        if len(note) > 70:
            note = note[:67] + "..."
        rows.append(MatrixRow(str(v.get("name")), state, [_cell(by_c.get(c), state) for c in cs],
                              [int(i) for i in v.get("run_ids") or []], note))
    return Matrix(cs, rows)
