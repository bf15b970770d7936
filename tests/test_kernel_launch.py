"""Kernel launches from the traces: grid, SM coverage, waves, est. occupancy, the findings
ranked by the time they cost -- on a hand-made trace with known numbers, the real H200 trace,
the simulator's traces, traces without the fields; and in every face (CLI text and JSON, the
comparison of two captures, the campaign report)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.kernels import trace_parse as tp
from dsv4tui.core.campaign import report
from dsv4tui.core.campaign.kernel_launch import NOT_IN_CAPTURE, launch_cells, launch_lines
from dsv4tui.core.campaign.kernels import ServerContext, store_capture
from dsv4tui.core.store import RunStore
from dsv4tui.main import main
from dsv4tui.sim.trace import write_trace

H200 = Path(__file__).parent / "data" / "traces" / "h200_torch_profiler-TP-0.trace.json.gz"
PROPS = {"id": 0, "name": "Test GPU", "numSms": 100, "sharedMemPerBlock": 49152,
         "maxThreadsPerMultiprocessor": 2048}


def kern(name: str, ts: float, dur: float, grid: int | None, threads: int = 256, *,
         regs: int = 32, smem: int = 0, occ: float | None = None,
         bps: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"device": 0, "stream": 7, "correlation": int(ts)}
    if grid is not None:
        args.update({"grid": [grid, 1, 1], "block": [threads, 1, 1],
                     "registers per thread": regs, "shared memory": smem})
        if bps:
            args["blocks per SM"] = grid / 100
        if occ is not None:
            args["est. achieved occupancy %"] = occ
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": args}


def write(path: Path, events: list[dict[str, Any]], props: dict[str, Any] | None = None) -> str:
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "gpu_user_annotation", "name": "step[DECODE bs=16]", "pid": 0,
         "tid": 7, "ts": 0.0, "dur": 10_000.0}, *events]}
    if props is not None:
        doc["deviceProperties"] = [props]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return str(path)


def known(tmp: Path, props: dict[str, Any] | None = PROPS, bps: bool = False) -> str:
    """1000 us of decode on a 100-SM GPU:

    small_grid_kernel 300 us, 25 blocks (25 % of the SMs), occ 3 %     -> grid finding
    cutlass_gemm_kernel 300 us: 200 blocks 180 us + 50 blocks 120 us   -> 80 % cover, 1.4 waves,
        64 KiB shared memory, occ 0 (not estimated), tensor cores      -> no finding
    moe_slot_gemv_kernel 200 us, 400 blocks of 128: occ 25 (120 us) and 20 (80 us) -> 23 %,
        all blocks resident (4/SM x 128 / 2048 = 25 %), a GEMV          -> occupancy + CUDA cores
    reduce_kernel 100 us, 1 block                                       -> grid finding (1 %)
    heavy_kernel 100 us, 400 blocks of 256, 255 registers, occ 12 %     -> occupancy (resources)
    """
    ev = [kern("small_grid_kernel", 0, 300, 25, occ=3, bps=bps),
          kern("cutlass_gemm_kernel", 400, 180, 200, 384, smem=65536, occ=0, bps=bps),
          kern("cutlass_gemm_kernel", 600, 120, 50, 384, smem=65536, occ=0, bps=bps),
          kern("moe_slot_gemv_kernel", 800, 120, 400, 128, regs=64, occ=25, bps=bps),
          kern("moe_slot_gemv_kernel", 1000, 80, 400, 128, regs=128, occ=20, bps=bps),
          kern("reduce_kernel", 1200, 100, 1, 512, occ=0, bps=bps),
          kern("heavy_kernel", 1400, 100, 400, 256, regs=255, smem=40000, occ=12, bps=bps)]
    return write(tmp / "known-TP-0.trace.json.gz", ev, props)


def by_name(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k["short_name"]: k for k in s["kernels"]}


def test_known_numbers_and_findings_ranked_by_time(tmp_path: Path) -> None:
    s = tp.parse_traces([known(tmp_path)])
    tp.attribute_tensor_cores(s, None)
    assert s["launch"]["sms"] == 100 and "deviceProperties" in s["launch"]["sms_source"]
    assert s["launch"]["fields_share"] == 1.0
    k = by_name(s)
    small = k["small_grid_kernel"]["launch"]
    assert (small["blocks"], small["threads"], small["sm_coverage"], small["waves"]) == \
        (25, 256, 0.25, 0.25)
    assert small["occupancy_pct"] == 3.0 and small["grid"] == [25, 1, 1]
    gemm = k["cutlass_gemm_kernel"]["launch"]
    assert gemm["shapes"] == 2 and gemm["sm_coverage"] == 0.8 and gemm["waves"] == 1.4
    assert gemm["blocks"] == 200 and gemm["blocks_mean"] == 140.0
    assert gemm["occupancy_pct"] is None and "not estimated" in gemm["occupancy_note"]
    assert [(x["grid"], x["calls"], x["occupancy_pct"]) for x in gemm["by_shape"]] == \
        [([200, 1, 1], 1, None), ([50, 1, 1], 1, None)]
    gemv = k["moe_slot_gemv_kernel"]["launch"]
    assert gemv["occupancy_pct"] == 23.0 and gemv["occupancy_limit"] == "grid"
    assert gemv["registers"] == 64  # the shape that took the most time
    assert k["heavy_kernel"]["launch"]["occupancy_limit"] == "resources"
    assert k["reduce_kernel"]["launch"]["occupancy_pct"] == 0.0  # a real (tiny) zero
    assert launch_cells(k["cutlass_gemm_kernel"]) == ("200+", "1.4w", "n/e")
    assert launch_cells(k["small_grid_kernel"]) == ("25", "25%", "3%")
    texts = [f["text"] for f in s["launch"]["findings"]]
    assert texts == [
        "`small_grid_kernel`: 25 blocks on 100 SMs (25 % of the GPU) for 30 % of each decode "
        "step — a split-K or a larger grid would use the idle SMs",
        "`moe_slot_gemv_kernel`: est. achieved occupancy 23 % (128 threads per block, 64 "
        "registers per thread), on CUDA cores (a GEMV) for 20 % of each decode step — the whole "
        "grid (400 blocks, 4.0 per SM) is resident at once and still leaves most warp slots "
        "empty: a larger grid (split the work finer) would hide memory latency; the MoE GEMM "
        "has tensor-core kernels (a grouped GEMM: cutlass, Marlin, DeepGEMM, FlashInfer's "
        "MXFP4/NVFP4 MoE)",
        "`heavy_kernel`: est. achieved occupancy 12 % (256 threads per block, 255 registers per "
        "thread, 39 KiB shared memory) for 10 % of each decode step — too few warps per SM to "
        "hide memory latency: fewer registers or less shared memory per block would let more "
        "blocks share an SM",
        "`reduce_kernel`: 1 block on 100 SMs (1.0 % of the GPU) for 10 % of each decode step — "
        "a split-K or a larger grid would use the idle SMs",
    ]
    fam = {f["family"]: f for f in s["families"]}
    # dense GEMM: 80 % coverage; its occupancy was never estimated -> none for the family
    assert fam["dense_gemm"]["launch"] == {"sm_coverage": 0.8, "occupancy_pct": None,
                                           "measured_share": 1.0}


def test_sm_count_from_blocks_per_sm_then_the_table_then_not_in_this_trace(
        tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    s = tp.parse_traces([known(tmp_path / "a", props=None, bps=True)])
    assert s["launch"]["sms"] == 100 and "blocks per SM" in s["launch"]["sms_source"]
    s = tp.parse_traces([known(tmp_path / "b", props={"id": 0, "name": "NVIDIA H100 PCIe"})])
    assert s["launch"]["sms"] == 114 and s["launch"]["sms_source"].startswith("table: ")
    assert by_name(s)["small_grid_kernel"]["launch"]["sm_coverage"] == pytest.approx(25 / 114,
                                                                                      abs=1e-4)
    s = tp.parse_traces([known(tmp_path / "c", props={"id": 0, "name": "Mystery GPU"})])
    launch = by_name(s)["small_grid_kernel"]["launch"]
    assert launch["blocks"] == 25 and launch["sm_coverage"] is None and launch["waves"] is None
    assert s["launch"]["sms"] is None and "not in this trace" in s["launch"]["note"]
    assert launch_cells(by_name(s)["small_grid_kernel"])[1] == "-"
    assert all("blocks on" not in f["text"] for f in s["launch"]["findings"])


def test_a_trace_without_launch_fields_says_so(tmp_path: Path) -> None:
    path = write(tmp_path / "bare.trace.json.gz",
                 [kern("_tiled_sparse_decode_kernel", 0, 400, None),
                  kern("_mxfp4_slot_gemv_kernel", 500, 400, None)], PROPS)
    # malformed fields count as none: a grid of strings, a negative block
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["traceEvents"][1]["args"].update({"grid": ["64", 1, 1], "block": [128, 1, 1]})
    doc["traceEvents"][2]["args"].update({"grid": [64, 1, 1], "block": [-128, 1, 1]})
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    s = tp.parse_traces([path])
    tp.attribute_tensor_cores(s, None)
    assert all(k["launch"] is None for k in s["kernels"])
    assert launch_cells(s["kernels"][0]) == ("-", "-", "-")
    assert s["launch"]["fields_share"] == 0.0
    lines = launch_lines(s)
    assert lines == ["launch: grid, block and occupancy are not in this trace (the profiler "
                     "recorded no launch fields)"]
    # the GEMV on CUDA cores is still a finding: its name says so, no grid needed
    assert [f["issues"] for f in s["launch"]["findings"]] == [["cuda_cores"]]
    # a capture stored before dsv4tui read launch fields
    old = {k: v for k, v in s.items() if k != "launch"}
    assert launch_lines(old) == ["launch fields: " + NOT_IN_CAPTURE]


def test_real_h200_trace_grids() -> None:
    """The real grids torch 2.11 recorded on the H200 (132 SMs)."""
    s = tp.parse_traces([str(H200)], top=100)
    tp.attribute_tensor_cores(s, None)
    assert s["launch"]["sms"] == 132 and s["launch"]["fields_share"] == 1.0
    k = by_name(s)
    gemv = k["_fp32_slot_gemv_kernel"]["launch"]
    assert gemv["grid"] == [16, 32, 1] and gemv["blocks"] == 512 and gemv["threads"] == 128
    assert gemv["waves"] == pytest.approx(3.879, abs=1e-3) and gemv["sm_coverage"] == 1.0
    assert gemv["occupancy_pct"] == 24.0 and gemv["registers"] == 96
    sdpa = next(x for x in s["kernels"] if "sdpa" in x["name"])["launch"]
    assert sdpa["grid"] == [1, 32, 16] and sdpa["shared_memory"] == 86336
    assert sdpa["occupancy_pct"] is None  # 84 KiB of opt-in shared memory: not estimated
    nvjet = k["nvjet_sm90_tst_128x16_64x11_4x1_v_bz_NNT"]["launch"]
    assert nvjet["blocks"] == 96 and nvjet["sm_coverage"] == pytest.approx(96 / 132, abs=1e-4)
    found = s["launch"]["findings"]
    assert [f["short_name"] for f in found] == ["_fp32_slot_gemv_kernel",
                                                "at::native::reduce_kernel"]
    assert found[0]["issues"] == ["occupancy", "cuda_cores"]
    assert found[1]["text"].startswith("`at::native::reduce_kernel`: 1 block on 132 SMs "
                                       "(0.8 % of the GPU) for 6.7 % of each decode step")


@pytest.mark.parametrize("backend, checkpoint, first, moe_blocks", [
    ("triton", "MXFP4", "`_mxfp4_slot_gemv_kernel`: 48 blocks on 188 SMs (26 % of the GPU), "
     "on CUDA cores (a GEMV) for 39 % of each decode step", 48),
    ("marlin", "NVFP4", "`_tiled_sparse_decode_kernel`: 64 blocks on 188 SMs (34 % of the "
     "GPU) for 43 % of each decode step — a split-K or a larger grid would use the idle SMs",
     188),
    ("triton", "NVFP4", "`_tiled_sparse_decode_kernel`: 64 blocks on 188 SMs (34 % of the "
     "GPU) for 46 % of each decode step", 188),
])
def test_simulator_traces_carry_the_seed_shape(tmp_path: Path, backend: str, checkpoint: str,
                                               first: str, moe_blocks: int) -> None:
    write_trace(str(tmp_path), backend, checkpoint, 5, tp_size=2, step_s=0.5, seed=3)
    s = tp.parse_traces([str(tmp_path)])
    tp.attribute_tensor_cores(s, 0.8 if checkpoint == "MXFP4" else 30.0, "simulated", 97.0)
    found = s["launch"]["findings"]
    assert found[0]["text"].startswith(first)
    attn = by_name(s)["_tiled_sparse_decode_kernel"]["launch"]
    assert attn["blocks"] == 64 and attn["sm_coverage"] == pytest.approx(64 / 188, abs=1e-4)
    moe = next(k for k in s["kernels"] if k["family"] == "moe_gemm")["launch"]
    assert moe["blocks"] == moe_blocks
    if checkpoint == "MXFP4":  # attention is the second finding, the GEMV the first
        assert [f["short_name"] for f in found] == ["_mxfp4_slot_gemv_kernel",
                                                    "_tiled_sparse_decode_kernel"]
    else:  # marlin's and cutlass's GEMMs fill the GPU: only the attention is a finding
        assert moe["sm_coverage"] == 1.0 and len(found) == 1


def test_simulated_h200_has_132_sms(tmp_path: Path) -> None:
    write_trace(str(tmp_path), "triton", "MXFP4", 3, step_s=0.5, seed=1, gpu_name="NVIDIA H200")
    s = tp.parse_traces([str(tmp_path)])
    assert s["launch"]["sms"] == 132
    attn = next(f for f in s["launch"]["findings"]
                if f["short_name"] == "_tiled_sparse_decode_kernel")
    assert "64 blocks on 132 SMs (48 % of the GPU)" in attn["text"]


def test_cli_text_json_show_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert main(["kernels", "--trace", str(H200)]) == 0
    text = capsys.readouterr().out
    assert "blocks  SMs   occ  kernel" in text
    assert "launch: 132 SMs from the trace (deviceProperties numSms)" in text
    assert "1. `_fp32_slot_gemv_kernel`: est. achieved occupancy 24 %" in text
    assert main(["kernels", "--trace", str(H200), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)["summary"]
    assert js["launch"]["sms"] == 132 and js["kernels"][1]["launch"]["blocks"] == 512
    write_trace(str(tmp_path / "a"), "triton", "MXFP4", 4, step_s=0.5, seed=2)
    a = tp.parse_traces([str(tmp_path / "a")])
    tp.attribute_tensor_cores(a, 0.8, "simulated", 97.0)
    old = {k: v for k, v in tp.parse_traces([str(H200)]).items() if k != "launch"}
    with RunStore() as store:
        run_id = store.start_run(label="mxfp4-triton", host="demo", backend="triton",
                                 checkpoint="MXFP4", simulated=True)
        ca, _ = store_capture(store, a, ServerContext(host="demo"), run_id=run_id)
        cb, _ = store_capture(store, old, ServerContext(host="demo"), label="old")
        rep = report.build(store, [run_id])
    assert main(["kernels", "--show", str(ca), str(cb)]) == 0
    text = capsys.readouterr().out
    assert f"#{ca}: launch: 188 SMs" in text
    assert "1. `_mxfp4_slot_gemv_kernel`: 48 blocks on 188 SMs (26 % of the GPU)" in text
    assert f"#{cb}: launch fields: {NOT_IN_CAPTURE}" in text
    html = report.to_html(rep)
    assert "Kernels: what leaves the GPU idle" in html
    assert ("`_tiled_sparse_decode_kernel`: 64 blocks on 188 SMs (34 % of the GPU) for 38 % "
            "of each decode step") in html
    md, _ = report.to_markdown(rep, "r")
    assert "## Kernels: what leaves the GPU idle" in md and "64 blocks on 188 SMs" in md


H200_SYNTH = H200.with_name("h200_synthetic_steps.trace.json.gz")


def test_a_fresh_real_h200_trace_tells_simt_from_tensor_core_gemms() -> None:
    """benchmarks/device_repeats.sh's trace (torch 2.11, H200, 2026-12-02): a bf16 GEMM
    (nvjet, tensor cores), an fp32 GEMM with TF32 off (cuBLAS' SIMT gemmSN_NN_kernel, whose
    full name mentions cublasGemvTensorStridedBatched), a 64-row reduction and elementwise work.
    Before: the SIMT GEMM was flagged 'tensor cores' by its name, then 'a GEMV'."""
    s = tp.parse_traces([str(H200_SYNTH)], top=100)
    tp.attribute_tensor_cores(s, None)
    assert s["launch"]["sms"] == 132
    k = by_name(s)
    simt = k["gemmSN_NN_kernel"]
    assert simt["tensor_core_by_name"] is False
    assert simt["launch"]["blocks"] == 256 and simt["launch"]["occupancy_pct"] == 24.0
    assert k["nvjet_sm90_tst_64x16_64x16_2x1_v_bz_NNT"]["tensor_core_by_name"] is True
    [finding] = s["launch"]["findings"]
    assert finding["short_name"] == "gemmSN_NN_kernel"
    assert "on CUDA cores (a SIMT GEMM)" in finding["text"]
    assert "a dense GEMM has tensor-core kernels" in finding["text"]
