"""GPU summaries over a level's time window, from telemetry frames.

The caller feeds every ``frame`` event of the host's telemetry stream to :meth:`GpuWindow.add`
(frames carry the host's wall clock in ``time``, as the agent's level events do); a level's
summary is computed over ``[started_at, finished_at]``. Missing metrics (None) are skipped,
never counted as 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

# frame field -> summary column prefix
FIELDS = (("util_gpu", "util"), ("tensor_active", "tensor"), ("sm_active", "sm"),
          ("dram_active", "dram"), ("power_w", "power"))


class GpuWindow:
    """Keeps the last ``keep_s`` seconds of frames."""

    def __init__(self, keep_s: float = 6 * 3600.0) -> None:
        self.keep_s = keep_s
        self._frames: deque[tuple[float, list[Mapping[str, Any]]]] = deque()

    def __len__(self) -> int:
        return len(self._frames)

    def add(self, frame: Mapping[str, Any]) -> bool:
        """Keep a frame; False (ignored) when it is not a usable ``frame`` event."""
        t, gpus = frame.get("time"), frame.get("gpus")
        if frame.get("type", "frame") != "frame" or not isinstance(t, (int, float)) \
                or not isinstance(gpus, list):
            return False
        self._frames.append((float(t), [g for g in gpus if isinstance(g, Mapping)]))
        while self._frames and self._frames[0][0] < t - self.keep_s:
            self._frames.popleft()
        return True

    def summary(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """Per GPU: frames, and mean/max of utilisation, tensor, SM, DRAM (%), power (W)."""
        acc: dict[int, dict[str, list[float]]] = {}
        counts: dict[int, int] = {}
        for t, gpus in self._frames:
            if not t0 <= t <= t1:
                continue
            for g in gpus:
                idx = g.get("index")
                if not isinstance(idx, int):
                    continue
                counts[idx] = counts.get(idx, 0) + 1
                per = acc.setdefault(idx, {})
                for key, _ in FIELDS:
                    v = g.get(key)
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        per.setdefault(key, []).append(float(v))
        out = []
        for idx in sorted(counts):
            row: dict[str, Any] = {"gpu": idx, "frames": counts[idx]}
            for key, name in FIELDS:
                vals = acc[idx].get(key, [])
                suffix = "_w" if name == "power" else ""
                row[f"{name}_mean{suffix}"] = round(sum(vals) / len(vals), 3) if vals else None
                row[f"{name}_max{suffix}"] = round(max(vals), 3) if vals else None
            out.append(row)
        return out
