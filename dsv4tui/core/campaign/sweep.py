"""A single sweep (``w`` in the dashboard, ``dsv4tui sweep HOST``): a one-variant campaign
without a restart, run by the host-side runner, so a dropped link never stops it and the
console collects every request when it is back.

:class:`SweepWatch` turns the journal events of such a campaign into the sweep's outcome (what
the CLI prints and ``--json`` carries); the numbers in the store come from the same events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.agent.bench import plan_size, stats
from dsv4tui.core.bench_runner import SanityOutcome
from dsv4tui.core.campaign import reducer


def plan_estimate(plan: Any) -> dict[str, Any]:
    """What a sweep plan (a ``config.SweepPlan``) costs before it runs: requests, a floor
    of its duration, the host's memory for its biggest level, and ``confirm`` (why it needs
    a yes: over an hour, over 2 GB; empty when none). The CLI's ``--yes`` and the Bench
    dialog's question both read this (agent/bench/plan_size.py)."""
    return plan_size.estimate(plan.model_dump())


@dataclass
class SweepOutcome:
    run_id: int | None
    label: str
    status: str  # done | partial | failed | cancelled | interrupted | running
    sanity: SanityOutcome | None
    levels: list[dict[str, Any]]
    error: str | None = None
    campaign_id: str | None = None
    notices: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # what the server ran (host's view)

    def errors_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for lv in self.levels:
            for kind, n in (lv.get("errors_by_kind") or {}).items():
                out[kind] = out.get(kind, 0) + int(n)
        return out

    def to_json(self) -> dict[str, Any]:
        """The exact shape ``dsv4tui sweep --json`` prints."""
        sanity = self.sanity.to_json() if self.sanity else {"skipped": True, "passed": None,
                                                              "cases": []}
        levels = []
        for lv in self.levels:
            j = stats.level_json(lv)
            j.update(status=lv.get("status") or ("partial" if lv.get("partial") else "done"),
                     partial=bool(lv.get("partial")), errors_by_kind=lv.get("errors_by_kind")
                     or {})
            levels.append(j)
        return {"run_id": self.run_id, "label": self.label, "status": self.status,
                "error": self.error, "campaign_id": self.campaign_id,
                "errors_by_kind": self.errors_by_kind(), "notices": self.notices,
                "ran": {k: self.meta.get(k) for k in (
                    "backend", "checkpoint", "quantization", "attention_backend", "source",
                    "sglang_version", "simulated")},
                "sanity": sanity, "levels": levels}


class SweepWatch(reducer.Reader):
    """Listens to a one-variant campaign's events (ingest's ``on_event``) and keeps what the
    outcome needs; ``then`` (optional) gets every event too (a progress printer, the UI)."""

    def __init__(self, label: str, *, sanity: bool = True, then: Any = None) -> None:
        self.label = label
        self.with_sanity = sanity
        self.then = then
        self.cases: list[dict[str, Any]] = []
        self.sanity_passed: bool | None = None
        self.sanity_error: str | None = None
        self.levels: dict[int, dict[str, Any]] = {}
        self.status: str | None = None
        self.reason: str | None = None
        self.run_id: int | None = None
        self.campaign_id: str | None = None
        self.notices: list[str] = []
        self.meta: dict[str, Any] = {}
        self.end_state: str | None = None
        self.run_ids: list[int] = []  # every run (sweep --repeats: one per repeat)

    def __call__(self, ev: dict[str, Any]) -> None:
        reducer.fold(self, ev)
        if self.then is not None:
            self.then(ev)

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> None:
        self.cases.append(dict(ev))

    def sanity(self, ev: ev_t.SanityEvent) -> None:
        self.sanity_passed = bool(ev.get("passed"))

    def level(self, ev: ev_t.LevelEvent) -> None:
        self.levels[int(ev.get("level") or 0)] = dict(ev)

    def run_start(self, ev: ev_t.RunStartEvent) -> None:
        self.meta = dict(ev.get("meta") or {})

    def run_stored(self, ev: reducer.RunStored) -> None:
        self.run_id = ev.get("run_id")
        if isinstance(self.run_id, int) and self.run_id not in self.run_ids:
            self.run_ids.append(self.run_id)

    def run_end(self, ev: ev_t.RunEndEvent) -> None:
        self.status, self.reason = str(ev.get("status") or "failed"), ev.get("reason")
        if self.status == "failed" and (self.reason or "").startswith("sanity could not"):
            self.sanity_error = self.reason

    def variant_end(self, ev: ev_t.VariantEndEvent) -> None:
        if self.status is None:
            self.status, self.reason = str(ev.get("state") or "failed"), ev.get("reason")

    def notice(self, ev: ev_t.NoticeEvent) -> None:
        if ev.get("message"):
            self.notices.append(str(ev["message"]))

    def journal_end(self, ev: ev_t.JournalEndEvent) -> None:
        self.end_state = str(ev.get("state") or "")
        if self.status is None:
            self.status, self.reason = self.end_state, ev.get("reason")

    def outcome(self) -> SweepOutcome:
        sanity = None
        if self.with_sanity and (self.cases or self.sanity_error):
            passed = bool(self.sanity_passed) and all(c.get("passed") for c in self.cases)
            sanity = SanityOutcome(passed, self.cases, self.sanity_error,
                                   "error" if self.sanity_error else None)
        status = self.status or "running"
        return SweepOutcome(self.run_id, self.label, status, sanity,
                            [self.levels[k] for k in sorted(self.levels)],
                            None if status == "done" else self.reason, self.campaign_id,
                            self.notices, self.meta)
