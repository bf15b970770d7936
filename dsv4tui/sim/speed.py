"""The simulator's performance model: GPUs, per backend + checkpoint speeds, busy counters.

Numbers follow the campaign's table (shared/reference/sglang.md, 8x RTX PRO 6000 Blackwell,
TP 8, C=16 output tok/s): MXFP4/triton 23.2, NVFP4/marlin 28.7, NVFP4/triton 28.5. A decode
step over a batch of B requests takes ``t1 * (1 + alpha * (B - 1))``: every running request
gets one token per step, so aggregate throughput rises sub-linearly with concurrency while
each request slows down, as on a real server.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    name: str
    sm: int  # compute capability as an int: 120 for sm_120
    mem_total_mib: int
    bandwidth_tb_s: float


GPUS: dict[str, GpuSpec] = {
    "rtx-pro-6000": GpuSpec("NVIDIA RTX PRO 6000 Blackwell Server Edition", 120, 97887, 1.79),
    "h200": GpuSpec("NVIDIA H200", 90, 143771, 4.8),
    "h100": GpuSpec("NVIDIA H100 80GB HBM3", 90, 81559, 3.35),
    "b200": GpuSpec("NVIDIA B200", 100, 183359, 8.0),
}
DEFAULT_GPU = "rtx-pro-6000"
_REFERENCE_BANDWIDTH = GPUS[DEFAULT_GPU].bandwidth_tb_s


def gpu_spec(name: str) -> GpuSpec:
    """Look a GPU up by key or by a fragment of its name (``"RTX PRO 6000"``, ``"H200"``)."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    if key in GPUS:
        return GPUS[key]
    for spec in GPUS.values():
        if name.strip().lower() in spec.name.lower():
            return spec
    raise ValueError(f"unknown simulated GPU {name!r}; known: {', '.join(GPUS)}")


@dataclass(frozen=True)
class BackendModel:
    c16_tok_s: float  # aggregate output tok/s at C=16 on the reference GPUs
    alpha: float  # step-time growth per extra running request
    prefill_base_s: float  # fixed cost of a prefill batch
    prefill_ms_per_token: float
    load_extra_s: float  # extra weight-loading time at speed 1 (e.g. marlin repacking)
    busy: dict[str, float]  # per-GPU counters while requests run (percent)


def _busy(util: float, tensor: float, sm: float, dram: float) -> dict[str, float]:
    return {"util_gpu": util, "tensor_active": tensor, "sm_active": sm, "dram_active": dram}


# (checkpoint, backend) -> model. triton on MXFP4 is a slot GEMV on CUDA cores (tensor pipe
# < 1 %); marlin dequantises to BF16 tensor cores; triton on NVFP4 routes to the cutlass FP4
# grouped GEMM.
MODELS: dict[tuple[str, str], BackendModel] = {
    ("MXFP4", "triton"): BackendModel(23.2, 0.35, 0.25, 2.0, 0.0, _busy(98, 0.8, 92, 35)),
    ("NVFP4", "marlin"): BackendModel(28.7, 0.30, 0.12, 1.0, 22.0, _busy(97, 38.0, 88, 52)),
    ("NVFP4", "triton"): BackendModel(28.5, 0.28, 0.14, 1.1, 0.0, _busy(96, 46.0, 86, 48)),
    ("MXFP4", "marlin"): BackendModel(26.1, 0.30, 0.13, 1.0, 18.0, _busy(97, 36.0, 88, 50)),
    ("MXFP4", "flashinfer_mxfp4"): BackendModel(25.4, 0.30, 0.15, 1.2, 0.0, _busy(96, 30.0, 85, 45)),
    ("NVFP4", "flashinfer_cutlass"): BackendModel(27.9, 0.28, 0.13, 1.0, 0.0, _busy(96, 44.0, 86, 47)),
    ("NVFP4", "cutlass"): BackendModel(27.6, 0.28, 0.13, 1.0, 0.0, _busy(96, 43.0, 86, 47)),
}
_GENERIC = BackendModel(24.0, 0.32, 0.18, 1.5, 0.0, _busy(95, 20.0, 85, 40))



def checkpoint_of(quantization: str | None, explicit: str | None = None) -> str:
    if explicit:
        return explicit.upper()
    if quantization in ("modelopt_fp4", "nvfp4_online", "petit_nvfp4"):
        return "NVFP4"
    return "MXFP4"


def resolve_backend(backend: str | None, checkpoint: str) -> str:
    """``auto`` as SGLang resolves it for DeepSeek-V4."""
    if backend in (None, "auto"):
        return "flashinfer_trtllm_routed" if checkpoint == "NVFP4" else "flashinfer_mxfp4"
    return backend


def runs_on(backend: str, gpu: GpuSpec) -> bool:
    """Does ``backend``'s MoE kernel exist for ``gpu`` (the console's one table of which
    kernels need which SM, ``sglang_choices.MOE_ARCH``)?"""
    from dsv4tui.core.server import sglang_choices

    return sglang_choices.arch_misfit("moe_runner_backend", backend,
                                      f"{gpu.sm // 10}.{gpu.sm % 10}") is None


class SpeedModel:
    """Step times for one server (backend, checkpoint, GPU, TP), scaled by ``decode_speed``."""

    def __init__(self, backend: str, checkpoint: str, gpu: GpuSpec, tp_size: int = 8,
                 decode_speed: float = 1.0) -> None:
        self.model = MODELS.get((checkpoint, backend), _GENERIC)
        # Decode is memory-bound: scale with bandwidth and (weakly) with the TP degree.
        scale = (gpu.bandwidth_tb_s / _REFERENCE_BANDWIDTH) * (max(tp_size, 1) / 8) ** 0.7
        self.scale = scale * decode_speed
        m = self.model
        self.t1 = 16.0 / (m.c16_tok_s * (1 + 15 * m.alpha)) / self.scale

    def step_s(self, batch: int) -> float:
        return self.t1 * (1 + self.model.alpha * (max(batch, 1) - 1))

    def aggregate_tok_s(self, batch: int) -> float:
        return max(batch, 1) / self.step_s(batch)

    def prefill_s(self, tokens: int) -> float:
        m = self.model
        return (m.prefill_base_s + tokens * m.prefill_ms_per_token / 1000.0) / self.scale

    def busy(self, running: int) -> dict[str, float]:
        """Per-GPU busy counters for ``running`` requests (tensor/SM grow with the batch)."""
        fill = min(1.0, 0.45 + 0.55 * running / 16.0)
        b = self.model.busy
        return {"util_gpu": b["util_gpu"], "tensor_active": round(b["tensor_active"] * fill, 2),
                "sm_active": round(b["sm_active"] * fill, 1),
                "dram_active": round(b["dram_active"] * fill, 1)}


def run_factor(noise_pct: float, rng: random.Random) -> float:
    """The run-to-run noise model (``--sim-run-noise PCT``): one server process's speed factor,
    log-normal with a log-sd of ``log(1 + PCT/100)`` (a process ~PCT % faster or slower than
    the backend's speed, one sd), drawn once when the process starts."""
    if noise_pct <= 0:
        return 1.0
    return math.exp(rng.gauss(0.0, math.log1p(noise_pct / 100.0)))
