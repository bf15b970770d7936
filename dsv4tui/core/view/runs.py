"""The Runs screen's list and what its keys compare or report: the store's runs as rows,
which reads are still worth showing, and the runs a comparison or a report covers."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from dsv4tui.core.campaign.view import CampaignView
from dsv4tui.core.view import model as m

LIST_LIMIT = 1000  # the newest runs the list shows


def run_rows(store: Any, limit: int = LIST_LIMIT) -> list[m.RunRow]:
    """The store's newest runs as the list shows them."""
    return [m.RunRow(run_id=r.id, label=r.label, created=r.started_at, host=r.target,
                     backend=r.backend, checkpoint=r.checkpoint, best_tok_s=r.best_tok_s,
                     status=r.status, simulated=r.simulated, sanity_passed=r.sanity_passed)
            for r in store.runs(limit=limit)]


class Newest:
    """Reads that may finish out of order (worker threads): each asks for a ticket, and only
    an answer at least as new as the one shown is shown -- a slow older read never wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked = 0
        self._shown = 0

    def ask(self) -> int:
        with self._lock:
            self._asked += 1
            return self._asked

    def show(self, ticket: int) -> bool:
        """True when the answer of ``ticket`` is to be shown (0: always)."""
        if ticket and ticket < self._shown:
            return False
        self._shown = ticket
        return True


class StoreChanges:
    """Whether another process (a CLI sweep, ``runs import``, another console) committed to
    the run store since the last look: SQLite's ``PRAGMA data_version``, which changes only
    for other connections' commits, so a look costs one tiny read and no list query."""

    def __init__(self) -> None:
        self._seen: int | None = None

    def changed(self, store: Any) -> bool:
        """True when another connection committed since the previous call (never the first)."""
        rows = store.query("PRAGMA data_version")
        version = int(rows[0][0]) if rows else 0
        before, self._seen = self._seen, version
        return before is not None and version != before


def baseline_of(runs: m.RunsView, ids: Sequence[Any]) -> Any:
    """The marked baseline (``B``), when it is one of ``ids``."""
    return runs.baseline if runs.baseline in ids else None


def latest_runs(cv: CampaignView) -> list[Any]:
    """The Campaign screen's comparison: each variant's latest run (variants with one)."""
    return [v.run_ids[-1] for v in cv.variants if v.run_ids]
