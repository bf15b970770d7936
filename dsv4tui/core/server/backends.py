"""Which MoE runner backends can run which checkpoint format: one table for every face.

The dashboard's backend picker lists only the backends that fit the profile's checkpoint;
``dsv4tui server start|restart --backend X`` refuses a misfit (unless ``--force``) before an
8-GPU restart is wasted on it; campaign code asks the same :func:`backend_misfit`.

A backend or checkpoint this table does not know is not refused: ``backend_misfit`` answers
only what the table says (the campaign's notes, ``sglang_choices.MOE_BACKEND_NOTES``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile

FORMATS: tuple[str, ...] = ("MXFP4", "NVFP4", "FP8", "BF16")

# backend -> the checkpoint formats it runs
BACKEND_FITS: dict[str, tuple[str, ...]] = {
    "auto": ("MXFP4", "NVFP4", "FP8", "BF16"),
    "triton": ("MXFP4", "NVFP4", "FP8", "BF16"),
    "marlin": ("MXFP4", "NVFP4"),
    "flashinfer_mxfp4": ("MXFP4",),
    "flashinfer_cutlass": ("NVFP4", "FP8"),
    "cutlass": ("NVFP4", "FP8"),
    "flashinfer_trtllm_routed": ("NVFP4",),
    "flashinfer_trtllm": ("NVFP4", "FP8"),
    "deep_gemm": ("FP8",),
    "triton_kernel": ("MXFP4",),
}

# --quantization -> the checkpoint format it loads (for profiles without a `checkpoint`)
_QUANT_FORMAT: dict[str, str] = {
    "mxfp4": "MXFP4", "quark_mxfp4": "MXFP4",
    "modelopt_fp4": "NVFP4", "nvfp4_online": "NVFP4", "petit_nvfp4": "NVFP4",
    "fp8": "FP8", "modelopt_fp8": "FP8", "w8a8_fp8": "FP8",
}


def checkpoint_format(checkpoint: str | None, quantization: str | None = None) -> str | None:
    """``MXFP4`` / ``NVFP4`` / ``FP8`` / ``BF16``, or None when neither label says which."""
    for text in (checkpoint, quantization):
        if not text:
            continue
        key = text.strip()
        if key.upper() in FORMATS:
            return key.upper()
        if key.lower() in _QUANT_FORMAT:
            return _QUANT_FORMAT[key.lower()]
    return None


def fits(backend: str) -> tuple[str, ...] | None:
    """The checkpoint formats ``backend`` runs, or None when the table does not know it."""
    return BACKEND_FITS.get(backend)


def checkpoint_misfit(checkpoint: str | None, backend: str,
                      quantization: str | None = None) -> str | None:
    """Why ``backend`` cannot run this checkpoint, or None when it fits (or nobody knows)."""
    fmt = checkpoint_format(checkpoint, quantization)
    ok = fits(backend)
    if fmt is None or ok is None or fmt in ok:
        return None
    good = [name for name, formats in BACKEND_FITS.items() if fmt in formats]
    label = checkpoint or quantization or fmt
    shown = label if label.upper() == fmt else f"{label} ({fmt})"
    return (f"backend {backend} runs {', '.join(ok)} checkpoints, not {shown}; "
            f"backends that fit {fmt}: {', '.join(good)}")


def backend_misfit(profile: ServerProfile, backend: str) -> str | None:
    """Why ``backend`` cannot run ``profile``'s checkpoint, or None when it fits."""
    return checkpoint_misfit(profile.checkpoint, backend, profile.quantization)
