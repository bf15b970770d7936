"""The simulator's command line: SGLang's launch_server flags (argparse, like SGLang) + --sim-*.

Unknown flags exit 2 like SGLang's argparse; prefix matching stays on, so ``--tp 8`` works and
``--cuda-graph-max-bs`` is "ambiguous" exactly as in SGLang 0.5.2x.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from dsv4tui.core.server import sglang_choices as ch

FAULTS = ("wrong-answer", "crash-after:N", "stall", "http-500", "ignore-sigterm", "fail-startup",
          "nccl-hang", "graph-oom:BS", "prefill-oom:TOKENS", "slow-rank:S")
# faults with a number: name -> what the number is
_COUNTED = {"crash-after": "a count", "graph-oom": "a batch size", "prefill-oom": "a token count",
            "slow-rank": "seconds"}


@dataclass(frozen=True)
class Faults:
    wrong_answer: bool = False
    crash_after: int | None = None
    stall: bool = False
    http_500: bool = False
    ignore_sigterm: bool = False
    fail_startup: bool = False
    nccl_hang: bool = False  # a lost peer: NCCL's watchdog lines, then wait (no exit)
    # OOM capturing CUDA graphs when the largest batch size captured is above this
    graph_oom: int | None = None
    # OOM in the warm-up prefill when --chunked-prefill-size is above this
    prefill_oom: int | None = None
    # one rank reaches distributed init this many seconds late (scaled by --sim-speed):
    # later than --dist-timeout (default 300 s, scaled too) -> the init times out
    slow_rank: int | None = None


def _fault(value: str) -> str:
    name, _, arg = value.partition(":")
    if name in _COUNTED:
        if not arg.isdigit():
            raise argparse.ArgumentTypeError(f"{name} needs {_COUNTED[name]}: {name}:N")
        return value
    if value not in FAULTS:
        raise argparse.ArgumentTypeError(f"unknown fault {value!r}; valid: {', '.join(FAULTS)}")
    return value


def faults_of(values: list[str]) -> Faults:
    kw: dict[str, object] = {}
    for v in values:
        name, _, arg = v.partition(":")
        if name in _COUNTED:
            kw[name.replace("-", "_")] = int(arg)
        else:
            kw[name.replace("-", "_")] = True
    return Faults(**kw)  # type: ignore[arg-type]


def _positive_float(value: str) -> float:
    try:
        num = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if num <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return num


def _share(value: str) -> float:
    try:
        num = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 <= num <= 1:
        raise argparse.ArgumentTypeError("must be a share between 0 and 1")
    return num


def _nonnegative_float(value: str) -> float:
    try:
        num = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if num < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return num


def _env_noise() -> float:
    """DSV4TUI_SIM_RUN_NOISE: --sim-run-noise's default (a demo host's servers inherit it)."""
    try:
        return max(0.0, float(os.environ.get("DSV4TUI_SIM_RUN_NOISE") or 0.0))
    except ValueError:
        return 0.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dsv4tui.sim.sglang",
                                description="Simulated SGLang launch_server.")
    a = p.add_argument
    a("--model-path", "--model", required=True)
    a("--tokenizer-path")
    a("--served-model-name")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tensor-parallel-size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", type=int, default=1)
    a("--ep-size", "--ep", "--expert-parallel-size", type=int, default=1)
    a("--pp-size", "--pipeline-parallel-size", type=int, default=1)
    a("--quantization", choices=ch.QUANTIZATIONS)
    a("--moe-runner-backend", choices=ch.MOE_RUNNER_BACKENDS, default="auto")
    a("--attention-backend", choices=ch.ATTENTION_BACKENDS)
    a("--dsv4-attn-backend", choices=ch.DSV4_ATTN_BACKENDS, default="auto")
    a("--dsv4-prefill-backend", choices=ch.DSV4_PREFILL_BACKENDS, default="auto")
    a("--kv-cache-dtype", choices=ch.KV_CACHE_DTYPES, default="auto")
    a("--mem-fraction-static", type=float)
    a("--trust-remote-code", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--api-key")
    a("--speculative-algorithm", choices=ch.SPECULATIVE_ALGORITHMS)
    a("--speculative-draft-model-path")
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)
    a("--log-level", default="info")
    a("--log-level-http")
    a("--decode-log-interval", type=int, default=40)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", "--nccl-init-addr")
    a("--dist-timeout", type=int, help="seconds the ranks wait for each other at init")
    a("--max-running-requests", type=int)
    a("--max-total-tokens", type=int)
    a("--context-length", type=int)
    a("--chunked-prefill-size", type=int, default=8192)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--page-size", type=int)
    a("--cuda-graph-max-bs-decode", type=int)
    a("--cuda-graph-max-bs-prefill", type=int)
    a("--cuda-graph-bs-decode", type=int, nargs="+")
    a("--disable-cuda-graph", action="store_true")
    a("--enable-dp-attention", action="store_true")
    a("--dtype", default="auto")
    a("--random-seed", type=int)
    a("--base-gpu-id", type=int, default=0)
    a("--enable-torch-compile", action="store_true")
    a("--reasoning-parser")
    a("--tool-call-parser")
    a("--chat-template")
    a("--json-model-override-args")
    a("--disable-radix-cache", action="store_true")
    a("--load-format", default="auto")
    a("--watchdog-timeout", type=float, default=300)
    a("--skip-server-warmup", action="store_true")
    a("--schedule-policy", default="fcfs")
    a("--stream-interval", type=int, default=1)
    a("--enable-cache-report", action="store_true")
    # Simulator-only flags.
    a("--sim-speed", type=_positive_float, default=1.0,
      help="time scale of startup and shutdown (1.0 = a realistic ~100 s startup)")
    a("--sim-decode-speed", type=_positive_float, default=1.0,
      help="multiplies token generation speed (1.0 = the campaign's numbers)")
    a("--sim-gpu", default="RTX PRO 6000", help="simulated GPU (RTX PRO 6000, H200, H100, B200)")
    a("--sim-gpus", type=int, default=int(os.environ.get("DSV4TUI_SIM_GPUS") or 8),
      help="number of simulated GPUs on the host")
    a("--sim-fault", action="append", type=_fault, default=[], metavar="|".join(FAULTS))
    a("--sim-run-noise", type=_nonnegative_float, default=_env_noise(), metavar="PCT",
      help="run-to-run noise: this process's speed is multiplied by a log-normal factor "
           "(one sd ~PCT %%) drawn once at start, as a fresh SGLang process is faster or "
           "slower than the last (sim/speed.run_factor; default $DSV4TUI_SIM_RUN_NOISE or 0)")
    a("--sim-seed", type=int, help="the seed of this process's draws (--sim-run-noise); "
      "without it, a fresh draw per process")
    a("--sim-wrong-rate", type=_share, default=0.0, metavar="P",
      help="a subtly wrong backend: that share of arithmetic / canary answers is off by one "
           "(the same prompts every time, as at temperature 0)")
    a("--sim-checkpoint", type=str.upper, choices=("MXFP4", "NVFP4"))
    a("--sim-no-children", action="store_true", help="do not fork scheduler processes")
    a("--sim-nice", type=int, default=0,
      help="lower the simulator's CPU priority by this much (the demo: 10, so a simulated "
           "GPU server on the same laptop never takes the CPU from the dashboard)")
    return p
