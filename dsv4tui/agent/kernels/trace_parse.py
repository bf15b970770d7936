"""Read PyTorch-profiler Chrome traces (``*.trace.json.gz``) and say where the GPU time went.

What counts (docs/kernels.md):

* GPU activity only: complete events (``ph: "X"``) whose ``cat`` is ``kernel`` (or the older
  ``Kernel``), ``gpu_memcpy`` or ``gpu_memset``. CPU ops, CUDA runtime/driver calls, python
  functions, flow events and the ``gpu_user_annotation`` ranges are not kernels and are never
  added up (annotations span kernels; counting them would count the time twice).
* Stages: SGLang wraps every forward pass in ``record_function("step[DECODE bs=16]")`` (or
  ``step[EXTEND bs=1 toks=128]`` ...). A kernel belongs to the step whose GPU-side annotation
  contains its start, else the step whose CPU-side annotation contains the kernel's launch
  (matched by ``args.correlation``), else the stage in the file name (``-decode`` /
  ``-DECODE`` from ``profile_by_stage``), else "unknown".
* Shares are of the summed kernel durations (kernels on concurrent streams each count), over
  the decode steps when the trace marks any, else over all GPU time. Times are summed over
  every rank (file) parsed.
* Launches: each kernel's ``grid``, ``block``, registers, shared memory and the profiler's
  est. achieved occupancy, time-weighted over the same launches as its share; the share of
  the GPU's SMs a launch covers (SMs from ``deviceProperties``, else implied by ``blocks per
  SM``, else ``SM_COUNTS``); the findings (kernels that leave the GPU idle) ranked by the
  time they cost. A trace without these fields says "not in this trace".

Python >= 3.9, stdlib only. Traces are read as a stream (one event at a time), so a trace of
hundreds of MB never sits in memory as one JSON document.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset"}
STEP_RE = re.compile(r"^(draft )?step\[([A-Z_]+)(?:\s+bs=(\d+))?")
_RANK_RE = re.compile(r"-TP-(\d+)")
_STAGE_FILE_RE = re.compile(r"-(decode|DECODE|prefill|PREFILL|EXTEND|extend)(?=\.trace\.json|\.json)")

DECODE_MODES = ("DECODE", "TARGET_VERIFY")
PREFILL_MODES = ("EXTEND", "PREFILL", "MIXED", "DRAFT_EXTEND", "DRAFT_EXTEND_V2", "SPLIT_PREFILL")

# Family key -> label, in display order.
FAMILY_LABELS = (
    ("moe_gemm", "MoE GEMM"),
    ("attention", "attention"),
    ("dense_gemm", "dense GEMM"),
    ("norm_elementwise", "norm / elementwise"),
    ("communication", "communication"),
    ("moe_routing", "MoE routing"),
    ("memory", "memcpy / memset"),
    ("other", "other"),
)

# Ordered (family, name fragments): the first family with a fragment in the lower-cased kernel
# name wins. Order matters: flashinfer's norm and sampling kernels before "flash" attention,
# MoE routing before "moe", the MoE slot GEMV before plain gemv.
_FAMILY_RULES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("communication", ("nccl", "all_reduce", "allreduce", "all_gather", "allgather",
                       "reduce_scatter", "reducescatter", "all_to_all", "alltoall",
                       "cross_device_reduce", "custom_ar", "one_shot", "two_shot", "lamport",
                       "mscclpp", "deepep", "deep_ep", "nvshmem", "moe_a2a", "pplx")),
    ("norm_elementwise", ("sampling", "rmsnorm", "rms_norm", "layernorm", "layer_norm",
                          "norm::", "normkernel", "act_and_mul", "silu_and_mul",
                          "gelu_and_mul", "activation::")),
    ("attention", ("indexer", "sparse_decode", "sparse_prefill", "mqa_logits", "flashmla")),
    ("moe_routing", ("topk", "top_k", "moe_align", "align_block_size", "count_and_sort",
                     "moe_sum", "router", "gating", "grouped_topk", "sort_tokens", "permute",
                     "expert_ids", "moe_fused_gate", "routing")),
    ("moe_gemm", ("moe", "expert", "group_mm", "grouped_gemm", "groupgemm", "gemm_grouped",
                  "groupedgemm", "grouped_mm", "slot_gemv", "megamoe", "masked_m")),
    ("attention", ("attn", "attention", "flash", "fmha", "mla", "paged", "sparse_decode",
                   "decode_kernel", "kvcache", "kv_cache", "kv_buffer", "indexer",
                   "batchdecode", "batchprefill", "_fwd_kernel", "merge_state",
                   "sparse_prefill")),
    ("dense_gemm", ("gemm", "gemv", "matmul", "xmma", "cutlass", "nvjet", "cublas", "wgmma",
                    "s16816", "h16816", "s1688", "h1688", "sm90_", "sm80_", "sm100_",
                    "sm120_", "ampere_", "hopper_", "marlin", "splitk", "deep_gemm",
                    "fp8_blockwise", "_mm_kernel")),
    ("norm_elementwise", ("norm", "elementwise", "silu", "gelu", "swiglu", "rotary", "rope",
                          "softmax", "reduce", "copy", "fill", "cat", "index", "scatter",
                          "gather", "quant", "cast", "add", "mul", "triton_poi", "triton_red",
                          "triton_per", "unrolled", "vectorized", "where", "clamp",
                          "embedding", "argmax", "sigmoid", "exp", "pow", "sort", "sum",
                          "arange", "compare", "max", "min")),
)

_GROUPED_HINTS = ("groupproblemshape", "grouped", "group_mm", "groupgemm", "moe", "expert")

# Tensor cores by name: (verdict, fragments). First match wins. None: the name cannot tell
# (Triton kernels use tensor cores only where they call tl.dot).
_TENSOR_RULES: Tuple[Tuple[Optional[bool], Tuple[str, ...]], ...] = (
    # cuBLAS' SIMT GEMMs (fp32 with TF32 off: gemmSN_NN_kernel<float, ...>, gemmk1_kernel)
    (False, ("gemv", "sgemm", "dgemm", "simt", "gemmsn", "gemmk1", "nccl", "all_reduce",
             "allreduce",
             "cross_device_reduce", "all_gather", "reduce_scatter")),
    (True, ("wgmma", "hmma", "imma", "tensorop", "s16816", "h16816", "s1688", "h1688",
            "i16832", "16832", "tcgen05", "umma", "xmma", "cutlass", "nvjet", "marlin",
            "flash_fwd", "flashmla", "fmha", "deep_gemm", "cublaslt", "mma", "gemm",
            "group_mm", "grouped_mm")),
    (False, ("elementwise", "norm", "reduce", "copy", "fill", "silu", "gelu", "act_and_mul",
             "rotary", "rope", "softmax", "topk", "top_k", "sort", "index", "cat", "scatter",
             "gather", "quant", "cast", "triton_poi", "triton_red", "triton_per",
             "sampling", "embedding", "argmax", "memcpy", "memset", "_gate", "routing",
             "align_block")),
)


# A kernel launch's shape as the profiler records it (args of a ``kernel`` event): (blocks
# launched, grid, block, registers per thread, shared memory bytes, est. achieved occupancy %).
Shape = Tuple[int, Tuple[int, int, int], Tuple[int, int, int], Optional[int], Optional[int],
              Optional[float]]


class TraceError(Exception):
    """A trace file that cannot be read (missing, truncated, not a Chrome trace)."""


# --- streaming reader --------------------------------------------------------------------

_WS = " \t\r\n"
READ_CHUNK = 1 << 20  # characters read at a time (tests shrink it to cross boundaries)


class _Stream:
    """Pull JSON values one at a time out of a text stream (bounded memory)."""

    def __init__(self, fh: Any, chunk: int = 0) -> None:
        self.fh = fh
        self.chunk = chunk or READ_CHUNK
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dec = json.JSONDecoder()

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(max(self.chunk, len(self.buf) - self.pos))
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def peek(self) -> str:
        while True:
            buf, pos, n = self.buf, self.pos, len(self.buf)
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._fill():
                return ""

    def expect(self, ch: str) -> None:
        got = self.peek()
        if got != ch:
            raise TraceError("expected %r, found %r" % (ch, got or "end of file"))
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                obj, end = self.dec.raw_decode(self.buf, self.pos)
            except ValueError as exc:
                if self._fill():
                    continue
                raise TraceError("not valid JSON: %s" % exc) from None
            if end >= len(self.buf) and not self.eof and self._fill():
                continue  # a number may go on in the next chunk: decode again
            self.pos = end
            return obj


def _open_text(path: str) -> Any:
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def iter_events(path: str, meta: Optional[Dict[str, Any]] = None) -> Iterator[Dict[str, Any]]:
    """Yield the trace's events one by one. ``meta`` receives the other top-level keys.

    Accepts the object form (``{"traceEvents": [...], ...}``) and the bare-array form of the
    Chrome trace format, gzipped or plain. Raises :class:`TraceError`.
    """
    try:
        fh = _open_text(path)
    except OSError as exc:
        raise TraceError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    try:
        with fh:
            yield from _events(_Stream(fh), meta)
    except (EOFError, OSError, gzip.BadGzipFile) as exc:
        raise TraceError("%s: truncated or corrupt: %s" % (path, exc)) from None
    except TraceError as exc:
        raise TraceError("%s: %s" % (path, exc)) from None


def _events(s: _Stream, meta: Optional[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
    first = s.peek()
    if first == "[":
        yield from _array(s)
        return
    if first != "{":
        raise TraceError("not a Chrome trace (starts with %r)" % (first or "nothing"))
    s.pos += 1
    seen = False
    if s.peek() == "}":
        s.pos += 1
    else:
        while True:
            key = s.value()
            s.expect(":")
            if key == "traceEvents":
                seen = True
                yield from _array(s)
            else:
                value = s.value()
                if meta is not None and isinstance(key, str):
                    meta[key] = value
            sep = s.peek()
            if sep == ",":
                s.pos += 1
                continue
            if sep == "}":
                s.pos += 1
                break
            raise TraceError("expected ',' or '}', found %r" % (sep or "end of file"))
    if not seen:
        raise TraceError("no traceEvents in the file")


def _array(s: _Stream) -> Iterator[Dict[str, Any]]:
    s.expect("[")
    if s.peek() == "]":
        s.pos += 1
        return
    while True:
        ev = s.value()
        if isinstance(ev, dict):
            yield ev
        sep = s.peek()
        if sep == ",":
            s.pos += 1
            if s.peek() == "]":  # a trailing comma (some writers leave one)
                s.pos += 1
                return
            continue
        if sep == "]":
            s.pos += 1
            return
        raise TraceError("expected ',' or ']' in traceEvents, found %r" % (sep or "end of file"))


# --- names -------------------------------------------------------------------------------


def short_name(name: str, limit: int = 80) -> str:
    """``void ns::kern<T, 4>(args)`` -> ``ns::kern``: template arguments and parameters go."""
    n = name.strip().replace("(anonymous namespace)::", "")
    if n.startswith("void "):
        n = n[5:]
    out: List[str] = []
    depth = 0
    for ch in n:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(" and out:
                break
            out.append(ch)
    text = "".join(out).strip() or name.strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _first_rule(low: str, rules: Sequence[Tuple[Any, Tuple[str, ...]]]) -> Tuple[bool, Any]:
    for verdict, fragments in rules:
        for frag in fragments:
            if frag in low:
                return True, verdict
    return False, None


def kernel_family(name: str, kind: str = "kernel") -> str:
    """The family of a GPU activity by its name (see ``FAMILY_LABELS``)."""
    if kind in ("memcpy", "memset"):
        return "memory"
    low = name.lower()
    for text in (short_name(name, 10_000).lower(), low):
        hit, family = _first_rule(text, _FAMILY_RULES)
        if hit:
            # A generic GEMM template (cutlass::device_kernel<...>) whose arguments say
            # "grouped" or "moe" is the MoE's grouped GEMM.
            if family == "dense_gemm" and any(f in low for f in _GROUPED_HINTS):
                return "moe_gemm"
            return str(family)
    return "other"


def tensor_core_by_name(name: str, kind: str = "kernel") -> Optional[bool]:
    """True/False when the kernel name says tensor cores or not; None when it cannot tell."""
    if kind in ("memcpy", "memset"):
        return False
    for text in (short_name(name, 10_000).lower(), name.lower()):
        hit, verdict = _first_rule(text, _TENSOR_RULES)
        if hit:
            return verdict  # type: ignore[no-any-return]
    return None


def stage_of_mode(mode: str) -> str:
    if mode in DECODE_MODES:
        return "decode"
    if mode in PREFILL_MODES:
        return "prefill"
    if mode == "IDLE":
        return "idle"
    return "other"


def rank_of(path: str) -> Optional[int]:
    m = _RANK_RE.search(os.path.basename(path))
    return int(m.group(1)) if m else None


def stage_of_file(path: str) -> Optional[str]:
    m = _STAGE_FILE_RE.search(os.path.basename(path))
    if not m:
        return None
    return "decode" if m.group(1).lower() == "decode" else "prefill"


# --- one file ----------------------------------------------------------------------------


class _Spans:
    """Sorted, possibly nested (start, end, stage) spans; which one contains a time."""

    def __init__(self) -> None:
        self.items: List[Tuple[float, float, str]] = []
        self._starts: List[float] = []
        self._sorted = True

    def add(self, start: float, end: float, stage: str) -> None:
        self.items.append((start, end, stage))
        self._sorted = False

    def find(self, t: float) -> Optional[str]:
        if not self._sorted:
            self.items.sort()
            self._starts = [s for s, _, _ in self.items]
            self._sorted = True
        i = bisect.bisect_right(self._starts, t) - 1
        # Steps do not overlap on one device; look back a little for a nested annotation.
        for j in range(i, max(i - 4, -1), -1):
            start, end, stage = self.items[j]
            if start <= t < end:
                return stage
        return None

    def __len__(self) -> int:
        return len(self.items)


def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class FileResult:
    """What one trace file holds, ready to be merged into a summary."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rank = rank_of(path)
        self.file_stage = stage_of_file(path)
        self.events = 0
        self.gpu_events = 0
        self.device_name: Optional[str] = None
        # (name, kind, stage) -> [calls, total_us, min_us, max_us]
        self.kernels: Dict[Tuple[str, str, str], List[float]] = {}
        self.window_us = 0.0
        self.start_unix: Optional[float] = None  # the GPU window in epoch seconds, when the
        self.end_unix: Optional[float] = None  # trace has baseTimeNanoseconds        # stage -> [(start_us, duration_us, batch size or None)] of the target model's steps
        self.step_spans: Dict[str, List[Tuple[float, float, Optional[int]]]] = {}
        self.step_source = "none"
        # (name, kind, stage) -> {launch shape: [calls, total_us]} (kernels with launch fields)
        self.shapes: Dict[Tuple[str, str, str], Dict[Shape, List[float]]] = {}
        self.num_sms: Optional[int] = None  # deviceProperties numSms (the CUDA runtime's)
        self.sms_by_bps: Dict[int, int] = {}  # SM count implied by "blocks per SM" -> launches
        self.smem_default: Optional[int] = None  # sharedMemPerBlock (no opt-in)
        self.max_threads_per_sm: Optional[int] = None  # maxThreadsPerMultiprocessor


def parse_file(path: str) -> FileResult:
    """Read one trace and sort its GPU activity by kernel name and stage."""
    res = FileResult(path)
    meta: Dict[str, Any] = {}
    # name, kind, ts, dur, pid, corr, launch shape
    raw: List[Tuple[str, str, float, float, Any, Any, Optional[Shape]]] = []
    gpu_steps: Dict[Any, _Spans] = {}
    cpu_steps: Dict[Any, _Spans] = {}
    launches: Dict[Any, Tuple[float, Any]] = {}  # correlation -> (ts, pid)
    gpu_marks: List[Tuple[str, float, float, Optional[int]]] = []
    interned: Dict[Shape, Shape] = {}  # one tuple per distinct launch shape, not per event
    cpu_marks: List[Tuple[str, float, float, Optional[int]]] = []
    for ev in iter_events(path, meta):
        res.events += 1
        if ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        ts, dur = _num(ev.get("ts")), _num(ev.get("dur"))
        if ts is None or dur is None or dur < 0:
            continue
        raw_args = ev.get("args")
        args: Dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        name = ev.get("name")
        if not isinstance(name, str):
            continue
        kind = GPU_CATS.get(cat) if isinstance(cat, str) else None
        if kind is not None:
            shape = launch_shape(args) if kind == "kernel" else None
            if shape is not None:
                shape = interned.setdefault(shape, shape)
                bps = _num(args.get("blocks per SM"))
                if bps is not None and bps > 0:
                    implied = round(shape[0] / bps)
                    res.sms_by_bps[implied] = res.sms_by_bps.get(implied, 0) + 1
            raw.append((name, kind, ts, dur, ev.get("pid"), args.get("correlation"), shape))
            continue
        if cat in ("gpu_user_annotation", "user_annotation"):
            m = STEP_RE.match(name)
            if m:
                gpu_side = cat == "gpu_user_annotation"
                target = gpu_steps if gpu_side else cpu_steps
                target.setdefault(ev.get("pid"), _Spans()).add(ts, ts + dur, m.group(2))
                if not m.group(1):  # not a draft model's step
                    bs = int(m.group(3)) if m.group(3) else None
                    (gpu_marks if gpu_side else cpu_marks).append(
                        (stage_of_mode(m.group(2)), ts, dur, bs))
            continue
        if cat in ("cuda_runtime", "cuda_driver", "runtime"):
            corr = args.get("correlation")
            if corr is not None:
                launches[corr] = (ts, ev.get("pid"))
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        res.device_name = props[0].get("name")
        sms, smem = _num(props[0].get("numSms")), _num(props[0].get("sharedMemPerBlock"))
        res.num_sms = int(sms) if sms is not None and sms > 0 else None
        res.smem_default = int(smem) if smem is not None and smem > 0 else None
        mt = _num(props[0].get("maxThreadsPerMultiprocessor"))
        res.max_threads_per_sm = int(mt) if mt is not None and mt > 0 else None
    res.gpu_events = len(raw)
    if gpu_steps:
        res.step_source = "gpu_annotation"
    elif cpu_steps:
        res.step_source = "cpu_annotation"
    elif res.file_stage:
        res.step_source = "file_name"
    all_cpu = _Spans()
    for spans in cpu_steps.values():
        for item in spans.items:
            all_cpu.add(*item)
    starts: List[float] = []
    ends: List[float] = []
    for name, kind, ts, dur, pid, corr, shape in raw:
        mode: Optional[str] = None
        if gpu_steps:
            gspans = gpu_steps.get(pid)
            mode = gspans.find(ts) if gspans is not None else None
        if mode is None and cpu_steps and corr is not None and corr in launches:
            lts, lpid = launches[corr]
            cspans = cpu_steps.get(lpid)
            mode = cspans.find(lts) if cspans is not None else all_cpu.find(lts)
        if mode is not None:
            stage = stage_of_mode(mode)
        elif res.file_stage:
            stage = res.file_stage
        else:
            stage = "unknown"
        key = (name, kind, stage)
        if shape is not None:
            per = res.shapes.setdefault(key, {})
            acc = per.get(shape)
            if acc is None:
                per[shape] = [1, dur]
            else:
                acc[0] += 1
                acc[1] += dur
        st = res.kernels.get(key)
        if st is None:
            res.kernels[key] = [1, dur, dur, dur]
        else:
            st[0] += 1
            st[1] += dur
            if dur < st[2]:
                st[2] = dur
            if dur > st[3]:
                st[3] = dur
        starts.append(ts)
        ends.append(ts + dur)
    if starts:
        res.window_us = max(ends) - min(starts)
        base = _num(meta.get("baseTimeNanoseconds"))
        if base is not None and base > 0:
            res.start_unix = base / 1e9 + min(starts) / 1e6
            res.end_unix = base / 1e9 + max(ends) / 1e6
    for stage, ts, dur, bs in sorted(gpu_marks or cpu_marks, key=lambda m: m[1]):
        res.step_spans.setdefault(stage, []).append((ts, dur, bs))
    return res


def _median(values: List[float]) -> Optional[float]:
    if not values:
        return None
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def _step_stats(files: Sequence[FileResult], stage: str) -> Dict[str, Any]:
    """Count, mean GPU span, start-to-start interval (consecutive steps of this stage on one
    rank: the real step time, CPU gaps included) and mean batch size of a stage's steps."""
    spans: List[float] = []
    gaps: List[float] = []
    sizes: List[int] = []
    for fr in files:
        marks = sorted((m for st, ms in fr.step_spans.items() for m in ms
                        if st in (stage,)), key=lambda m: m[0])
        all_marks = sorted(m for ms in fr.step_spans.values() for m in ms)
        starts = [m[0] for m in all_marks]
        for ts, dur, bs in marks:
            spans.append(dur)
            if bs is not None:
                sizes.append(bs)
            i = bisect.bisect_right(starts, ts)
            # the next step of any stage starts this one's successor: only decode->decode
            if i < len(all_marks) and all_marks[i] in marks:
                gaps.append(all_marks[i][0] - ts)
    interval = _median(gaps)
    return {"count": len(spans),
            "mean_ms": round(sum(spans) / len(spans) / 1000.0, 4) if spans else None,
            "interval_ms": round(interval / 1000.0, 4) if interval is not None else None,
            "mean_bs": round(sum(sizes) / len(sizes), 2) if sizes else None}


# --- summary -----------------------------------------------------------------------------


def _round(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def summarize(files: Sequence[FileResult], top: int = 25) -> Dict[str, Any]:
    """Merge parsed files into the kernels summary (see docs/kernels.md for every field)."""
    by_name: Dict[Tuple[str, str], Dict[str, Any]] = {}
    stage_time: Dict[str, float] = {}
    for fr in files:
        for (name, kind, stage), (calls, total, lo, hi) in fr.kernels.items():
            stage_time[stage] = stage_time.get(stage, 0.0) + total
            k = by_name.get((name, kind))
            if k is None:
                k = by_name[(name, kind)] = {"name": name, "kind": kind, "stages": {},
                                             "min_us": lo, "max_us": hi}
            sk = k["stages"].setdefault(stage, [0, 0.0])
            sk[0] += int(calls)
            sk[1] += total
            k["min_us"] = min(k["min_us"], lo)
            k["max_us"] = max(k["max_us"], hi)
    total_gpu = sum(stage_time.values())
    has_decode = stage_time.get("decode", 0.0) > 0
    basis = "decode" if has_decode else "all"
    basis_total = stage_time.get("decode", 0.0) if has_decode else total_gpu
    kernels: List[Dict[str, Any]] = []
    for (name, kind), k in by_name.items():
        if has_decode:
            calls, t = k["stages"].get("decode", (0, 0.0))
        else:
            calls = sum(c for c, _ in k["stages"].values())
            t = sum(x for _, x in k["stages"].values())
        all_t = sum(x for _, x in k["stages"].values())
        if not calls:
            continue
        kernels.append({
            "name": name, "short_name": short_name(name), "kind": kind,
            "family": kernel_family(name, kind),
            "tensor_core_by_name": tensor_core_by_name(name, kind),
            "calls": calls, "total_us": _round(t), "mean_us": _round(t / calls),
            "min_us": _round(k["min_us"]), "max_us": _round(k["max_us"]),
            "share": round(t / basis_total, 6) if basis_total > 0 else None,
            "all_stages_us": _round(all_t),
        })
    kernels.sort(key=lambda r: (-r["total_us"], r["name"]))
    sms, sms_source = gpu_sm_count(files)
    smem_default = next((fr.smem_default for fr in files if fr.smem_default), None)
    max_threads = next((fr.max_threads_per_sm for fr in files if fr.max_threads_per_sm), None)
    shapes = _merge_shapes(files, "decode" if has_decode else None)
    for k in kernels:
        k["launch"] = launch_record(shapes.get((k["name"], k["kind"])), k["total_us"], sms,
                                    smem_default, max_threads)
    families = _families(kernels, basis_total)
    steps = {stage: _step_stats(files, stage) for stage in ("decode", "prefill")}
    dec = steps["decode"]
    if dec["interval_ms"] and dec["mean_bs"]:
        dec["tok_s"] = round(dec["mean_bs"] / (dec["interval_ms"] / 1000.0), 3)
    ranks = sorted({fr.rank for fr in files if fr.rank is not None})
    sources = sorted({fr.step_source for fr in files})
    if has_decode:
        note = ("shares are of GPU kernel time inside decode steps (step[DECODE] markers: %s); "
                "prefill steps are counted apart" % ", ".join(sources))
    elif total_gpu > 0:
        note = ("the trace marks no decode steps: shares are of all GPU kernel time in the "
                "window")
    else:
        note = "the trace holds no GPU kernels (was the GPU activity profiled?)"
    shown = kernels[:top] if top > 0 else kernels
    rest = kernels[len(shown):]
    return {
        "files": [{"path": fr.path, "rank": fr.rank, "events": fr.events,
                   "gpu_events": fr.gpu_events, "window_ms": round(fr.window_us / 1000.0, 3),
                   "step_source": fr.step_source, "device": fr.device_name} for fr in files],
        "ranks": len(ranks) if ranks else len(files),
        "device": next((fr.device_name for fr in files if fr.device_name), None),
        "basis": basis,
        "basis_note": note,
        "gpu_time_ms": {"total": round(total_gpu / 1000.0, 3),
                        **{s: round(t / 1000.0, 3) for s, t in sorted(stage_time.items())}},
        "window_ms": (round(sum(fr.window_us for fr in files) / len(files) / 1000.0, 3)
                      if files else 0.0),
        "window_unix": _unix_window(files),
        "steps": steps,
        "kernel_names": len(kernels),
        "kernels": shown,
        "kernels_rest": {"count": len(rest),
                         "total_us": _round(sum(k["total_us"] for k in rest)),
                         "share": (round(sum(k["total_us"] for k in rest) / basis_total, 6)
                                   if basis_total > 0 else None)},
        "families": families,
        "launch": launch_summary(kernels, families, sms, sms_source, basis),
    }


def _unix_window(files: Sequence[FileResult]) -> Optional[List[float]]:
    starts = [fr.start_unix for fr in files if fr.start_unix is not None]
    ends = [fr.end_unix for fr in files if fr.end_unix is not None]
    if not starts or not ends:
        return None
    return [round(min(starts), 6), round(max(ends), 6)]


def _families(kernels: List[Dict[str, Any]], basis_total: float) -> List[Dict[str, Any]]:
    acc: Dict[str, Dict[str, Any]] = {}
    for k in kernels:
        f = acc.setdefault(k["family"], {"total_us": 0.0, "all_stages_us": 0.0, "calls": 0,
                                         "kernels": 0, "tc_yes": 0.0, "tc_no": 0.0,
                                         "tc_unknown": 0.0, "top": []})
        _add_family_launch(f, k)
        f["total_us"] += k["total_us"]
        f["all_stages_us"] += k["all_stages_us"]
        f["calls"] += k["calls"]
        f["kernels"] += 1
        verdict = k["tensor_core_by_name"]
        f["tc_yes" if verdict is True else "tc_no" if verdict is False else "tc_unknown"] += \
            k["total_us"]
        if len(f["top"]) < 3:
            f["top"].append(k["short_name"])
    out = []
    for key, label in FAMILY_LABELS:
        if key not in acc:
            continue
        f = acc[key]
        known = f["tc_yes"] + f["tc_no"]
        if f["tc_unknown"] > known:
            by_name: Optional[bool] = None
        else:
            by_name = f["tc_yes"] > f["tc_no"]
        out.append({"family": key, "label": label, "total_us": _round(f["total_us"]),
                    "share": (round(f["total_us"] / basis_total, 6) if basis_total > 0
                              else None),
                    "all_stages_us": _round(f["all_stages_us"]),
                    "calls": f["calls"], "kernels": f["kernels"], "top_kernels": f["top"],
                    "tensor_core_by_name": by_name,
                    "tensor_cores": by_name, "tensor_basis": "name" if by_name is not None
                    else "unknown", "tensor_note": None, "launch": _family_launch(f)})
    out.sort(key=lambda r: -r["total_us"])
    return out


# --- launches: grid, SM coverage, occupancy ----------------------------------------------

# SM counts by GPU model, for a trace whose deviceProperties lack numSms and whose kernels
# lack "blocks per SM" (the profiler's grid / numSms). Ordered (name fragment, SMs, source):
# the first fragment in the lower-cased device name wins. SMs = CUDA cores / 128 where the
# datasheet prints cores (128 FP32 cores per SM on Ampere GA100 aside, Ada, Hopper, Blackwell).
SM_COUNTS: Tuple[Tuple[str, int, str], ...] = (
    # RTX PRO 6000 Blackwell (Server, Workstation, Max-Q): 24,064 CUDA cores (NVIDIA
    # datasheets) = 188 SMs x 128
    ("rtx pro 6000", 188, "NVIDIA RTX PRO 6000 Blackwell datasheet: 24,064 CUDA cores = 188 SMs"),
    # B200: 148 SMs per GPU (NVIDIA Blackwell architecture technical brief; what the CUDA
    # runtime reports as multiProcessorCount on a B200)
    ("b200", 148, "NVIDIA Blackwell (B200) technical brief: 148 SMs"),
    # H200 SXM: the GH100 of the H100 SXM5, 132 SMs (the H200 trace in tests/data says
    # numSms 132); H100 SXM5 132, H100 PCIe 114 (NVIDIA H100 Tensor Core GPU Architecture
    # whitepaper, table 3)
    ("h200", 132, "NVIDIA H100 architecture whitepaper (GH100, SXM5 config): 132 SMs"),
    ("h100 pcie", 114, "NVIDIA H100 architecture whitepaper: H100 PCIe 114 SMs"),
    ("h100", 132, "NVIDIA H100 architecture whitepaper: H100 SXM5 132 SMs"),
    # A100: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper)
    ("a100", 108, "NVIDIA A100 architecture whitepaper: 108 SMs"),
    # L40S: 18,176 CUDA cores (NVIDIA L40S datasheet) = 142 SMs x 128
    ("l40s", 142, "NVIDIA L40S datasheet: 18,176 CUDA cores = 142 SMs"),
)

FINDING_MIN_SHARE = 0.05  # a kernel costing less of the step than this is not a finding
LOW_COVERAGE = 0.5  # a launch that can occupy under half the SMs leaves the GPU idle
LOW_OCCUPANCY_PCT = 25.0  # est. achieved occupancy under this: too few warps to hide latency
NO_GRID_FINDINGS = ("communication", "memory")  # few SMs by design: the link is the cost
# Families with tensor-core kernels for the same work: a CUDA-core kernel there is a finding.
TENSOR_PATHS = {
    "moe_gemm": "the MoE GEMM has tensor-core kernels (a grouped GEMM: cutlass, Marlin, "
                "DeepGEMM, FlashInfer's MXFP4/NVFP4 MoE)",
    "dense_gemm": "a dense GEMM has tensor-core kernels (cuBLAS, cutlass)",
}
DEFAULT_SMEM_PER_BLOCK = 48 * 1024  # without opt-in, on every GPU since Volta
NOT_IN_TRACE = "not in this trace"
_MAX_SHAPES = 4  # launch shapes listed per kernel (the time of the rest still counts)


def _dims(value: Any) -> Optional[Tuple[int, int, int]]:
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
        return None
    out = []
    for v in value:
        n = _num(v)
        if n is None or n < 1 or n != int(n):
            return None
        out.append(int(n))
    while len(out) < 3:
        out.append(1)
    return (out[0], out[1], out[2])


def _count(value: Any) -> Optional[int]:
    n = _num(value)
    return int(n) if n is not None and n >= 0 else None


def launch_shape(args: Dict[str, Any]) -> Optional[Shape]:
    """The launch shape of a kernel event's args; None when the trace has no grid/block."""
    grid, block = _dims(args.get("grid")), _dims(args.get("block"))
    if grid is None or block is None:
        return None
    occ = _num(args.get("est. achieved occupancy %"))
    if occ is None:  # older torch: a fraction
        frac = _num(args.get("est. achieved occupancy"))
        occ = frac * 100.0 if frac is not None else None
    return (grid[0] * grid[1] * grid[2], grid, block, _count(args.get("registers per thread")),
            _count(args.get("shared memory")), occ)


def gpu_sm_count(files: Sequence[FileResult]) -> Tuple[Optional[int], Optional[str]]:
    """(SMs, where that came from): the trace's deviceProperties, else the SM count its
    "blocks per SM" imply (the profiler divides the grid by it), else ``SM_COUNTS`` by the
    device name; (None, None) when none of them knows."""
    for fr in files:
        if fr.num_sms:
            return fr.num_sms, "the trace (deviceProperties numSms)"
    implied: Dict[int, int] = {}
    for fr in files:
        for n, c in fr.sms_by_bps.items():
            implied[n] = implied.get(n, 0) + c
    if implied:
        n = max(implied.items(), key=lambda kv: kv[1])[0]
        if n > 0:
            return n, "the trace (grid / blocks per SM)"
    name = next((fr.device_name for fr in files if fr.device_name), None)
    return sm_count_by_name(name)


def sm_count_by_name(name: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    low = " ".join(str(name or "").lower().replace("_", " ").split())
    if not low:
        return None, None
    for frag, sms, source in SM_COUNTS:
        if frag in low:
            return sms, "table: " + source
    return None, None


def _merge_shapes(files: Sequence[FileResult], stage: Optional[str]
                  ) -> Dict[Tuple[str, str], Dict[Shape, List[float]]]:
    out: Dict[Tuple[str, str], Dict[Shape, List[float]]] = {}
    for fr in files:
        for (name, kind, st), per in fr.shapes.items():
            if stage is not None and st != stage:
                continue
            tgt = out.setdefault((name, kind), {})
            for shape, (calls, us) in per.items():
                acc = tgt.setdefault(shape, [0, 0.0])
                acc[0] += calls
                acc[1] += us
    return out


def _occupancy(shape: Shape, smem_default: Optional[int]) -> Optional[float]:
    """The profiler's estimate, or None where it could not make one: it runs CUDA's occupancy
    calculator without the kernel's opt-in shared-memory limit, so a kernel with more than the
    default 48 KiB per block gets 0 (or a negative number), not its occupancy."""
    occ, smem = shape[5], shape[4]
    if occ is None or occ < 0:
        return None
    if occ == 0 and smem is not None and smem > (smem_default or DEFAULT_SMEM_PER_BLOCK):
        return None
    return min(occ, 100.0)


def launch_record(shapes: Optional[Dict[Shape, List[float]]], total_us: float,
                  sms: Optional[int], smem_default: Optional[int] = None,
                  max_threads_per_sm: Optional[int] = None) -> Optional[Dict[str, Any]]:
    """What a kernel's launches were, time-weighted over its launches (None without fields).

    ``sm_coverage``: min(1, blocks / SMs) -- the share of the SMs one launch can keep busy;
    ``waves``: blocks / SMs; ``occupancy_pct``: the profiler's est. achieved occupancy over
    the launches it could estimate. The grid, block, registers and shared memory are those of
    the launch shape that took the most time (``shapes`` says how many there were).
    ``occupancy_limit``: "grid" when the whole grid is resident at once and still fills few
    thread slots (the profiler caps blocks per SM at grid / SMs), "resources" when registers,
    shared memory or the block size cap the resident blocks; None when it cannot tell."""
    if not shapes:
        return None
    items = sorted(shapes.items(), key=lambda kv: (-kv[1][1], kv[0][0]))
    measured = sum(us for _, (_, us) in items)
    top_shape = items[0][0]
    blocks_mean = (sum(sh[0] * us for sh, (_, us) in items) / measured) if measured > 0 else \
        float(top_shape[0])
    cov = waves = None
    if sms:
        if measured > 0:
            cov = sum(min(1.0, sh[0] / sms) * us for sh, (_, us) in items) / measured
        else:
            cov = min(1.0, top_shape[0] / sms)
        waves = blocks_mean / sms
    occ_us = 0.0
    occ_sum = 0.0
    for sh, (_, us) in items:
        occ = _occupancy(sh, smem_default)
        if occ is not None:
            occ_us += us
            occ_sum += occ * us
    occupancy = occ_sum / occ_us if occ_us > 0 else None
    limit = None
    top_occ = _occupancy(top_shape, smem_default)
    if top_occ is not None and sms and max_threads_per_sm:
        threads = top_shape[2][0] * top_shape[2][1] * top_shape[2][2]
        by_grid = 100.0 * (top_shape[0] / sms) * threads / max_threads_per_sm
        limit = "grid" if top_occ >= by_grid - 1.0 else "resources"
    note = None
    if occupancy is None:
        if all(sh[5] is None for sh, _ in items):
            note = NOT_IN_TRACE
        else:
            note = ("not estimated: the profiler's calculator leaves out opt-in shared memory "
                    "(%s per block)" % _bytes(top_shape[4]))
    return {
        "grid": list(top_shape[1]), "block": list(top_shape[2]), "blocks": top_shape[0],
        "threads": top_shape[2][0] * top_shape[2][1] * top_shape[2][2],
        "registers": top_shape[3], "shared_memory": top_shape[4],
        "shapes": len(items), "blocks_mean": round(blocks_mean, 2),
        "sm_coverage": round(cov, 4) if cov is not None else None,
        "waves": round(waves, 3) if waves is not None else None,
        "occupancy_pct": round(occupancy, 2) if occupancy is not None else None,
        "occupancy_note": note, "occupancy_limit": limit,
        "measured_share": round(measured / total_us, 4) if total_us > 0 else None,
        "by_shape": [{"grid": list(sh[1]), "block": list(sh[2]), "registers": sh[3],
                      "shared_memory": sh[4], "occupancy_pct": _occupancy(sh, smem_default),
                      "calls": int(c),
                      "total_us": _round(us)} for sh, (c, us) in items[:_MAX_SHAPES]],
    }


def _bytes(n: Optional[int]) -> str:
    if n is None:
        return "? B"
    if n >= 1024:
        return "%.0f KiB" % (n / 1024.0) if n % 1024 == 0 or n >= 10240 else \
            "%.1f KiB" % (n / 1024.0)
    return "%d B" % n


def _add_family_launch(f: Dict[str, Any], k: Dict[str, Any]) -> None:
    launch = k.get("launch")
    acc = f.setdefault("_launch", [0.0, 0.0, 0.0, 0.0, 0.0])  # us, cov*us, cov us, occ*us, occ us
    if not launch:
        return
    us = float(k["total_us"]) * float(launch.get("measured_share") or 0.0)
    acc[0] += us
    if launch.get("sm_coverage") is not None:
        acc[1] += launch["sm_coverage"] * us
        acc[2] += us
    if launch.get("occupancy_pct") is not None:
        acc[3] += launch["occupancy_pct"] * us
        acc[4] += us


def _family_launch(f: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    us, cov, cov_us, occ, occ_us = f.pop("_launch", [0.0] * 5)
    if us <= 0:
        return None
    # an occupancy the profiler estimated for under half the family's time stands for no one
    return {"sm_coverage": round(cov / cov_us, 4) if cov_us > 0 else None,
            "occupancy_pct": round(occ / occ_us, 2) if occ_us >= 0.5 * us else None,
            "measured_share": round(us / f["total_us"], 4) if f["total_us"] > 0 else None}


def _pct_text(x: float) -> str:
    return "%.0f %%" % (100 * x) if x >= 0.095 else "%.1f %%" % (100 * x)


def launch_findings(kernels: Sequence[Dict[str, Any]], families: Sequence[Dict[str, Any]],
                    sms: Optional[int], basis: str) -> List[Dict[str, Any]]:
    """Kernels that leave the GPU idle, ranked by the time they cost (their share of the
    step): a grid under half the SMs, a low estimated occupancy, CUDA cores where the family
    has a tensor-core path. Only kernels worth ``FINDING_MIN_SHARE`` of the step or more."""
    fam = {f["family"]: f for f in families}
    where = "of each decode step" if basis == "decode" else "of the GPU time in the capture"
    out = []
    for k in kernels:
        share = k.get("share")
        if share is None or share < FINDING_MIN_SHARE:
            continue
        launch = k.get("launch") or {}
        family = k.get("family", "other")
        issues: List[str] = []
        facts: List[str] = []
        remedies: List[str] = []
        cov = launch.get("sm_coverage")
        occ = launch.get("occupancy_pct")
        if family not in NO_GRID_FINDINGS and launch:
            if cov is not None and cov < LOW_COVERAGE:
                issues.append("grid")
                shapes = " (its most-used grid of %d)" % launch["shapes"] \
                    if launch.get("shapes", 1) > 1 else ""
                facts.append("%d block%s on %d SMs (%s of the GPU)%s"
                             % (launch["blocks"], "" if launch["blocks"] == 1 else "s",
                                sms or 0, _pct_text(cov), shapes))
                remedies.append("a split-K or a larger grid would use the idle SMs")
            elif occ is not None and occ < LOW_OCCUPANCY_PCT:
                issues.append("occupancy")
                detail = ["%d threads per block" % launch["threads"]]
                if launch.get("registers") is not None:
                    detail.append("%d registers per thread" % launch["registers"])
                if launch.get("shared_memory"):
                    detail.append("%s shared memory" % _bytes(launch["shared_memory"]))
                facts.append("est. achieved occupancy %.0f %% (%s)" % (occ, ", ".join(detail)))
                if launch.get("occupancy_limit") == "grid":
                    remedies.append("the whole grid (%d blocks, %.1f per SM) is resident at "
                                    "once and still leaves most warp slots empty: a larger "
                                    "grid (split the work finer) would hide memory latency"
                                    % (launch["blocks"], launch.get("waves") or 0.0))
                else:
                    remedies.append("too few warps per SM to hide memory latency: fewer "
                                    "registers or less shared memory per block would let more "
                                    "blocks share an SM")
        path = TENSOR_PATHS.get(family)
        if path is not None:
            by_name = k.get("tensor_core_by_name")
            f = fam.get(family) or {}
            if by_name is False:
                short = str(k.get("short_name") or k.get("name") or "").lower()
                why = ("a GEMV" if "gemv" in short else "a SIMT GEMM" if any(
                    x in short for x in ("gemmsn", "gemmk1", "sgemm", "simt")) else "by its name")
            elif by_name is None and f.get("tensor_cores") is False:
                why = "by the tensor-pipe counters"
            else:
                why = None
            if why is not None:
                issues.append("cuda_cores")
                facts.append("on CUDA cores (%s)" % why)
                remedies.append(path)
        if not issues:
            continue
        name = k.get("short_name") or k.get("name")
        text = "`%s`: %s for %s %s — %s" % (name, ", ".join(facts), _pct_text(share), where,
                                            "; ".join(remedies))
        out.append({"kernel": k.get("name"), "short_name": name, "family": family,
                    "share": share, "issues": issues, "blocks": launch.get("blocks"),
                    "sms": sms, "sm_coverage": cov, "occupancy_pct": occ, "text": text})
    out.sort(key=lambda r: -r["share"])
    return out


def launch_summary(kernels: Sequence[Dict[str, Any]], families: Sequence[Dict[str, Any]],
                   sms: Optional[int], sms_source: Optional[str], basis: str
                   ) -> Dict[str, Any]:
    """The capture's launch facts: the SM count and its source, how much of the kernel time
    carries launch fields, the findings."""
    timed = [k for k in kernels if k.get("kind") == "kernel"]
    total = sum(float(k["total_us"]) for k in timed)
    with_fields = sum(float(k["total_us"]) * float((k.get("launch") or {}).get(
        "measured_share") or 0.0) for k in timed)
    share = with_fields / total if total > 0 else 0.0
    if not timed or with_fields <= 0:
        note = ("grid, block and occupancy are %s (the profiler recorded no launch fields)"
                % NOT_IN_TRACE)
    elif sms is None:
        note = ("the trace has grids but not the GPU's SM count (no deviceProperties, no "
                "blocks per SM, a GPU the table does not know): SM coverage is %s"
                % NOT_IN_TRACE)
    else:
        note = ("%d SMs from %s; launch fields on %s of the kernel time"
                % (sms, sms_source, _pct_text(share)))
    return {"sms": sms, "sms_source": sms_source, "fields_share": round(share, 4),
            "note": note, "min_share": FINDING_MIN_SHARE, "low_coverage": LOW_COVERAGE,
            "low_occupancy_pct": LOW_OCCUPANCY_PCT,
            "findings": launch_findings(kernels, families, sms, basis)}


def refresh_launch_findings(summary: Dict[str, Any]) -> None:
    """Findings again after the tensor-core decision changed the families' flags (for the
    kernels listed; the others keep theirs)."""
    launch = summary.get("launch")
    if not isinstance(launch, dict):
        return
    listed = summary.get("kernels") or []
    names = {k.get("name") for k in listed}
    kept = [f for f in launch.get("findings") or [] if f.get("kernel") not in names]
    fresh = launch_findings(listed, summary.get("families") or [], launch.get("sms"),
                            str(summary.get("basis") or "all"))
    launch["findings"] = sorted(kept + fresh, key=lambda r: -r["share"])


def find_traces(paths: Sequence[str]) -> List[str]:
    """Files to parse: each path as is, or the ``*.trace.json[.gz]`` files in a directory."""
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p)
                           if n.endswith(".trace.json.gz") or n.endswith(".trace.json"))
            out.extend(os.path.join(p, n) for n in names)
        else:
            out.append(p)
    return out


def parse_traces(paths: Sequence[str], top: int = 25,
                 ranks: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """Parse trace files (or directories of them) into one summary. Raises TraceError."""
    files = find_traces(paths)
    if ranks is not None:
        wanted = set(ranks)
        files = [f for f in files if rank_of(f) in wanted or rank_of(f) is None]
    if not files:
        raise TraceError("no trace files (*.trace.json.gz) in %s" % ", ".join(paths))
    return summarize([parse_file(f) for f in files], top=top)


# --- tensor cores: name + telemetry ------------------------------------------------------

# Below this tensor-pipe activity (percent) while a family's kernels ran -- even if every bit
# of the measured activity were theirs -- the family did not run on tensor cores.
TENSOR_LOW_PCT = 5.0


def attribute_tensor_cores(summary: Dict[str, Any], tensor_active_pct: Optional[float],
                           source: Optional[str] = None,
                           busy_pct: Optional[float] = None) -> Dict[str, Any]:
    """Decide each family's ``tensor_cores`` flag from its kernel names and the tensor-pipe
    activity measured over the profiling window; fills ``tensor_basis``/``tensor_note``.

    ``tensor_active_pct``: mean GPM any-tensor activity (0-100) of the busy GPUs over the
    window, None without GPM. ``busy_pct``: how much of that window a kernel was running
    (NVML ``util_gpu``, same GPUs and frames); without it the trace's own window stands in.
    A family whose kernels took a share ``f`` of the GPU time ran for ``f * busy`` of the
    window, so it can have caused at most ``T / (f * busy)`` tensor activity while it ran.
    When that bound is under ``TENSOR_LOW_PCT`` the family ran on CUDA cores whatever its
    name says; otherwise the kernel names decide. Returns the ``tensor_decision`` record.
    """
    families = summary.get("families") or []
    if tensor_active_pct is None:
        for f in families:
            f["tensor_cores"] = f["tensor_core_by_name"]
            f["tensor_basis"] = "name" if f["tensor_cores"] is not None else "unknown"
            f["tensor_note"] = ("by kernel name only: no tensor-pipe telemetry (GPM n/a)"
                                if f["tensor_cores"] is not None else
                                "the names cannot tell and there is no tensor-pipe telemetry")
        decision = {"method": "name", "tensor_active_pct": None, "busy_pct": busy_pct,
                    "source": source, "low_pct": TENSOR_LOW_PCT,
                    "note": "kernel names only (no tensor-pipe telemetry for the window)"}
        summary["tensor_decision"] = decision
        refresh_launch_findings(summary)
        return decision
    t = max(0.0, float(tensor_active_pct))
    all_time = sum(float(f.get("all_stages_us") or 0.0) for f in families)
    if busy_pct is not None and busy_pct >= 0:
        busy = min(1.0, float(busy_pct) / 100.0)
        busy_from = "util_gpu"
    else:
        # Family times are summed over the traced files (ranks): so is the window.
        window_us = (float(summary.get("window_ms") or 0.0) * 1000.0
                     * max(1, len(summary.get("files") or [])))
        busy = min(1.0, all_time / window_us) if window_us > 0 else 0.0
        busy_from = "trace window"
    for f in families:
        by_name = f["tensor_core_by_name"]
        share = (float(f.get("all_stages_us") or 0.0) / all_time) if all_time > 0 else 0.0
        s = share * busy
        bound = (t / s) if s > 0 else None
        f["window_share"] = round(s, 6)
        f["tensor_bound_pct"] = round(bound, 2) if bound is not None else None
        if f["family"] == "memory":
            f["tensor_cores"], f["tensor_basis"] = False, "name"
            f["tensor_note"] = "copies and fills never use tensor cores"
        elif bound is not None and bound < TENSOR_LOW_PCT:
            f["tensor_cores"], f["tensor_basis"] = False, "telemetry"
            f["tensor_note"] = ("tensor pipe %.1f %% over the window while this family ran "
                                "%.0f %% of it: at most %.1f %% tensor activity while it ran"
                                % (t, 100 * s, bound)
                                + ("; its kernel names suggest tensor cores, the counters say no"
                                   if by_name else ""))
        elif by_name is True:
            f["tensor_cores"], f["tensor_basis"] = True, "name+telemetry"
            f["tensor_note"] = ("tensor-core kernel names; the tensor pipe (%.1f %% over the "
                                "window) allows up to %s while it ran"
                                % (t, "%.0f %%" % bound if bound is not None else "any"))
        elif by_name is False:
            f["tensor_cores"], f["tensor_basis"] = False, "name"
            f["tensor_note"] = ("CUDA-core kernel names (the tensor pipe's %.1f %% is other "
                                "kernels')" % t)
        else:
            f["tensor_cores"], f["tensor_basis"] = None, "unknown"
            f["tensor_note"] = ("the names cannot tell, and the tensor pipe (%.1f %%, up to "
                                "%s while it ran) could include this family"
                                % (t, "%.0f %%" % bound if bound is not None else "any"))
    note = ("a family ran on CUDA cores when the measured tensor-pipe activity, all credited to "
            "it, stays under %g %% while it ran; otherwise the kernel names decide (busy "
            "fraction from %s: %.0f %%)" % (TENSOR_LOW_PCT, busy_from, 100 * busy))
    if busy < 0.2:
        note += ("; the GPUs were busy only %.0f %% of the window, so the counters say little"
                 % (100 * busy))
    refresh_launch_findings(summary)
    decision = {"method": "name+telemetry", "tensor_active_pct": round(t, 3),
                "busy_pct": round(100 * busy, 2), "busy_from": busy_from, "source": source,
                "low_pct": TENSOR_LOW_PCT, "note": note}
    summary["tensor_decision"] = decision
    return decision
