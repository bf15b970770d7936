"""Side-by-side comparison of runs per concurrency (``dsv4tui runs compare``, Runs screen)."""

from __future__ import annotations

from typing import Any

from dsv4tui.store.models import Level, Run
from dsv4tui.store.runstore import RunStore


def _pct(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return round(100.0 * (value - base) / base, 1)


def compare_runs(store: RunStore, refs: list[str]) -> dict[str, Any]:
    """``{"runs": [run dicts], "rows": [{"concurrency": C, "runs": [cell, ...]}]}``.

    A cell: run_id, output_tok_s, ttft_ms (mean), tok_s_per_kw, tensor_mean and the change
    against the first run in % (``*_pct``); None where a run has no level at that C (the last
    level wins when a run measured a C twice).
    """
    runs: list[Run] = [store.find_run(ref) for ref in refs]
    by_run: list[dict[int, Level]] = []
    for run in runs:
        by_c: dict[int, Level] = {}
        for level in store.levels(run.id):
            by_c[level.concurrency] = level
        by_run.append(by_c)
    cs = sorted({c for by_c in by_run for c in by_c})
    rows = []
    for c in cs:
        base = by_run[0].get(c)
        cells = []
        for run, by_c in zip(runs, by_run, strict=True):
            lv: Level | None = by_c.get(c)
            cell: dict[str, Any] = {"run_id": run.id, "output_tok_s": None, "ttft_ms": None,
                                    "tok_s_per_kw": None, "tensor_mean": None,
                                    "output_tok_s_pct": None, "ttft_ms_pct": None,
                                    "tok_s_per_kw_pct": None}
            if lv is not None:
                cell.update(output_tok_s=lv.output_tok_s, ttft_ms=lv.ttft_mean_ms,
                            tok_s_per_kw=_round(lv.tok_s_per_kw), tensor_mean=_round(lv.tensor_mean),
                            partial=lv.partial)
                if base is not None:
                    cell.update(output_tok_s_pct=_pct(lv.output_tok_s, base.output_tok_s),
                                ttft_ms_pct=_pct(lv.ttft_mean_ms, base.ttft_mean_ms),
                                tok_s_per_kw_pct=_pct(lv.tok_s_per_kw, base.tok_s_per_kw))
            cells.append(cell)
        rows.append({"concurrency": c, "runs": cells})
    return {"runs": [_run_brief(r) for r in runs], "rows": rows}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _run_brief(run: Run) -> dict[str, Any]:
    return {"id": run.id, "label": run.label, "host": run.host, "target": run.target,
            "backend": run.backend, "checkpoint": run.checkpoint, "status": run.status,
            "started_at": run.started_at}
