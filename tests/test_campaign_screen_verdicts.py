"""The Campaign screen's comparison columns: the best-Δ column gets the 95 % interval of the
variant's best tok/s against the baseline's across repeats and the verdict (or says one run
each), the matrix shows startup time per phase, the highlighted variant's kernel families sit
under the matrix; on a narrow terminal columns give way by priority, never a cut word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_apps.frozen import frozen_app
from textual.widgets import Static

from dsv4tui.core.campaign.verdict import speed_effect
from dsv4tui.core.campaign.view import (
    CampaignView,
    apply_campaign_event,
    best_effect,
    kernel_lines,
    set_kernel_lines,
)
from dsv4tui.core.store import RunStore
from dsv4tui.tui.screens.campaign import (
    _PAD,
    change_text,
    dropped_text,
    matrix_cells,
    matrix_columns,
    vs_text,
)

PHASES = [{"name": "load_weights", "duration_s": 41.3}, {"name": "kv_cache", "duration_s": 6.2},
          {"name": "cuda_graph", "duration_s": 38.5}, {"name": "http_up", "duration_s": 1.0},
          {"name": "ready", "duration_s": 9.8}]


def campaign(toks: dict[str, list[float]]) -> CampaignView:
    """A campaign's journal folded into the view: each variant's repeats (a restart, a run, one
    level at C=16 each), interleaved A1 B1 A2 B2 ..."""
    cv = CampaignView()
    names = list(toks)
    events: list[dict[str, Any]] = [{"type": "campaign_start", "name": "story",
                                     "plan": {"levels": [[16, 4]]}, "repeats": 3,
                                     "variants": [{"name": n} for n in names]}]
    for r in range(max(len(t) for t in toks.values())):
        for vi, name in enumerate(names):
            if r >= len(toks[name]):
                continue
            run = f"{vi}.r{r}"
            events += [{"type": "variant_start", "variant": vi, "restart": True},
                       {"type": "launch_end", "variant": vi, "ok": True,
                        "startup_s": 100.0 + vi, "phases": PHASES},
                       {"type": "run_start", "variant": vi, "run": run},
                       {"type": "sanity", "variant": vi, "passed": True},
                       {"type": "level", "variant": vi, "run": run, "level": 0,
                        "concurrency": 16, "status": "done", "output_tok_s": toks[name][r],
                        "completed": 4},
                       {"type": "variant_end", "variant": vi, "state": "done"}]
    for i, ev in enumerate(events):
        apply_campaign_event(cv, ev, float(i))
    return cv


def test_repeats_give_best_delta_its_interval_and_verdict() -> None:
    toks = {"NVFP4_marlin": [28.7, 28.1, 29.0], "NVFP4_triton": [35.2, 34.6, 36.1]}
    cv = campaign(toks)
    base, tri = cv.variants
    assert tri.bests() == toks["NVFP4_triton"]  # every repeat kept, not just the last run
    e = best_effect(tri, base)
    want = speed_effect("output_tok_s", toks["NVFP4_triton"], toks["NVFP4_marlin"])
    assert e == want and e is not None and e.verdict == "faster"
    assert change_text(tri, base) == (f"{e.change_pct:+.1f} % [{e.ci_low:+.1f}, "
                                      f"{e.ci_high:+.1f}] faster")
    assert change_text(base, base) == "base"
    assert vs_text(tri, base, "vs:short") == f"{e.change_pct:+.1f}% faster"
    # the phases of its last launch, each in its column
    cells = dict(zip((k for _, k, _ in matrix_columns(cv)), matrix_cells(cv, tri), strict=True))
    assert (cells["startup"], cells["p_load_weights"], cells["p_kv_cache"],
            cells["p_cuda_graph"], cells["p_ready"]) == ("101.0s", "41.3s", "6.2s", "38.5s",
                                                         "9.8s")


def test_no_difference_says_what_it_could_resolve_and_one_run_says_so() -> None:
    cv = campaign({"A": [30.0, 31.0, 29.5], "B": [30.4, 29.6, 30.6]})
    a, b = cv.variants
    e = best_effect(b, a)
    assert e is not None and e.verdict == "no detectable difference"
    assert change_text(b, a) == (f"no detectable difference (≥ {e.detectable_pct:.1f} % "
                                 "resolvable)")
    one = campaign({"A": [30.0], "B": [33.0]})
    assert change_text(one.variants[1], one.variants[0]) == "+10.0 % (one run each)"
    assert vs_text(one.variants[1], one.variants[0], "vs:short") == "+10.0% (1 run)"


@pytest.mark.parametrize("width", [200, 157, 117, 77, 60])
def test_narrow_matrices_drop_columns_by_priority_and_cut_no_cell(width: int) -> None:
    cv = campaign({"NVFP4_marlin": [28.7, 28.1, 29.0], "NVFP4_triton": [35.2, 34.6, 36.1],
                   "NVFP4_trtllm_routed": [30.1, 30.0, 30.4]})
    cols = matrix_columns(cv, width)
    keys = [k for _, k, _ in cols]
    # the level cells and the best Δ (in some form) stay; what goes, goes in SPARE's order
    assert keys[:3] == ["variant", "state", "c0"] and any(k.startswith("vs") for k in keys)
    if width >= 200:
        assert "vs" in keys and "p_cuda_graph" in keys and "note" in keys
    if width == 77:  # an 80-column terminal
        assert "p_cuda_graph" not in keys and "runs" not in keys
    if width < 200:
        assert sum(w + _PAD for _, _, w in cols) <= width + 2 * _PAD  # the note may shrink
    from dsv4tui.tui.screens.campaign import CampaignMatrix

    base = cv.variant(cv.baseline)
    for v in cv.variants:
        shown = CampaignMatrix._cells(cv, v, cols)
        for (_, key, w), text in zip(cols, shown, strict=True):
            if key != "note":
                assert len(text) <= w, (key, text, w)  # never an ellipsis in a number
        extra = dropped_text(cv, v, set(keys))
        if "vs" not in keys and v is not base:  # the full verdict moves to the details line
            assert change_text(v, base) in extra
        if "p_cuda_graph" not in keys:
            assert "graphs 38.5s" in extra


def _sim_capture(tmp: Path, backend: str, checkpoint: str, tensor: float) -> dict[str, Any]:
    from dsv4tui.agent.kernels import trace_parse
    from dsv4tui.sim.trace import write_trace

    write_trace(str(tmp), backend, checkpoint, 5, tp_size=2, batch=16, seed=1)
    s = trace_parse.parse_traces([str(tmp)])
    trace_parse.attribute_tensor_cores(s, tensor, "simulated", 97.0)
    s.update(model="dsv4", load={"concurrency": 16},
             server={"backend": backend, "checkpoint": checkpoint, "simulated": True})
    return s


def test_a_capture_linked_to_a_variants_run_gives_its_families_line(tmp_path: Path) -> None:
    from test_report import seed_run

    from dsv4tui.core.store import kernels as kernel_store

    cv = campaign({"MXFP4_triton": [23.2], "NVFP4_marlin": [28.7]})
    with RunStore() as store:
        ra = seed_run(store, "MXFP4_triton", "triton", 40.0)
        rb = seed_run(store, "NVFP4_marlin", "marlin", 30.0)
        cv.variants[0].run_ids, cv.variants[1].run_ids = [ra], [rb]
        assert kernel_lines(cv, store) == [None, None]  # no capture yet: no line
        kernel_store.save_capture(store, _sim_capture(tmp_path / "b", "marlin", "NVFP4", 38.0),
                                  host="demo", run_id=rb)
        lines = kernel_lines(cv, store)
    assert lines[0] is None and lines[1] is not None
    assert lines[1].startswith("capture #") and " C=16: " in lines[1]
    assert "MoE GEMM 27% TC" in lines[1] and lines[1].endswith(" SIM")
    assert set_kernel_lines(cv, lines) and not set_kernel_lines(cv, lines)
    assert cv.variants[1].kernels == lines[1]


def _details(app: Any) -> str:
    return str(app.screen.query_one("#camp-details", Static).render())


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_the_screen_shows_phases_verdicts_and_families(size: tuple[int, int]) -> None:
    app = frozen_app("campaign")
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        from dsv4tui.tui.screens.campaign import CampaignMatrix

        matrix = app.screen.query_one(CampaignMatrix)
        keys = matrix.shown_keys()
        first = _details(app)
        await pilot.press("down")  # NVFP4_marlin: 3 repeats against MXFP4_triton's 3
        await pilot.pause()
        second = _details(app)
    cv = app.model.campaign
    verdict = change_text(cv.variants[1], cv.variants[0])
    assert verdict.endswith("] faster") and "[" in verdict
    assert "MXFP4_triton kernels (share of a decode step; TC tensor cores, CC CUDA cores)" in \
        first and "MoE GEMM 39% CC" in first
    if size == (160, 48):
        assert {"vs", "startup", "p_load_weights", "p_kv_cache", "p_cuda_graph",
                "p_ready"} <= keys
    else:  # 80x24: the phases and the full verdict move to the details line
        assert "p_load_weights" not in keys and "vs" not in keys
        assert f"best Δ {verdict}" in second and "weights 52.0s" in second
