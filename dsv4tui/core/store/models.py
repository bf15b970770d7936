"""Rows read back from the run store (plain dataclasses, JSON-ready with ``to_dict``).

Readers are tolerant: a row of an older schema (a column missing), a stats blob with fields
missing, null or of the wrong type, or JSON that does not parse, reads as None / empty in the
shape every consumer expects, never as an exception (see :func:`normalise_level`).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dsv4tui.agent.bench import stats as _stats
from dsv4tui.core.store import sql
from dsv4tui.core.store.owner import owner_state, parse_owner

RUN_STATUSES = ("running", "done", "partial", "cancelled", "failed", "interrupted")


def _get(row: sqlite3.Row | Mapping[str, Any], key: str) -> Any:
    """A column, or None where the row (an older schema) has no such column."""
    try:
        return row[key]
    except (IndexError, KeyError):
        return None


def _number(v: Any) -> float | int | None:
    """An int or a finite float, else None (bools, strings, NaN, dicts are not numbers)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _count(v: Any) -> int | None:
    n = _number(v)
    return None if n is None else int(n)


# The full shape of a level (stats.level_metrics' output): its keys, and the sub-keys of the
# latency summaries. Missing or unusable values read as None ({} for errors_by_kind).
_SHAPE = _stats.level_metrics([], 0)
SUMMARY_FIELDS = tuple(k for k, v in _SHAPE.items() if isinstance(v, dict) and k != "errors_by_kind")
COUNT_FIELDS = ("concurrency", "requests", "completed", "errors", "output_tokens")
NUMBER_FIELDS = tuple(k for k in _SHAPE if k not in SUMMARY_FIELDS and k not in COUNT_FIELDS
                      and k not in ("errors_by_kind", "token_count_source"))
LEVEL_EVENT_FIELDS = ("level", "started_at", "finished_at")  # what the level event adds


def _summary(v: Any) -> dict[str, float | int | None]:
    src = v if isinstance(v, Mapping) else {}
    out: dict[str, float | int | None] = {k: _number(src.get(k)) for k in _stats.SUMMARY_KEYS}
    for k, x in src.items():  # extra keys (``max``) kept, as numbers or None
        if k not in out:
            out[str(k)] = _number(x)
    return out


def normalise_level(level: Any, **fallback: Any) -> dict[str, Any]:
    """A level's stats in the full shape of ``stats.level_metrics`` output, whatever was stored.

    Every key is there (None where unknown; ``errors_by_kind`` {}), every latency summary is a
    dict with mean/p50/p90/p99, numbers are numbers. ``fallback`` fills what the stats lack
    (the level row's columns: ``completed=...``, ``ttft_mean_ms=...`` for ``ttft_ms.mean``).
    Unknown extra keys are kept as stored.
    """
    src: Mapping[str, Any] = level if isinstance(level, Mapping) else {}
    out: dict[str, Any] = {str(k): v for k, v in src.items()}
    for k in COUNT_FIELDS:
        out[k] = _count(src.get(k))
    for k in NUMBER_FIELDS:
        out[k] = _number(src.get(k))
    for k in SUMMARY_FIELDS:
        out[k] = _summary(src.get(k))
    kinds = src.get("errors_by_kind")
    out["errors_by_kind"] = ({str(k): c for k, v in kinds.items() if (c := _count(v)) is not None}
                             if isinstance(kinds, Mapping) else {})
    source = src.get("token_count_source")
    out["token_count_source"] = source if isinstance(source, str) else None
    for k in LEVEL_EVENT_FIELDS:
        out[k] = _count(src.get(k)) if k == "level" else _number(src.get(k))
    out["partial"] = bool(src.get("partial"))
    out["rebuilt"] = bool(src.get("rebuilt"))
    for k, v in fallback.items():
        if k.endswith("_mean_ms") and k[:-len("_mean_ms")] + "_ms" in SUMMARY_FIELDS:
            summary = out[k[:-len("_mean_ms")] + "_ms"]
            if summary["mean"] is None:
                summary["mean"] = _number(v)
        elif out.get(k) is None:
            out[k] = _count(v) if k in COUNT_FIELDS or k == "level" else (
                v if isinstance(v, str) else _number(v))
    return out


@dataclass
class Level:
    run_id: int
    idx: int
    concurrency: int
    requests: int
    partial: bool
    stats: dict[str, Any]  # the agent's `level` event (docs/metrics.md), normalise_level'd
    gpus: list[dict[str, Any]] = field(default_factory=list)
    rebuilt: bool = False  # made from the stored requests (the level event never arrived)

    @property
    def output_tok_s(self) -> float | None:
        return self.stats.get("output_tok_s")

    @property
    def ttft_mean_ms(self) -> float | None:
        return (self.stats.get("ttft_ms") or {}).get("mean")

    @property
    def power_w(self) -> float | None:
        """Sum over GPUs of the mean power in the level's window (None without telemetry)."""
        vals = [g["power_mean_w"] for g in self.gpus if g.get("power_mean_w") is not None]
        return sum(vals) if vals else None

    @property
    def tok_s_per_kw(self) -> float | None:
        power, tok_s = self.power_w, self.output_tok_s
        if not power or tok_s is None:
            return None
        return tok_s / (power / 1000.0)

    @property
    def tensor_mean(self) -> float | None:
        vals = [g["tensor_mean"] for g in self.gpus if g.get("tensor_mean") is not None]
        return sum(vals) / len(vals) if vals else None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.stats)
        out.update(level=self.idx, concurrency=self.concurrency, requests=self.requests,
                   partial=self.partial, rebuilt=self.rebuilt, gpus=self.gpus,
                   power_w=self.power_w, tok_s_per_kw=self.tok_s_per_kw)
        return out

    @classmethod
    def from_stats(cls, run_id: int, level: Mapping[str, Any], **fallback: Any) -> Level:
        """A level from a ``level`` event / ``stats.level_metrics`` dict (normalised)."""
        st = normalise_level(level, **fallback)
        idx = st["level"] if st["level"] is not None else 0
        return cls(run_id, idx, st["concurrency"] or 0, st["requests"] or 0,
                   st["partial"], st, rebuilt=st["rebuilt"])

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Level:
        # the row's columns win over the blob for what identifies the level
        stored = sql.loads(_get(row, "stats_json"))
        stored = dict(stored) if isinstance(stored, Mapping) else {}
        stored.update(level=_get(row, "idx"), concurrency=_get(row, "concurrency"),
                      requests=_get(row, "requests"))
        if _get(row, "partial"):
            stored["partial"] = True
        fallback = {k: _get(row, k) for k in ("completed", "errors", "duration_s", "output_tokens",
                                               "output_tok_s", "ttft_mean_ms", "tpot_mean_ms",
                                               "token_count_source", "started_at", "finished_at")}
        return cls.from_stats(_count(_get(row, "run_id")) or 0, stored, **fallback)


@dataclass
class Run:
    id: int
    label: str
    host: str
    url: str | None
    model: str | None
    profile_name: str | None
    profile: dict[str, Any] | None
    backend: str | None
    checkpoint: str | None
    launch_id: int | None
    server_version: str | None
    gpu_names: list[str]
    plan: dict[str, Any] | None
    started_at: float
    finished_at: float | None
    status: str
    error: str | None
    sanity_passed: bool | None
    simulated: bool
    best_tok_s: float | None = None  # the highest level output tok/s (listing only)
    owner: str | None = None  # the writing console's token, host:pid:start (owner.py)
    owner_host: str | None = None  # the machine of that console
    owner_pid: int | None = None
    campaign_id: str | None = None  # set: a host-side campaign runner writes it, not a console

    @property
    def target(self) -> str:
        """Where it ran: the host, or the URL for ``--url`` runs."""
        return self.url if self.host == "local" and self.url else self.host

    @property
    def owner_state(self) -> str | None:
        """For a ``running`` run: ``campaign`` (a runner on the host), ``alive`` / ``gone``
        (a console on this machine), ``elsewhere`` (a console on another machine, which
        cannot be checked from here); None when the run is not running."""
        if self.status != "running":
            return None
        if self.campaign_id:
            return "campaign"
        return owner_state(self.owner)

    @property
    def status_text(self) -> str:
        """The status as a display says it: ``done``; ``running (console pid 123)``;
        ``running (console pid 123 on laptop-2)``; ``running on ct200 (campaign c-2026...)``;
        ``interrupted (console pid 123 is gone)`` before the store has marked it so."""
        state = self.owner_state
        if state is None:
            return self.status
        if state == "campaign":
            return f"running on {self.host} (campaign {self.campaign_id})"
        pid = f"console pid {self.owner_pid}" if self.owner_pid is not None else "a console"
        if state == "elsewhere":
            return f"running ({pid} on {self.owner_host})"
        if state == "gone":
            return f"interrupted ({pid} is gone)" if self.owner else "running (no owner)"
        return f"running ({pid})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status_text": self.status_text}

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Run:
        sanity, owner = _get(row, "sanity_passed"), _get(row, "owner")
        parsed = parse_owner(owner)
        profile, plan = sql.loads(_get(row, "profile_json")), sql.loads(_get(row, "plan_json"))
        gpus = sql.loads(_get(row, "gpu_names_json"))
        return cls(
            id=row["id"], label=str(_get(row, "label") or ""), host=str(_get(row, "host") or ""),
            url=_get(row, "url"), model=_get(row, "model"), profile_name=_get(row, "profile_name"),
            profile=profile if isinstance(profile, dict) else None, backend=_get(row, "backend"),
            checkpoint=_get(row, "checkpoint"), launch_id=_get(row, "launch_id"),
            server_version=_get(row, "server_version"),
            gpu_names=[str(g) for g in gpus] if isinstance(gpus, list) else [],
            plan=plan if isinstance(plan, dict) else None,
            started_at=_number(_get(row, "started_at")) or 0.0,
            finished_at=_number(_get(row, "finished_at")),
            status=str(_get(row, "status") or "unknown"), error=_get(row, "error"),
            sanity_passed=None if sanity is None else bool(sanity),
            simulated=bool(_get(row, "simulated")),
            best_tok_s=_number(_get(row, "best_tok_s")),
            owner=owner, owner_host=parsed[0] if parsed else None,
            owner_pid=parsed[1] if parsed else None, campaign_id=_get(row, "campaign_id"))


@dataclass
class Launch:
    id: int
    host: str
    profile_name: str | None
    profile: dict[str, Any] | None
    backend: str | None
    checkpoint: str | None
    changes: dict[str, Any]
    startup_s: float | None
    ok: bool
    error: str | None
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Launch:
        profile, changes = sql.loads(_get(row, "profile_json")), sql.loads(_get(row, "changes_json"))
        return cls(row["id"], str(_get(row, "host") or ""), _get(row, "profile_name"),
                   profile if isinstance(profile, dict) else None, _get(row, "backend"),
                   _get(row, "checkpoint"), changes if isinstance(changes, dict) else {},
                   _number(_get(row, "startup_s")), bool(_get(row, "ok")), _get(row, "error"),
                   _number(_get(row, "created_at")) or 0.0)
