"""The Fleet screen with frozen data: five hosts, no connection (snapshot tests).

Two H200 nodes (one serving NVFP4 on marlin under load, one starting), an RTX PRO 6000 box
with its server stopped, a B200 node that refuses the connection (its one-line reason, the
retry countdown) and a host without an NVIDIA driver. Run it by hand:
``python tests/snapshot_apps/fleet.py [THEME]``.
"""

from __future__ import annotations

import sys

from dsv4tui.core.config import Settings
from dsv4tui.core.fleet.model import HostSummary
from dsv4tui.tui.fleet_app import FleetApp

H200_MIB = 143_771
PRO_MIB = 97_887


def frozen_summaries() -> list[HostSummary]:
    return [
        HostSummary("h200a", state="connected", gpu_count=8, gpu_model="8× NVIDIA H200",  # noqa: RUF001
                    util_pct=97.4, tensor_pct=31.2, mem_used_mib=8 * 131_000,
                    mem_total_mib=8 * H200_MIB, power_w=8 * 612.0, power_limit_w=8 * 700.0,
                    server="ready", profile="nvfp4", backend="marlin", last_run=41,
                    last_label="NVFP4_marlin", best_tok_s=2874.6, frames=120),
        HostSummary("h200b", state="connected", gpu_count=8, gpu_model="8× NVIDIA H200",  # noqa: RUF001
                    util_pct=12.0, tensor_pct=0.4, mem_used_mib=8 * 61_000,
                    mem_total_mib=8 * H200_MIB, power_w=8 * 180.0, power_limit_w=8 * 700.0,
                    server="starting", profile="mxfp4", backend="triton", last_run=38,
                    last_label="MXFP4_triton", best_tok_s=1210.0, frames=120),
        HostSummary("ct200", state="connected", gpu_count=8,
                    gpu_model="8× NVIDIA RTX PRO 6000 Blackwell Server Edition",  # noqa: RUF001
                    util_pct=0.0, tensor_pct=0.0, mem_used_mib=8 * 512.0,
                    mem_total_mib=8 * PRO_MIB, power_w=8 * 31.0, power_limit_w=8 * 600.0,
                    server="stopped", frames=120, stale=True),
        HostSummary("b200", state="reconnecting", retry_in=12.0,
                    error="b200: connection refused by 10.0.0.7:22"),
        HostSummary("gpu-old", state="connected", server="stopped",
                    telemetry_error="no NVIDIA driver on gpu-old"),
    ]


class FrozenFleet:
    """What FleetApp reads of a Fleet, frozen."""

    def __init__(self) -> None:
        self._summaries = frozen_summaries()

    def summaries(self) -> list[HostSummary]:
        return self._summaries


def frozen_fleet_app(theme: str = "dark") -> FleetApp:
    return FleetApp(FrozenFleet(), settings=Settings(theme=theme), live=False,
                    title="fleet", selected="h200b")


if __name__ == "__main__":
    frozen_fleet_app(*(sys.argv[1:2])).run()
