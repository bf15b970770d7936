"""The Bench screen's sweep: the view of a sweep this console starts, of one a watched
campaign begins (its journal's ``run_start``), of one already running on the host (rebuilt
from the store), and how each ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv4tui.core.view import model as m
from dsv4tui.core.view.notice import Notice


def why_not_start(model: m.UiModel, watching: bool) -> str | None:
    """Why a sweep cannot start now (``watching``: a sweep or campaign is being watched)."""
    if model.sweep.running or watching:
        what = "a campaign" if model.campaign.running else "a sweep"
        return f"{what} is running on the host (x cancels it)"
    if model.startup.active:
        return "wait for the restart to finish"
    return None


def for_plan(label: str, plan: Any, host: str, now: float) -> m.SweepView:
    """A sweep about to start with ``plan`` (a ``config.SweepPlan``): its levels pending."""
    return m.SweepView(status="starting", label=label, host=host, input_len=plan.input_len,
                       output_len=plan.output_len,
                       levels=[m.LevelRow(c, n) for c, n in plan.level_shapes()],
                       rates=list(plan.rates), started=now)


def for_run_start(ev: Mapping[str, Any], old: m.SweepView, host: str, now: float) -> m.SweepView:
    """A run of the watched campaign begins (its ``run_start``: plan and meta). The open-loop
    levels come after the C levels (C = max_concurrency, or 0 without a cap); a sweep this
    console started keeps its start time."""
    plan = ev.get("plan") or {}
    meta = ev.get("meta") or {}
    levels = [(int(c), int(n)) for c, n in plan.get("levels") or []]
    rates = [(float(r), int(n)) for r, n in plan.get("rates") or []]
    cap = int(plan.get("max_concurrency") or 0)
    started = old.started if old.status == "starting" and old.label == ev.get("label") \
        else now
    return m.SweepView(
        status="starting", label=ev.get("label"), host=host, backend=meta.get("backend"),
        checkpoint=meta.get("checkpoint"), input_len=plan.get("input_len"),
        output_len=plan.get("output_len"),
        levels=[m.LevelRow(c, n) for c, n in [*levels, *((cap, n) for _, n in rates)]],
        rates=rates, started=started)


def failed(sw: m.SweepView, exc: BaseException, now: float) -> None:
    """The sweep could not start."""
    sw.status, sw.detail = "failed", getattr(exc, "message", None) or str(exc)
    sw.ended = now


def stopped(sw: m.SweepView, now: float) -> None:
    """The console stops watching (the sweep ended, or it goes on without us): the clock
    stops and no level is shown running any more."""
    sw.ended = sw.ended or now
    for lv in sw.levels:
        if lv.status in ("running", "warm-up"):
            lv.status = "stopped"


def ended(model: m.UiModel, outcome: Any) -> Notice | None:
    """A sweep's end (a ``campaign.sweep.SweepWatch`` outcome) into the model; what to say."""
    sw = model.sweep
    if outcome.sanity is not None and outcome.sanity.error:
        model.sanity.status = "error"
        model.sanity.detail = outcome.sanity.error
    sw.status, sw.detail = outcome.status, outcome.error
    if sw.status in ("failed", "partial") and sw.detail:
        return Notice(sw.detail, f"sweep {sw.status}", "error", 10)
    if sw.status == "done":
        return Notice(f"{sw.label}: best {m.fmt_num(sw.best_tok_s, 1)} tok/s", "sweep done")
    return None


def from_store(info: dict[str, Any], store: Any, host: str) -> m.SweepView:
    """A running sweep (one-variant campaign, ``info``: its host status) as the Bench screen
    shows it, from what the store holds of it; its journal's events then fill it in."""
    from dsv4tui.core.store import campaigns as cstore

    plan = info.get("plan") or {}
    levels = [m.LevelRow(int(c), int(n)) for c, n in plan.get("levels") or []]
    sw = m.SweepView(status="running", label=info.get("name"), host=host,
                     input_len=plan.get("input_len"), output_len=plan.get("output_len"),
                     levels=levels)
    runs = cstore.run_ids(store, str(info["id"])) if store is not None else {}
    keys = [k for v in info.get("variants") or [] for k in v.get("runs") or []]
    rid = runs.get(keys[-1]) if keys else None
    if rid is None:
        return sw
    run = store.run(rid)
    if run is not None:
        sw.run_id, sw.backend, sw.checkpoint = rid, run.backend, run.checkpoint
    stored = {lv.idx: lv for lv in store.levels(rid)}
    counts: dict[int, list[bool]] = {}
    for req in store.requests(rid):
        counts.setdefault(int(req["level"]), []).append(bool(req["ok"]))
    for idx, row in enumerate(levels):
        lv = stored.get(idx)
        if lv is not None and not lv.stats.get("rebuilt"):
            m.fill_level(row, lv.stats)
            row.status = str(lv.stats.get("status") or ("partial" if lv.partial else "done"))
        elif idx in counts:
            row.completed = sum(counts[idx])
            row.errors = len(counts[idx]) - row.completed
            row.status = "running"
    return sw
