"""The fleet's rows as text: the cells ``dsv4tui fleet`` prints and the Fleet screen draws
(one function, so the two cannot disagree). "—" where nothing is known yet, "n/a" where the
host cannot say (never a fake 0). ``compact``: the columns and shorter cells for a terminal
under :data:`WIDE` columns. No textual here.
"""

from __future__ import annotations

from collections.abc import Iterable

from dsv4tui.core.fleet.model import HostSummary
from dsv4tui.core.telemetry import fmt_pct

WIDE = 150  # the full table's width; narrower terminals get the compact one
MEDIUM = 115  # from here on the compact table keeps the GPU model and the profile

COLUMNS: tuple[tuple[str, str], ...] = (
    ("host", "HOST"), ("state", "STATE"), ("gpus", "GPUS"), ("model", "MODEL"),
    ("util", "UTIL"), ("tensor", "TENSOR"), ("mem", "MEM"), ("power", "POWER"),
    ("server", "SERVER"), ("profile", "PROFILE"), ("backend", "BACKEND"),
    ("best", "BEST tok/s"),
)
COMPACT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("host", "HOST"), ("state", "STATE"), ("gpus", "GPUS"), ("util", "UTIL"),
    ("tensor", "TENS"), ("mem", "MEM"), ("power", "POWER"), ("server", "SERVER"),
    ("backend", "BACKEND"), ("best", "tok/s"),
)


MEDIUM_COLUMNS: tuple[tuple[str, str], ...] = (
    *COMPACT_COLUMNS[:3], ("model", "MODEL"), *COMPACT_COLUMNS[3:8], ("profile", "PROFILE"),
    *COMPACT_COLUMNS[8:],
)


def columns(compact: bool = False) -> tuple[tuple[str, str], ...]:
    return COMPACT_COLUMNS if compact else COLUMNS


def columns_for(width: int) -> tuple[bool, tuple[tuple[str, str], ...]]:
    """(compact cells?, the columns) for a terminal ``width`` columns wide."""
    if width >= WIDE:
        return False, COLUMNS
    return True, MEDIUM_COLUMNS if width >= MEDIUM else COMPACT_COLUMNS


def _pct(value: float | None) -> str:
    return fmt_pct(value)


def state_text(s: HostSummary, compact: bool = False) -> str:
    """``connected``, ``lost · retry 4s``, ``failed``, ``connected · stale`` ...
    (compact: ``stale``, ``retry 4s``)."""
    if s.connected and s.stale:
        return "stale" if compact else f"{s.state} · stale"
    if s.retry_in is not None:
        return f"retry {s.retry_in:.0f}s" if compact else f"{s.state} · retry {s.retry_in:.0f}s"
    return s.state


_NAME_NOISE = ("NVIDIA ", " Blackwell Server Edition", " Server Edition",
               " Workstation Edition")


def short_model(summary: str, *, one_kind: bool = True) -> str:
    """``8× NVIDIA RTX PRO 6000 Blackwell Server Edition`` -> ``RTX PRO 6000`` (the count has
    its own column; a mixed host keeps its counts: ``4× H200 + 4× H100``)."""  # noqa: RUF002
    text = summary
    for noise in _NAME_NOISE:
        text = text.replace(noise, "")
    if one_kind and " + " not in text:
        text = text.split("× ", 1)[-1]  # noqa: RUF001
    return text


def cells(s: HostSummary, compact: bool = False) -> dict[str, str]:
    """The row of ``s``, one string per :data:`COLUMNS` key ("—" where nothing is known,
    "n/a" where the host cannot say)."""
    dash = "—"
    known = s.frames > 0 and s.connected  # a lost host's last figures are not shown as now
    mem = dash
    if s.mem_total_mib and known:
        mem = _pct(s.mem_pct) if compact else (
            f"{_pct(s.mem_pct)} {(s.mem_used_mib or 0) / 1024:.0f}/{s.mem_total_mib / 1024:.0f}G")
    power = dash
    if s.power_w is not None and known:
        kw = "kW" if compact else " kW"
        power = f"{s.power_w / 1000:.2f}{kw}" if s.power_w >= 1000 else f"{s.power_w:.0f} W"
    model = short_model(s.gpu_model, one_kind=bool(s.gpu_count)) if s.gpu_model else dash
    if s.simulated:
        model = f"{model} SIMULATED" if model != dash else "SIMULATED"
    if s.telemetry_error and not known:
        model = s.telemetry_error
    gpus = str(s.gpu_count) if s.gpu_count is not None else dash
    if compact and s.simulated:  # the compact table may have no MODEL column to say it in
        gpus = f"{gpus} SIM" if gpus != dash else "SIM"
    server = (s.server or dash) if s.connected else dash
    if s.status_error and s.server is None and s.connected:
        server = "unknown"
    return {
        "host": s.host, "state": state_text(s, compact),
        "gpus": gpus, "model": model,
        "util": _pct(s.util_pct) if known else dash,
        "tensor": _pct(s.tensor_pct) if known else dash,
        "mem": mem, "power": power, "server": server, "profile": s.profile or dash,
        "backend": s.backend or dash,
        "best": f"{s.best_tok_s:,.0f}" if s.best_tok_s is not None else dash,
    }


def problems(summaries: Iterable[HostSummary]) -> list[str]:
    """One line per host that has something wrong: not connected (why), telemetry or status
    failing."""
    out = []
    for s in summaries:
        if not s.connected and s.error:
            out.append(s.error if s.error.startswith(f"{s.host}:") else f"{s.host}: {s.error}")
        elif s.telemetry_error:
            out.append(f"{s.host}: telemetry: {s.telemetry_error}")
        elif s.status_error:
            out.append(f"{s.host}: server status: {s.status_error}")
    return out
