"""The dashboard's server keys and their workers: restart with a backend or attention pick
(``b``, ``a``, ``p``, ``r``), sanity (``s``), adopt (``A``), the host facts the pickers
show. What a restart changes in the views is ``dsv4tui.core.view.launch``'s. Mixed into
:class:`dsv4tui.tui.app.Dsv4App`."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, cast

from textual import work

from dsv4tui.core import paths
from dsv4tui.core.config import ServerProfile
from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.server import backends, next_move
from dsv4tui.core.view import choices, launch
from dsv4tui.core.view import model as m
from dsv4tui.core.view.journal import bench_event
from dsv4tui.core.view.parts import PROFILES, SERVER, STARTUP
from dsv4tui.core.view.profiles import profiles_of
from dsv4tui.tui.screens import dialogs

if TYPE_CHECKING:
    from dsv4tui.tui.app import Dsv4App


def _app(obj: object) -> Dsv4App:
    """This mixin's methods run on the App (typed as what they are)."""
    return cast("Dsv4App", obj)


class ServerKeys:
    """The App's half that restarts, checks and adopts the server (keys and workers)."""

    def _profile(self, name: str | None = None) -> tuple[str, ServerProfile]:
        app = _app(self)
        if app.spec is None:
            raise UserError("no host")
        return app.spec.config.profile(name or app.model.active_profile)  # type: ignore[no-any-return]

    def backend_for(self, profile: str | None) -> str:
        app = _app(self)
        return app.next_launch.backend_for(app.model, profile)

    def attention_current(self, profile: str | None) -> dict[str, str | None]:
        """The attention flags the next restart of ``profile`` uses."""
        app = _app(self)
        try:
            name, prof = app._profile(profile)
        except UserError:
            return {}
        return app.next_launch.attention_for(name, prof)

    @work(group="server", exclusive=True, exit_on_error=False)
    async def restart_server(self, profile: str | None, backend: str | None,
                             overrides: dict[str, str | None] | None = None) -> None:
        app = _app(self)
        host = app.host()  # not connected: nothing changes, the error dialog says why
        name, prof = app._profile(profile)
        backend, flags = app.next_launch.take(name, backend, overrides)
        if name != app.model.active_profile:
            app.model.active_profile = name
            app._follow_metrics()  # its port may differ
        try:
            await launch.restart(app.link, host, name, prof, backend, flags, app._store,
                                 on_started=partial(setattr, self, "_started_server", True))
        except Exception as exc:
            self.failed_start = exc  # m restarts with its next move (screens/launch shows it)
            app.mark(STARTUP)
            app._refresh_later()  # where the server stands now
            raise
        self.failed_start = None
        await app._sanity()

    def _target_spec(self) -> dict[str, Any]:
        """Where sanity and sweeps aim: the server dsv4tui started on the host, whichever
        profile (else what answers on the default profile's port) -- decided on the host."""
        app = _app(self)
        from dsv4tui.core.campaign.plan import bench_target

        return bench_target(app.spec.config) if app.spec is not None else {"mode": "ours"}

    async def _find_target(self) -> Any:
        app = _app(self)
        from dsv4tui.core.bench_runner import find_target

        host = app.host()
        target, meta, notice = await find_target(host.agent, app._target_spec(),
                                                 host=host.name, simulated=host.simulated,
                                                 store=app._store)
        if notice:
            app.notify(notice, title="not our server", severity="warning", timeout=8)
        return target, meta

    def _on_bench_event(self, ev: dict[str, Any]) -> None:
        app = _app(self)
        app.apply(bench_event(app.model, ev, app._live_levels,
                               sweep_watched=app._sweep_cid is not None))

    async def _sanity(self) -> None:
        app = _app(self)
        from dsv4tui.core.bench_runner import BenchRunner

        runner = BenchRunner(app.host().agent, app._store, on_event=app._on_bench_event)
        await launch.sanity(app.model, runner, app._find_target, app.settings.sanity.suite(),
                            app.mark)

    @work(group="sanity", exclusive=True, exit_on_error=False)
    async def run_sanity(self) -> None:
        app = _app(self)
        await app._sanity()

    @work(group="facts", exclusive=True, exit_on_error=False)
    async def load_host_facts(self) -> None:
        """What the pickers need to know of the host (``core.server.host_facts``)."""
        app = _app(self)
        try:
            host = app.host()
        except ConnectError:
            return
        await app.host_facts.gather(host)

    @work(group="server", exclusive=True, exit_on_error=False)
    async def adopt_server(self) -> None:
        """Inspect the foreign server, show its launch as a profile diff, write it (after the
        confirm) and record it on the host as ours: the core's adopt, as the CLI does."""
        app = _app(self)
        from dsv4tui.core.server import adopt

        host = app.host()
        assert app.spec is not None
        path = app.config_path or paths.config_file()
        cfg, prof = app.spec.config, app.model.profile()
        on_port = app._profile(prof.name)[1] if cfg.profiles and prof is not None else None
        proposal = await adopt.prepare(host, app.spec.name, cfg, on_port, path)
        if not await app.push_screen_wait(
                dialogs.adopt_confirm(adopt.proposal_lines(proposal), path)):
            return
        await adopt.commit(host, proposal, path, cfg)
        app.model.profiles = profiles_of(cfg)
        app.model.active_profile = proposal.name
        app.notify(f"adopted pid {proposal.foreign.pid} as profile {proposal.name!r} (written "
                    f"to {path}); r restarts it, a and b change one flag", timeout=8,
                    markup=False)
        app.link.restarted()
        await app._refresh_status()
        app.mark(PROFILES, SERVER)
        app.load_host_facts()

    def _need_live(self) -> bool:
        app = _app(self)
        if not app.live:
            app.notify("no host attached", severity="warning")
        elif not app.model.conn.connected:
            app.notify(f"{app.model.conn.host} is not connected", severity="warning",
                        markup=False)
        return app.live and app.model.conn.connected

    def _refused(self, why: str | None) -> bool:
        app = _app(self)
        if why:
            app.notify(why, severity="warning")
        return bool(why)

    def _need_profile(self, *, configured: bool = False) -> m.ProfileChoice | None:
        app = _app(self)
        prof = app.model.profile()
        if prof is None or (configured and app.spec is None):
            app.notify("this host has no launch profiles", severity="warning")
            return None
        return prof

    def action_pick_backend(self) -> None:
        app = _app(self)
        if (prof := app._need_profile()) is None:
            return
        current = app.next_launch.running_backend(app.model, prof.name)
        capability = app.host_facts.capability

        def chosen(value: str | None) -> None:
            if not value or value == current:
                return
            if app.spec is not None and prof.name in app.spec.config.profiles:
                try:  # a known misfit is refused before anything is stopped, as in the CLI
                    backends.refuse_backend(app._profile(prof.name)[1], value, capability,
                                            hint=f"dsv4tui server restart {app.spec.name} "
                                            f"--backend {value} --force launches it anyway")
                except UserError as exc:
                    app.notify(exc.message, title="not restarted", severity="warning",
                               timeout=10, markup=False)
                    return
            app._confirm_restart(prof.name, value)
        app.push_screen(dialogs.backend_picker(prof, choices.backend_choices(
            prof.checkpoint, current, prof.quantization, capability), capability), chosen)

    def action_pick_attention(self) -> None:
        app = _app(self)
        if (prof := app._need_profile(configured=True)) is None:
            return
        name, profile = app._profile(prof.name)
        facts, version = app.host_facts, app.host_facts.version(name)
        listed = choices.attention_choices(profile, app.attention_current(name),
                                           facts.capability, version)

        def chosen(value: str | None) -> None:
            picked = choices.picked_attention(value)
            if picked is not None and app.attention_current(name).get(picked[0]) != picked[1]:
                app._confirm_restart(name, None, dict([picked]))
        app.push_screen(dialogs.attention_picker(name, version, facts.capability,
                                                  app.model.simulated, listed), chosen)

    def action_pick_profile(self) -> None:
        app = _app(self)
        if not app.model.profiles:
            app.notify("this host has no launch profiles", severity="warning")
            return
        current = app.model.active_profile

        def chosen(value: str | None) -> None:
            if value and value != current:
                app._confirm_restart(value, None)
        app.push_screen(dialogs.profile_picker(choices.profile_choices(
            app.model.profiles, current, app.backend_for)), chosen)

    def action_restart(self) -> None:
        app = _app(self)
        if app._need_profile() is not None:
            app._confirm_restart(app.model.active_profile, None)

    def _confirm_restart(self, profile: str | None, backend: str | None,
                         overrides: dict[str, str | None] | None = None) -> None:
        app = _app(self)
        if not app._need_live() or app._refused(launch.why_not_restart(app.model)):
            return
        prof = app.model.profile(profile)
        assert prof is not None
        before = app.attention_current(prof.name)
        changes = [(key, before.get(key), value) for key, value in (overrides or {}).items()]

        def answer(yes: bool | None) -> None:
            if yes:
                app.show_body("launch")
                app.restart_server(prof.name, backend, overrides)
        app.push_screen(dialogs.restart_confirm(prof, backend or app.backend_for(prof.name),
                                                 app.model.server.state, changes), answer)

    failed_start: BaseException | None = None  # the last restart's failure, if it failed

    def action_next_move(self) -> None:
        """m: restart with the last failed start's next move (next_move), after the confirm."""
        app = _app(self)
        err = self.failed_start
        move = next_move.of_failed_start(err)
        if move is None or not move.runnable:
            app.notify(move.text() if move else "no failed start to try a next move for",
                       timeout=6)
            return
        ran = getattr(err, "result", None)
        extra = (ran.launch.profile.get("extra_args") if ran is not None else None) or []
        backend, overrides = next_move.restart_change(move, extra)
        app._confirm_restart(ran.profile if ran is not None else None, backend,
                             cast("dict[str, str | None]", overrides) or None)

    def action_sanity(self) -> None:
        app = _app(self)
        if not app._need_live():
            return
        if app.model.startup.active:
            app.notify("the server is restarting; sanity runs when it is ready", timeout=4)
            return
        app.run_sanity()

    def action_adopt(self) -> None:
        app = _app(self)
        if not app._need_live():
            return
        if app.model.server.state != "foreign":
            app.notify("no server that dsv4tui did not start on the profile's port",
                        timeout=4)
        elif app.model.simulated:
            app.notify("the demo host's profiles are built in: nothing to adopt there",
                        severity="warning")
        else:
            app.adopt_server()
