"""The dashboard's campaigns: sweeps and campaigns run on the host by themselves; the App
starts them, watches their journal (through the core: dsv4tui.core.campaign.session) and draws
what arrives — the Bench screen's live sweep, the Launch screen's restart phases, the
Campaign screen's matrix. Mixed into :class:`dsv4tui.tui.app.Dsv4App`.

One watcher at a time (the host runs one load generator at a time): a sweep started with
``w``, a campaign started with ``n`` on the Campaign screen, or whatever is running on the
host when the console connects (started by another console, or before a reconnect). A dropped
link never stops the work: the watcher reconnects and collects what it missed.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

from textual import work

from dsv4tui.core.campaign.view import CampaignView, apply_campaign_event
from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.view import model as m
from dsv4tui.tui.screens.messages import CAMPAIGN, SANITY, SERVER, STARTUP, SWEEP
from dsv4tui.tui.screens.modals import Choice, ConfirmScreen, PickerScreen, PlanInput

if TYPE_CHECKING:
    from dsv4tui.tui.app import Dsv4App


def _app(obj: object) -> Dsv4App:
    """This mixin's methods run on the App (typed as what they are)."""
    return cast("Dsv4App", obj)

_LAUNCH_EVENTS = ("stopping", "stopped", "started", "status", "log_event")


class CampaignWatcher:
    """The App's half that starts and watches host-side sweeps and campaigns."""

    _sweep_cid: str | None = None  # the campaign (a sweep is one too) being watched

    # -- routing the journal's events to the views -------------------------------------------
    _host_lag = 0.0  # how far the host's clock is ahead of ours (when it is)

    def _event_mono(self, ev: dict[str, Any]) -> float:
        """When the event happened, on this console's monotonic clock (the views' clock):
        events read back after a reconnect or an attach keep their own times."""
        app = _app(self)
        now = app.model.mono()
        t = ev.get("t")
        if not isinstance(t, (int, float)):
            return now
        wall = time.time()
        app._host_lag = max(app._host_lag, float(t) - wall)
        return now - max(0.0, wall + app._host_lag - float(t))

    def _on_campaign_event(self, ev: dict[str, Any]) -> None:
        app = _app(self)
        kind = ev.get("type")
        model, now = app.model, app._event_mono(ev)
        if kind == "variant_start":  # a new variant: no answer of the last one is its answer
            model.sanity = m.SanityView()
            app.mark(SANITY)
        if kind == "launch_start":  # a campaign restarts the server: the Launch screen shows it
            model.startup.reset(ev.get("profile_name"), ev.get("backend"),
                                ev.get("checkpoint"), now)
            srv = model.server
            srv.state, srv.phase = "stopping", None
            srv.profile = ev.get("profile_name") or srv.profile
            srv.backend = ev.get("backend") or srv.backend
            srv.checkpoint = ev.get("checkpoint") or srv.checkpoint
            model.decode.clear()
            app.mark(STARTUP, SERVER)
        elif "launch" in ev and kind in _LAUNCH_EVENTS:
            from dsv4tui.core.server import control as server_control

            step = server_control.startup_step(ev)
            if step is not None:
                m.apply_step(model.startup, step, now)
                srv = model.server
                if step.kind == "started":
                    srv.state, srv.phase, srv.started_at = "starting", "load_weights", time.time()
                    if (step.event or {}).get("log"):
                        app._follow_log(str(step.event["log"]))
                elif step.kind in ("phase", "progress"):
                    srv.phase = model.startup.current
                app.mark(STARTUP, SERVER)
        elif kind == "launch_end":
            su = model.startup
            if ev.get("ok"):
                su.status, su.ended = "ready", now
                model.server.state, model.server.phase = "ready", "ready"
            else:
                su.finish("failed", now)
                su.message = str(ev.get("error") or "the server did not start")
                su.error_lines = [str(x) for x in ev.get("last_errors") or []]
                model.server.state = "crashed"
            app.mark(STARTUP, SERVER)
            app.run_worker(app._refresh_status(), group="status", exclusive=True,
                            exit_on_error=False)
        elif kind == "run_start":
            app._new_sweep_view(ev, now)
        app._on_bench_event(ev)
        cv = model.campaign
        if cv.id is not None and cv.id == app._sweep_cid and apply_campaign_event(cv, ev, now):
            app.mark(CAMPAIGN)

    def _new_sweep_view(self, ev: dict[str, Any], now: float) -> None:
        """A run of the watched campaign begins: the Bench screen shows it."""
        app = _app(self)
        plan = ev.get("plan") or {}
        meta = ev.get("meta") or {}
        old = app.model.sweep
        levels = [(int(c), int(n)) for c, n in plan.get("levels") or []]
        # open-loop levels come after the C levels (C = max_concurrency, or 0 without a cap)
        rates = [(float(r), int(n)) for r, n in plan.get("rates") or []]
        cap = int(plan.get("max_concurrency") or 0)
        started = old.started if old.status == "starting" and old.label == ev.get("label") \
            else now
        app.model.sweep = m.SweepView(
            status="starting", label=ev.get("label"), host=app.model.conn.host,
            backend=meta.get("backend"), checkpoint=meta.get("checkpoint"),
            input_len=plan.get("input_len"), output_len=plan.get("output_len"),
            levels=[m.LevelRow(c, n) for c, n in [*levels, *((cap, n) for _, n in rates)]],
            rates=rates, started=started)
        app._live_levels = {}
        app.model.sanity = m.SanityView(status="running", backend=meta.get("backend"),
                                         checkpoint=meta.get("checkpoint"))
        app.mark(SWEEP, SANITY)

    async def _wait_host(self) -> Any:
        app = _app(self)
        if app._supervisor is None:
            raise ConnectError(f"{app.model.conn.host}: not connected")
        return await app._supervisor.wait_connected()

    def _gpu_names(self) -> list[str]:
        app = _app(self)
        tel = app.model.telemetry
        return [g.sample.name for g in tel.gpus() if g.sample.name] if tel else []

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

        def link_lost(why: str) -> None:
            text = f"link lost: it goes on on {app.model.conn.host}; reconnecting"
            app.model.sweep.detail = app.model.campaign.detail = text
            app.mark(SWEEP, CAMPAIGN)

        try:
            return await session.follow_to_end(app._wait_host, app._store, cid,
                                               on_event=tell, on_link=link_lost,
                                               gpu_names=app._gpu_names())
        except asyncio.CancelledError:  # the console stops watching; the host goes on
            gone = f"the console stopped watching; it goes on on {app.model.conn.host}"
            if app.model.sweep.running:
                app.model.sweep.status, app.model.sweep.detail = "detached", gone
            if app.model.campaign.running:
                app.model.campaign.state, app.model.campaign.detail = "detached", gone
            raise
        finally:
            app._sweep_cid = None
            sw = app.model.sweep
            sw.ended = sw.ended or app.model.mono()
            for lv in sw.levels:
                if lv.status in ("running", "warm-up"):
                    lv.status = "stopped"
            app.mark(SWEEP, SANITY, CAMPAIGN)
            app.load_runs()

    # -- a single sweep (w) ---------------------------------------------------------------
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
        app.model.sweep = sw = m.SweepView(
            status="starting", label=plan_input.label, host=host.name,
            input_len=plan.input_len, output_len=plan.output_len,
            levels=[m.LevelRow(c, n) for c, n in plan.level_shapes()],
            rates=list(plan.rates), started=app.model.mono())
        app._live_levels = {}
        app.mark(SWEEP)
        try:
            _, meta = await app._find_target()  # a clear error before anything starts
        except BaseException as exc:
            sw.status, sw.detail = "failed", getattr(exc, "message", None) or str(exc)
            sw.ended = app.model.mono()
            app.mark(SWEEP)
            raise
        sw.backend, sw.checkpoint = meta.backend, meta.checkpoint  # what runs, from the host
        cases = app.settings.sanity.suite() or None
        spec = sweep_spec(label=plan_input.label, plan=plan, cases=cases,
                          target=app._target_spec(), host=host.name)
        watch = SweepWatch(plan_input.label, sanity=cases is not None)
        try:
            started = await session.start(host, spec, app._store)
        except BaseException as exc:
            sw.status, sw.detail = "failed", getattr(exc, "message", None) or str(exc)
            sw.ended = app.model.mono()
            app.mark(SWEEP)
            raise
        watch.campaign_id = app._own_cid = str(started["id"])
        await app._watch(watch.campaign_id, on_event=watch)
        app._sweep_ended(watch.outcome())

    def _sweep_ended(self, outcome: Any) -> None:
        app = _app(self)
        sw = app.model.sweep
        if outcome.sanity is not None and outcome.sanity.error:
            app.model.sanity.status = "error"
            app.model.sanity.detail = outcome.sanity.error
        sw.status, sw.detail = outcome.status, outcome.error
        app.mark(SWEEP, SANITY)
        if sw.status in ("failed", "partial") and sw.detail:
            app.notify(sw.detail, title=f"sweep {sw.status}", severity="error", timeout=10,
                        markup=False)
        elif sw.status == "done":
            app.notify(f"{sw.label}: best {m.fmt_num(sw.best_tok_s, 1)} tok/s",
                        title="sweep done", timeout=6, markup=False)

    # -- campaigns (n on the Campaign screen) -----------------------------------------------
    def action_pick_campaign(self) -> None:
        app = _app(self)
        from dsv4tui.core.campaign.plan import available

        if not app._need_live():
            return
        if app.model.busy is not None:
            app.notify(f"a {app.model.busy} is running: cancel it first (x)",
                        severity="warning")
            return
        host = app.model.conn.host
        found = available(app.settings, host)
        if not found:
            app.notify(f"no campaign for {host}: add [campaigns.NAME] with host = \"{host}\" "
                        "to the config (README: Campaigns)", severity="warning", timeout=8,
                       markup=False)
            return
        choices = [Choice(name, name, f"{len(c.variants)} variants: "
                          + ", ".join(v.name for v in c.variants)) for name, c in found.items()]

        def chosen(value: str | None) -> None:
            if value:
                app._confirm_campaign(value)
        app.push_screen(PickerScreen("start a campaign", f"campaigns for {host} — each "
                                      "variant: restart → sanity → sweep, on the host",
                                      choices), chosen)

    def _confirm_campaign(self, name: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign.plan import resolve

        try:
            plan = resolve(app.settings, name, host_config=app.spec.config)
        except UserError as err:
            app.show_error("campaign", err.message)
            return
        levels = ", ".join(f"C={c}:{n}" for c, n in plan.sweep.levels)
        names = ", ".join(v.name for v in plan.variants)
        msg = (f"[b]{len(plan.variants)}[/b] variants ({names}) · sweep {levels} · "
               f"on failure {plan.on_failure}\nthe running server is stopped first; the "
               "campaign goes on by itself if this console goes away.")

        def answer(yes: bool | None) -> None:
            if yes:
                app.switch_mode("campaign")
                app.start_campaign(name)
        app.push_screen(ConfirmScreen(f"start campaign {name}?", msg, yes="Start"), answer)

    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def start_campaign(self, name: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign import session
        from dsv4tui.core.campaign.plan import resolve

        plan = resolve(app.settings, name, host_config=app.spec.config)
        app.model.campaign = CampaignView(state="starting", name=name, host=plan.host,
                                           levels=list(plan.sweep.levels),
                                           repeats=plan.repeats, started=app.model.mono())
        app.mark(CAMPAIGN)
        try:
            started = await session.start(app.host(), plan.agent_spec(), app._store)
        except BaseException as exc:
            app.model.campaign.state = "failed"
            app.model.campaign.detail = getattr(exc, "message", None) or str(exc)
            app.mark(CAMPAIGN)
            raise
        app.model.campaign.id = app._own_cid = str(started["id"])
        await app._watch(app.model.campaign.id)
        app._campaign_ended()

    def _campaign_ended(self) -> None:
        app = _app(self)
        cv = app.model.campaign
        counts = cv.counts()
        text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        app.notify(f"campaign {cv.name}: {cv.state} ({text})", title="campaign",
                    severity="error" if counts.get("failed") else "information", timeout=10,
                    markup=False)

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
        cid = str(info["id"])
        wall = time.time()
        if info.get("kind") == "campaign":
            cv = await asyncio.to_thread(from_status, info, app._store)
            app.model.campaign = _with_mono_times(cv, info, app.model.mono(), wall)
            app.mark(CAMPAIGN)
        else:
            app.model.sweep = await asyncio.to_thread(_sweep_from_store, info, app._store,
                                                      app.model.conn.host)
            app.model.sweep.started = app.model.mono() - max(
                0.0, wall - float(info.get("created_at") or wall))
            app.mark(SWEEP)
        app.notify(f"{info.get('kind')} {info.get('name')!r} is running on "
                   f"{app.model.conn.host}: watching it", timeout=6, markup=False)
        await app._watch(cid)
        if info.get("kind") == "campaign":
            app._campaign_ended()

    @work(group="store", thread=True, exit_on_error=False)
    def show_last_campaign(self, info: dict[str, Any]) -> None:
        """The host's last campaign, ended, in the Campaign screen (nothing to watch)."""
        app = _app(self)
        from dsv4tui.core.campaign.view import from_status

        cv = _with_mono_times(from_status(info, app._store), info, app.model.mono(),
                              time.time())
        cv.state = str(info.get("state") or cv.state)
        cv.detail = info.get("reason")
        cv.server = (info.get("server") or {}).get("text")

        def show() -> None:
            if app.model.campaign.state == "idle":
                app.model.campaign = cv
                app.mark(CAMPAIGN)
        app.call_from_thread(show)

    # -- cancel (x) ------------------------------------------------------------------------
    @work(group="cancel", exclusive=True, exit_on_error=False)
    async def cancel_sweep(self, cid: str) -> None:
        app = _app(self)
        from dsv4tui.core.campaign import session

        out = await session.cancel(app.host(), None, cid)
        app.notify(f"cancelled on {app.model.conn.host}; finished requests are stored. "
                    f"{(out.get('server') or {}).get('text') or ''}", timeout=6, markup=False)


def _with_mono_times(cv: CampaignView, info: dict[str, Any], mono: float,
                     wall: float) -> CampaignView:
    """Host wall-clock times of a campaign status on this console's monotonic clock."""
    def at(t: Any) -> float | None:
        return mono - max(0.0, wall - float(t)) if isinstance(t, (int, float)) else None

    cv.started = at(info.get("created_at")) or mono
    cv.ended = at(info.get("ended_at"))
    for v, raw in zip(cv.variants, info.get("variants") or [], strict=False):
        v.started, v.ended = at(raw.get("started_at")), at(raw.get("ended_at"))
    return cv


def _sweep_from_store(info: dict[str, Any], store: Any, host: str) -> m.SweepView:
    """A running sweep (one-variant campaign) as the Bench screen shows it, from what the
    store holds of it; its journal's events then fill it in."""
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
