"""``campaign status`` says, per variant, its startup per phase (weights, KV cache, CUDA graphs,
warm-up) and, where a kernel capture is linked to one of its runs, its kernel families with
tok/s and roofline % -- in text and in ``--json`` (``variants[i].kernels``,
``startup_phases``); with repeats the verdicts carry ``ci_low``/``ci_high``/``verdict``/
``n_repeats``. A real SQLite store, captures parsed from the simulator's traces and stored
through the real store functions; the printing is the command's own (no host needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_campaign_screen_verdicts import PHASES, _sim_capture
from test_report import seed_run

from dsv4tui.cli.campaign import _print_status, with_verdicts
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.core.store import kernels as kernel_store


def _campaign(store: RunStore, tmp: Path) -> dict[str, Any]:
    """Two variants, three repeats each (each its own launch with phases); a capture at C=16
    linked to NVFP4_marlin's second run."""
    cstore.ensure(store, "c1", host="demo", name="story", kind="campaign")
    variants = []
    for vi, (label, backend, gaps) in enumerate((("MXFP4_triton", "triton", (40, 41, 39.5)),
                                                 ("NVFP4_marlin", "marlin", (30, 30.5, 31)))):
        ids = []
        for r, gap in enumerate(gaps):
            rid = seed_run(store, label, backend, float(gap))
            lid = cstore.add_launch(store, "c1", f"{vi}.r{r}", host="demo",
                                    profile_name=label.lower(), profile={}, backend=backend,
                                    checkpoint="NVFP4", changes={}, argv=["python3"])
            cstore.end_launch(store, lid, ok=True, startup_s=100.0 + 20 * vi + r, error=None,
                              pid=1000 + r, phases=PHASES)
            with store.transaction() as db:
                db.execute("UPDATE runs SET launch_id = ? WHERE id = ?", (lid, rid))
            ids.append(rid)
        variants.append({"name": label, "label": label, "state": "done", "run_ids": ids})
    kernel_store.save_capture(store, _sim_capture(tmp, "marlin", "NVFP4", 38.0), host="demo",
                              run_id=variants[1]["run_ids"][1])
    return {"id": "c1", "name": "story", "host": "demo", "state": "done", "created_at": 0,
            "plan": {"levels": [[1, 4], [8, 4], [16, 4]]}, "variants": variants}


def test_status_text_has_phases_verdicts_and_families(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as store:
        info = _campaign(store, tmp_path)
        _print_status(info, store)
    out = capsys.readouterr().out
    assert "startup per phase" in out
    head = next(x for x in out.splitlines() if "weights s" in x)
    assert all(h in head for h in ("KV cache s", "CUDA graphs s", "warm-up s", "startup s"))
    row = next(x for x in out.splitlines() if x.startswith("NVFP4_marlin") and "41.3" in x)
    assert "38.5" in row and "9.8" in row and "122.0" in row and "+20 %" in row
    assert "NVFP4_marlin C=16: tok/s" in out and "] faster (n=3/3)" in out
    fam = next(x for x in out.splitlines() if x.strip().startswith("NVFP4_marlin: capture #"))
    assert "MoE GEMM 27 % (tensor cores)" in fam and "tok/s at C=16" in fam
    assert "roofline" in fam and fam.endswith("SIMULATED")
    assert not any(x.strip().startswith("MXFP4_triton: capture") for x in out.splitlines())


def test_status_json_has_kernels_and_phases_per_variant(tmp_path: Path) -> None:
    with RunStore() as store:
        info = _campaign(store, tmp_path)
        out = with_verdicts(info, store)
        levels = {lv.concurrency: lv.output_tok_s
                  for lv in store.levels(info["variants"][1]["run_ids"][1])}
    tri, mar = out["variants"]
    assert tri["kernels"] is None
    k = mar["kernels"]
    assert k["run_id"] == info["variants"][1]["run_ids"][1] and k["concurrency"] == 16
    assert k["output_tok_s"] == pytest.approx(levels[16], abs=0.01)
    moe = next(f for f in k["families"] if f["family"] == "moe_gemm")
    assert moe["tensor_cores"] is True and moe["share"] == pytest.approx(0.27, abs=0.005)
    assert k["simulated"] is True and "roofline_pct" in k
    assert mar["startup_s"] == 122.0
    assert mar["startup_phases"] == {"load_weights": 41.3, "kv_cache": 6.2, "cuda_graph": 38.5,
                                     "http_up": 1.0, "ready": 9.8}
    v16 = next(v for v in out["verdicts"] if v["concurrency"] == 16)
    assert v16["label"] == "NVFP4_marlin" and v16["n_repeats"] == 3
    assert v16["verdict"] == "faster" and v16["ci_low"] < v16["change_pct"] < v16["ci_high"]
