"""The demo fleet: several simulated hosts on this machine, and one that cannot be reached.

``dsv4tui demo --fleet`` (the Fleet screen) and ``dsv4tui fleet --demo`` (printed) show it:
``sim-h200`` (8x H200), ``sim-b200`` (8x B200), ``sim-pro6000`` (8x RTX PRO 6000) and
``sim-h100`` (4x H100), each its own agent with its own simulated GPUs and its own simulated
SGLang profile (its own port), plus ``offline`` (an SSH target on a closed loopback port:
refused at once, so its row says why). Each host's state lives under the data dir's
``demo-fleet/NAME/``. No textual here.
"""

from __future__ import annotations

from typing import Any

from dsv4tui.core import paths
from dsv4tui.core.config import HostConfig
from dsv4tui.core.hosts.resolve import HostSpec

# name, GPU count, the simulator's GPU (dsv4tui.sim.speed.GPUS)
DEMO_FLEET: tuple[tuple[str, int, str], ...] = (
    ("sim-h200", 8, "h200"),
    ("sim-b200", 8, "b200"),
    ("sim-pro6000", 8, "rtx-pro-6000"),
    ("sim-h100", 4, "h100"),
)
OFFLINE = "offline"
OFFLINE_TARGET = "nobody@127.0.0.1:1"  # nothing listens on port 1: refused at once
PORT_BASE = 30300  # sim-h200 serves on 30300, sim-b200 on 30301, ...


def demo_specs(count: int | None = None, *, offline: bool = True) -> list[HostSpec]:
    """The demo fleet's hosts (the first ``count`` simulated ones, cycling through the models
    for more), plus the unreachable one when ``offline``."""
    n = len(DEMO_FLEET) if count is None else max(1, count)
    specs = []
    for i in range(n):
        base, gpus, gpu = DEMO_FLEET[i % len(DEMO_FLEET)]
        name = base if i < len(DEMO_FLEET) else f"{base}-{i // len(DEMO_FLEET) + 1}"
        specs.append(demo_spec(name, gpus, gpu, PORT_BASE + i))
    if offline:
        specs.append(HostSpec(OFFLINE, HostConfig(ssh=OFFLINE_TARGET, connect_timeout_s=5),
                              "ssh", target=OFFLINE_TARGET))
    return specs


def demo_spec(name: str, gpus: int, gpu: str, port: int) -> HostSpec:
    """One simulated host: ``gpus`` simulated ``gpu`` (a dsv4tui.sim.speed.GPUS key), the
    demo's two profiles on ``port`` at TP ``gpus``."""
    from dsv4tui.core.hosts.demo import demo_profile
    from dsv4tui.sim.speed import GPUS

    spec = GPUS[gpu]
    profiles = {key: demo_profile(ckpt, port=port, extra_args=["--sim-gpu", gpu]).model_copy(
        update={"tp_size": gpus}) for key, ckpt in (("mxfp4", "MXFP4"), ("nvfp4", "NVFP4"))}
    return HostSpec(name, HostConfig(profiles=profiles, default_profile="mxfp4"), "demo",
                    env=sim_env(name, gpus, spec.name, spec.mem_total_mib))


def sim_env(name: str, gpus: int, gpu_name: str, mem_mib: int) -> dict[str, str]:
    """The agent environment of one simulated host: its own state file and GPUs."""
    base = paths.data_dir() / "demo-fleet" / name
    base.mkdir(parents=True, exist_ok=True)
    return {"DSV4TUI_SIM_STATE": str(base / "sim-state.json"), "DSV4TUI_SIM_GPUS": str(gpus),
            "DSV4TUI_SIM_GPU_NAME": gpu_name, "DSV4TUI_SIM_GPU_MEM_MIB": str(mem_mib),
            "DSV4TUI_AGENT_HOME": str(base / "agent")}


async def start_servers(fleet: Any, names: list[str]) -> list[str]:
    """Start the simulated server (its default profile) on each of ``names`` once connected,
    in parallel; the names it started (a failure only leaves that host's server stopped)."""
    import asyncio

    from dsv4tui.core.server import control as server_control

    async def one(name: str) -> str | None:
        try:
            host = await fleet.supervisor(name).wait_connected(timeout=60)
            status = await server_control.status(host)
            if status.get("state") in ("ready", "starting"):
                return None  # a previous demo's server: left as it is
            await server_control.start(host, wait=False)
        except Exception:
            return None
        return name

    done = await asyncio.gather(*(one(n) for n in names))
    return [n for n in done if n is not None]


async def stop_servers(fleet: Any, names: list[str]) -> None:
    """Stop the simulated servers :func:`start_servers` started (the demo cleans up)."""
    import asyncio
    import contextlib

    from dsv4tui.core.server import control as server_control

    async def one(name: str) -> None:
        host = fleet.supervisor(name).host
        if host is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server_control.stop(host, grace=5), 15)

    await asyncio.gather(*(one(n) for n in names))
