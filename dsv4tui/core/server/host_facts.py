"""What the attention picker needs to know of a host: the GPUs' compute capability (the
agent's hello; the simulator's on the demo) and the SGLang version each launch profile runs."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from dsv4tui.core.errors import UserError


@dataclass
class HostFacts:
    capability: str | None = None  # "12.0"; None: not known (yet)
    sglang: dict[str, str | None] | None = None  # profile -> version; None: not probed yet

    def version(self, profile: str) -> str | None:
        return (self.sglang or {}).get(profile)

    async def gather(self, host: Any) -> None:
        """Ask ``host`` (a connected ``hosts.resolve.Host``); each fact is kept as it comes."""
        from dsv4tui.core.server import sglang_version

        self.capability = await capability(host) or self.capability
        versions: dict[str, str | None] = {}
        for name, prof in host.config.profiles.items():
            versions[name] = (await sglang_version.probe(host, prof)).version
        self.sglang = versions


async def capability(host: Any) -> str | None:
    """The compute capability of ``host``'s GPUs ("12.0"; the simulator's on a simulated
    host), from the agent's hello; None when it cannot say."""
    with contextlib.suppress(UserError, OSError):
        events = await host.agent.call("hello", timeout=90.0)
        hello: dict[str, Any] = next((e for e in events if e.get("type") == "hello"), {})
        found = hello.get("compute_capability")
        return found if isinstance(found, str) else None
    return None
