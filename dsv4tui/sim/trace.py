"""The simulator's profiler: a small, plausible PyTorch-profiler trace per TP rank.

``write_trace`` writes ``{profile_id}-TP-{rank}.trace.json.gz`` files in the Chrome trace
format that ``torch.profiler`` exports for SGLang's ``/start_profile``: GPU kernels
(``cat: "kernel"``, ``args.stream``/``device``/``correlation``), the CUDA runtime launches,
CPU ops, SGLang's ``step[DECODE bs=N]`` annotations on both sides, and flow events.

The kernel mix follows the backend and checkpoint, as the campaign measured it
(shared/reference/sglang.md): MXFP4 on ``triton`` spends ~39 % of decode in
``_mxfp4_slot_gemv_kernel`` and ~38 % in ``_tiled_sparse_decode_kernel``; NVFP4 on ``triton``
runs the cutlass FP4 grouped GEMM and attention becomes the largest part; ``marlin`` runs
Marlin MoE kernels. Each kernel carries a launch shape (``LAUNCH``: the sparse-decode attention
at 64 blocks, the MXFP4 slot GEMV at a small grid, Marlin's and cutlass's GEMMs filling the
GPU) with Kineto's occupancy estimate. Only 8 representative layers are written per step (the
step's time is spread over them), so a file stays small. Nothing in these files was measured.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

LAYERS = 8  # representative layers per step (DeepSeek-V4 has many more)
BUSY_FRACTION = 0.93  # GPU busy share of a decode step (launch gaps, scheduler)

NORM = "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"
DENSE = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"
LM_HEAD = "nvjet_tst_128x64_64x8_2x1_v_bz_TNN"
ATTN_MXFP4 = "_tiled_sparse_decode_kernel"
ATTN_PREFILL = "_tiled_sparse_prefill_kernel"
INDEXER = "_sparse_indexer_topk_kernel"
KV_STORE = "void sglang::store_kv_cache_kernel<__nv_fp8_e4m3, 256>(__nv_fp8_e4m3*, __nv_bfloat16 const*, long const*, int)"
ROPE = "void sglang::rotary_embedding_kernel<__nv_bfloat16, true>(long const*, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16 const*, int, long, long, int, int, int)"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GATE = "moe_fused_gate_kernel"
ALIGN = "void sglang::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, unsigned long, int*)"
ACT = "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, __nv_bfloat16 const*, int)"
SLOT_GEMV = "_mxfp4_slot_gemv_kernel"
CUTLASS_FP4 = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::"
               "GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::"
               "CollectiveMma<cutlass::gemm::MainloopSm120TmaWarpSpecializedBlockScaled<3, 2, "
               "cute::tuple<int, int, int> >, cute::tuple<cute::C<128>, cute::C<128>, "
               "cute::C<128> >, cutlass::nv_float4_t<cutlass::float_e2m1_t> > > >"
               "(cutlass_fp4_group_mm::Params)")
FP4_QUANT = "void scaled_fp4_experts_quant_kernel<__nv_bfloat16, false>(int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, int const*, int const*)"
MARLIN = ("void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 256, 1, 8, 8, true, 4, 128, "
          "false>(int4 const*, int4 const*, int4*, int4*, int4 const*, int4 const*, "
          "int const*, int const*, int const*, float const*, int, bool, int, int, int, int, "
          "int, int, bool, bool, bool, int)")
FUSED_MOE = "fused_moe_kernel"
SAMPLING = "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)0, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>(float*, int*, int*, float*, int*, float*, float*, unsigned int, unsigned long, unsigned long)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)"
MEMCPY = "Memcpy DtoH (Device -> Pinned)"

# Launch shapes: name -> (grid, block threads, registers per thread, shared memory bytes). A grid
# of "sms" is one block per SM (persistent GEMMs: Marlin, cutlass, cuBLAS), "2sms" two, "bs"
# one per running request; a number is that many blocks. The campaign's shape: the Triton
# sparse-decode attention at 64 blocks and the MXFP4 slot GEMV at a small grid leave most SMs
# idle; Marlin's and cutlass's GEMMs fill the GPU.
LAUNCH: dict[str, tuple[int | str, int, int, int]] = {
    NORM: ("bs", 512, 32, 0), DENSE: ("sms", 384, 168, 90_112),
    LM_HEAD: ("2sms", 384, 168, 90_112), ATTN_MXFP4: (64, 128, 128, 16_384),
    ATTN_PREFILL: (512, 128, 128, 32_768), INDEXER: ("bs", 256, 64, 8192),
    KV_STORE: ("bs", 256, 32, 0), ROPE: ("bs", 128, 40, 0), NCCL: (16, 512, 96, 0),
    GATE: ("bs", 256, 48, 1024), ALIGN: (1, 1024, 32, 4096), ACT: ("bs", 1024, 24, 0),
    SLOT_GEMV: (48, 128, 64, 512), CUTLASS_FP4: ("sms", 384, 168, 99_328),
    FP4_QUANT: ("sms", 512, 40, 0), MARLIN: ("sms", 256, 168, 98_304),
    FUSED_MOE: ("2sms", 256, 96, 49_152), SAMPLING: ("bs", 1024, 64, 33_792),
    ELEMENTWISE: (1, 128, 16, 0),
}


@dataclass(frozen=True)
class _Kernel:
    name: str
    share: float  # of the step's GPU time (all layers together)
    per_layer: int = 1  # calls per layer; 0: once per step
    stream: int = 7
    cat: str = "kernel"


def _mix(backend: str, checkpoint: str) -> list[_Kernel]:
    """The decode kernel mix (shares sum to 1) for a backend + checkpoint."""
    common_tail = [
        _Kernel(NORM, 0.030, 2), _Kernel(ROPE, 0.008), _Kernel(KV_STORE, 0.006),
        _Kernel(ACT, 0.010), _Kernel(GATE, 0.010), _Kernel(ALIGN, 0.008),
        _Kernel(SAMPLING, 0.004, 0), _Kernel(ELEMENTWISE, 0.003, 0),
        _Kernel(MEMCPY, 0.001, 0, cat="gpu_memcpy"),
    ]
    if "marlin" in backend:
        moe = [_Kernel(MARLIN, 0.270, 2)]
        attn, comm, dense, indexer = 0.430, 0.105, 0.085, 0.030
    elif checkpoint == "NVFP4" and backend not in ("flashinfer_mxfp4",):
        moe = [_Kernel(CUTLASS_FP4, 0.225, 2), _Kernel(FP4_QUANT, 0.020)]
        attn, comm, dense, indexer = 0.460, 0.110, 0.075, 0.030
    elif backend == "triton":  # MXFP4 on triton: the slot GEMV on CUDA cores
        moe = [_Kernel(SLOT_GEMV, 0.390, 2)]
        attn, comm, dense, indexer = 0.380, 0.080, 0.050, 0.020
    else:
        moe = [_Kernel(FUSED_MOE, 0.300, 2)]
        attn, comm, dense, indexer = 0.410, 0.095, 0.075, 0.040
    head = [_Kernel(DENSE, dense * 0.8, 2), _Kernel(LM_HEAD, dense * 0.2, 0),
            _Kernel(ATTN_MXFP4, attn), _Kernel(INDEXER, indexer),
            _Kernel(NCCL, comm, 2, stream=24)]
    kernels = head + moe + common_tail
    total = sum(k.share for k in kernels)
    return [_Kernel(k.name, k.share / total, k.per_layer, k.stream, k.cat) for k in kernels]


def default_step_s(backend: str, checkpoint: str, batch: int = 16) -> float:
    """A decode step's time at the campaign's C=16 speeds (16 tokens per step)."""
    try:
        from dsv4tui.sim.speed import MODELS
    except ImportError:  # pragma: no cover - the speed model ships with the simulator
        MODELS = {}
    model = MODELS.get((checkpoint, backend))
    tok_s = model.c16_tok_s if model is not None else 24.0
    return max(batch, 1) / tok_s


def _layer_order(mix: Sequence[_Kernel]) -> list[tuple[_Kernel, int]]:
    """Kernels in launch order for one layer: (kernel, call index within the layer)."""
    order = [NORM, DENSE, ROPE, KV_STORE, INDEXER, ATTN_MXFP4, DENSE, NCCL, NORM, GATE, ALIGN,
             FP4_QUANT, SLOT_GEMV, CUTLASS_FP4, MARLIN, FUSED_MOE, ACT, SLOT_GEMV, CUTLASS_FP4,
             MARLIN, FUSED_MOE, NCCL]
    by_name = {k.name: k for k in mix if k.per_layer > 0}
    seen: dict[str, int] = {}
    out = []
    for name in order:
        k = by_name.get(name)
        if k is None:
            continue
        i = seen.get(name, 0)
        if i >= k.per_layer:
            continue
        seen[name] = i + 1
        out.append((k, i))
    return out


def write_trace(output_dir: str, backend: str, checkpoint: str, num_steps: int | None,
                *, tp_size: int = 1, batch: int = 16, step_s: float | None = None,
                prefill_steps: int = 1, profile_id: str | None = None,
                gpu_name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                seed: int | None = None, start_time: float | None = None) -> list[str]:
    """Write one trace per TP rank for ``num_steps`` forward steps; the paths written.

    The first ``prefill_steps`` steps are EXTEND steps (a new request joined), the rest
    DECODE with ``batch`` running requests. ``step_s`` is a decode step's time (default: the
    campaign's C=16 speed for this backend). Files appear atomically (tmp + rename).
    """
    steps = max(1, int(num_steps or 5))
    prefill_steps = max(0, min(prefill_steps, steps - 1))
    step = step_s if step_s and step_s > 0 else default_step_s(backend, checkpoint, batch)
    profile_id = profile_id or repr(time.time())
    if start_time is None:  # the profiled steps end now
        start_time = time.time() - step * (steps + 1.6 * prefill_steps) - 0.05
    # Kineto writes ts in us relative to baseTimeNanoseconds (base + ts = wall clock).
    base_us = (int(start_time) - 86_400) * 1e6
    t0 = start_time * 1e6 - base_us
    os.makedirs(output_dir, exist_ok=True)
    mix = _mix(backend, checkpoint)
    gpu = _gpu_props(gpu_name)
    paths = []
    for rank in range(max(1, tp_size)):
        rng = random.Random((seed if seed is not None else int(start_time * 1e6)) * 131 + rank)
        events = _rank_events(rank, mix, steps, prefill_steps, step, batch, t0, rng, gpu)
        doc_head = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": rank, "name": gpu_name, "totalGlobalMem": 102_641_811_456,
                                  "computeMajor": gpu["cc"] // 10, "computeMinor": gpu["cc"] % 10,
                                  "maxThreadsPerBlock": 1024,
                                  "maxThreadsPerMultiprocessor": gpu["max_threads"],
                                  "numSms": gpu["sms"], "regsPerBlock": 65536,
                                  "regsPerMultiprocessor": 65536, "warpSize": 32,
                                  "sharedMemPerBlock": 49152,
                                  "sharedMemPerMultiprocessor": gpu["smem_sm"]}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": max(1, tp_size)},
            "record_shapes": 0, "with_stack": 0, "simulated": True,
            "trace_id": f"{rng.getrandbits(64):016X}",
        }
        path = os.path.join(output_dir, f"{profile_id}-TP-{rank}.trace.json.gz")
        tmp = path + ".tmp"
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=5) as fh:
            head = json.dumps(doc_head)[1:-1]
            fh.write("{\n  " + head + ',\n  "traceEvents": [\n')
            fh.write(",\n".join(json.dumps(ev, separators=(", ", ": ")) for ev in events))
            fh.write(f'\n  ],\n  "traceName": {json.dumps(path)},\n  "displayTimeUnit": "ms",\n'
                     f'  "baseTimeNanoseconds": {int(base_us) * 1000}\n}}\n')
        os.replace(tmp, path)
        paths.append(path)
    return paths


def _gpu_props(gpu_name: str) -> dict[str, int]:
    """What the CUDA runtime would report of the simulated GPU (SM count: the agent's table)."""
    from dsv4tui.agent.kernels.trace_parse import sm_count_by_name
    from dsv4tui.sim.speed import gpu_spec

    try:
        cc = gpu_spec(gpu_name).sm
    except ValueError:
        cc = 120
    sms = sm_count_by_name(gpu_name)[0] or 188
    # sm_120 (RTX PRO 6000): 1536 threads and 100 KiB shared memory per SM; sm_90/100: 2048
    # threads, 228 KiB.
    if cc >= 120:
        return {"cc": cc, "sms": sms, "max_threads": 1536, "smem_sm": 102_400, "max_blocks": 24}
    return {"cc": cc, "sms": sms, "max_threads": 2048, "smem_sm": 233_472, "max_blocks": 32}


def launch_args(name: str, batch: int, gpu: dict[str, int]) -> dict:
    """A kernel event's launch fields as torch.profiler writes them, with Kineto's estimate:
    blocks per SM = grid / SMs, capped by the resident blocks CUDA's occupancy calculator
    allows; occupancy = that x threads / max threads per SM; 0 for shared memory above the
    default 48 KiB (the calculator runs without the kernel's opt-in limit)."""
    grid_spec, threads, regs, smem = LAUNCH.get(name, (gpu["sms"], 256, 32, 0))
    if grid_spec == "sms":
        blocks = gpu["sms"]
    elif grid_spec == "2sms":
        blocks = 2 * gpu["sms"]
    elif grid_spec == "bs":
        blocks = max(1, batch)
    else:
        blocks = int(grid_spec)
    per_sm = blocks / gpu["sms"]
    if smem > 49152:
        occ = 0
    else:
        active = min(gpu["max_blocks"], gpu["max_threads"] // threads,
                     65536 // max(1, regs * threads), gpu["smem_sm"] // smem if smem else 99)
        occ = int(0.5 + 100.0 * min(active, per_sm) * threads / gpu["max_threads"])
    return {"registers per thread": regs, "shared memory": smem,
            "blocks per SM": round(per_sm, 6), "warps per SM": round(per_sm * threads / 32, 6),
            "grid": [blocks, 1, 1], "block": [threads, 1, 1], "est. achieved occupancy %": occ}


def _rank_events(rank: int, mix: list[_Kernel], steps: int, prefill_steps: int, step_s: float,
                 batch: int, t0: float, rng: random.Random, gpu: dict[str, int]) -> list[dict]:
    pid_cpu, tid = 1000 + rank, 1000 + rank
    step_us = step_s * 1e6
    busy_us = step_us * BUSY_FRACTION
    layer_order = _layer_order(mix)
    per_step = [k for k in mix if k.per_layer == 0]
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "ts": t0, "pid": rank, "tid": 0,
         "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": t0, "pid": rank, "tid": 0,
         "args": {"labels": f"GPU {rank}"}},
        {"name": "thread_name", "ph": "M", "ts": t0, "pid": pid_cpu, "tid": tid,
         "args": {"name": f"scheduler_TP{rank}"}},
    ]
    corr = 100_000 * (rank + 1)
    ext = 5000 * (rank + 1)
    t = t0 + 200.0
    for s in range(steps):
        prefill = s < prefill_steps
        scale = 2.6 if prefill else 1.0
        label = (f"step[EXTEND bs=1 toks={128 + rng.randrange(64)}]" if prefill
                 else f"step[DECODE bs={batch}]")
        cpu_start = t
        # CPU side: the step span, a few ops, one CUDA graph launch (decode) or launches.
        ext += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": label, "pid": pid_cpu,
                       "tid": tid, "ts": round(cpu_start, 3), "dur": 0.0,
                       "args": {"External id": ext, "Record function id": 0}})
        step_event = events[-1]
        gpu_t = cpu_start + 180.0 + rng.uniform(0, 40)
        gpu_start = gpu_t
        launch_ts = cpu_start + 20.0
        for layer in range(LAYERS):
            for k, _i in layer_order:
                dur = busy_us * k.share / (LAYERS * k.per_layer) * scale * rng.uniform(0.9, 1.1)
                name = ATTN_PREFILL if (prefill and k.name == ATTN_MXFP4) else k.name
                corr += 1
                events.extend(_launch(name, k, corr, ext, rank, pid_cpu, tid, launch_ts,
                                      gpu_t, dur, prefill, launch_args(name, batch, gpu)))
                launch_ts += 4.0 + rng.uniform(0, 2)
                gpu_t += dur + rng.uniform(1.0, 3.0)
            del layer
        for k in per_step:
            dur = busy_us * k.share * scale * rng.uniform(0.9, 1.1)
            corr += 1
            events.extend(_launch(k.name, k, corr, ext, rank, pid_cpu, tid, launch_ts, gpu_t,
                                  dur, prefill, launch_args(k.name, batch, gpu)))
            launch_ts += 4.0
            gpu_t += dur + rng.uniform(1.0, 3.0)
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": label, "pid": rank,
                       "tid": 7, "ts": round(gpu_start, 3), "dur": round(gpu_t - gpu_start, 3),
                       "args": {"External id": ext}})
        step_event["dur"] = round(max(launch_ts, gpu_t) - cpu_start, 3)
        t = cpu_start + (step_us * scale if prefill else step_us) + rng.uniform(-50, 50)
        t = max(t, gpu_t + 50.0)
    return events


def _launch(name: str, k: _Kernel, corr: int, ext: int, rank: int, pid_cpu: int, tid: int,
            launch_ts: float, gpu_ts: float, dur: float, prefill: bool,
            launch: dict) -> list[dict]:
    api = "cudaMemcpyAsync" if k.cat == "gpu_memcpy" else "cudaLaunchKernel"
    gpu_args: dict = {"External id": ext, "device": rank, "stream": k.stream,
                      "correlation": corr}
    if k.cat == "kernel":
        gpu_args.update(launch)
    else:
        gpu_args.update({"bytes": 64 if not prefill else 8, "memory bandwidth (GB/s)": 0.05})
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": api, "pid": pid_cpu, "tid": tid,
         "ts": round(launch_ts, 3), "dur": 3.1, "args": {"External id": ext,
                                                        "cbid": 211, "correlation": corr}},
        {"ph": "X", "cat": k.cat, "name": name, "pid": rank, "tid": k.stream,
         "ts": round(gpu_ts, 3), "dur": round(dur, 3), "args": gpu_args},
        {"ph": "s", "id": corr, "pid": pid_cpu, "tid": tid, "ts": round(launch_ts, 3),
         "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": corr, "pid": rank, "tid": k.stream, "ts": round(gpu_ts, 3),
         "cat": "ac2g", "name": "ac2g", "bp": "e"},
    ]
