"""The GPU panel of a host made of several nodes: its GPUs grouped under one header row per
node (``── h200b · rank 1 · 8 GPUs · util 97% · mem 1001/1123G``), each GPU numbered on its
node; on a short terminal (below SUMMARY_BELOW rows) one summary row per node instead --
a level cell per GPU for utilisation and the tensor pipe, then the node's averages."""

from __future__ import annotations

from dsv4tui.core.telemetry import GpuStatus, HostTelemetry, mean_of, total_of
from dsv4tui.tui.widgets.cells import level_char
from dsv4tui.tui.widgets.gpu_base import Row

SUMMARY_BELOW = 30  # terminal rows: fewer -> one row per node


def by_node(t: HostTelemetry, statuses: list[GpuStatus]) -> list[tuple[str, list[GpuStatus]]]:
    """The statuses of each node, in rank order (GPUs of no node: last, under "?")."""
    groups = t.node_groups or []
    seen: set[int] = set()
    out = []
    for node, indices in groups:
        wanted = set(indices)
        seen |= wanted
        out.append((node, [s for s in statuses if s.sample.index in wanted]))
    rest = [s for s in statuses if s.sample.index not in seen]
    if rest:
        out.append(("?", rest))
    return out


def _figures(sts: list[GpuStatus]) -> tuple[float | None, float | None, str, bool]:
    fresh = [s for s in sts if not s.stale]
    util = mean_of([s.sample.util_gpu for s in fresh])
    tensor = mean_of([s.sample.tensor_active for s in fresh])
    used = total_of([s.sample.mem_used_mib for s in fresh])
    total = total_of([s.sample.mem_total_mib for s in fresh])
    mem = "n/a" if used is None or total is None else f"{used / 1024:.0f}/{total / 1024:.0f}G"
    return util, tensor, mem, bool(sts) and not fresh


def node_header(node: str, rank: int, sts: list[GpuStatus], width: int) -> Row:
    """``── h200b · rank 1 · 8 GPUs · util 97% · tensor 0.4% · mem 1001/1123G ──``."""
    util, tensor, mem, stale = _figures(sts)
    out = Row()
    out.append("── ", "title")
    out.append(node, "header")
    out.append(f" · rank {rank} · {len(sts)} GPU{'s' if len(sts) != 1 else ''}", "title")
    if stale:
        out.append(" · no frames", "warn")
    else:
        out.append(f" · util {'n/a' if util is None else f'{util:.0f}%'}", "value")
        out.append(f" · tensor {'n/a' if tensor is None else f'{tensor:.1f}%'}", "value")
        out.append(f" · mem {mem} ", "value")
    used = len(out.plain)
    if used < width:
        out.append("─" * (width - used), "title")
    return out


def node_summary(node: str, rank: int, sts: list[GpuStatus], name_w: int) -> Row:
    """One row for a node: ``h200b  r1 util ▇▇▇▇▇▇▇▇ 97% tensor ▁▁▁▁▁▁▁▁ 0.4% mem 1001/1123G``."""
    util, tensor, mem, stale = _figures(sts)
    out = Row()
    out.append(f"{node[:name_w]:<{name_w}}", "header")
    out.append(f" r{rank}", "title")
    for label, metric, value, fmt in (("util", "util_gpu", util, ".0f"),
                                      ("tensor", "tensor_active", tensor, ".1f")):
        out.append(f" {label} ", "title")
        for s in sts:
            v = s.sample.value(metric)
            out.append(level_char(None if v is None else v / 100.0),
                       "stale" if s.stale else ("na" if v is None else "spark"))
        out.append(" n/a" if value is None else f" {value:{fmt}}%", "na" if value is None
                   else "value")
    out.append(" mem ", "title")
    out.append(mem, "na" if mem == "n/a" else "value")
    if stale:
        out.append(" no frames", "warn")
    return out
