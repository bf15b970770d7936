"""Datasheet numbers of the GPUs the roofline knows (docs/roofline.md gives every source).

Units: memory in GB (10^9 bytes) as the datasheets print it, bandwidth in TB/s (10^12
bytes/s), throughput in dense (non-sparse) TFLOP/s of the tensor cores. ``None`` where the
part has no such tensor format (Ampere: FP8/FP4; Ada and Hopper: FP4). Where a datasheet only
prints "with sparsity" figures, the dense figure is half of it (NVIDIA's 2:4 sparsity doubles
the peak); docs/roofline.md marks each derived number.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class GpuSpec:
    key: str
    name: str  # as NVML reports it, where known
    form_factor: str
    memory_gb: float
    bandwidth_tb_s: float
    bf16_tflops: float | None
    fp8_tflops: float | None
    fp4_tflops: float | None
    source: str  # short reference; the full citation is in docs/roofline.md
    aliases: tuple[str, ...] = ()

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_tb_s * 1e12

    def tflops_for(self, bytes_per_param: float) -> tuple[float | None, str]:
        """The dense tensor peak that matches a weight width (FP4 <= 0.5 B, FP8 <= 1 B)."""
        if bytes_per_param <= 0.5 and self.fp4_tflops:
            return self.fp4_tflops, "fp4"
        if bytes_per_param <= 1.0 and self.fp8_tflops:
            return self.fp8_tflops, "fp8"
        return self.bf16_tflops, "bf16"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("aliases")
        d["bandwidth_bytes_s"] = self.bandwidth_bytes_s
        return d


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("rtx-pro-6000-server", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "PCIe, passive (server), 600 W", 96, 1.792, 500, 1000, 2000,
            "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet",
            ("rtx pro 6000 blackwell server", "rtx pro 6000 server", "rtx-pro-6000-server")),
    GpuSpec("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "PCIe, active (workstation), 600 W", 96, 1.792, 500, 1000, 2000,
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet",
            ("rtx pro 6000 blackwell workstation", "rtx pro 6000 blackwell", "rtx pro 6000",
             "rtx-pro-6000", "rtx pro 6000 workstation")),
    GpuSpec("b200", "NVIDIA B200", "SXM (HGX/DGX B200), 1000 W", 180, 8.0, 2250, 4500, 9000,
            "NVIDIA DGX B200 / HGX B200 datasheets (per GPU = system / 8)", ("b200",)),
    GpuSpec("gb200", "NVIDIA GB200", "Grace Blackwell superchip GPU (NVL72)", 186, 8.0, 2500,
            5000, 10000, "NVIDIA GB200 NVL72 specifications (per GPU = superchip / 2)",
            ("gb200",)),
    GpuSpec("h200", "NVIDIA H200", "SXM, 700 W", 141, 4.8, 989, 1979, None,
            "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)", ("h200",)),
    GpuSpec("h100", "NVIDIA H100 80GB HBM3", "SXM5, 700 W", 80, 3.35, 989, 1979, None,
            "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)",
            ("h100 80gb hbm3", "h100 sxm", "h100-sxm", "h100")),
    GpuSpec("a100", "NVIDIA A100-SXM4-80GB", "SXM4, 400 W", 80, 2.039, 312, None, None,
            "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)",
            ("a100-sxm4-80gb", "a100 80gb sxm", "a100-sxm", "a100")),
    GpuSpec("l40s", "NVIDIA L40S", "PCIe, passive, 350 W", 48, 0.864, 362.05, 733, None,
            "NVIDIA L40S datasheet", ("l40s",)),
)

# Names that look like a known part but are another one (different memory or clocks).
_NOT = {
    "h100": ("pcie", "nvl", "h100 94", "h100 64"),
    "h200": ("nvl",),
    "a100": ("pcie", "40gb", "a100-sxm4-40gb"),
    "rtx-pro-6000": ("max-q",),
    "rtx-pro-6000-server": ("max-q",),
}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower().replace("_", " ")).replace("nvidia ", "")


def lookup(name: str) -> GpuSpec | None:
    """A GPU by key (``h200``), NVML name (``NVIDIA H100 80GB HBM3``) or a fragment."""
    text = _norm(name)
    if not text:
        return None
    for spec in GPUS:
        if text in (spec.key, _norm(spec.name)):
            return spec
    for spec in GPUS:
        if any(bad in text for bad in _NOT.get(spec.key, ())):
            continue
        if any(alias in text for alias in spec.aliases):
            return spec
    return None


def known_names() -> list[str]:
    return [spec.key for spec in GPUS]
