"""Startup time per phase, per run: the campaign report's column group (weights, KV cache,
CUDA graphs, HTTP up, warm-up, the rest, the whole startup and its change against the
baseline), so a variant that starts in 100 s instead of 5 minutes reads as such.

The phases are the launch's own (the store's launch record: the agent's phase events, from the
server's log: SGLang's ``elapsed=`` for weights and CUDA graphs, log timestamps for the rest);
``startup`` is launch -> ready on the host's clock (server/startup.STARTUP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# column -> the agent's phase name (agent/host/logparse.PHASES; "ready": HTTP up -> ready)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("weights s", "load_weights"), ("KV cache s", "kv_cache"), ("CUDA graphs s", "cuda_graph"),
    ("HTTP up s", "http_up"), ("warm-up s", "ready"))
HEAD: list[str] = ["run", *(c for c, _ in COLUMNS), "other s", "startup s", "vs baseline"]


def _secs(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "-"


def phase_seconds(phases: Any) -> dict[str, float]:
    """``[{name, duration_s}, ...]`` -> ``{name: seconds}`` (the phases a launch recorded)."""
    out: dict[str, float] = {}
    for p in phases if isinstance(phases, list) else []:
        if isinstance(p, Mapping) and isinstance(p.get("duration_s"), (int, float)):
            out[str(p.get("name"))] = out.get(str(p.get("name")), 0.0) + float(p["duration_s"])
    return out


def rows(launches: Sequence[tuple[str, Mapping[str, Any] | None]],
         baseline: str | None = None) -> list[list[str]]:
    """One row per ``(run name, its launch record {startup_s, phases})``; [] when no run has
    a launch with phases (nothing to show). ``baseline``: the run name the change is against
    (default: the first)."""
    if not any(la and la.get("phases") for _, la in launches):
        return []
    totals = {name: (la or {}).get("startup_s") for name, la in launches}
    base = totals.get(baseline if baseline is not None else launches[0][0])
    out = []
    for name, la in launches:
        la = la or {}
        secs = phase_seconds(la.get("phases"))
        total = la.get("startup_s")
        other = total - sum(secs.values()) if isinstance(total, (int, float)) and secs else None
        change = "-"
        if isinstance(total, (int, float)) and isinstance(base, (int, float)) and base > 0:
            change = f"{100.0 * (total - base) / base:+.0f} %"
        out.append([name, *(_secs(secs.get(phase)) for _, phase in COLUMNS),
                    _secs(max(other, 0.0) if other is not None else None), _secs(total), change])
    return out
