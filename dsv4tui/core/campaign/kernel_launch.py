"""How a capture's kernel launches read -- blocks, share of the SMs, estimated occupancy and
the findings -- for every face: ``dsv4tui kernels`` (text), the Kernels screen (a column and
the findings panel), the comparison of two captures and the campaign report.

The numbers are the agent's (``agent/kernels/trace_parse.py``: ``kernel["launch"]``,
``summary["launch"]``); nothing here recomputes them. A capture stored before the agent read
launch fields, or a trace without them, reads "not in this trace", never a guessed number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_IN_TRACE = "not in this trace"
NOT_IN_CAPTURE = ("not in this capture (stored before dsv4tui read the profiler's launch "
                  "fields)")


def launch_cells(k: Mapping[str, Any]) -> tuple[str, str, str]:
    """(blocks, SMs, occ) of a kernel row: ``64``, ``34%`` (the share of the SMs one launch
    covers; ``3.9w`` waves when the grid is larger than the GPU), ``24%`` (est. achieved
    occupancy; ``n/e`` where the profiler could not estimate it); ``-`` where the trace has
    no launch fields."""
    launch = k.get("launch")
    if not isinstance(launch, Mapping):
        return "-", "-", "-"
    blocks = str(launch.get("blocks", "-")) + ("+" if (launch.get("shapes") or 1) > 1 else "")
    return blocks, coverage_cell(launch), occupancy_cell(launch)


def coverage_cell(launch: Mapping[str, Any] | None) -> str:
    if not isinstance(launch, Mapping) or launch.get("sm_coverage") is None:
        return "-"
    waves = launch.get("waves")
    if isinstance(waves, (int, float)) and waves >= 1.0:
        return f"{waves:.1f}w"
    return f"{100 * float(launch['sm_coverage']):.0f}%"


def occupancy_cell(launch: Mapping[str, Any] | None) -> str:
    if not isinstance(launch, Mapping):
        return "-"
    occ = launch.get("occupancy_pct")
    if occ is None:
        return "-" if launch.get("occupancy_note") == NOT_IN_TRACE else "n/e"
    return f"{occ:.0f}%"


def family_cell(f: Mapping[str, Any]) -> str:
    """A family's time-weighted SM coverage and occupancy: ``SMs 34% occ 3%``."""
    launch = f.get("launch")
    if not isinstance(launch, Mapping):
        return "-"
    cov, occ = launch.get("sm_coverage"), launch.get("occupancy_pct")
    parts = []
    if cov is not None:
        parts.append(f"SMs {100 * cov:.0f}%")
    if occ is not None:
        parts.append(f"occ {occ:.0f}%")
    return " ".join(parts) or "-"


def findings(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    launch = summary.get("launch")
    if not isinstance(launch, Mapping):
        return []
    return [f for f in launch.get("findings") or [] if isinstance(f, Mapping)]


def finding_texts(summary: Mapping[str, Any], limit: int | None = None) -> list[str]:
    texts = [str(f.get("text") or "") for f in findings(summary)]
    return texts[:limit] if limit is not None else texts


def launch_note(summary: Mapping[str, Any]) -> str:
    """One line: the SM count and where it came from, or why there are no launch numbers."""
    launch = summary.get("launch")
    if not isinstance(launch, Mapping):
        return "launch fields: " + NOT_IN_CAPTURE
    return "launch: " + str(launch.get("note") or NOT_IN_TRACE)


def launch_lines(summary: Mapping[str, Any], limit: int | None = None) -> list[str]:
    """The launch note, then the findings ranked by the time they cost (plain text)."""
    lines = [launch_note(summary)]
    launch = summary.get("launch")
    if not isinstance(launch, Mapping) or not launch.get("fields_share"):
        return lines
    texts = finding_texts(summary)
    if not texts:
        lines.append(
            f"no kernel that costs {100 * float(launch.get('min_share') or 0.05):.0f} % of the "
            f"step or more covers under {100 * float(launch.get('low_coverage') or 0.5):.0f} % "
            f"of the SMs, runs under {float(launch.get('low_occupancy_pct') or 25):.0f} % "
            "estimated occupancy, or runs on CUDA cores where its family has tensor cores")
        return lines
    lines.append("findings, ranked by the time they cost:")
    shown = texts if limit is None else texts[:limit]
    lines += [f"{i}. {t}" for i, t in enumerate(shown, 1)]
    if len(texts) > len(shown):
        lines.append(f"... {len(texts) - len(shown)} more")
    return lines


def run_kernel_lines(store: Any, run_id: int) -> list[str] | None:
    """The launch note and findings of a run's newest kernel capture (the campaign report);
    None when no capture is attached to the run."""
    from dsv4tui.core.store import kernels as kernel_store

    try:
        items = kernel_store.captures(store, run_id=run_id, limit=1)
    except Exception:  # an older store without the kernels table: nothing to say
        return None
    if not items:
        return None
    return [f"capture {items[0].title}", *launch_lines(items[0].summary)]
