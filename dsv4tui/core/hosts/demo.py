"""The demo host's config: two profiles that launch the simulator through ``server start``.

``mxfp4``: the stock DeepSeek-V4-Flash MXFP4 checkpoint on the triton MoE backend;
``nvfp4``: the NVFP4 checkpoint on marlin. TP 8 on 8 simulated RTX PRO 6000 (sm_120).
``--sim-speed 8`` makes a startup take ~12 s (~14 s on marlin).

The port: ``$DSV4TUI_DEMO_PORT``, else one this machine's demo took once from the free ports
(not SGLang's default 30000, where a real server may listen) and keeps in the data dir, so
``dsv4tui server status demo`` finds the server a dashboard started. ``dsv4tui demo`` claims
it (``resolve.claim_demo_port``): when something the demo did not start listens there, it
takes another free port and says so.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import dsv4tui
from dsv4tui.core import paths
from dsv4tui.core.config import CampaignConfig, CampaignVariant, HostConfig, ServerProfile

DEMO_SPEED = 8.0
PORT_ENV = "DSV4TUI_DEMO_PORT"
PORT_FILE = "port"  # in the demo's data dir: the port this machine's demo took


def _port_file() -> Path:
    return paths.data_dir() / "demo" / PORT_FILE


def _kept_port() -> int | None:
    try:
        text = _port_file().read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def keep_port(port: int) -> None:
    path = _port_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{PORT_FILE}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick of the loopback's free ones)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_port() -> int:
    """``$DSV4TUI_DEMO_PORT``, else the port this machine's demo keeps (taken the first time
    from the free ones)."""
    value = os.environ.get(PORT_ENV)
    if value and value.isdigit() and 0 < int(value) < 65536:
        return int(value)
    kept = _kept_port()
    if kept is None:
        kept = free_port()
        keep_port(kept)
    return kept


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
    real RTX PRO 6000 (no kernel image), recorded as failed while the campaign goes on. Each
    variant's kernels are captured at C=16 after its first sweep (families per variant in the
    report and the Campaign screen)."""
    story = CampaignConfig(
        host="demo", profile="mxfp4",
        sweep={"levels": [(1, 2), (8, 8), (16, 16)], "output_len": 16, "input_len": 64},
        kernels={"level": 16, "steps": 3, "warmup": 0.5},  # where the time moved, per variant
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

