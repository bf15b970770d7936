"""Which MoE runner backends can run which checkpoint format: one table for every face;
and which run on the host's GPUs (``sglang_choices.MOE_ARCH``, the table the attention picker
reads too).

The dashboard's backend picker lists only the backends that fit the profile's checkpoint,
each marked ✗ (with the reason) where its kernels do not run on the GPUs;
``dsv4tui server start|restart --backend X`` and the picker's answer both go through
:func:`refuse_backend`, which refuses a misfit (unless ``--force``) before anything is
stopped, so a working server is never thrown away for one; campaign code asks the same
:func:`backend_misfit`.

A backend or checkpoint this table does not know is not refused: ``backend_misfit`` answers
only what the table says (the campaign's notes, ``sglang_choices.MOE_BACKEND_NOTES``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.core.server import sglang_choices

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


def gpu_misfit(backend: str, capability: str | None) -> str | None:
    """Why ``backend``'s kernels do not run on GPUs of compute ``capability`` ("12.0"), or
    None when they do (or the capability or the backend's needs are not known)."""
    why = sglang_choices.arch_misfit("moe_runner_backend", backend, capability)
    return f"backend {backend} {why}" if why else None


def launch_misfit(profile: ServerProfile, backend: str, capability: str | None) -> str | None:
    """Why ``backend`` cannot run ``profile``'s checkpoint, or on these GPUs; None: it fits."""
    return backend_misfit(profile, backend) or gpu_misfit(backend, capability)


FORCE_HINT = "--force launches it anyway"


def refuse_backend(profile: ServerProfile, backend: str | None, capability: str | None, *,
                   force: bool = False, hint: str = FORCE_HINT) -> str | None:
    """Before a restart with ``backend`` stops anything: a known misfit (checkpoint or GPUs)
    is refused (UserError, exit 2: the reason and ``hint``); with ``force`` the reason comes
    back, to be shown as a warning. None when it fits (or when no backend is switched)."""
    if not backend:
        return None
    why = launch_misfit(profile, backend, capability)
    if why is None or force:
        return why
    raise UserError(f"{why} ({hint})", EXIT_CONFIG)
