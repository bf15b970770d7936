"""A campaign's journal (a sweep is a one-variant campaign) as the dashboard watches it: each
event into the views it changes -- the Launch screen's restart, the Bench screen's sweep, the
sanity gate, the Campaign screen's matrix -- and the host's times on this console's clock.

The functions return :class:`Effects`: the parts of the model that changed, and what the App
has to do next (follow a new log, ask for the server's status, reread the run list)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.view import CampaignView, apply_campaign_event
from dsv4tui.core.view import launch, sweeps
from dsv4tui.core.view import model as m
from dsv4tui.core.view.notice import Notice
from dsv4tui.core.view.parts import CAMPAIGN, SANITY, SERVER, STARTUP, SWEEP


@dataclass
class Effects:
    parts: set[str] = field(default_factory=set)
    follow_log: str | None = None  # the server started: its log
    refresh_status: bool = False  # a launch ended: the server's status is worth asking for
    run_stored: bool = False  # a run was stored: the Runs list shows it

    def __or__(self, other: Effects) -> Effects:
        return Effects(self.parts | other.parts, self.follow_log or other.follow_log,
                       self.refresh_status or other.refresh_status,
                       self.run_stored or other.run_stored)


class HostClock:
    """The host's event times (``t``, its wall clock) on this console's monotonic clock: events
    read back after a reconnect or an attach keep their own times; a host clock ahead of ours
    (the most seen so far) is allowed for."""

    def __init__(self) -> None:
        self.lag = 0.0  # how far the host's clock is ahead of ours (when it is)

    def mono(self, ev: dict[str, Any], now: float) -> float:
        t = ev.get("t")
        if not isinstance(t, (int, float)):
            return now
        wall = time.time()
        self.lag = max(self.lag, float(t) - wall)
        return now - max(0.0, wall + self.lag - float(t))


class _RunStored(reducer.Reader):
    def run_stored(self, ev: reducer.RunStored) -> bool:
        return ev.get("run_id") is not None


def bench_event(model: m.UiModel, ev: dict[str, Any], live: dict[int, m.LiveLevel], *,
                sweep_watched: bool) -> Effects:
    """An event of the bench runner or of a watched sweep: the sanity gate's, the sweep's."""
    fx = Effects(run_stored=bool(reducer.fold(_RunStored(), ev)))
    if m.apply_sanity_event(model.sanity, ev):
        fx.parts.add(SANITY)
    if sweep_watched and m.apply_sweep_event(model.sweep, ev, live, model.mono()):
        fx.parts.add(SWEEP)
    return fx


class _JournalFold(reducer.Reader):
    """What a campaign's events change on the Launch screen and the sanity gate."""

    def __init__(self, model: m.UiModel, now: float, live: dict[int, m.LiveLevel]) -> None:
        self.model, self.now, self.live = model, now, live
        self.fx = Effects()

    def variant_start(self, ev: ev_t.VariantStartEvent) -> None:
        """A new variant: no answer of the last one is its answer."""
        self.model.sanity = m.SanityView()
        self.fx.parts.add(SANITY)

    def launch_start(self, ev: ev_t.LaunchStartEvent) -> None:
        """A campaign restarts the server: the Launch screen shows it."""
        self.fx.parts.update(launch.campaign_launch_begins(self.model, ev, self.now))

    def server_step(self, ev: ev_t.ServerStepEvent) -> None:
        self._step(dict(ev))

    def log_event(self, ev: ev_t.LogEvent) -> None:
        self._step(dict(ev))

    def _step(self, ev: dict[str, Any]) -> None:
        if "launch" not in ev:
            return
        from dsv4tui.core.server import control as server_control

        step = server_control.startup_step(ev)
        if step is not None:
            self.fx.follow_log = launch.step(self.model, step, self.now)
            self.fx.parts.update((STARTUP, SERVER))

    def launch_end(self, ev: ev_t.LaunchEndEvent) -> None:
        self.fx.parts.update(launch.campaign_launch_ended(self.model, ev, self.now))
        self.fx.refresh_status = True

    def run_start(self, ev: ev_t.RunStartEvent) -> None:
        """A run of the campaign begins: the Bench screen shows it."""
        model = self.model
        model.sweep = sweeps.for_run_start(ev, model.sweep, model.conn.host, self.now)
        self.live.clear()
        meta = ev.get("meta") or {}
        model.sanity = m.SanityView(status="running", backend=meta.get("backend"),
                                    checkpoint=meta.get("checkpoint"))
        self.fx.parts.update((SWEEP, SANITY))


def journal_event(model: m.UiModel, ev: dict[str, Any], now: float,
                  live: dict[int, m.LiveLevel], *, watched: str | None) -> Effects:
    """One event of campaign ``watched``'s journal (``now``: when it happened, on our clock)."""
    fold = _JournalFold(model, now, live)
    reducer.fold(fold, ev)
    fx = fold.fx | bench_event(model, ev, live, sweep_watched=watched is not None)
    cv = model.campaign
    if cv.id is not None and cv.id == watched and apply_campaign_event(cv, ev, now):
        fx.parts.add(CAMPAIGN)
    return fx


def link_lost(model: m.UiModel) -> tuple[str, ...]:
    text = f"link lost: it goes on on {model.conn.host}; reconnecting"
    model.sweep.detail = model.campaign.detail = text
    return SWEEP, CAMPAIGN


def detached(model: m.UiModel) -> None:
    """The console stopped watching; what runs goes on on the host."""
    gone = f"the console stopped watching; it goes on on {model.conn.host}"
    if model.sweep.running:
        model.sweep.status, model.sweep.detail = "detached", gone
    if model.campaign.running:
        model.campaign.state, model.campaign.detail = "detached", gone


def since(t: Any, mono: float, wall: float) -> float | None:
    """Host wall-clock time ``t`` on the monotonic clock that reads ``mono`` at ``wall``."""
    return mono - max(0.0, wall - float(t)) if isinstance(t, (int, float)) else None


def campaign_times(cv: CampaignView, info: dict[str, Any], mono: float,
                   wall: float) -> CampaignView:
    """A campaign's host status (``info``) times on this console's monotonic clock."""
    cv.started = since(info.get("created_at"), mono, wall) or mono
    cv.ended = since(info.get("ended_at"), mono, wall)
    for v, raw in zip(cv.variants, info.get("variants") or [], strict=False):
        v.started, v.ended = since(raw.get("started_at"), mono, wall), since(
            raw.get("ended_at"), mono, wall)
    return cv


def ended_campaign(info: dict[str, Any], store: Any, mono: float, wall: float) -> CampaignView:
    """The host's last campaign, ended, as the Campaign screen shows it."""
    from dsv4tui.core.campaign.view import from_status

    cv = campaign_times(from_status(info, store), info, mono, wall)
    cv.state = str(info.get("state") or cv.state)
    cv.detail = info.get("reason")
    cv.server = (info.get("server") or {}).get("text")
    return cv


def campaign_summary(cv: CampaignView) -> Notice:
    """What a campaign's end says: its state and how many variants ended how."""
    counts = cv.counts()
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return Notice(f"campaign {cv.name}: {cv.state} ({text})", "campaign",
                  "error" if counts.get("failed") else "information", 10)
