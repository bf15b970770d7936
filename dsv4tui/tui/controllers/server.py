"""The server: restart with a backend or attention pick (``b``, ``a``, ``p``, ``r``, ``m``),
sanity (``s``), adopt (``A``), the server's status and /metrics, the host facts the pickers
show, where sanity and sweeps aim. What a restart changes in the views is
``dsv4tui.core.view.launch``'s; the dashboard's side is :class:`ServerControl`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

from dsv4tui.core import paths
from dsv4tui.core.config import ServerProfile, Settings
from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.server import backends, next_move
from dsv4tui.core.server.host_facts import HostFacts
from dsv4tui.core.view import choices, launch
from dsv4tui.core.view import model as m
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.journal import Effects, bench_event
from dsv4tui.core.view.next_launch import NextLaunch
from dsv4tui.core.view.parts import PROFILES, SERVER, STARTUP
from dsv4tui.core.view.profiles import profiles_of
from dsv4tui.tui.controllers.ui import Ui, need_live, refused, start
from dsv4tui.tui.controllers.watch import Watch
from dsv4tui.tui.screens import dialogs


def profile_of(spec: Any, model: m.UiModel, name: str | None = None) -> tuple[str, ServerProfile]:
    """The host's launch profile ``name`` (default: the active one); no host: a UserError."""
    if spec is None:
        raise UserError("no host")
    return spec.config.profile(name or model.active_profile)  # type: ignore[no-any-return]


class ServerControl:
    """Restarts, checks and adopts the host's server (``spec``'s, followed by ``link``)."""

    def __init__(self, ui: Ui, model: m.UiModel, link: HostLink, spec: Any, *,
                 settings: Settings, config_path: Path | None, store: Callable[[], Any],
                 watch: Watch, apply: Callable[[Effects], None]) -> None:
        self.ui, self.model, self.link, self.spec = ui, model, link, spec
        self.settings, self.config_path, self.store = settings, config_path, store
        self.watch, self.apply = watch, apply
        self.live = spec is not None
        self.next_launch = NextLaunch()  # the backend and attention flags picked per profile
        self.host_facts = HostFacts()  # the GPUs' compute capability, the SGLang versions
        self.failed_start: BaseException | None = None  # the last restart's, if it failed
        self.started_server = False  # this session started the server (the demo stops it)
        self._adopt_offered: set[Any] = set()  # foreign pids the adopt step was offered for

    def profile(self, name: str | None = None) -> tuple[str, ServerProfile]:
        return profile_of(self.spec, self.model, name)

    def backend_for(self, profile: str | None) -> str:
        return self.next_launch.backend_for(self.model, profile)

    def attention_current(self, profile: str | None) -> dict[str, str | None]:
        """The attention flags the next restart of ``profile`` uses."""
        try:
            name, prof = self.profile(profile)
        except UserError:
            return {}
        return self.next_launch.attention_for(name, prof)

    # -- the server's status and /metrics ----------------------------------------------------
    def follow_metrics(self) -> None:
        """The server's /metrics: ours wherever it runs, else the active profile's port."""
        try:
            prof: ServerProfile | None = self.profile()[1]
        except UserError:
            prof = None
        self.link.follow_metrics(prof)

    async def refresh_status(self) -> dict[str, Any]:
        from dsv4tui.core.server import adopt

        status = await self.link.refresh_status()
        offer = adopt.offer(status, self._adopt_offered, simulated=self.model.simulated,
                            key=self.ui.key_of("adopt")) if status else None
        if offer:
            self.ui.notify(offer, title="a server we did not start", timeout=15, markup=False)
        return status

    def refresh_later(self) -> None:
        start(self.ui, self.refresh_status(), "refresh_status", "status", exclusive=True)

    # -- restart, sanity, facts, adopt (workers) ---------------------------------------------
    def restart_server(self, profile: str | None, backend: str | None,
                       overrides: dict[str, str | None] | None = None) -> None:
        start(self.ui, self._restart(profile, backend, overrides), "restart_server", "server",
              exclusive=True)

    async def _restart(self, profile: str | None, backend: str | None,
                       overrides: dict[str, str | None] | None) -> None:
        host = self.link.host()  # not connected: nothing changes, the error dialog says why
        name, prof = self.profile(profile)
        backend, flags = self.next_launch.take(name, backend, overrides)
        if name != self.model.active_profile:
            self.model.active_profile = name
            self.follow_metrics()  # its port may differ
        try:
            await launch.restart(self.link, host, name, prof, backend, flags, self.store(),
                                 on_started=partial(setattr, self, "started_server", True))
        except Exception as exc:
            self.failed_start = exc  # m restarts with its next move (screens/launch shows it)
            self.ui.mark(STARTUP)
            self.refresh_later()  # where the server stands now
            raise
        self.failed_start = None
        await self.sanity()

    def target_spec(self) -> dict[str, Any]:
        """Where sanity and sweeps aim: the server dsv4tui started on the host, whichever
        profile (else what answers on the default profile's port) -- decided on the host."""
        from dsv4tui.core.campaign.plan import bench_target

        return bench_target(self.spec.config) if self.spec is not None else {"mode": "ours"}

    async def find_target(self) -> Any:
        from dsv4tui.core.bench_runner import find_target

        host = self.link.host()
        target, meta, notice = await find_target(host.agent, self.target_spec(),
                                                 host=host.name, simulated=host.simulated,
                                                 store=self.store())
        if notice:
            self.ui.notify(notice, title="not our server", severity="warning", timeout=8)
        return target, meta

    def on_bench_event(self, ev: dict[str, Any]) -> None:
        self.apply(bench_event(self.model, ev, self.watch.live,
                               sweep_watched=self.watch.watched is not None))

    async def sanity(self) -> None:
        from dsv4tui.core.bench_runner import BenchRunner

        runner = BenchRunner(self.link.host().agent, self.store(), on_event=self.on_bench_event)
        await launch.sanity(self.model, runner, self.find_target, self.settings.sanity.suite(),
                            self.ui.mark)

    def run_sanity(self) -> None:
        start(self.ui, self.sanity(), "run_sanity", "sanity", exclusive=True)

    def load_host_facts(self) -> None:
        """What the pickers need to know of the host (``core.server.host_facts``)."""
        try:
            host = self.link.host()
        except ConnectError:
            return
        start(self.ui, self.host_facts.gather(host), "load_host_facts", "facts", exclusive=True)

    async def _adopt(self) -> None:
        """Inspect the foreign server, show its launch as a profile diff, write it (after the
        confirm) and record it on the host as ours: the core's adopt, as the CLI does."""
        from dsv4tui.core.server import adopt

        host = self.link.host()
        assert self.spec is not None
        path = self.config_path or paths.config_file()
        cfg, prof = self.spec.config, self.model.profile()
        on_port = self.profile(prof.name)[1] if cfg.profiles and prof is not None else None
        proposal = await adopt.prepare(host, self.spec.name, cfg, on_port, path)
        if not await self.ui.push_screen_wait(
                dialogs.adopt_confirm(adopt.proposal_lines(proposal), path)):
            return
        await adopt.commit(host, proposal, path, cfg)
        self.model.profiles = profiles_of(cfg)
        self.model.active_profile = proposal.name
        self.ui.notify(f"adopted pid {proposal.foreign.pid} as profile {proposal.name!r} "
                       f"(written to {path}); r restarts it, a and b change one flag",
                       timeout=8, markup=False)
        self.link.restarted()
        await self.refresh_status()
        self.ui.mark(PROFILES, SERVER)
        self.load_host_facts()

    # -- keys --------------------------------------------------------------------------------
    def _need_profile(self, *, configured: bool = False) -> m.ProfileChoice | None:
        prof = self.model.profile()
        if prof is None or (configured and self.spec is None):
            self.ui.notify("this host has no launch profiles", severity="warning")
            return None
        return prof

    def pick_backend(self) -> None:
        if (prof := self._need_profile()) is None:
            return
        current = self.next_launch.running_backend(self.model, prof.name)
        capability = self.host_facts.capability

        def chosen(value: str | None) -> None:
            if not value or value == current:
                return
            if self.spec is not None and prof.name in self.spec.config.profiles:
                try:  # a known misfit is refused before anything is stopped, as in the CLI
                    backends.refuse_backend(self.profile(prof.name)[1], value, capability,
                                            hint=f"dsv4tui server restart {self.spec.name} "
                                            f"--backend {value} --force launches it anyway")
                except UserError as exc:
                    self.ui.notify(exc.message, title="not restarted", severity="warning",
                                   timeout=10, markup=False)
                    return
            self.confirm_restart(prof.name, value)
        self.ui.push_screen(dialogs.backend_picker(prof, choices.backend_choices(
            prof.checkpoint, current, prof.quantization, capability), capability), chosen)

    def pick_attention(self) -> None:
        if (prof := self._need_profile(configured=True)) is None:
            return
        name, profile = self.profile(prof.name)
        facts, version = self.host_facts, self.host_facts.version(name)
        listed = choices.attention_choices(profile, self.attention_current(name),
                                           facts.capability, version)

        def chosen(value: str | None) -> None:
            picked = choices.picked_attention(value)
            if picked is not None and self.attention_current(name).get(picked[0]) != picked[1]:
                self.confirm_restart(name, None, dict([picked]))
        self.ui.push_screen(dialogs.attention_picker(name, version, facts.capability,
                                                     self.model.simulated, listed), chosen)

    def pick_profile(self) -> None:
        if not self.model.profiles:
            self.ui.notify("this host has no launch profiles", severity="warning")
            return
        current = self.model.active_profile

        def chosen(value: str | None) -> None:
            if value and value != current:
                self.confirm_restart(value, None)
        self.ui.push_screen(dialogs.profile_picker(choices.profile_choices(
            self.model.profiles, current, self.backend_for)), chosen)

    def restart(self) -> None:
        if self._need_profile() is not None:
            self.confirm_restart(self.model.active_profile, None)

    def confirm_restart(self, profile: str | None, backend: str | None,
                        overrides: dict[str, str | None] | None = None) -> None:
        if not need_live(self.ui, self.model, self.live) or refused(
                self.ui, launch.why_not_restart(self.model)):
            return
        prof = self.model.profile(profile)
        assert prof is not None
        before = self.attention_current(prof.name)
        changes = [(key, before.get(key), value) for key, value in (overrides or {}).items()]

        def answer(yes: bool | None) -> None:
            if yes:
                self.ui.show_body("launch")
                self.restart_server(prof.name, backend, overrides)
        self.ui.push_screen(dialogs.restart_confirm(
            prof, backend or self.backend_for(prof.name), self.model.server.state, changes),
            answer)

    def next_move(self) -> None:
        """m: restart with the last failed start's next move (next_move), after the confirm."""
        err = self.failed_start
        move = next_move.of_failed_start(err)
        if move is None or not move.runnable:
            self.ui.notify(move.text() if move else "no failed start to try a next move for",
                           timeout=6)
            return
        ran = getattr(err, "result", None)
        extra = (ran.launch.profile.get("extra_args") if ran is not None else None) or []
        backend, overrides = next_move.restart_change(move, extra)
        self.confirm_restart(ran.profile if ran is not None else None, backend,
                             cast("dict[str, str | None]", overrides) or None)

    def check_sanity(self) -> None:
        """s: the sanity prompts against the server (not while it restarts)."""
        if not need_live(self.ui, self.model, self.live):
            return
        if self.model.startup.active:
            self.ui.notify("the server is restarting; sanity runs when it is ready", timeout=4)
            return
        self.run_sanity()

    def adopt(self) -> None:
        if not need_live(self.ui, self.model, self.live):
            return
        if self.model.server.state != "foreign":
            self.ui.notify("no server that dsv4tui did not start on the profile's port",
                           timeout=4)
        elif self.model.simulated:
            self.ui.notify("the demo host's profiles are built in: nothing to adopt there",
                           severity="warning")
        else:
            start(self.ui, self._adopt(), "adopt_server", "server", exclusive=True)
