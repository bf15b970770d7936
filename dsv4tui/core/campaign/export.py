"""Exports of stored runs and comparisons, for both faces (``dsv4tui runs export``, ``runs
compare --format``, the dashboard's ``e``).

CSV cells hold numbers as numbers (no thousands separators, no ``%``, no ``base``); which run
is the baseline is a column of its own. Text cells that a spreadsheet would run as a formula
(leading ``=``, ``+``, ``-``, ``@``, tab, CR) get a leading ``'``. Markdown cells escape the
table's own syntax (``|``) and every text reaching either format has its control characters
escaped (:func:`dsv4tui.core.campaign.labels.safe_text`). JSON is exact (json escapes itself).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign.columns import (
    COMPARE_COLUMNS,
    DETAIL_COLUMNS,
    LEVEL_COLUMNS,
    change_title,
    fmt_change,
)
from dsv4tui.core.campaign.compare import CHANGE_KEYS, SIMULATED, Comparison, sim_name
from dsv4tui.core.campaign.labels import safe_text

if TYPE_CHECKING:
    from dsv4tui.core.store.models import Run
    from dsv4tui.core.store.runstore import RunStore

REQUEST_CSV = ("level", "concurrency", "index", "ok", "start_s", "ttft_s", "ttfat_s", "e2e_s",
               "tpot_s", "output_tokens", "prompt_tokens", "token_source", "chunks",
               "finish_reason", "status", "error_kind", "error")

_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


# --- cells ----------------------------------------------------------------------------------

def csv_cell(value: Any) -> Any:
    """A CSV cell: numbers and None (empty) as they are, text made safe for spreadsheets."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    text = safe_text(value)
    return "'" + text if text.startswith(_FORMULA) else text


def md_cell(value: Any) -> str:
    """A Markdown table cell or inline text: controls escaped, Markdown syntax escaped."""
    return _MD_SPECIAL.sub(r"\\\1", safe_text("" if value is None else value))


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([csv_cell(h) for h in header])
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return buf.getvalue()


# --- a comparison ---------------------------------------------------------------------------

def compare_csv_rows(cmp: Comparison) -> tuple[list[str], list[list[Any]]]:
    """One row per C and run; numbers, not display text."""
    # rate: req/s of an open-loop level, else empty; simulated: 1 when the built-in simulator
    # served the run (its numbers are not a real server's)
    header = ["concurrency", "rate", "run_id", "label", "host", "backend", "checkpoint",
              "simulated", "baseline_run_id", "is_baseline"]
    for col in COMPARE_COLUMNS:
        header.append(col.key)
        if col.change:
            header.append(f"{col.key}_change_pct")
    header += ["power_w", "errors", "partial"]
    rows: list[list[Any]] = []
    for row in cmp.rows():
        cells: list[Any] = [row.concurrency, row.rate, row.run.id, row.run.label, row.run.host,
                            row.run.backend, row.run.checkpoint, int(row.run.simulated),
                            cmp.baseline_id, int(row.is_baseline)]
        for col in COMPARE_COLUMNS:
            cells.append(_round(row.values.get(col.key), 3))
            if col.change:
                cells.append(_round(row.changes.get(col.key), 2))
        p = row.point
        cells += [_round(p.power_w, 1) if p else None, p.errors if p else None,
                  int(p.partial) if p else None]
        rows.append(cells)
    return header, rows


def compare_csv(cmp: Comparison) -> str:
    return _csv_text(*compare_csv_rows(cmp))


def compare_markdown(cmp: Comparison) -> str:
    base = cmp.baseline_id
    head = ["C", "run"]
    for col in COMPARE_COLUMNS:
        head.append(col.header)
        if col.change:
            head.append(change_title(base))
    note = cmp.simulated_note()
    lines = [f"**{md_cell(note)}**", ""] if note else []
    lines += ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for row in cmp.rows():
        cells = [row.load if row.rate is not None else str(row.concurrency),
                 md_cell(sim_name(row.name, row.run.simulated)
                         + (" (baseline)" if row.is_baseline else ""))]
        for col in COMPARE_COLUMNS:
            cells.append(col.text(row.values.get(col.key)))
            if col.change:
                cells.append("-" if row.is_baseline else fmt_change(row.changes.get(col.key)))
        lines.append("| " + " | ".join(cells) + " |")
    notes = cmp.definition_notes()  # another tool's run: whose definitions, where they mix
    if notes:
        lines += ["", "Definitions (docs/metrics.md):", ""] + [f"- {md_cell(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def write_compare(cmp: Comparison, stem: Path) -> tuple[Path, Path]:
    """``stem.csv`` (one row per run and C) and ``stem.json``; returns both paths."""
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    csv_path.write_text(compare_csv(cmp), encoding="utf-8", newline="")
    json_path.write_text(json.dumps(cmp.to_json(), indent=2, default=str) + "\n",
                         encoding="utf-8")
    return csv_path, json_path


# --- one run --------------------------------------------------------------------------------

def run_detail(store: RunStore, run: Run, with_requests: bool = False) -> dict[str, Any]:
    """Everything stored about a run (``runs show --json``, ``runs export``)."""
    out: dict[str, Any] = {"run": run.to_dict(),
                           "levels": [lv.to_dict() for lv in store.levels(run.id)],
                           "sanity": store.sanity_results(run_id=run.id)}
    if with_requests:
        out["requests"] = store.requests(run.id)
    return out


def all_runs(store: RunStore, with_requests: bool = True) -> dict[str, Any]:
    """Every stored run (``runs export --all``), oldest first."""
    runs = sorted(store.runs(), key=lambda r: (r.started_at, r.id))
    return {"runs": [run_detail(store, r, with_requests) for r in runs]}


def run_json(detail: Mapping[str, Any]) -> str:
    return json.dumps(detail, indent=2, default=str) + "\n"


def run_csv(detail: Mapping[str, Any]) -> str:
    """Every request of the run, one row each."""
    conc = {lv["level"]: lv["concurrency"] for lv in detail["levels"]}
    rows = [[{**req, "concurrency": conc.get(req["level"])}.get(k) for k in REQUEST_CSV]
            for req in detail.get("requests") or []]
    return _csv_text(REQUEST_CSV, rows)


def run_markdown(detail: Mapping[str, Any]) -> str:
    run = detail["run"]
    cols = (*LEVEL_COLUMNS, *DETAIL_COLUMNS)
    head = ["C", "n", "ok", "err", *(c.header for c in cols), "tokens"]
    sim = (f" ({SIMULATED}: the built-in simulator, not a real server)"
           if run.get("simulated") else "")
    lines = [f"## Run {run['id']}: {md_cell(run['label'])}{sim}", "",
             f"target {md_cell(run['url'] or run['host'])}, model {md_cell(run['model'] or '-')}, "
             f"backend {md_cell(run['backend'] or '-')}, checkpoint "
             f"{md_cell(run['checkpoint'] or '-')}, status {md_cell(run['status'])}", "",
             "| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for lv in detail["levels"]:
        cells = [str(lv["concurrency"]), str(lv["requests"]), _int(lv.get("completed")),
                 _int(lv.get("errors")), *(c.text(c.value(lv)) for c in cols),
                 md_cell((lv.get("token_count_source") or "-")
                         + (" (partial)" if lv.get("partial") else ""))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _int(v: Any) -> str:
    return "-" if v is None else str(v)


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


__all__ = ["CHANGE_KEYS", "REQUEST_CSV", "all_runs", "compare_csv", "compare_csv_rows",
           "compare_markdown", "csv_cell", "md_cell", "run_csv", "run_detail", "run_json",
           "run_markdown", "write_compare"]
