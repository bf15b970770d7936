"""Rows read back from the run store (plain dataclasses, JSON-ready with ``to_dict``)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

RUN_STATUSES = ("running", "done", "cancelled", "failed", "interrupted")


def _loads(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@dataclass
class Level:
    run_id: int
    idx: int
    concurrency: int
    requests: int
    partial: bool
    stats: dict[str, Any]  # the agent's `level` event (docs/metrics.md)
    gpus: list[dict[str, Any]] = field(default_factory=list)

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
                   partial=self.partial, gpus=self.gpus, power_w=self.power_w,
                   tok_s_per_kw=self.tok_s_per_kw)
        return out

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Level:
        return cls(row["run_id"], row["idx"], row["concurrency"], row["requests"],
                   bool(row["partial"]), _loads(row["stats_json"]) or {})


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

    @property
    def target(self) -> str:
        """Where it ran: the host, or the URL for ``--url`` runs."""
        return self.url if self.host == "local" and self.url else self.host

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Run:
        keys = row.keys()
        return cls(
            id=row["id"], label=row["label"], host=row["host"], url=row["url"],
            model=row["model"], profile_name=row["profile_name"],
            profile=_loads(row["profile_json"]), backend=row["backend"],
            checkpoint=row["checkpoint"], launch_id=row["launch_id"],
            server_version=row["server_version"], gpu_names=_loads(row["gpu_names_json"]) or [],
            plan=_loads(row["plan_json"]), started_at=row["started_at"],
            finished_at=row["finished_at"], status=row["status"], error=row["error"],
            sanity_passed=None if row["sanity_passed"] is None else bool(row["sanity_passed"]),
            simulated=bool(row["simulated"]),
            best_tok_s=row["best_tok_s"] if "best_tok_s" in keys else None)


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
        return cls(row["id"], row["host"], row["profile_name"], _loads(row["profile_json"]),
                   row["backend"], row["checkpoint"], _loads(row["changes_json"]) or {},
                   row["startup_s"], bool(row["ok"]), row["error"], row["created_at"])
