"""The demo host's config: two profiles that launch the simulator through ``server start``.

``mxfp4``: the stock DeepSeek-V4-Flash MXFP4 checkpoint on the triton MoE backend;
``nvfp4``: the NVFP4 checkpoint on marlin. TP 8 on 8 simulated RTX PRO 6000 (sm_120).
``--sim-speed 8`` makes a startup take ~12 s (~14 s on marlin). Port 30000, or
``$DSV4TUI_DEMO_PORT``: fixed on purpose, so status finds the server a previous run started.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dsv4tui
from dsv4tui.core.config import CampaignConfig, CampaignVariant, HostConfig, ServerProfile

DEMO_SPEED = 8.0
DEMO_PORT = 30000


def demo_port() -> int:
    value = os.environ.get("DSV4TUI_DEMO_PORT")
    return int(value) if value and value.isdigit() else DEMO_PORT


def demo_profile(checkpoint: str, *, port: int | None = None, speed: float = DEMO_SPEED,
                 extra_args: list[str] | None = None) -> ServerProfile:
    """A simulator profile for ``checkpoint`` (MXFP4 -> triton, NVFP4 -> marlin)."""
    root = str(Path(dsv4tui.__file__).resolve().parent.parent)
    nvfp4 = checkpoint.upper() == "NVFP4"
    return ServerProfile(
        python=sys.executable, module="dsv4tui.sim.sglang",
        model_path="/models/DeepSeek-V4-Flash-NVFP4" if nvfp4 else "/models/DeepSeek-V4-Flash",
        served_model_name="deepseek-v4-flash", port=port or demo_port(), tp_size=8,
        quantization="modelopt_fp4" if nvfp4 else None, checkpoint="NVFP4" if nvfp4 else "MXFP4",
        moe_runner_backend="marlin" if nvfp4 else "triton", trust_remote_code=True,
        enable_metrics=True, env={"PYTHONPATH": root}, active_params_b=13.0, bytes_per_param=0.5,
        extra_args=["--sim-speed", f"{speed:g}", "--sim-nice", "10", *(extra_args or [])])


def demo_campaigns() -> dict[str, CampaignConfig]:
    """The campaign of our story, against the simulator, sized down to take ~3 minutes (the
    simulator decodes at the story's real speed, ~23 tok/s at C=16; the story's own sweep is
    C=1, 8, 16 with 8, 32, 48 requests of 256 tokens): MXFP4 on
    triton, NVFP4 on marlin, NVFP4 on triton (native FP4 cutlass), and NVFP4 on
    flashinfer_trtllm_routed, which fails on the simulated sm_120 GPUs the way it does on a
    real RTX PRO 6000 (no kernel image), recorded as failed while the campaign goes on."""
    story = CampaignConfig(
        host="demo", profile="mxfp4",
        sweep={"levels": [(1, 2), (8, 8), (16, 16)], "output_len": 16, "input_len": 64},
        variants=[CampaignVariant(name="MXFP4_triton"),
                  CampaignVariant(name="NVFP4_marlin", profile="nvfp4"),
                  CampaignVariant.model_validate({"name": "NVFP4_triton", "profile": "nvfp4",
                                                  "moe_runner_backend": "triton"}),
                  CampaignVariant.model_validate({
                      "name": "NVFP4_trtllm_routed", "profile": "nvfp4",
                      "moe_runner_backend": "flashinfer_trtllm_routed"})])
    return {"story": story}


def demo_host_config(port: int | None = None) -> HostConfig:
    return HostConfig(profiles={"mxfp4": demo_profile("MXFP4", port=port),
                                "nvfp4": demo_profile("NVFP4", port=port)},
                      default_profile="mxfp4")


DEMO_PAIR_GPU = "H200"
DEMO_PAIR_DIST_OFFSET = 100  # node 0's rendezvous port: the demo port + this


def demo_pair_config(port: int | None = None) -> HostConfig:
    """The two-node demo host (``demo-pair``): DeepSeek-V4 at TP 16 over two simulated nodes
    of 8 H200 each, both on this machine (node 0 serves HTTP on the demo port; node 1 joins
    it at 127.0.0.1, on the demo port + DEMO_PAIR_DIST_OFFSET)."""
    profile = demo_profile("MXFP4", port=port, extra_args=["--sim-gpu", DEMO_PAIR_GPU])
    profile = profile.model_copy(update={"tp_size": 16, "model_path": "/models/DeepSeek-V4-Pro",
                                         "served_model_name": "deepseek-v4-pro",
                                         "active_params_b": None,
                                         "dist_init_port": min(
                                             (port or demo_port()) + DEMO_PAIR_DIST_OFFSET,
                                             65535)})
    return HostConfig(nodes=["demo-node0", "demo-node1"], gpus=8,
                      profiles={"pro-2x8": profile}, default_profile="pro-2x8")

