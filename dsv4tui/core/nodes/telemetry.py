"""The GPUs of a host made of several nodes as one host: every node's latest frame merged
into one Frame, node k's GPUs numbered after those of the nodes before it (node 0's GPU 3 is
3; with 8 GPUs each, node 1's GPU 3 is 11), and which GPUs belong to which node, so the GPU
panel can group them under node headers. A node not heard from for STALE_TICKS intervals is
left out of the merged frames, so its GPUs go stale in the host's telemetry as a host's do.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from dsv4tui.core.telemetry import STALE_TICKS, Frame, FrameError, HostTelemetry


class NodeFrames:
    def __init__(self, nodes: list[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.nodes = list(nodes)
        self.clock = clock
        self._latest: dict[str, tuple[Frame, float]] = {}
        self._counts: dict[str, int] = {}  # GPUs each node had in its last frame

    def offsets(self) -> dict[str, int]:
        out, at = {}, 0
        for node in self.nodes:
            out[node] = at
            at += self._counts.get(node, 0)
        return out

    def groups(self) -> list[tuple[str, list[int]]]:
        off = self.offsets()
        return [(n, list(range(off[n], off[n] + self._counts.get(n, 0)))) for n in self.nodes]

    def node_of(self, index: int) -> tuple[str, int] | None:
        """(node, its local GPU index) of merged GPU ``index``."""
        for node, indices in self.groups():
            if index in indices:
                return node, index - indices[0]
        return None

    def add(self, node: str, frame: Frame) -> Frame:
        """Take ``node``'s frame; the merged frame of every node heard from lately."""
        now = self.clock()
        self._latest[node] = (frame, now)
        self._counts[node] = max((g.index for g in frame.gpus), default=-1) + 1
        off = self.offsets()
        gpus = []
        for name in self.nodes:
            got = self._latest.get(name)
            if got is None or now - got[1] > STALE_TICKS * got[0].interval:
                continue
            gpus += [dataclasses.replace(g, index=off[name] + g.index) for g in got[0].gpus]
        first = self._latest.get(self.nodes[0], (frame, now))[0]
        return dataclasses.replace(first, time=frame.time, gpus=tuple(gpus), processes=None,
                                   interval=frame.interval, seq=None)

    def feed(self, telemetry: HostTelemetry, node: str, frame: Frame) -> Frame:
        merged = self.add(node, frame)
        telemetry.add(merged)
        telemetry.node_groups = self.groups()
        return merged

    def feed_event(self, telemetry: HostTelemetry, node: str, ev: dict[str, Any]
                   ) -> Frame | None:
        """A node's ``telemetry`` event: the merged frame, or None (not a frame, or bad)."""
        if ev.get("type") != "frame":
            return None
        try:
            frame = Frame.from_event(ev)
        except FrameError:
            return None
        return self.feed(telemetry, node, frame)
