"""The old dict shape of a comparison, kept for callers of ``dsv4tui.core.store.compare_runs``.

The comparison itself is computed once, in :mod:`dsv4tui.core.campaign.compare` (the CLI's
``runs compare``, the dashboard and both exports use it); this only reshapes its result.
New code: ``dsv4tui.core.campaign.compare.compare_runs``.
"""

from __future__ import annotations

from typing import Any

from dsv4tui.core.store.runstore import RunStore


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def compare_runs(store: RunStore, refs: list[str]) -> dict[str, Any]:
    """``{"runs": [run dicts], "rows": [{"concurrency": C, "runs": [cell, ...]}]}``.

    A cell: run_id, output_tok_s, ttft_ms (the mean), tok_s_per_kw, tensor_mean and the
    change against the first run in % (``*_pct``, one decimal); None where a run has no level
    at that C.
    """
    from dsv4tui.core.campaign.compare import compare_runs as compare
    from dsv4tui.core.campaign.compare import pct_change

    cmp = compare(store, refs)
    base_id = cmp.baseline_id
    rows = []
    for c in cmp.concurrencies():
        base = cmp.point(base_id, c) if base_id is not None else None
        cells = []
        for run in cmp.runs:
            p = cmp.point(run.id, c)
            cell: dict[str, Any] = {"run_id": run.id, "output_tok_s": None, "ttft_ms": None,
                                    "tok_s_per_kw": None, "tensor_mean": None,
                                    "output_tok_s_pct": None, "ttft_ms_pct": None,
                                    "tok_s_per_kw_pct": None}
            if p is not None:
                cell.update(output_tok_s=p.output_tok_s, ttft_ms=p.ttft_mean_ms,
                            tok_s_per_kw=_round(p.tok_s_per_kw),
                            tensor_mean=_round(p.tensor_active), partial=p.partial)
                if base is not None:
                    for key, attr in (("output_tok_s_pct", "output_tok_s"),
                                      ("ttft_ms_pct", "ttft_mean_ms"),
                                      ("tok_s_per_kw_pct", "tok_s_per_kw")):
                        pct = pct_change(getattr(p, attr), getattr(base, attr))
                        cell[key] = None if pct is None else round(pct, 1)
            cells.append(cell)
        rows.append({"concurrency": c, "runs": cells})
    return {"runs": [{"id": r.id, "label": r.label, "host": r.host, "target": r.target,
                      "backend": r.backend, "checkpoint": r.checkpoint, "status": r.status,
                      "started_at": r.started_at} for r in cmp.runs], "rows": rows}
