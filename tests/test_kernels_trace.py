"""Trace parsing: a real PyTorch-profiler trace (H200), hand-made traces with exact numbers,
the simulator's traces, kernel families and the tensor-core decision."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.kernels import trace_parse as tp
from dsv4tui.sim.trace import write_trace

DATA = Path(__file__).parent / "data" / "traces"
H200 = DATA / "h200_torch_profiler-TP-0.trace.json.gz"


# --- hand-made traces ----------------------------------------------------------------------


def kernel(name: str, ts: float, dur: float, corr: int, *, cat: str = "kernel",
           stream: int = 7, pid: int = 0) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": stream, "ts": ts, "dur": dur,
            "args": {"External id": corr, "device": pid, "stream": stream, "correlation": corr,
                     "grid": [1, 1, 1], "block": [128, 1, 1]}}


def noise(ts: float) -> list[dict[str, Any]]:
    """CPU ops, runtime calls, python functions, flows, metadata: never kernel time."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 77, "tid": 77, "ts": ts,
         "dur": 5000.0, "args": {"External id": 1}},
        {"ph": "X", "cat": "python_function", "name": "forward", "pid": 77, "tid": 77, "ts": ts,
         "dur": 9000.0},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 77, "tid": 77,
         "ts": ts, "dur": 4000.0, "args": {"correlation": 999999}},
        {"ph": "s", "id": 5, "pid": 77, "tid": 77, "ts": ts, "cat": "ac2g", "name": "ac2g"},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": 77, "tid": 77, "ts": ts,
         "s": "g"},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 77, "tid": 77,
         "ts": ts, "dur": 1e6},
    ]


def write(path: Path, events: list[dict[str, Any]], *, gz: bool = True,
          bare: bool = False, **top: Any) -> Path:
    doc: Any = events if bare else {"schemaVersion": 1, **top, "traceEvents": events,
                                    "traceName": str(path)}
    text = json.dumps(doc, indent=1)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def two_steps() -> list[dict[str, Any]]:
    """One EXTEND step and one DECODE step, with GPU-side step annotations.

    decode: gemv 3 x 100 us, attention 2 x 50 us, nccl 1 x 40 us, memcpy 1 x 10 us -> 450 us
    extend: gemv 1 x 400 us, attention 1 x 100 us -> 500 us
    """
    ev = noise(0.0)
    ev += [
        {"ph": "X", "cat": "gpu_user_annotation", "name": "step[EXTEND bs=1 toks=64]", "pid": 0,
         "tid": 7, "ts": 1000.0, "dur": 600.0},
        kernel("_mxfp4_slot_gemv_kernel", 1000.0, 400.0, 1),
        kernel("_tiled_sparse_decode_kernel", 1450.0, 100.0, 2),
        {"ph": "X", "cat": "gpu_user_annotation", "name": "step[DECODE bs=16]", "pid": 0,
         "tid": 7, "ts": 2000.0, "dur": 700.0},
        kernel("_mxfp4_slot_gemv_kernel", 2000.0, 100.0, 3),
        kernel("_mxfp4_slot_gemv_kernel", 2150.0, 100.0, 4),
        kernel("_mxfp4_slot_gemv_kernel", 2300.0, 100.0, 5),
        kernel("_tiled_sparse_decode_kernel", 2420.0, 50.0, 6),
        kernel("_tiled_sparse_decode_kernel", 2480.0, 50.0, 7),
        kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
               2540.0, 40.0, 8, stream=24),
        kernel("Memcpy DtoH (Device -> Pinned)", 2600.0, 10.0, 9, cat="gpu_memcpy"),
    ]
    return ev


def test_hand_made_trace_exact_numbers(tmp_path: Path) -> None:
    path = write(tmp_path / "123.4-TP-0.trace.json.gz", two_steps(),
                 deviceProperties=[{"id": 0, "name": "NVIDIA H200"}],
                 baseTimeNanoseconds=1_700_000_000_000_000_000)
    s = tp.parse_traces([str(path)])
    assert s["basis"] == "decode"
    assert s["device"] == "NVIDIA H200"
    assert s["gpu_time_ms"] == {"total": 0.95, "decode": 0.45, "prefill": 0.5}
    by = {k["short_name"]: k for k in s["kernels"]}
    gemv = by["_mxfp4_slot_gemv_kernel"]
    assert (gemv["calls"], gemv["total_us"], gemv["mean_us"]) == (3, 300.0, 100.0)
    assert gemv["share"] == pytest.approx(300 / 450)
    assert gemv["all_stages_us"] == 700.0 and gemv["max_us"] == 400.0 and gemv["min_us"] == 100.0
    attn = by["_tiled_sparse_decode_kernel"]
    assert (attn["calls"], attn["total_us"], attn["mean_us"]) == (2, 100.0, 50.0)
    assert by["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]["family"] == "communication"
    assert by["Memcpy DtoH"]["kind"] == "memcpy" and by["Memcpy DtoH"]["family"] == "memory"
    assert sum(k["share"] for k in s["kernels"]) == pytest.approx(1.0)
    fam = {f["family"]: f for f in s["families"]}
    assert fam["moe_gemm"]["share"] == pytest.approx(300 / 450)
    assert fam["attention"]["share"] == pytest.approx(100 / 450)
    assert [f["family"] for f in s["families"]][:2] == ["moe_gemm", "attention"]
    assert s["steps"]["decode"]["count"] == 1 and s["steps"]["decode"]["mean_ms"] == 0.7
    assert s["steps"]["prefill"]["count"] == 1
    # the GPU window: first kernel start (1000 us) to last end (2610 us) after the base time
    assert s["window_ms"] == pytest.approx(1.61)
    assert s["window_unix"] == pytest.approx([1_700_000_000.001, 1_700_000_000.00261])


def test_cpu_annotation_and_correlation_fallback(tmp_path: Path) -> None:
    """No GPU-side annotations: kernels are placed by their launch inside the CPU step span."""
    ev = [e for e in two_steps() if e.get("cat") != "gpu_user_annotation"]
    ev += [{"ph": "X", "cat": "user_annotation", "name": "step[EXTEND bs=1 toks=64]", "pid": 77,
            "tid": 77, "ts": 100.0, "dur": 100.0},
           {"ph": "X", "cat": "user_annotation", "name": "step[DECODE bs=16]", "pid": 77,
            "tid": 77, "ts": 300.0, "dur": 100.0}]
    for corr in range(1, 10):  # launches: 1, 2 in the EXTEND span; 3..9 in the DECODE span
        ts = 110.0 + corr if corr <= 2 else 310.0 + corr
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77,
                   "tid": 77, "ts": ts, "dur": 3.0, "args": {"correlation": corr}})
    s = tp.parse_traces([str(write(tmp_path / "x-TP-0.trace.json.gz", ev))])
    assert s["files"][0]["step_source"] == "cpu_annotation"
    assert s["gpu_time_ms"]["decode"] == 0.45 and s["gpu_time_ms"]["prefill"] == 0.5


def test_stage_from_file_name_bare_array_and_plain_json(tmp_path: Path) -> None:
    ev = [e for e in two_steps() if e.get("cat") != "gpu_user_annotation"]
    path = write(tmp_path / "99.1-TP-3-decode.trace.json", ev, gz=False, bare=True)
    s = tp.parse_traces([str(path)])
    assert s["files"][0]["rank"] == 3 and s["files"][0]["step_source"] == "file_name"
    assert s["basis"] == "decode" and s["gpu_time_ms"]["decode"] == 0.95


def test_no_step_markers_means_all_gpu_time(tmp_path: Path) -> None:
    ev = [e for e in two_steps() if e.get("cat") != "gpu_user_annotation"]
    s = tp.parse_traces([str(write(tmp_path / "t.trace.json.gz", ev))])
    assert s["basis"] == "all" and "no decode steps" in s["basis_note"]
    gemv = next(k for k in s["kernels"] if k["short_name"] == "_mxfp4_slot_gemv_kernel")
    assert gemv["calls"] == 4 and gemv["share"] == pytest.approx(700 / 950)


def test_streaming_reader_across_tiny_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    path = write(tmp_path / "a-TP-0.trace.json.gz", two_steps(),
                 deviceProperties=[{"id": 0, "name": "NVIDIA H200"}])
    whole = tp.parse_traces([str(path)])
    monkeypatch.setattr(tp, "READ_CHUNK", 7)
    assert tp.parse_traces([str(path)]) == whole


def test_directories_ranks_and_rank_filter(tmp_path: Path) -> None:
    for r in range(2):
        write(tmp_path / f"5.5-TP-{r}.trace.json.gz", two_steps())
    (tmp_path / "notes.txt").write_text("not a trace")
    s = tp.parse_traces([str(tmp_path)])
    assert s["ranks"] == 2 and s["gpu_time_ms"]["decode"] == 0.9
    only = tp.parse_traces([str(tmp_path)], ranks=[1])
    assert [f["rank"] for f in only["files"]] == [1]


@pytest.mark.parametrize("content, why", [
    (b"", "not a Chrome trace"),
    (b"hello", "not a Chrome trace"),
    (b'{"traceEvents": [{"ph": "X"', "not valid JSON"),
    (b'{"schemaVersion": 1}', "no traceEvents"),
])
def test_bad_traces_raise_one_line(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "bad.trace.json"
    path.write_bytes(content)
    with pytest.raises(tp.TraceError, match=why):
        tp.parse_traces([str(path)])


def test_truncated_gzip_and_missing(tmp_path: Path) -> None:
    path = write(tmp_path / "t.trace.json.gz", two_steps())
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(tp.TraceError, match="truncated or corrupt"):
        tp.parse_traces([str(path)])
    with pytest.raises(tp.TraceError, match="cannot read"):
        tp.parse_traces([str(tmp_path / "missing.trace.json.gz")])
    with pytest.raises(tp.TraceError, match="no trace files"):
        tp.parse_traces([str(tmp_path / "empty-dir")] if (tmp_path / "empty-dir").mkdir()
                        is None else [])


# --- a real PyTorch profiler trace ---------------------------------------------------------


def test_real_h200_torch_profiler_trace() -> None:
    """tests/data/traces/torch_standin.py on an H200 (torch 2.11, CUDA 13): 8 decode steps of
    bs 16 under record_function("step[DECODE bs=16]"), as SGLang's model runner marks them."""
    s = tp.parse_traces([str(H200)], top=100)
    f0 = s["files"][0]
    assert f0["rank"] == 0 and f0["step_source"] == "gpu_annotation"
    # 176 kernels + 8 memcpys; the 520 cpu_ops, 249 runtime/driver calls, flows etc. are not
    assert f0["gpu_events"] == 184 and f0["events"] > 1200
    assert s["device"] == "NVIDIA H200"
    assert s["basis"] == "decode" and s["steps"]["decode"]["count"] == 8
    assert s["steps"]["decode"]["mean_bs"] == 16
    assert s["steps"]["prefill"]["count"] == 0
    assert s["gpu_time_ms"]["decode"] == s["gpu_time_ms"]["total"]
    by = {k["short_name"]: k for k in s["kernels"]}
    gemv = by["_fp32_slot_gemv_kernel"]
    assert gemv["calls"] == 8 and gemv["family"] == "moe_gemm"
    assert gemv["tensor_core_by_name"] is False
    sdpa = next(k for k in s["kernels"] if "sdpa" in k["name"] and "flash" in k["name"])
    assert sdpa["family"] == "attention" and sdpa["tensor_core_by_name"] is True
    nvjet = [k for k in s["kernels"] if k["name"].startswith("nvjet_")]
    assert nvjet and all(k["family"] == "dense_gemm" and k["tensor_core_by_name"] for k in nvjet)
    assert sum(k["share"] for k in s["kernels"]) == pytest.approx(1.0, abs=1e-4)
    assert {f["family"] for f in s["families"]} >= {"moe_gemm", "attention", "dense_gemm",
                                                    "norm_elementwise", "memory"}
    # the trace carries its clock: the window is in epoch seconds (2026-11-30 here)
    assert 1.79e9 < s["window_unix"][0] < s["window_unix"][1] < 1.80e9


# --- names -> families, tensor cores -------------------------------------------------------


@pytest.mark.parametrize("name, family, tc", [
    ("_mxfp4_slot_gemv_kernel", "moe_gemm", False),
    ("_tiled_sparse_decode_kernel", "attention", None),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
     "GroupProblemShape<cute::tuple<int, int, int> > > >(Params)", "moe_gemm", True),
    ("void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 256>(int4 const*)", "moe_gemm", True),
    ("fused_moe_kernel", "moe_gemm", None),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "communication", False),
    ("void cross_device_reduce_1stage<__nv_bfloat16, 8>(RankData*, RankSignals, Signal*, "
     "__nv_bfloat16*, int, int)", "communication", False),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(float)",
     "norm_elementwise", False),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>(float*)",
     "norm_elementwise", False),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<true>(Params)", "attention", None),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128> >(Params)",
     "attention", True),
    ("nvjet_tst_128x64_64x8_2x1_v_bz_TNN", "dense_gemm", True),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", "dense_gemm", True),
    ("ampere_sgemm_128x64_nn", "dense_gemm", False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)",
     "norm_elementwise", False),
    ("void sglang::moe_align_block_size_kernel<int>(int const*)", "moe_routing", False),
    ("moe_fused_gate_kernel", "moe_routing", False),
    ("_sparse_indexer_topk_kernel", "attention", False),
    ("some_unknown_kernel_name", "other", None),
])
def test_families_and_tensor_core_names(name: str, family: str, tc: bool | None) -> None:
    assert tp.kernel_family(name) == family
    assert tp.tensor_core_by_name(name) is tc


def test_short_names() -> None:
    assert tp.short_name("void at::native::(anonymous namespace)::reduce_kernel<512, 1>(int)") \
        == "at::native::reduce_kernel"
    assert tp.short_name("Memcpy DtoH (Device -> Pageable)") == "Memcpy DtoH"
    assert tp.short_name("x" * 200).endswith("…") and len(tp.short_name("x" * 200)) == 80


# --- tensor cores: names + telemetry -------------------------------------------------------


def _summary_for_attribution() -> dict[str, Any]:
    """Families as in the campaign's MXFP4/triton profile: 39 % MoE GEMV, 38 % attention,
    6 % dense GEMM (of 1 s of kernel time in all stages)."""
    fams = [("moe_gemm", "MoE GEMM", 0.39, False), ("attention", "attention", 0.38, None),
            ("dense_gemm", "dense GEMM", 0.06, True), ("communication", "comm", 0.07, False),
            ("norm_elementwise", "norm", 0.10, False)]
    return {"window_ms": 1000.0, "files": [{}], "families": [
        {"family": k, "label": lab, "share": sh, "total_us": sh * 1e6, "all_stages_us": sh * 1e6,
         "tensor_core_by_name": tc, "tensor_cores": tc} for k, lab, sh, tc in fams]}


def test_attribution_campaign_case() -> None:
    s = _summary_for_attribution()
    d = tp.attribute_tensor_cores(s, 0.8, "nvml", busy_pct=98.0)
    f = {x["family"]: x for x in s["families"]}
    # MoE: 0.8 / (0.39 * 0.98) = 2.09 % at most -> CUDA cores, by the counters
    assert f["moe_gemm"]["tensor_bound_pct"] == pytest.approx(0.8 / (0.39 * 0.98), abs=0.01)
    assert (f["moe_gemm"]["tensor_cores"], f["moe_gemm"]["tensor_basis"]) == (False, "telemetry")
    # attention: the name cannot tell; 0.8 / (0.38 * 0.98) = 2.15 % -> CUDA cores
    assert (f["attention"]["tensor_cores"], f["attention"]["tensor_basis"]) == (False, "telemetry")
    # dense GEMM: 0.8 / (0.06 * 0.98) = 13.6 % possible -> its tensor-core name stands
    assert (f["dense_gemm"]["tensor_cores"], f["dense_gemm"]["tensor_basis"]) == \
        (True, "name+telemetry")
    # communication: 0.8 / (0.07 * 0.98) = 11.7 % possible -> the CUDA-core name decides
    assert (f["communication"]["tensor_cores"], f["communication"]["tensor_basis"]) == \
        (False, "name")
    assert d["method"] == "name+telemetry" and d["busy_pct"] == 98.0


def test_attribution_tensor_core_backend_and_no_telemetry() -> None:
    s = _summary_for_attribution()
    tp.attribute_tensor_cores(s, 46.0, "simulated", busy_pct=96.0)
    f = {x["family"]: x for x in s["families"]}
    assert f["attention"]["tensor_cores"] is None and f["attention"]["tensor_basis"] == "unknown"
    assert f["moe_gemm"]["tensor_cores"] is False and f["moe_gemm"]["tensor_basis"] == "name"
    s = _summary_for_attribution()
    d = tp.attribute_tensor_cores(s, None)
    assert d["method"] == "name"
    assert [x["tensor_cores"] for x in s["families"]] == [False, None, True, False, False]
    s = _summary_for_attribution()  # an idle window says little, and says so
    d = tp.attribute_tensor_cores(s, 0.1, "nvml", busy_pct=3.0)
    assert "busy only 3 %" in d["note"]
    assert {x["family"]: x["tensor_basis"] for x in s["families"]}["dense_gemm"] == \
        "name+telemetry"


# --- the simulator's traces -----------------------------------------------------------------


@pytest.mark.parametrize("backend, checkpoint, moe_kernel, moe_share, moe_tc", [
    ("triton", "MXFP4", "_mxfp4_slot_gemv_kernel", 0.39, False),
    ("triton", "NVFP4", "cutlass::device_kernel", 0.225, True),
    ("marlin", "NVFP4", "marlin_moe_wna16::Marlin", 0.27, True),
])
def test_sim_trace_follows_backend(tmp_path: Path, backend: str, checkpoint: str,
                                   moe_kernel: str, moe_share: float, moe_tc: bool) -> None:
    paths = write_trace(str(tmp_path), backend, checkpoint, 5, tp_size=4, batch=16,
                        step_s=0.5, profile_id="1700000000.5", seed=3)
    assert [Path(p).name for p in paths] == [f"1700000000.5-TP-{r}.trace.json.gz"
                                             for r in range(4)]
    assert not list(tmp_path.glob("*.tmp"))
    s = tp.parse_traces([str(tmp_path)])
    assert s["ranks"] == 4 and s["basis"] == "decode"
    assert s["steps"]["decode"]["count"] == 16 and s["steps"]["prefill"]["count"] == 4
    assert s["steps"]["decode"]["interval_ms"] == pytest.approx(500, rel=0.01)
    assert s["steps"]["decode"]["tok_s"] == pytest.approx(32, rel=0.01)
    top = s["kernels"][0] if s["kernels"][0]["family"] == "moe_gemm" else next(
        k for k in s["kernels"] if k["family"] == "moe_gemm")
    assert moe_kernel in top["short_name"]
    assert top["share"] == pytest.approx(moe_share, abs=0.02)
    assert top["tensor_core_by_name"] is moe_tc
    attn = next(k for k in s["kernels"] if k["short_name"] == "_tiled_sparse_decode_kernel")
    if checkpoint == "MXFP4":
        assert attn["share"] == pytest.approx(0.38, abs=0.02)
    else:  # the MoE got faster: attention is the bottleneck now
        assert s["families"][0]["family"] == "attention"
    fam = {f["family"] for f in s["families"]}
    assert {"communication", "norm_elementwise", "dense_gemm", "moe_routing"} <= fam
