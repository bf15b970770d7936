"""The compare table's rows: % change against the baseline, roofline, same-label runs apart."""

from __future__ import annotations

from dsv4tui.core.campaign.compare import Comparison, Point, RunInfo
from dsv4tui.tui.screens.runs import compare_rows


def run(run_id: int, label: str) -> RunInfo:
    return RunInfo(run_id, label, "demo", "demo", "triton", "MXFP4")


def test_rows_change_and_roofline_and_duplicate_labels() -> None:
    view = Comparison.build(
        [run(1, "MXFP4_triton"), run(2, "MXFP4_triton"), run(3, "nvfp4")],
        {1: [Point(16, 23.2, power_w=4000.0, roofline_pct=0.06)],
         2: [Point(16, 28.7, power_w=4000.0)],
         3: [Point(16, 28.5)]}, baseline=1)
    headers, rows = compare_rows(view)
    assert headers[-1] == "roofline %" and headers[3] == "vs #1"  # names the baseline run
    # every figure says its unit, in the header as the CLI's table does
    assert {"TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "tensor %"} <= set(headers)
    col = {h: i for i, h in enumerate(headers) if h != "vs #1"}
    by_name = {r[1]: r for r in rows}
    assert set(by_name) == {"MXFP4_triton #1 (base)", "MXFP4_triton #2", "nvfp4"}
    assert by_name["MXFP4_triton #2"][3] == "+23.7%"  # 23.2 -> 28.7 tok/s at C=16
    assert by_name["MXFP4_triton #1 (base)"][-1] == "0.06"
    assert by_name["nvfp4"][-1] == "n/a" and by_name["nvfp4"][col["tok/s/kW"]] == "n/a"
    # another baseline: the same numbers, the change against run 3 and its name in the header
    headers, rows = compare_rows(view.with_baseline(3))
    assert headers[3] == "vs #3"
    assert {r[1]: r for r in rows}["MXFP4_triton #2"][3] == "+0.7%"  # 28.5 -> 28.7
