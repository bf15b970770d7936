"""The compare table's rows: % change against the baseline, roofline, same-label runs apart."""

from __future__ import annotations

from dsv4tui.screens.model import CompareView, LevelStats, RunRow
from dsv4tui.screens.runs import compare_rows


def run(run_id: int, label: str) -> RunRow:
    return RunRow(run_id=run_id, label=label, created=0.0, host="demo", backend="triton",
                  checkpoint="MXFP4", best_tok_s=None, status="done")


def test_rows_change_and_roofline_and_duplicate_labels() -> None:
    view = CompareView(runs=[run(1, "MXFP4_triton"), run(2, "MXFP4_triton"), run(3, "nvfp4")],
                       baseline=1)
    view.levels = {
        1: [LevelStats(16, 23.2, power_w=4000.0, roofline_pct=0.06)],
        2: [LevelStats(16, 28.7, power_w=4000.0)],
        3: [LevelStats(16, 28.5)],
    }
    headers, rows = compare_rows(view)
    assert headers[-1] == "roofline"
    by_name = {r[1]: r for r in rows}
    assert set(by_name) == {"MXFP4_triton #1 (base)", "MXFP4_triton #2", "nvfp4"}
    assert by_name["MXFP4_triton #2"][3] == "+23.7%"  # 23.2 -> 28.7 tok/s at C=16
    assert by_name["MXFP4_triton #1 (base)"][-1] == "0.06%"
    assert by_name["nvfp4"][-1] == "n/a" and by_name["nvfp4"][8] == "n/a"  # no power: no tok/kW
