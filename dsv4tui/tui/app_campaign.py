"""The dashboard's sweeps and campaigns: they run on the host by themselves; the App starts
them (``w``, ``n`` on the Campaign screen), cancels them (``x``) and watches their journal
through the core (``dsv4tui.core.campaign.session``); what each journal event changes in the
views is ``dsv4tui.core.view.journal``'s. Mixed into :class:`dsv4tui.tui.app.Dsv4App`.

One watcher at a time (the host runs one load generator at a time): a sweep started with
``w``, a campaign started with ``n``, or whatever is running on the host when the console
connects (started by another console, or before a reconnect). A dropped link never stops the
work: the watcher reconnects and collects what it missed.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

from textual import work

from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.view import CampaignView
from dsv4tui.core.errors import UserError
from dsv4tui.core.view import journal, sweeps
from dsv4tui.core.view.choices import campaign_choices
from dsv4tui.core.view.parts import CAMPAIGN, SANITY, SWEEP
from dsv4tui.tui.screens import dialogs
from dsv4tui.tui.screens.modals import PlanInput

if TYPE_CHECKING:
    from dsv4tui.tui.app import Dsv4App


class _RunEnded(reducer.Reader):
    def run_finished(self, ev: reducer.RunFinished) -> bool:
        return True


def _app(obj: object) -> Dsv4App:
    """This mixin's methods run on the App (typed as what they are)."""
    return cast("Dsv4App", obj)


class CampaignWatcher:
    """The App's half that starts and watches host-side sweeps and campaigns."""

    _sweep_cid: str | None = None  # the campaign (a sweep is one too) being watched
    _clock: journal.HostClock | None = None  # the host's times on ours

    def _on_campaign_event(self, ev: dict[str, Any]) -> None:
        app = _app(self)
        if app._clock is None:
            app._clock = journal.HostClock()
        now = app._clock.mono(ev, app.model.mono())
        app.apply(journal.journal_event(app.model, ev, now, app._live_levels,
                                        watched=app._sweep_cid))
        if reducer.fold(_RunEnded(), ev) and app.model.campaign.variants:
            app.load_campaign_kernels()  # a capture linked to the run shows its families

    @work(group="campaign-kernels", thread=True, exclusive=True, exit_on_error=False)
    def load_campaign_kernels(self) -> None:
        """The variants' kernel families lines from the store (captures linked to their runs)."""
        app = _app(self)
        from dsv4tui.core.campaign.view import kernel_lines, set_kernel_lines

        cv = app.model.campaign
        if app._store is None:
            return
        lines = kernel_lines(cv, app._store)

        def show() -> None:
            if app.model.campaign is cv and set_kernel_lines(cv, lines):
                app.mark(CAMPAIGN)
        app.call_from_thread(show)

    async def _watch(self, cid: str, *, on_event: Any = None) -> Any:
        """Collect campaign ``cid`` until it ends (across reconnects); its events go to the
        views (and to ``on_event``)."""
        app = _app(self)
        from dsv4tui.core.campaign import session

        app._sweep_cid = cid

        def tell(ev: dict[str, Any]) -> None:
            app._on_campaign_event(ev)
            if on_event is not None:
                on_event(ev)
        try:
            return await session.follow_to_end(
                app.link.wait_connected, app._store, cid, on_event=tell,
                on_link=lambda _why: app.mark(*journal.link_lost(app.model)),
                gpu_names=app._gpu_names())
        except asyncio.CancelledError:  # the console stops watching; the host goes on
            journal.detached(app.model)
            raise
        finally:
            app._sweep_cid = None
            sweeps.stopped(app.model.sweep, app.model.mono())
            app.mark(SWEEP, SANITY, CAMPAIGN)
            app.load_runs()
            if app.model.campaign.variants:
                app.load_campaign_kernels()

    def _gpu_names(self) -> list[str]:
        tel = _app(self).model.telemetry
        return [g.sample.name for g in tel.gpus() if g.sample.name] if tel else []

    # -- a single sweep (w) ---------------------------------------------------------------
    def action_sweep(self) -> None:
        app = _app(self)
        app.show_body("bench")
        if not app._need_live() or app._refused(sweeps.why_not_start(
                app.model, app._sweep_cid is not None)):
            return

        def start(result: PlanInput | None) -> None:
            if result is None:
                return
            from dsv4tui.core.campaign.sweep import plan_estimate
            from dsv4tui.core.config import SweepPlan

            try:
                plan = SweepPlan.model_validate({**app.settings.sweep.model_dump(),
                                                 **result.plan_fields()})
            except ValueError:
                app.run_sweep(result)  # run_sweep says what is wrong
                return
            est = plan_estimate(plan)
            if not est["confirm"]:
                app.run_sweep(result)
                return

            def answered(yes: bool | None) -> None:
                if yes:
                    app.run_sweep(result)
            app.push_screen(dialogs.big_plan_confirm(est), answered)
        app.push_screen(dialogs.sweep_plan(app.next_launch.sweep_label(app.model),
                                           app.settings.sweep, app.model.sanity.summary), start)

    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def run_sweep(self, plan_input: PlanInput) -> None:
        """The sweep runs on the host as a one-variant campaign: the console watches and
        collects, so a dropped link (or quitting) never stops it; ``x`` cancels it there."""
        app = _app(self)
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.plan import sweep_spec
        from dsv4tui.core.campaign.sweep import SweepWatch
        from dsv4tui.core.config import SweepPlan

        host = app.host()
        # every field the dialog showed: levels, rates, lengths, range ratio, goodput, seed
        plan = SweepPlan.model_validate({**app.settings.sweep.model_dump(),
                                         **plan_input.plan_fields()})
        app.model.sweep = sw = sweeps.for_plan(plan_input.label, plan, host.name,
                                               app.model.mono())
        app._live_levels = {}
        app.mark(SWEEP)
        cases = app.settings.sanity.suite() or None
        watch = SweepWatch(plan_input.label, sanity=cases is not None)
        try:
            _, meta = await app._find_target()  # a clear error before anything starts
            sw.backend, sw.checkpoint = meta.backend, meta.checkpoint  # what runs, from the host
            started = await session.start(host, sweep_spec(
                label=plan_input.label, plan=plan, cases=cases, target=app._target_spec(),
                host=host.name), app._store)
        except BaseException as exc:
            sweeps.failed(sw, exc, app.model.mono())
            app.mark(SWEEP)
            raise
        watch.campaign_id = app._own_cid = str(started["id"])
        await app._watch(watch.campaign_id, on_event=watch)
        app.tell(sweeps.ended(app.model, watch.outcome()))
        app.mark(SWEEP, SANITY)

    # -- campaigns (n on the Campaign screen) -----------------------------------------------
    def action_pick_campaign(self) -> None:
        app = _app(self)
        from dsv4tui.core.campaign.plan import available

        if not app._need_live() or app._refused(
                f"a {app.model.busy} is running: cancel it first (x)" if app.model.busy else None):
            return
        host = app.model.conn.host
        found = available(app.settings, host)
        if not found:
            app.notify(f"no campaign for {host}: add [campaigns.NAME] with host = \"{host}\" "
                       "to the config (README: Campaigns)", severity="warning", timeout=8,
                       markup=False)
            return

        def chosen(value: str | None) -> None:
            if value:
                app._confirm_campaign(value)
        app.push_screen(dialogs.campaign_picker(host, campaign_choices(found)), chosen)

    def _confirm_campaign(self, name: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign.plan import resolve

        try:
            plan = resolve(app.settings, name, host_config=app.spec.config)
        except UserError as err:
            app.show_error("campaign", err.message)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                app.show_body("campaign")
                app.start_campaign(name)
        app.push_screen(dialogs.campaign_confirm(name, plan), answer)

    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def start_campaign(self, name: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.plan import resolve

        plan = resolve(app.settings, name, host_config=app.spec.config)
        app.model.campaign = cv = CampaignView(state="starting", name=name, host=plan.host,
                                               levels=list(plan.sweep.levels),
                                               repeats=plan.repeats, started=app.model.mono())
        app.mark(CAMPAIGN)
        try:
            started = await session.start(app.host(), plan.agent_spec(), app._store)
        except BaseException as exc:
            cv.state, cv.detail = "failed", getattr(exc, "message", None) or str(exc)
            app.mark(CAMPAIGN)
            raise
        cv.id = app._own_cid = str(started["id"])
        await app._watch(cv.id)
        app.tell(journal.campaign_summary(app.model.campaign))

    # -- what runs on the host when we connect ----------------------------------------------
    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def attach_running(self, info: dict[str, Any] | None = None) -> None:
        """A sweep or campaign already running on the host (another console's, or ours
        before the console went away): watch it too, and collect it. Its views start from
        what the host's status and the store already hold; the journal fills in the rest."""
        app = _app(self)
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.view import from_status

        if info is None:
            running = await session.listing(app.host(), running=True)
            if not running:
                return
            info = running[-1]
        wall = time.time()
        if info.get("kind") == "campaign":
            cv = await asyncio.to_thread(from_status, info, app._store)
            app.model.campaign = journal.campaign_times(cv, info, app.model.mono(), wall)
            app.mark(CAMPAIGN)
        else:
            app.model.sweep = await asyncio.to_thread(sweeps.from_store, info, app._store,
                                                      app.model.conn.host)
            app.model.sweep.started = journal.since(info.get("created_at") or wall,
                                                    app.model.mono(), wall)
            app.mark(SWEEP)
        app.notify(f"{info.get('kind')} {info.get('name')!r} is running on "
                   f"{app.model.conn.host}: watching it", timeout=6, markup=False)
        await app._watch(str(info["id"]))
        if info.get("kind") == "campaign":
            app.tell(journal.campaign_summary(app.model.campaign))

    @work(group="store", thread=True, exit_on_error=False)
    def show_last_campaign(self, info: dict[str, Any]) -> None:
        """The host's last campaign, ended, in the Campaign screen (nothing to watch)."""
        app = _app(self)
        cv = journal.ended_campaign(info, app._store, app.model.mono(), time.time())

        def show() -> None:
            if app.model.campaign.state == "idle":
                app.model.campaign = cv
                app.mark(CAMPAIGN)
        app.call_from_thread(show)

    # -- cancel (x) ------------------------------------------------------------------------
    def action_cancel(self) -> None:
        """x: a sanity run is cancelled at once; a sweep or campaign (it may have run all
        night) only after a yes, as q, r and b ask."""
        app = _app(self)
        cancelled = False
        for worker in app.workers:
            if worker.group == "sanity" and worker.is_running:
                worker.cancel()
                cancelled = True
        cid = app._sweep_cid
        if cid is not None and app.model.conn.connected:
            what = "campaign" if app.model.campaign.state == "running" else "sweep"

            def answer(yes: bool | None) -> None:
                if yes and app._sweep_cid == cid:
                    app.cancel_sweep(cid)  # stopped on the host; the watcher collects
                    app.notify("cancelling …", timeout=3)
            app.push_screen(dialogs.cancel_confirm(what, app.model.conn.host), answer)
            return
        app.notify("cancelling …" if cancelled else "nothing to cancel",
                   timeout=3 if cancelled else 2)

    @work(group="cancel", exclusive=True, exit_on_error=False)
    async def cancel_sweep(self, cid: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign import session

        out = await session.cancel(app.host(), None, cid)
        app.notify(f"cancelled on {app.model.conn.host}; finished requests are stored. "
                   f"{(out.get('server') or {}).get('text') or ''}", timeout=6, markup=False)
