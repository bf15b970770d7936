"""Why a server start failed: one class per cause, from the parsed log and how it exited.

:func:`diagnose` takes a :class:`logparse.LogParser`'s events (and the parser, for the phase
the failure came in) plus the exit code or signal, and names the cause: an OOM while capturing
CUDA graphs, loading weights, allocating the KV cache (or no room left for it), or running a
prefill; NCCL / distributed init failing or timing out (a rank that never joined); no kernel
image for this GPU; a warm-up request that failed; a Python exception (named when the log has
its line); a killed process (signal); an exit the log says nothing about. The agent's server
status carries the answer (``failure``), the console reads the same dict, so both agree.
``evidence`` holds what the log said that a next move can use: the CUDA-graph batch sizes,
the chunked-prefill size, the init timeout. Stdlib, Python 3.9.
"""

from __future__ import annotations

import re
import signal as _signal
from typing import Any, Dict, Iterable, List, Optional

from dsv4tui.agent.host.logparse import CAUSE_ORDER, Event, LogParser

CLASSES: Dict[str, str] = {
    "oom_cuda_graph": "CUDA out of memory while capturing CUDA graphs",
    "oom_weights": "CUDA out of memory while loading the weights",
    "oom_kv_cache": "CUDA out of memory allocating the KV cache",
    "kv_cache_no_room": "no GPU memory left for the KV cache at this --mem-fraction-static",
    "oom_prefill": "CUDA out of memory running a batch (prefill)",
    "dist_timeout": "distributed init timed out (a rank never joined)",
    "nccl_error": "NCCL / distributed init failed",
    "no_kernel_image": "no kernel image for this GPU",
    "warmup_failed": "the warm-up request failed",
    "python_exception": "a Python exception",
    "killed": "killed by a signal",
    "exited": "exited with no error in the log",
}

_NO_ROOM_RE = re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static")
_TIMEOUT_RE = re.compile(r"DistStoreError|DistNetworkError|[Tt]imed out after|"
                         r"collective operation timeout|Watchdog caught collective")
_TIMEOUT_S_RE = re.compile(r"(?:[Tt]imed out after|timeout=)\s*(\d+(?:\.\d+)?)\s*(?:s\b|sec)")
_JOINED_RE = re.compile(r"(\d+)/(\d+) clients joined")
_DIST_FRAME_RE = re.compile(r"init_torch_distributed|initialize_model_parallel|"
                            r"init_distributed_environment|init_process_group")
_FRAME_FUNC_RE = re.compile(r'File "[^"]+", line \d+, in (\w+)')
# where in SGLang's code an OOM happened (frames say it more surely than the phase)
_FRAME_PHASES = (("cuda_graph", re.compile(r"cuda_graph_runner|capture_one_batch_size|"
                                           r"def capture|\bcapture\b")),
                 ("kv_cache", re.compile(r"init_memory_pool|memory_pool\.py|TokenToKVPool")),
                 ("load_weights", re.compile(r"load_model|load_weights|model_loader")),
                 ("prefill", re.compile(r"forward_extend|forward_batch_generation|"
                                        r"run_batch|event_loop")))
_KERNEL_PARTS = (("MoE", re.compile(r"\bmoe\b|_moe|fused_moe|moe_runner|[Ee]xpert")),
                 ("attention", re.compile(r"[Aa]ttention|BatchPrefill|BatchDecode|flash_?attn|"
                                          r"flashmla|sparse_mla|\bmla\b")))
_ORDER = CAUSE_ORDER  # the most telling error kinds first (as logparse.root_cause ranks them)
_SERVING = ("http_up", "warmup", "ready", "serving")  # after the graphs: a batch's OOM


def _frames(events: List[Event]) -> str:
    return "\n".join(line for e in events if e.get("kind") == "traceback"
                     for line in e.get("lines") or [])


def _where(frames: str, phase: Optional[str]) -> Optional[str]:
    """The startup phase an OOM came in: after the graphs were captured, a batch's (prefill);
    before, its traceback's frames say, else the parser's phase."""
    if phase in _SERVING:
        return "prefill"
    for name, rx in _FRAME_PHASES:
        if rx.search(frames):
            return name
    return phase


def _evidence(events: List[Event]) -> Dict[str, Any]:
    """What the log says that a next move needs (only what it said)."""
    out: Dict[str, Any] = {}
    sizes: List[int] = []
    for e in events:
        kind = e.get("kind")
        if kind == "cuda_graph_begin" and e.get("bs"):
            sizes = list(e["bs"])
        elif kind == "cuda_graph_progress" and e.get("bs"):
            out.setdefault("graph_bs_capturing", []).append(int(e["bs"]))
        elif kind == "server_limits" and e.get("chunked_prefill_size"):
            out["chunked_prefill_size"] = int(e["chunked_prefill_size"])
        elif kind == "server_args":
            for key in ("mem_fraction_static", "chunked_prefill_size",
                        "cuda_graph_max_bs_decode", "dist_timeout", "moe_runner_backend"):
                if e.get(key) is not None:
                    out.setdefault(key, e[key])
    if sizes:
        out["graph_bs"] = sizes
        out["graph_max_bs"] = max(sizes)
    return out


def _best(events: List[Event]) -> Optional[Event]:
    best = None
    for e in events:
        kind = e.get("kind")
        if kind in _ORDER and (best is None or _ORDER.index(kind) < _ORDER.index(best["kind"])):
            best = e
    return best


def _exception(events: List[Event], best: Event) -> Optional[str]:
    if best.get("exception"):
        return str(best["exception"])
    for e in events:
        if e.get("kind") == "traceback" and e.get("exception"):
            return str(e["exception"])
    return None


def signal_name(num: Any) -> str:
    try:
        return _signal.Signals(int(num)).name
    except (TypeError, ValueError):
        return "signal %s" % num


def diagnose(events: Iterable[Event], parser: Optional[LogParser] = None,
             exit_code: Optional[int] = None, signal: Optional[int] = None
             ) -> Optional[Dict[str, Any]]:
    """The failure's class and a one-line cause, or None when nothing failed (no error in the
    log and no bad exit). ``{"class", "cause", "phase", "exception", "line", "text",
    "evidence"}``; ``phase``: the startup phase it failed in (or ``serving``)."""
    events = list(events)
    phase: Optional[str] = None
    if parser is not None:
        phase = parser.failed_in or ("serving" if parser.ready else parser.current_phase)
    if phase == "init" and any(e.get("kind") in ("decode", "prefill") for e in events):
        phase = "serving"  # a log cut before its ready line, then batches: it was serving
    evidence = _evidence(events)
    best = _best(events)
    if best is None:
        if signal:
            name = signal_name(signal)
            hint = " (the kernel's OOM killer, or someone's kill)" if name == "SIGKILL" else ""
            return _result("killed", "killed by %s%s, phase %s" % (name, hint, phase or "?"),
                           phase, None, None, evidence)
        if exit_code:
            return _result("exited", "exited with code %s, phase %s; the log names no error"
                           % (exit_code, phase or "?"), phase, None, None, evidence)
        return None
    frames = _frames(events)
    text = str(best.get("text") or "")
    exc = _exception(events, best)
    every = "\n".join(str(e.get("text") or "") for e in events if e.get("kind") in _ORDER)
    kind = best["kind"]
    if kind == "oom":
        if _NO_ROOM_RE.search(every):
            cls = "kv_cache_no_room"
        else:
            where = _where(frames, phase)
            cls = {"cuda_graph": "oom_cuda_graph", "load_weights": "oom_weights",
                   "init": "oom_weights", "kv_cache": "oom_kv_cache"}.get(where or "",
                                                                          "oom_prefill")
        cause = CLASSES[cls]
        if cls == "oom_cuda_graph" and evidence.get("graph_max_bs"):
            cause += " (batch sizes up to %d)" % evidence["graph_max_bs"]
    elif kind == "no_kernel_image":
        cls, cause = "no_kernel_image", CLASSES["no_kernel_image"]
        said = frames + "\n" + every
        for part, rx in _KERNEL_PARTS:  # whose kernels had no image for this GPU
            if rx.search(said):
                evidence["kernels_of"] = part
                cause += " in the %s kernels" % part
                break
        cause += " (built for another architecture)"
    elif kind == "warmup_failed":
        phase = "warmup"
        cls, cause = "warmup_failed", CLASSES["warmup_failed"] + (": %s" % exc if exc else "")
    elif kind == "nccl_error" or _TIMEOUT_RE.search(every) or (
            kind in ("traceback", "fatal", "child_failed") and not exc
            and _DIST_FRAME_RE.search(frames)):
        cls = "dist_timeout" if _TIMEOUT_RE.search(every) else "nccl_error"
        cause = CLASSES[cls]
        secs = _TIMEOUT_S_RE.search(every)
        if secs:
            evidence["timeout_s"] = float(secs.group(1))
            cause += " after %g s" % float(secs.group(1))
        joined = _JOINED_RE.search(every)
        if joined:
            cause += " (%s of %s joined)" % (joined.group(1), joined.group(2))
    else:
        cls = "python_exception"
        if exc:
            cause = "a Python exception: %s" % _one_line(events, exc)
        else:
            funcs = _FRAME_FUNC_RE.findall(frames)
            cause = "a Python exception (the log has no exception line%s)" % (
                "; last frame: %s" % funcs[-1] if funcs else "")
    if phase:
        cause += ", phase %s" % phase
    return _result(cls, cause, phase, exc, best, evidence, text)


def _one_line(events: List[Event], exc: str) -> str:
    """``ValueError: Model architectures [...] are not supported`` (cut to 120 characters)."""
    for e in events:
        if e.get("exception") == exc and e.get("kind") in ("traceback", "exception"):
            msg = e.get("message")
            if msg is None:
                raw = str(e.get("text") or "")
                msg = raw.split(exc + ":", 1)[-1] if exc + ":" in raw else ""
            line = ("%s: %s" % (exc, msg.strip())) if msg and msg.strip() else exc
            return line if len(line) <= 120 else line[:117] + "..."
    return exc


def _result(cls: str, cause: str, phase: Optional[str], exc: Optional[str],
            best: Optional[Event], evidence: Dict[str, Any], text: str = ""
            ) -> Dict[str, Any]:
    return {"class": cls, "cause": cause, "phase": phase, "exception": exc,
            "line": best.get("line") if best else None, "text": text, "evidence": evidence}


# -- the next move: one flag changed, from what ran (its argv, else what its log said) -------

# class -> (the flag, the evidence key that says its value when the argv does not)
MOVE_FLAGS: Dict[str, Any] = {
    "oom_cuda_graph": ("--cuda-graph-max-bs-decode", "graph_max_bs"),
    "oom_kv_cache": ("--mem-fraction-static", "mem_fraction_static"),
    "kv_cache_no_room": ("--mem-fraction-static", "mem_fraction_static"),
    "oom_prefill": ("--chunked-prefill-size", "chunked_prefill_size"),
    "dist_timeout": ("--dist-timeout", "timeout_s"),
}
MEM_FRACTION_STEP = 0.02
# what to look at when no flag would help
HINTS: Dict[str, str] = {
    "oom_weights": "the weights do not fit: a larger --tp-size, a smaller checkpoint, or "
                   "another process holds GPU memory (dsv4tui gpus HOST)",
    "nccl_error": "NCCL_DEBUG=INFO in the profile's env says why (peer access, network, "
                  "a GPU in use)",
    "no_kernel_image": "a backend whose kernels are built for this GPU: the profile's "
                       "--attention-backend / --dsv4-attn-backend, or its SGLang build",
    "warmup_failed": "the server came up but its first request failed: its log has why",
    "python_exception": "the exception names the problem: dsv4tui logs HOST shows it in full",
    "killed": "SIGKILL without an error: the host's OOM killer (dmesg) or a kill",
    "exited": "the log's last lines (dsv4tui logs HOST)",
}


def argv_value(argv: List[str], flag: str) -> Optional[str]:
    """The value of ``flag`` in an argv (``--flag V`` or ``--flag=V``; the last one wins)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(flag + "="):
            found = arg[len(flag) + 1:]
    return found


def with_flag(argv: List[str], flag: str, value: str) -> List[str]:
    """``argv`` with ``flag`` set to ``value``: every occurrence replaced, else appended."""
    out: List[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            skip = True
            continue
        if arg.startswith(flag + "="):
            continue
        out.append(arg)
    return [*out, flag, value]


def _num(text: Any) -> Optional[float]:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _shown(value: float) -> str:
    return "%d" % value if float(value).is_integer() else ("%.2f" % value).rstrip("0")


def next_flag(fail: Dict[str, Any], argv: List[str]) -> Optional[Dict[str, Any]]:
    """The documented next move for a failure of one of :data:`MOVE_FLAGS`' classes:
    ``{"flag", "from", "to", "why"}`` (values as argv strings), or None when no flag helps
    or the value it starts from is known neither from the argv nor from the log."""
    move = MOVE_FLAGS.get(str(fail.get("class")))
    if move is None:
        return None
    flag, key = move
    evidence = fail.get("evidence") or {}
    ran = argv_value(argv, flag)
    start = _num(ran) if ran is not None else _num(evidence.get(key))
    where = "its argv" if ran is not None else "its log"
    cls = fail["class"]
    if start is None:
        return None
    to = 0.0
    if cls == "oom_cuda_graph":
        if start <= 1:
            return None
        to = max(int(start) // 2, 1)
        why = ("half the largest CUDA-graph batch size (%s, from %s): less graph memory"
               % (_shown(start), where))
    elif cls == "oom_kv_cache":
        to = round(start - MEM_FRACTION_STEP, 2)
        why = ("%g less of the GPU for weights + KV cache (%s, from %s): more room for "
               "activations and graphs" % (MEM_FRACTION_STEP, _shown(start), where))
        if to <= 0:
            return None
    elif cls == "kv_cache_no_room":
        to = round(start + MEM_FRACTION_STEP, 2)
        why = "%g more of the GPU for the KV cache (%s, from %s), as SGLang asks" % (
            MEM_FRACTION_STEP, _shown(start), where)
        if to >= 1:
            return None
    elif cls == "oom_prefill":
        if start <= 1:
            return None
        to = int(start) // 2
        why = ("half the prefill chunk (%s tokens, from %s): smaller activations"
               % (_shown(start), where))
    else:  # dist_timeout
        to = int(start) * 2
        why = ("twice the time the ranks wait for each other (%s s, from %s)"
               % (_shown(start), where))
    return {"flag": flag, "from": _shown(start), "to": _shown(to), "why": why}
