"""Which SGLang a launch profile runs on its host: the version the profile's python has
installed (the agent's ``sglang-version``: importlib.metadata in that interpreter, with the
profile's environment; sglang is never imported), or the simulator's for the demo profiles.

A launch is validated against that version's choice lists (:mod:`dsv4tui.core.server.sglang_choices`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.config import ServerProfile
from dsv4tui.core.errors import UserError

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host

SIM_MODULE = "dsv4tui.sim."


@dataclass(frozen=True)
class SglangVersion:
    python: str
    version: str | None
    source: str  # "installed" | "simulator" | "absent" | "unknown" (the probe failed)
    detail: str | None = None

    def text(self) -> str:
        if self.source == "simulator":
            return f"sglang {self.version} (the simulator)"
        if self.version:
            return f"sglang {self.version} in {self.python}"
        if self.source == "absent":
            return f"no sglang in {self.python}" + (f" ({self.detail})" if self.detail else "")
        return f"sglang version unknown in {self.python}" + (
            f" ({self.detail})" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "version": self.version, "source": self.source,
                "detail": self.detail}


def simulator_version(profile: ServerProfile) -> str | None:
    """The SGLang version the simulator plays, for a profile that launches it."""
    if not profile.module.startswith(SIM_MODULE):
        return None
    from dsv4tui.sim.runtime import VERSION

    return VERSION


def from_probe(python: str, ev: dict[str, Any]) -> SglangVersion:
    """An agent ``sglang_version`` (or a ``hello`` probe) event -> SglangVersion."""
    if ev.get("version"):
        return SglangVersion(python, str(ev["version"]), "installed")
    if ev.get("present"):
        return SglangVersion(python, None, "unknown", "sglang is importable but has no "
                             "package metadata (a source checkout?)")
    if ev.get("error"):
        return SglangVersion(python, None, "unknown" if ev["error"] != "interpreter not found"
                             else "absent", str(ev["error"]))
    return SglangVersion(python, None, "absent")


async def probe(host: Host, profile: ServerProfile) -> SglangVersion:
    """The SGLang ``profile`` runs on ``host`` (never raises for a failed probe: the launch is
    then validated against the newest lists, as without a version)."""
    sim = simulator_version(profile)
    if sim is not None:
        return SglangVersion(profile.python, sim, "simulator")
    args = ["sglang-version", "--python", profile.python]
    if profile.env:
        args += ["--env-json", json.dumps(profile.env)]
    try:
        events = await host.agent.call(*args, timeout=90.0)
    except (UserError, OSError) as exc:
        return SglangVersion(profile.python, None, "unknown", getattr(exc, "message", str(exc)))
    ev = next((e for e in events if e.get("type") == "sglang_version"), {})
    return from_probe(profile.python, ev)
