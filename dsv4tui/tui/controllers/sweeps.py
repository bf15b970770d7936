"""Sweeps and campaigns: they run on the host by themselves; :class:`SweepsControl` starts them
(``w``, ``n`` on the Campaign body), cancels them (``x``, after a yes) and watches their
journal through the core (``dsv4tui.core.campaign.session``); what each journal event changes
in the views is ``dsv4tui.core.view.journal``'s.

One watcher at a time (the host runs one load generator at a time): a sweep started with
``w``, a campaign started with ``n``, or whatever is running on the host when the console
connects (started by another console, or before a reconnect). A dropped link never stops the
work: the watcher reconnects and collects what it missed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.view import CampaignView
from dsv4tui.core.config import Settings
from dsv4tui.core.errors import UserError
from dsv4tui.core.view import journal, sweeps
from dsv4tui.core.view import model as m
from dsv4tui.core.view.choices import campaign_choices
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.parts import CAMPAIGN, SANITY, SWEEP
from dsv4tui.tui.controllers.runs import RunsControl
from dsv4tui.tui.controllers.server import ServerControl
from dsv4tui.tui.controllers.ui import Ui, need_live, refused, start
from dsv4tui.tui.controllers.watch import Watch
from dsv4tui.tui.screens import dialogs
from dsv4tui.tui.screens.modals import PlanInput


class _Captured(reducer.Reader):
    """A run ended, or a variant's kernel capture came in: its families may be in the store."""

    def run_finished(self, ev: reducer.RunFinished) -> bool: return True
    def kernels(self, ev: Any) -> bool: return True


class SweepsControl:
    """Starts, watches and cancels the host's sweeps and campaigns (aimed where ``server``
    aims, collected into ``runs``' store)."""

    def __init__(self, ui: Ui, model: m.UiModel, link: HostLink, spec: Any, *,
                 settings: Settings, server: ServerControl, runs: RunsControl, watch: Watch,
                 apply: Callable[[journal.Effects], None]) -> None:
        self.ui, self.model, self.link, self.spec = ui, model, link, spec
        self.settings, self.server, self.runs, self.watch = settings, server, runs, watch
        self.apply = apply
        self.live = spec is not None
        self._clock: journal.HostClock | None = None  # the host's times on ours

    def _on_campaign_event(self, ev: dict[str, Any]) -> None:
        if self._clock is None:
            self._clock = journal.HostClock()
        now = self._clock.mono(ev, self.model.mono())
        self.apply(journal.journal_event(self.model, ev, now, self.watch.live,
                                         watched=self.watch.watched))
        if reducer.fold(_Captured(), ev) and self.model.campaign.variants:
            self.runs.load_campaign_kernels(self.model.campaign)  # a capture linked to the run shows its families

    async def _watch(self, cid: str, *, on_event: Any = None) -> Any:
        """Collect campaign ``cid`` until it ends (across reconnects); its events go to the
        views (and to ``on_event``)."""
        from dsv4tui.core.campaign import session

        self.watch.watched = cid

        def tell(ev: dict[str, Any]) -> None:
            self._on_campaign_event(ev)
            if on_event is not None:
                on_event(ev)
        try:
            return await session.follow_to_end(
                self.link.wait_connected, self.runs.store, cid, on_event=tell,
                on_link=lambda _why: self.ui.mark(*journal.link_lost(self.model)),
                gpu_names=self._gpu_names())
        except asyncio.CancelledError:  # the console stops watching; the host goes on
            journal.detached(self.model)
            raise
        finally:
            self.watch.watched = None
            sweeps.stopped(self.model.sweep, self.model.mono())
            self.ui.mark(SWEEP, SANITY, CAMPAIGN)
            self.runs.load_runs()
            if self.model.campaign.variants:
                self.runs.load_campaign_kernels(self.model.campaign)

    def _gpu_names(self) -> list[str]:
        tel = self.model.telemetry
        return [g.sample.name for g in tel.gpus() if g.sample.name] if tel else []

    # -- a single sweep (w) ---------------------------------------------------------------
    def sweep(self) -> None:
        self.ui.show_body("bench")
        if not need_live(self.ui, self.model, self.live) or refused(self.ui, sweeps.why_not_start(
                self.model, self.watch.watched is not None)):
            return

        def begin(result: PlanInput | None) -> None:
            if result is None:
                return
            from dsv4tui.core.campaign.sweep import plan_estimate
            from dsv4tui.core.config import SweepPlan

            try:
                plan = SweepPlan.model_validate({**self.settings.sweep.model_dump(),
                                                 **result.plan_fields()})
            except ValueError:
                self.run_sweep(result)  # run_sweep says what is wrong
                return
            est = plan_estimate(plan)
            if not est["confirm"]:
                self.run_sweep(result)
                return

            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_sweep(result)
            self.ui.push_screen(dialogs.big_plan_confirm(est), answered)
        self.ui.push_screen(dialogs.sweep_plan(self.server.next_launch.sweep_label(self.model),
                                               self.settings.sweep, self.model.sanity.summary),
                            begin)

    def run_sweep(self, plan_input: PlanInput) -> None:
        start(self.ui, self._run_sweep(plan_input), "run_sweep", "sweep", exclusive=True)

    async def _run_sweep(self, plan_input: PlanInput) -> None:
        """The sweep runs on the host as a one-variant campaign: the console watches and
        collects, so a dropped link (or quitting) never stops it; ``x`` cancels it there."""
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.plan import sweep_spec
        from dsv4tui.core.campaign.sweep import SweepWatch
        from dsv4tui.core.config import SweepPlan

        host = self.link.host()
        # every field the dialog showed: levels, rates, lengths, range ratio, goodput, seed
        plan = SweepPlan.model_validate({**self.settings.sweep.model_dump(),
                                         **plan_input.plan_fields()})
        self.model.sweep = sw = sweeps.for_plan(plan_input.label, plan, host.name,
                                                self.model.mono())
        self.watch.live = {}
        self.ui.mark(SWEEP)
        cases = self.settings.sanity.suite() or None
        watch = SweepWatch(plan_input.label, sanity=cases is not None)
        try:
            _, meta = await self.server.find_target()  # a clear error before anything starts
            sw.backend, sw.checkpoint = meta.backend, meta.checkpoint  # what runs, from the host
            started = await session.start(host, sweep_spec(
                label=plan_input.label, plan=plan, cases=cases,
                target=self.server.target_spec(), host=host.name), self.runs.store)
        except BaseException as exc:
            sweeps.failed(sw, exc, self.model.mono())
            self.ui.mark(SWEEP)
            raise
        watch.campaign_id = self.watch.own = str(started["id"])
        await self._watch(watch.campaign_id, on_event=watch)
        self.ui.tell(sweeps.ended(self.model, watch.outcome()))
        self.ui.mark(SWEEP, SANITY)

    # -- campaigns (n on the Campaign body) -------------------------------------------------
    def pick_campaign(self) -> None:
        from dsv4tui.core.campaign.plan import available

        busy = self.model.busy
        if not need_live(self.ui, self.model, self.live) or refused(
                self.ui, f"a {busy} is running: cancel it first (x)" if busy else None):
            return
        host = self.model.conn.host
        found = available(self.settings, host)
        if not found:
            self.ui.notify(f"no campaign for {host}: add [campaigns.NAME] with host = "
                           f"\"{host}\" to the config (README: Campaigns)", severity="warning",
                           timeout=8, markup=False)
            return

        def chosen(value: str | None) -> None:
            if value:
                self._confirm_campaign(value)
        self.ui.push_screen(dialogs.campaign_picker(host, campaign_choices(found)), chosen)

    def _confirm_campaign(self, name: str) -> None:
        from dsv4tui.core.campaign.plan import resolve

        try:
            plan = resolve(self.settings, name, host_config=self.spec.config)
        except UserError as err:
            self.ui.show_error("campaign", err.message)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.ui.show_body("campaign")
                start(self.ui, self._start_campaign(name), "start_campaign", "sweep",
                      exclusive=True)
        self.ui.push_screen(dialogs.campaign_confirm(name, plan), answer)

    async def _start_campaign(self, name: str) -> None:
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.plan import resolve

        plan = resolve(self.settings, name, host_config=self.spec.config)
        self.model.campaign = cv = CampaignView(
            state="starting", name=name, host=plan.host, levels=list(plan.sweep.levels),
            repeats=plan.repeats, started=self.model.mono())
        self.ui.mark(CAMPAIGN)
        try:
            started = await session.start(self.link.host(), plan.agent_spec(), self.runs.store)
        except BaseException as exc:
            cv.state, cv.detail = "failed", getattr(exc, "message", None) or str(exc)
            self.ui.mark(CAMPAIGN)
            raise
        cv.id = self.watch.own = str(started["id"])
        await self._watch(cv.id)
        self.ui.tell(journal.campaign_summary(self.model.campaign))

    # -- what runs on the host when we connect ----------------------------------------------
    def attach_running(self, info: dict[str, Any] | None = None) -> None:
        start(self.ui, self._attach(info), "attach_running", "sweep", exclusive=True)

    async def _attach(self, info: dict[str, Any] | None) -> None:
        """A sweep or campaign already running on the host (another console's, or ours
        before the console went away): watch it too, and collect it. Its views start from
        what the host's status and the store already hold; the journal fills in the rest."""
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.view import from_status

        if info is None:
            running = await session.listing(self.link.host(), running=True)
            if not running:
                return
            info = running[-1]
        wall, model, store = time.time(), self.model, self.runs.store
        if info.get("kind") == "campaign":
            cv = await asyncio.to_thread(from_status, info, store)
            model.campaign = journal.campaign_times(cv, info, model.mono(), wall)
            self.ui.mark(CAMPAIGN)
        else:
            model.sweep = await asyncio.to_thread(sweeps.from_store, info, store,
                                                  model.conn.host)
            model.sweep.started = journal.since(info.get("created_at") or wall,
                                                model.mono(), wall)
            self.ui.mark(SWEEP)
        self.ui.notify(f"{info.get('kind')} {info.get('name')!r} is running on "
                       f"{model.conn.host}: watching it", timeout=6, markup=False)
        await self._watch(str(info["id"]))
        if info.get("kind") == "campaign":
            self.ui.tell(journal.campaign_summary(model.campaign))

    def show_last_campaign(self, info: dict[str, Any]) -> None:
        """The host's last campaign, ended, in the Campaign body (nothing to watch)."""
        def read() -> None:
            cv = journal.ended_campaign(info, self.runs.store, self.model.mono(), time.time())

            def show() -> None:
                if self.model.campaign.state == "idle":
                    self.model.campaign = cv
                    self.ui.mark(CAMPAIGN)
            self.ui.call_from_thread(show)
        start(self.ui, read, "show_last_campaign", "store", thread=True)

    # -- cancel (x) ------------------------------------------------------------------------
    def cancel(self) -> None:
        """x: a sanity run is cancelled at once; a sweep or campaign (it may have run all
        night) only after a yes, as q, r and b ask."""
        cancelled = False
        for worker in self.ui.workers:
            if worker.group == "sanity" and worker.is_running:
                worker.cancel()
                cancelled = True
        cid, host = self.watch.watched, self.model.conn.host
        if cid is not None and self.model.conn.connected:
            what = "campaign" if self.model.campaign.state == "running" else "sweep"

            def answer(yes: bool | None) -> None:
                if yes and self.watch.watched == cid:
                    start(self.ui, self._cancel(cid), "cancel_sweep", "cancel", exclusive=True)
                    self.ui.notify("cancelling …", timeout=3)
            self.ui.push_screen(dialogs.cancel_confirm(what, host), answer)
            return
        self.ui.notify("cancelling …" if cancelled else "nothing to cancel",
                       timeout=3 if cancelled else 2)

    async def _cancel(self, cid: str) -> None:
        from dsv4tui.core.campaign import session

        out = await session.cancel(self.link.host(), None, cid)
        self.ui.notify(f"cancelled on {self.model.conn.host}; finished requests are stored. "
                       f"{(out.get('server') or {}).get('text') or ''}", timeout=6, markup=False)
