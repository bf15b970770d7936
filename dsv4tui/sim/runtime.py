"""The simulated server's state: derived settings, memory model, phases, children, exit paths."""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from typing import Any, NoReturn

from dsv4tui.sim import answers
from dsv4tui.sim.args import Faults, faults_of
from dsv4tui.sim.engine import Engine
from dsv4tui.sim.log import SimLog
from dsv4tui.sim.publish import StatePublisher
from dsv4tui.sim.speed import (
    GpuSpec,
    SpeedModel,
    checkpoint_of,
    gpu_spec,
    resolve_backend,
    run_factor,
)

VERSION = "0.5.23"
_GIB = 1024.0
_DRIVER_RESERVED_GB = 2.0
_KV_BYTES_PER_TOKEN = 47_000


class SimServer:
    """Everything the startup script, the engine and the HTTP app share."""

    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        self.args = args
        self.argv = argv
        self.faults: Faults = faults_of(args.sim_fault)
        self.speed_factor: float = args.sim_speed
        self.gpu: GpuSpec = gpu_spec(args.sim_gpu)
        self.checkpoint = checkpoint_of(args.quantization, args.sim_checkpoint)
        self.backend = resolve_backend(args.moe_runner_backend, self.checkpoint)
        self.served_name: str = args.served_model_name or args.model_path
        model = args.model_path.lower()
        self.is_dsv4 = "deepseek-v4" in model or "deepseekv4" in model or "dsv4" in model
        self.architecture = ("DeepseekV4ForCausalLM" if self.is_dsv4 else
                             "DeepseekV3ForCausalLM" if "deepseek" in model else "LlamaForCausalLM")
        self.context_len: int = args.context_length or (1048576 if self.is_dsv4 else 131072)
        self.max_running: int = args.max_running_requests or 256
        # --sim-run-noise: this process's speed factor, drawn once (sim/speed.run_factor)
        self.run_factor = run_factor(getattr(args, "sim_run_noise", 0.0), random.Random(
            args.sim_seed if getattr(args, "sim_seed", None) is not None else None))
        self.wrong_rate: float = getattr(args, "sim_wrong_rate", 0.0)
        self.speed = SpeedModel(self.backend, self.checkpoint, self.gpu, args.tp_size,
                                args.sim_decode_speed * self.run_factor)
        # several nodes: this node runs TP ranks [first_tp_rank, first_tp_rank + local_tp)
        self.nnodes = max(int(args.nnodes or 1), 1)
        self.node_rank = int(args.node_rank or 0)
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"--node-rank {self.node_rank} must be in [0, {self.nnodes})")
        if self.nnodes > 1 and not args.dist_init_addr:
            raise ValueError("--nnodes > 1 needs --dist-init-addr HOST:PORT (node 0's)")
        if max(args.tp_size, 1) % self.nnodes:
            raise ValueError(f"--tp-size {args.tp_size} does not divide over --nnodes "
                             f"{self.nnodes}")
        self.local_tp = max(args.tp_size, 1) // self.nnodes
        self.first_tp_rank = self.node_rank * self.local_tp
        self.peer_running = 0  # rank 0's running requests, as a node rank > 0 hears them
        self.rendezvous: Any = None
        self.log = SimLog(args.tp_size, args.dp_size, args.ep_size,
                          local_ranks=range(self.first_tp_rank,
                                            self.first_tp_rank + self.local_tp))
        # Memory (GB per GPU) follows the phases.
        self.total_gb = self.gpu.mem_total_mib / _GIB
        self.used_gb = 0.0
        self.weights_gb = (164.0 if self.is_dsv4 else 16.0) / max(args.tp_size, 1)
        self.mem_fraction = args.mem_fraction_static or 0.88
        self.kv_gb = 0.0
        self.max_total_tokens = 0
        self.load_progress = 0.0
        self.phase = "load_weights"
        self.phase_seconds: dict[str, float] = {}
        self._phase_at: float | None = time.monotonic()
        self.ready = False
        self.draining = False
        self.started = time.time()
        self.children: list[int] = []
        self.profile: dict[str, Any] | None = None
        self.engine: Engine | None = None
        self.publisher = StatePublisher(os.environ.get("DSV4TUI_SIM_STATE"), self.snapshot)

    def off_by_one(self, prompt: str) -> bool:
        """--sim-wrong-rate P: is this prompt's answer one of the share P answered off by one
        (decided by the prompt alone, so the same prompts every time)."""
        return self.wrong_rate > 0 and answers.share_of(prompt) < self.wrong_rate

    # -- time and phases ---------------------------------------------------------------------

    def scaled(self, seconds: float) -> float:
        return seconds / self.speed_factor

    def set_phase(self, phase: str) -> None:
        now = time.monotonic()
        if self.phase and self.phase != phase and self._phase_at is not None:
            # how long each startup phase took (sglang:startup_time_seconds{phase=...})
            self.phase_seconds[self.phase] = round(now - self._phase_at, 3)
        self._phase_at = now
        self.phase = phase
        self.publisher.publish()

    @property
    def avail_gb(self) -> float:
        return self.total_gb - _DRIVER_RESERVED_GB - self.used_gb

    def snapshot(self) -> dict[str, Any]:
        eng = self.engine
        running = eng.num_running if eng else 0
        if self.node_rank > 0:
            running = self.peer_running
        used = self.used_gb + (_DRIVER_RESERVED_GB if self.used_gb else 0.0)
        return {
            "phase": self.phase, "tp_size": self.local_tp,
            "gpu_ids": list(range(self.args.base_gpu_id, self.args.base_gpu_id + self.local_tp)),
            "nnodes": self.nnodes, "node_rank": self.node_rank,
            "gpu_name": self.gpu.name, "mem_total_mib": self.gpu.mem_total_mib,
            "backend": self.backend, "checkpoint": self.checkpoint,
            "running_requests": running, "queue_requests": len(eng.waiting) if eng else 0,
            "gen_tok_s": round(eng.gen_tok_s(), 2) if eng else 0.0,
            "mem_used_frac": round(min(used / self.total_gb, 1.0), 4),
            "load_progress": round(self.load_progress, 3),
            "busy": self.speed.busy(running),
        }

    def kv_tokens(self) -> int:
        return int(self.kv_gb * 1e9 / _KV_BYTES_PER_TOKEN)

    # -- child processes (sglang::scheduler_TPn, sglang::detokenizer) ------------------------

    def fork_children(self) -> None:
        """Fork idle stand-ins for SGLang's scheduler/detokenizer processes (same group).

        Like SGLang's children they die when the parent goes (polled once a second, so an
        orphan can outlive a SIGKILLed parent briefly: that is what stop's group kill is for).
        """
        if self.args.sim_no_children:
            return
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        for _ in range(self.local_tp + (1 if self.node_rank == 0 else 0)):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                try:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    while os.getppid() == parent:
                        time.sleep(1.0)
                finally:
                    os._exit(0)
            self.children.append(pid)

    def kill_children(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in self.children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        self.children = []

    # -- ways out ----------------------------------------------------------------------------

    def crash(self, lines: list[str], rank: int | None = None,
              head: str = "Scheduler hit an exception", exit_code: int = 1) -> NoReturn:
        """Log a failure the way SGLang does (traceback, then the launcher) and exit;
        ``rank``: the TP rank that failed (default: this node's first)."""
        self.log.info(f"{head}: Traceback (most recent call last):",
                      self.first_tp_rank if rank is None else rank)
        for line in lines:
            self.log.plain(line)
        self.log.plain("")
        self.log.info("Received sigquit from a child process. It usually means the child failed.",
                      None)
        self.exit(exit_code, "crashed")

    def exit(self, code: int, phase: str) -> NoReturn:
        self.phase = phase
        self.used_gb = 0.0
        self.publisher.stop(phase=phase, running_requests=0, queue_requests=0, gen_tok_s=0.0,
                            mem_used_frac=0.0)
        self.kill_children()
        sys.stderr.flush()
        os._exit(code)
