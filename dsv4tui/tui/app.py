"""The dashboard App: modes (one screen each), bindings with ids, themes, and the live host.

The App owns what lives longer than a screen: the :class:`HostSupervisor` of the one host
(connection state, reconnects, the long-lived ``telemetry`` and ``logs --follow`` streams),
the :class:`UiModel` the screens draw, the run store, and every worker (restart, sanity,
sweep, store queries). Screens only read the model and get :class:`ModelUpdated` messages,
batched here to at most ~10 per second. Any worker failure becomes one error dialog
(:meth:`Dsv4App._worker_state`), never a crash.

Nothing here times requests: the agent on the host measures; the App displays its events.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from textual import on, work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from dsv4tui.core import paths
from dsv4tui.core.config import HostConfig, ServerProfile, Settings
from dsv4tui.core.errors import ConfigError, ConnectError, UserError
from dsv4tui.core.view import model as m
from dsv4tui.tui import app_nodes, keymap, themes
from dsv4tui.tui.app_campaign import CampaignWatcher
from dsv4tui.tui.app_fleet import FleetMember
from dsv4tui.tui.responsive import ResponsiveApp
from dsv4tui.tui.screens.base import DsvScreen
from dsv4tui.tui.screens.bench import BenchScreen
from dsv4tui.tui.screens.campaign import CampaignScreen
from dsv4tui.tui.screens.dashboard import DashboardScreen
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.launch import LaunchScreen
from dsv4tui.tui.screens.logs import LogsScreen
from dsv4tui.tui.screens.messages import (
    ALL,
    COMPARE,
    CONN,
    GPU,
    LOGS,
    METRICS,
    PROFILES,
    RUNS,
    SANITY,
    SERVER,
    STARTUP,
    SWEEP,
    ModelUpdated,
)
from dsv4tui.tui.screens.modals import (
    Choice,
    ConfirmScreen,
    ErrorScreen,
    PickerScreen,
    PlanInput,
    SweepPlanScreen,
)
from dsv4tui.tui.screens.runs import CompareScreen, RunsScreen
from dsv4tui.tui.widgets.gpu_panel import GpuFrame
from dsv4tui.tui.widgets.text import esc

FLUSH_S = 0.1  # model changes reach the screen at most this often
LIVE_LEVEL_S = 0.5  # the running level's live TTFT/TPOT/tok/s are recomputed this often
STATUS_POLL_S = 15.0
LOG_HISTORY_LINES = 2000

SCREENS: dict[str, type[DsvScreen]] = {
    "dashboard": DashboardScreen, "logs": LogsScreen, "launch": LaunchScreen,
    "bench": BenchScreen, "runs": RunsScreen,
}

def backend_choices(checkpoint: str, current: str,
                    quantization: str | None = None) -> list[Choice]:
    """The backends that fit ``checkpoint`` (current one marked), with what each runs on
    (the core's table, :mod:`dsv4tui.core.server.backends`: the CLI refuses the others)."""
    from dsv4tui.core.server import backends, sglang_choices

    out = []
    for name in sglang_choices.MOE_RUNNER_BACKENDS:
        fits = backends.fits(name)
        misfit = backends.checkpoint_misfit(checkpoint, name, quantization)
        known = fits is not None and backends.checkpoint_format(checkpoint, quantization)
        if (not known or misfit is not None) and name != current:
            continue
        note = sglang_choices.MOE_BACKEND_NOTES.get(name, "")
        fit = misfit or (f"fits {', '.join(fits)}" if fits else
                         "not known to fit this checkpoint")
        out.append(Choice(name, name, f"{fit} — {note}" if note else fit, current=name == current))
    return out


ATTENTION_FIELDS = ("dsv4_attn_backend", "dsv4_prefill_backend", "attention_backend")
_ATTENTION_TITLES = {
    "dsv4_attn_backend": "--dsv4-attn-backend · DeepSeek-V4's sparse attention kernel",
    "dsv4_prefill_backend": "--dsv4-prefill-backend · DeepSeek-V4's sparse prefill path",
    "attention_backend": "--attention-backend",
}


def is_dsv4(profile: ServerProfile) -> bool:
    return "deepseek-v4" in profile.model_path.lower()


def attention_choices(profile: ServerProfile, current: dict[str, str | None],
                      capability: str | None, version: str | None) -> list[Choice]:
    """The attention flags' valid choices for the host's SGLang (``field=value`` each), the
    current ones marked, what each runs on where SGLang says so (``capability``: the GPUs'
    compute capability, "12.0"); DeepSeek-V4 models get their two kernels first."""
    from dsv4tui.core.server import sglang_choices

    lists, _ = sglang_choices.lists_for(version)
    fields = ATTENTION_FIELDS if is_dsv4(profile) else ("attention_backend",)
    sm = sglang_choices.sm_name(capability)
    out: list[Choice] = []
    for name in fields:
        values = lists.of(name)
        now = current.get(name)
        unset = now is None
        title = _ATTENTION_TITLES[name]
        if name == "attention_backend" and is_dsv4(profile):
            title += " · SGLang uses dsv4 for DeepSeek-V4"
        out.append(Choice(f"#{name}", title, enabled=False))
        for value in values:
            arch = sglang_choices.ARCH_NOTES.get(name, {}).get(value)
            misfit = sglang_choices.arch_misfit(name, value, capability)
            note = arch.note if arch else ""
            if misfit:
                note = f"✗ {misfit} — {note}" if note else f"✗ {misfit}"
            elif sm and arch is not None and arch.majors is not None:
                note = f"✓ runs on {sm} — {note}"
            is_current = now == value or (unset and value == "auto")
            out.append(Choice(f"{name}={value}", value, note, current=is_current))
        if unset and "auto" not in values:
            out.append(Choice(f"{name}=", "(unset: SGLang picks)", "the profile sets no flag",
                              current=True))
    return out


def profile_choice(name: str, p: ServerProfile) -> m.ProfileChoice:
    fields: list[tuple[str, str]] = []
    for label, value in (("attention", p.attention_backend),
                         ("dsv4 attention", p.dsv4_attn_backend),
                         ("dsv4 prefill", p.dsv4_prefill_backend), ("kv cache", p.kv_cache_dtype),
                         ("mem fraction", p.mem_fraction_static), ("dp size", p.dp_size),
                         ("ep size", p.ep_size), ("speculative", p.speculative_algorithm),
                         ("port", p.port), ("python", p.python)):
        if value is not None:
            fields.append((label, str(value)))
    if p.extra_args:
        fields.append(("extra args", " ".join(p.extra_args)))
    return m.ProfileChoice(name=name, checkpoint=p.checkpoint_label, quantization=p.quantization,
                           backend=p.backend_label, model_path=p.model_path, tp_size=p.tp_size,
                           fields=fields)


def model_for(name: str, config: HostConfig, *, simulated: bool) -> m.UiModel:
    """A fresh model for host ``name`` (profiles from its config)."""
    from dsv4tui.core.telemetry import HostTelemetry

    model = m.UiModel()
    model.conn = m.Connection(host=name, simulated=simulated)
    model.profiles = [profile_choice(n, p) for n, p in config.profiles.items()]
    if config.profiles:
        model.active_profile = config.default_profile or next(iter(config.profiles))
    model.telemetry = HostTelemetry(name)
    return model


class Dsv4App(FleetMember, CampaignWatcher, ResponsiveApp):
    """``Dsv4App(spec=host_spec(...), settings=...)`` runs live; ``Dsv4App(model=frozen)``
    shows a frozen model (snapshot tests) without any host."""

    TITLE = "dsv4tui"
    CSS_PATH = [str(Path(__file__).with_name("app.tcss")), str(themes.TCSS)]
    BINDINGS = [*keymap.bindings("app"),
                Binding("ctrl+c", "quit_app", "Quit", show=False, priority=True, system=True)]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, spec: Any = None, *, settings: Settings | None = None,
                 theme: str | None = None, model: m.UiModel | None = None,
                 autostart: bool = False, start_mode: str = "dashboard",
                 store: Any = None, config_path: Path | None = None) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.config_path = config_path  # where adopt writes (None: the default config file)
        self.spec = spec
        self.live = spec is not None
        if model is None:
            if spec is None:
                model = m.UiModel()
            else:
                model = model_for(spec.name, spec.config, simulated=spec.simulated)
        self.model = model
        self.autostart = autostart
        self.start_mode = start_mode
        self._requested_theme = theme
        self._dirty: set[str] = set()
        self._flush_pending = False
        self._live_at = 0.0
        self._shown_modes: set[str] = set()
        self._backend_override: dict[str, str] = {}
        self._attention_override: dict[str, dict[str, str | None]] = {}  # profile -> fields
        self.host_facts: dict[str, Any] = {}  # the GPUs' compute capability, SGLang version
        self._adopt_offered: set[Any] = set()  # foreign pids the adopt step was offered for
        self._supervisor: Any = None
        self._node_streams: Any = None  # a host made of nodes: the other nodes (app_nodes)
        self._store: Any = store
        self._sweep_cid: str | None = None  # the host-side campaign of the running sweep
        self._own_cid: str | None = None  # ... when this console started it
        self._runs_lock = threading.Lock()
        self._runs_asked = 0  # run-list reads asked / shown: a slow older read never wins
        self._runs_shown = 0
        self._live_levels: dict[int, m.LiveLevel] = {}
        self._log_path: str | None = None
        self._log_dedup = False
        self._status_timer: Any = None
        self._stopping = False
        self._hangup = False  # the terminal closed (SIGHUP): end the process once clean
        self._started_server = False  # this session started the server (the demo stops it)
        self._status_gen = 0  # bumped by restarts: an older status answer is dropped
        self.extra_tabs: dict[str, tuple[str, str]] = {}
        self.last_error: str | None = None  # the last error dialog's message (tests)

    # -- setup ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        for theme in themes.THEMES.values():
            self.register_theme(theme)
        name, warning = themes.resolve(self._requested_theme or self.settings.theme)
        self.theme = name
        self._theme_class(name)
        self.theme_changed_signal.subscribe(self, lambda t: self._theme_class(t.name))
        if warning:
            self.notify(warning, title="theme", severity="warning", timeout=8, markup=False)
        km, problems = keymap.check_keymap(self.settings.keymap)
        if km:
            self.set_keymap(km)
        for problem in problems:
            self.notify(problem, title="config", severity="warning", timeout=8, markup=False)
        for mode, cls in SCREENS.items():
            self.add_mode(mode, self._factory(cls))
        self._add_kernels_mode()
        self.add_mode("campaign", self._factory(CampaignScreen))
        self.extra_tabs["7"] = ("campaign", "Campaign")
        self.switch_mode(self.start_mode if self.start_mode in self._mode_names() else
                         "dashboard")
        self._shown_modes.add(self.current_mode)
        self.call_after_refresh(self._freeze_heap)
        if self.live:
            self.open_store()
            self.connect_host()
            self.set_timer(1.0, self._warm_modes)
            self._quit_on_hangup()

    def _quit_on_hangup(self) -> None:
        """The terminal closed (SIGHUP) or someone asked us to stop (SIGTERM): quit as ``q``
        does -- a running sweep is marked, the demo's simulated server is stopped -- instead
        of dying with the server still running."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGHUP:  # also when a quit is already under way: it must not wait
            self._hangup = True   # on the terminal that is gone
        if not self._stopping:
            self.run_worker(self._quit_cleanly(), group="quit", exit_on_error=False)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        theme = self.current_theme if self.is_running else None
        return themes.variable_defaults(theme.dark if theme is not None else True)

    def _factory(self, cls: type[DsvScreen]) -> Callable[[], Screen[Any]]:
        return lambda: cls(self.model)

    def _mode_names(self) -> list[str]:
        return [*SCREENS, *(mode for mode, _ in self.extra_tabs.values())]

    def _add_kernels_mode(self) -> None:
        """The Kernels screen (issue 7) when its module exists; tolerated when it does not."""
        try:
            import importlib

            module = importlib.import_module("dsv4tui.tui.screens.kernels")
        except Exception:
            return
        cls = getattr(module, "KernelsScreen", None)
        if cls is None:
            return

        def make() -> Screen[Any]:
            try:
                return cast(Screen[Any], cls(self.model))
            except TypeError:
                return cast(Screen[Any], cls())

        self.add_mode("kernels", make)
        self.extra_tabs["6"] = ("kernels", "Kernels")

    def _theme_class(self, name: str) -> None:
        for t in themes.THEMES:
            self.set_class(t == name, f"-theme-{t}")

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        km = self._keymap or {}
        scopes = {"app"}
        if isinstance(screen, (DashboardScreen, LogsScreen, LaunchScreen)):
            scopes.add("logs")
        if isinstance(screen, RunsScreen):
            scopes.add("runs")
        if isinstance(screen, CompareScreen):
            scopes.add("compare")
        for action, keys in keymap.effective(km):
            if not action.palette or action.scope not in scopes:
                continue
            target = self if action.scope == "app" else screen
            yield SystemCommand(f"{action.description} ({keys})", action.help,
                                self._palette_callback(action.action, target))
        for name in themes.THEMES:
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme",
                                self._theme_callback(name))

    def _palette_callback(self, action: str, target: Any) -> Callable[[], Any]:
        def run() -> None:
            self.call_later(self.run_action, action, target)
        return run

    def _theme_callback(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.theme = name
        return run

    # -- batched model updates -------------------------------------------------------------
    def mark(self, *parts: str) -> None:
        """Parts of the model changed: the screen on top redraws them within FLUSH_S."""
        self._dirty.update(parts)
        if not self._flush_pending:
            self._flush_pending = True
            self.set_timer(FLUSH_S, self._flush_model)

    def _flush_model(self) -> None:
        self._flush_pending = False
        now = time.monotonic()
        if self._live_levels and now - self._live_at >= LIVE_LEVEL_S:
            self._live_at = now  # level_metrics over a level's requests: at most 2 per second
            if m.refresh_live_levels(self.model.sweep, self._live_levels):
                self._dirty.add(SWEEP)
        parts, self._dirty = frozenset(self._dirty), set()
        if not parts or self._stopping or not self.is_running:
            return
        try:
            screen = self.screen
        except Exception:  # no screen yet / any more (start-up, shutdown)
            return
        if isinstance(screen, DsvScreen):
            screen.post_message(ModelUpdated(parts))

    def on_gpu_frame(self, message: GpuFrame) -> None:
        self.mark(GPU)

    # -- workers' failures: one dialog ------------------------------------------------------
    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state is not WorkerState.ERROR or self._stopping:
            return
        error = worker.error
        titles = {"connect": "cannot connect", "server": "restart failed",
                  "sanity": "sanity check could not run", "sweep": "sweep stopped",
                  "store": "run store", "status": "server status", "export": "export failed",
                  "report": "report failed"}
        title = titles.get(worker.group, f"{worker.name} failed")
        message = (error.message if isinstance(error, UserError)
                   else f"{type(error).__name__}: {error}")
        details = list(getattr(error, "excerpt", None) or [])
        self.show_error(title, message, details)

    def show_error(self, title: str, message: str, details: list[str] | None = None) -> None:
        self.last_error = message
        self.push_screen(ErrorScreen(title, message, details))

    # -- connection -------------------------------------------------------------------------
    @work(group="connect", exclusive=True, exit_on_error=False)
    async def connect_host(self) -> None:
        spec = self.spec
        sup = self.new_supervisor(spec)  # the fleet's, when opened from one (app_fleet)
        self._supervisor = sup
        self.model.conn.retry_in = sup.retry_in
        interval = self.settings.telemetry.interval_s
        self.model.gpu_interval = interval
        sup.add_stream("telemetry", ["telemetry", "--interval", f"{interval:g}"],
                       self._on_telemetry_event)
        if spec.group:  # a host made of nodes: every other node's GPUs and log too
            self._node_streams = app_nodes.start(self, spec, interval)
        self._follow_metrics()
        host = await sup.wait_connected()
        self.load_host_facts()
        self._status_timer = self.set_timer(STATUS_POLL_S, self._poll_status)
        try:
            await self._look_around(host)
        except ConnectError as exc:
            # the link dropped while we looked around (the supervisor may not know yet): the
            # banner says so, and the reconnect refreshes the status and attaches to whatever
            # runs (_on_supervisor_state); no error dialog over the banner
            self.model.logs.append(f"[dsv4tui] {exc.message}")
            self.mark(LOGS)

    async def _look_around(self, host: Any) -> None:
        """Right after connecting: the server's state, a campaign or sweep that runs there
        (watched), the last campaign (shown), else the first restart when asked for."""
        status = await self._refresh_status()
        from dsv4tui.core.campaign import session

        found = await session.listing(host)
        running = [c for c in found if c.get("state") == "running"]
        campaigns = [c for c in found if c.get("kind") == "campaign"]
        if not running and campaigns:
            self.show_last_campaign(campaigns[-1])  # the Campaign screen shows the last one
        if running:
            self.attach_running(running[-1])  # someone's sweep or campaign runs: watch it
        elif self.autostart and status.get("state") in ("stopped", "crashed", "unknown"):
            if self.current_mode == "dashboard":
                self.switch_mode("launch")  # a first look: the startup phases, then sanity
            self.restart_server(self.model.active_profile, None)
        elif status.get("state") == "ready" and self.model.server.profile:
            self.run_sanity()  # attached to a running server we started: is it still sane?

    def _on_supervisor_state(self, sup: Any) -> None:
        conn = self.model.conn
        was_down = conn.down
        conn.state = sup.state.value
        conn.detail = sup.detail
        conn.attempts = sup.attempts
        if conn.state == "connected" and was_down:
            self.model.logs.append("──── reconnected ────")
            self.mark(LOGS)
            self.run_worker(self._refresh_status(), group="status", exclusive=True,
                            exit_on_error=False)
            if self._sweep_cid is None and not self._stopping:
                self.attach_running()  # started while we were away (another console)
        self.mark(CONN)

    def _on_stream_error(self, name: str, error: UserError) -> None:
        if name == "telemetry" and self.model.telemetry is not None:
            self.model.telemetry.set_error(error.message)
            self.mark(GPU)
        elif name == "metrics":
            self.model.server_metrics.last_error = error.message
            self.mark(METRICS)
        elif name == "logs":
            self.model.logs.append(f"[dsv4tui] log stream: {error.message}")
            self.mark(LOGS)

    def _follow_metrics(self) -> None:
        """The server's /metrics at the telemetry rate: ours wherever it runs, else the active
        profile's port (a server someone else started there)."""
        if self._supervisor is None:
            return
        args = ["metrics", "--interval", f"{self.model.gpu_interval:g}"]
        with contextlib.suppress(UserError):
            _, prof = self._profile()
            args += ["--host", prof.host, "--port", str(prof.port)]
        self._supervisor.add_stream("metrics", args, self._on_metrics_event)

    def _on_metrics_event(self, ev: dict[str, Any]) -> None:
        if ev.get("type") != "server_metrics":
            return
        self.model.server_metrics.add(ev, self.model.mono())
        self.mark(METRICS)

    def _on_telemetry_event(self, ev: dict[str, Any]) -> None:
        if ev.get("type") != "frame":
            return
        from dsv4tui.core.telemetry import Frame, FrameError

        try:
            frame = Frame.from_event(ev)
        except FrameError:
            return
        if self._node_streams is not None:  # node 0's frame, merged with the other nodes'
            frame = self._node_streams.frames.feed(self.model.telemetry, self._node_streams.node0, frame)
        else:
            self.model.telemetry.add(frame)
        self.post_message(GpuFrame(self.model.conn.host, frame))

    def host(self) -> Any:
        sup = self._supervisor
        if sup is None or sup.host is None or self.model.conn.state != "connected":
            raise ConnectError(f"{self.model.conn.host}: not connected")
        return sup.host

    # -- server status and the log stream ---------------------------------------------------
    async def _refresh_status(self) -> dict[str, Any]:
        from dsv4tui.core.server import control as server_control

        try:
            host = self.host()
        except ConnectError:
            return {}
        gen = self._status_gen
        status = await server_control.status(host, self.model.active_profile)
        if gen == self._status_gen and not self.model.startup.active:
            m.apply_status(self.model, status)
            self.mark(SERVER, PROFILES)
        if status.get("log"):
            self._follow_log(str(status["log"]))
        if self._node_streams is not None and isinstance(status.get("nodes"), list):
            self._node_streams.follow_logs(status["nodes"])
        self._offer_adopt(status)
        return status

    def _poll_status(self) -> None:
        """Timer-chained: the next poll is armed only after this one finished."""
        async def poll() -> None:
            try:
                if not self.model.startup.active and self.model.conn.connected:
                    with contextlib.suppress(UserError):
                        await self._refresh_status()
            finally:
                if not self._stopping:
                    self._status_timer = self.set_timer(STATUS_POLL_S, self._poll_status)
        self.run_worker(poll(), group="status", exclusive=True, exit_on_error=False)

    def _follow_log(self, path: str) -> None:
        if self._supervisor is None or path == self._log_path:
            return
        if self._log_path is not None:
            self.model.logs.append(f"──── log: {path} ────")
        self._log_path = path
        self._log_dedup = False
        self._supervisor.add_stream(
            "logs", ["logs", path, "--follow", "--lines", str(LOG_HISTORY_LINES)],
            self._on_log_event)
        self.mark(LOGS)

    def _on_log_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "lines":
            lines = ev.get("lines") or []
            if self._node_streams is not None:
                lines = self._node_streams.lines(self._node_streams.node0, lines)
            if ev.get("first_line") == 1 and len(self.model.logs) and self._log_dedup:
                lines = _skip_seen(self.model.logs.tail(20), lines)
            self._log_dedup = True
            self.model.logs.extend(lines)
            self.mark(LOGS)
        elif kind == "log_event":
            inner = ev.get("event") or {}
            part = m.apply_log_event(self.model, inner, self.model.mono())
            if part:
                self.mark(part)
        elif kind == "log_rotated":
            self.model.logs.append("──── log file replaced ────")
            self._log_dedup = False
            self.mark(LOGS)

    # -- restart ----------------------------------------------------------------------------
    def _profile(self, name: str | None = None) -> tuple[str, ServerProfile]:
        if self.spec is None:
            raise UserError("no host")
        cfg: HostConfig = self.spec.config
        return cfg.profile(name or self.model.active_profile)

    def backend_for(self, profile: str | None) -> str:
        prof = self.model.profile(profile)
        if profile and profile in self._backend_override:
            return self._backend_override[profile]
        return prof.backend if prof else "auto"

    @work(group="server", exclusive=True, exit_on_error=False)
    async def restart_server(self, profile: str | None, backend: str | None,
                             overrides: dict[str, str | None] | None = None) -> None:
        from dsv4tui.core.server import control as server_control

        host = self.host()
        name, prof = self._profile(profile)
        backend = backend or self._backend_override.get(name)
        if backend:
            self._backend_override[name] = backend
        if overrides:  # kept for this profile's next restarts, as the backend is
            self._attention_override.setdefault(name, {}).update(overrides)
        attention = dict(self._attention_override.get(name, {}))
        if name != self.model.active_profile:
            self.model.active_profile = name
            self._follow_metrics()  # its port may differ
        self._status_gen += 1
        su = self.model.startup
        su.reset(name, backend or prof.backend_label, prof.checkpoint_label, self.model.mono())
        srv = self.model.server
        srv.state, srv.phase = "stopping", None
        self.model.sanity = m.SanityView()
        self.model.decode.clear()
        self.mark(STARTUP, SERVER, SANITY, PROFILES)

        def on_step(step: Any) -> None:
            m.apply_step(su, step, self.model.mono())
            if step.kind == "started":
                self._started_server = True
                srv.state, srv.phase = "starting", "load_weights"
                srv.profile, srv.backend = name, backend or prof.backend_label
                srv.checkpoint, srv.tp_size = prof.checkpoint_label, prof.tp_size
                srv.started_at = time.time()
                log = (step.event or {}).get("log")
                if log:
                    self._follow_log(str(log))
            elif step.kind in ("phase", "progress"):
                srv.phase = su.current
            elif step.kind == "ready":
                srv.state, srv.phase = "ready", "ready"
            self.mark(STARTUP, SERVER)

        try:
            result = await server_control.restart(host, name, backend, on_phase=on_step,
                                                  store=self._store,
                                                  overrides=attention or None)
        except BaseException as exc:
            su.finish("failed", self.model.mono())  # the phase clocks stop with the total
            excerpt = list(getattr(exc, "excerpt", None) or [])
            if excerpt:
                su.error_lines = excerpt
            su.message = getattr(exc, "message", None) or (
                "cancelled" if isinstance(exc, asyncio.CancelledError) else str(exc))
            srv.state = "crashed" if excerpt else "unknown"
            self.mark(STARTUP, SERVER)
            if not isinstance(exc, asyncio.CancelledError):
                self.run_worker(self._refresh_status(), group="status", exclusive=True,
                                exit_on_error=False)
            raise
        su.status, su.ended = "ready", self.model.mono()
        self._status_gen += 1
        if result.status:
            m.apply_status(self.model, result.status)
            if result.status.get("log"):
                self._follow_log(str(result.status["log"]))
        srv.state, srv.phase = "ready", "ready"  # restart() returns only once it is ready
        self.mark(STARTUP, SERVER, PROFILES)
        await self._sanity()

    # -- sanity and sweeps ------------------------------------------------------------------
    def _bench_runner(self) -> Any:
        from dsv4tui.core.bench_runner import BenchRunner

        return BenchRunner(self.host().agent, self._store, on_event=self._on_bench_event)

    def _target_spec(self) -> dict[str, Any]:
        """Where sanity and sweeps aim: the server dsv4tui started on the host, whichever
        profile (else what answers on the default profile's port) -- decided on the host."""
        from dsv4tui.core.campaign.plan import bench_target

        return bench_target(self.spec.config) if self.spec is not None else {"mode": "ours"}

    async def _find_target(self) -> Any:
        from dsv4tui.core.bench_runner import find_target

        host = self.host()
        target, meta, notice = await find_target(host.agent, self._target_spec(),
                                                 host=host.name, simulated=host.simulated,
                                                 store=self._store)
        if notice:
            self.notify(notice, title="not our server", severity="warning", timeout=8)
        return target, meta

    def _on_bench_event(self, ev: dict[str, Any]) -> None:
        if m.apply_sanity_event(self.model.sanity, ev):
            self.mark(SANITY)
        if self._sweep_cid is not None and m.apply_sweep_event(
                self.model.sweep, ev, self._live_levels, self.model.mono()):
            self.mark(SWEEP)
        if ev.get("type") == "run_stored" and ev.get("run_id") is not None:
            self.load_runs()  # the Runs list shows the new run (running) while it runs

    async def _sanity(self) -> None:
        runner = self._bench_runner()
        srv = self.model.server
        self.model.sanity = m.SanityView(status="running", backend=srv.backend,
                                         checkpoint=srv.checkpoint)
        self.mark(SANITY)
        s = self.model.sanity
        try:
            target, _ = await self._find_target()
        except UserError as err:
            s.status, s.detail, s.at = "error", err.message, time.time()
            self.mark(SANITY)
            return
        outcome = await runner.sanity(target, self.settings.sanity.suite(),
                                      host=self.model.conn.host)
        s = self.model.sanity
        s.at = time.time()
        if outcome.error:
            s.status, s.detail = "error", outcome.error
        else:
            s.status = "passed" if outcome.passed else "failed"
        self.mark(SANITY)

    @work(group="sanity", exclusive=True, exit_on_error=False)
    async def run_sanity(self) -> None:
        await self._sanity()

    # -- kernel captures (the Kernels screen posts these) ------------------------------------
    def on_kernels_screen_reload(self, _message: Any) -> None:
        self.load_captures()

    def on_kernels_screen_run_requested(self, message: Any) -> None:
        self.take_capture(int(message.steps), int(message.concurrency))

    def _kernels_screen(self) -> Any | None:
        screen = self.screen
        return screen if hasattr(screen, "set_captures") else None

    @work(group="kernels-load", thread=True, exit_on_error=False)
    def load_captures(self) -> None:
        from dsv4tui.core.store import RunStore
        from dsv4tui.core.store import kernels as kernel_store

        if self._store is None:
            self._store = RunStore()
        items = kernel_store.captures(self._store, host=self.spec.name if self.spec else None)
        self.call_from_thread(self._show_captures, items)

    def _show_captures(self, items: list[Any]) -> None:
        screen = self._kernels_screen()
        if screen is not None:
            screen.set_captures(items)

    def _kernels_progress(self, ev: dict[str, Any]) -> None:
        screen = self._kernels_screen()
        if screen is not None and ev.get("type") in ("kernels_target", "kernels_phase"):
            screen.set_progress(str(ev.get("message") or f"capturing kernels of {ev.get('url')} ..."))

    @work(group="kernels", exclusive=True, exit_on_error=False)
    async def take_capture(self, steps: int, concurrency: int) -> None:
        """Steady load + SGLang's /start_profile on the host (agent), stored with the server
        launch it measured and the load; linked to a run only when taken during or right
        after that run on the same launch (dsv4tui.core.campaign.kernels)."""
        from dsv4tui.core.campaign import kernels as kp

        host = self.host()
        name = self.model.server.profile or self.model.active_profile
        pname, prof = self._profile(name)
        url = f"http://{prof.host}:{prof.port}"
        if self._store is None:
            from dsv4tui.core.store import RunStore

            self._store = RunStore()
        ctx = await kp.server_context(host, self._store, pname)
        taken_at = time.time()
        try:
            summary = await kp.collect_kernels(
                host.agent, kp.agent_args(url, steps=steps, concurrency=concurrency,
                                          model=prof.served_model_name,
                                          api_key_env=prof.api_key_env),
                self._kernels_progress)
        except UserError as err:
            screen = self._kernels_screen()
            if screen is not None:
                screen.set_error(err.message)
            raise
        capture_id, run_id = await asyncio.to_thread(kp.store_capture, self._store, summary, ctx,
                                              taken_at=taken_at)
        screen = self._kernels_screen()
        if screen is not None:
            what = "/".join(x for x in (ctx.backend, ctx.checkpoint) if x) or pname
            launch = f"launch {ctx.launch_id}" if ctx.launch_id is not None else "launch unknown"
            link = (f"with run {run_id}" if run_id is not None else
                    "not linked to a run (no run on this launch ran in the last "
                    f"{kp.LINK_WINDOW_S / 60:.0f} min)")
            screen.set_progress(f"stored capture #{capture_id} of {what} at C={concurrency} "
                                f"({launch}), {link}")
        self.load_captures()

    # -- the run store ----------------------------------------------------------------------
    @work(group="store", thread=True, exit_on_error=False)
    def open_store(self) -> None:
        if self._store is None:
            from dsv4tui.core.store import RunStore

            self._store = RunStore()
        self._load_runs_now()

    def _load_runs_now(self) -> None:
        store = self._store
        if store is None:
            return
        with self._runs_lock:
            self._runs_asked += 1
            gen = self._runs_asked
        rows = [m.RunRow(run_id=r.id, label=r.label, created=r.started_at, host=r.target,
                         backend=r.backend, checkpoint=r.checkpoint, best_tok_s=r.best_tok_s,
                         status=r.status, simulated=r.simulated,
                         sanity_passed=r.sanity_passed)
                for r in store.runs(limit=1000)]
        self.call_from_thread(self._set_runs, rows, gen)

    def _set_runs(self, rows: list[m.RunRow], gen: int = 0) -> None:
        if gen and gen < self._runs_shown:
            return  # an older read finished after a newer one: keep the newer
        self._runs_shown = gen
        runs = self.model.runs
        runs.rows = rows
        ids = {r.run_id for r in rows}
        runs.marked = [i for i in runs.marked if i in ids]
        runs.loading = False
        self.mark(RUNS)

    @work(group="store", thread=True, exit_on_error=False)
    def load_runs(self) -> None:
        self._load_runs_now()

    @work(group="store", thread=True, exit_on_error=False)
    def load_compare(self, ids: list[Any]) -> None:
        from dsv4tui.core.campaign.compare import compare_runs

        store = self._store
        if store is None:
            raise UserError("the run store is not open")
        baseline = self.model.runs.baseline
        cmp = compare_runs(store, [str(i) for i in ids],
                           baseline if baseline in ids else None)
        self.call_from_thread(self._show_compare, cmp)

    def _show_compare(self, view: m.CompareView) -> None:  # a campaign.compare.Comparison
        self.model.runs.compare = view
        if not isinstance(self.screen, CompareScreen):
            if self.current_mode != "runs":
                self.switch_mode("runs")
            self.push_screen(CompareScreen(self.model))
        self.mark(COMPARE)

    @work(group="export", thread=True, exit_on_error=False)
    def export_compare(self) -> None:
        view = self.model.runs.compare
        if view is None:
            raise UserError("nothing to export: compare 2+ runs first (Runs: space, c)")
        out = paths.data_dir() / "exports"
        out.mkdir(parents=True, exist_ok=True)
        stem = out / time.strftime("compare-%Y%m%d-%H%M%S")
        from dsv4tui.core.campaign.export import write_compare

        csv_path, json_path = write_compare(view, stem)
        self.call_from_thread(self.notify, f"wrote {csv_path} and {json_path.name}",
                              title="exported", timeout=8, markup=False)

    # -- screenshots and reports (files: written by workers, said by a notification) -------
    def action_save_screen(self) -> None:
        """The screen as SVG (Textual's own screenshot), into the data dir's screenshots."""
        svg = self.export_screenshot()
        self.write_screenshot(svg, time.strftime(f"dsv4tui-{self.current_mode}-%Y%m%d-%H%M%S"
                                                 ".svg"))

    @work(group="export", thread=True, exit_on_error=False)
    def write_screenshot(self, svg: str, name: str) -> None:
        out = paths.data_dir() / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        path = out / name
        try:
            path.write_text(svg, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.call_from_thread(self.notify, f"screen saved to {path}", title="screenshot",
                              timeout=8, markup=False)

    def action_report_runs(self) -> None:
        marked = list(self.model.runs.marked)
        if not marked:
            self.notify("mark the runs for the report with space, then R", timeout=4)
            return
        baseline = self.model.runs.baseline
        self.write_report(marked, baseline if baseline in marked else None)

    def action_report_compare(self) -> None:
        view = self.model.runs.compare
        if view is None or not view.runs:
            self.notify("nothing to report: compare 2+ runs first (Runs: space, c)", timeout=4)
            return
        self.write_report([r.id for r in view.runs], view.baseline_id)

    @work(group="report", thread=True, exit_on_error=False)
    def write_report(self, ids: list[int], baseline: int | None) -> None:
        """The report of runs ``ids`` (dsv4tui.core.campaign.report), into the data dir's
        reports folder; a missing matplotlib is a warning saying how to get it."""
        from dsv4tui.core.campaign import charts, report

        if not charts.available():
            self.call_from_thread(self.notify, charts.INSTALL_HINT, title="no report",
                                  severity="warning", timeout=10, markup=False)
            return
        store = self._store
        if store is None:
            raise UserError("the run store is not open")
        rep = report.build(store, ids, baseline)
        path = report.write(rep, report.default_path(report.runs_stem(ids)))[0]
        self.call_from_thread(self.notify, f"report written to {path}", title="report",
                              timeout=10, markup=False)

    # -- actions (keys and the command palette) ---------------------------------------------
    def action_show(self, mode: str) -> None:
        if mode not in self._mode_names():
            return
        if mode not in self._shown_modes:
            self._shown_modes.add(mode)
            self.call_after_refresh(self._freeze_heap)
        if self.current_mode == mode and isinstance(self.screen, CompareScreen):
            self.pop_screen()
            return
        if isinstance(self.screen, (HelpScreen, ErrorScreen)):
            self.pop_screen()
        self.switch_mode(mode)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen())

    def _need_live(self) -> bool:
        if not self.live:
            self.notify("no host attached", severity="warning")
            return False
        if not self.model.conn.connected:
            self.notify(f"{self.model.conn.host} is not connected", severity="warning", markup=False)
            return False
        return True

    def action_pick_backend(self) -> None:
        prof = self.model.profile()
        if prof is None:
            self.notify("this host has no launch profiles", severity="warning")
            return
        current = self.model.server.backend if (
            self.model.server.profile == prof.name and self.model.server.backend) \
            else self.backend_for(prof.name)
        choices = backend_choices(prof.checkpoint, current, prof.quantization)
        intro = (f"profile [b]{esc(prof.name)}[/b] · checkpoint [b]{esc(prof.checkpoint)}[/b]"
                 f"{' · ' + esc(prof.quantization) if prof.quantization else ''}\n"
                 "only the backends that fit this checkpoint are listed")

        def chosen(value: str | None) -> None:
            if value and value != current:
                self._confirm_restart(prof.name, value)
        self.push_screen(PickerScreen("MoE backend", intro, choices), chosen)

    def attention_current(self, profile: str | None) -> dict[str, str | None]:
        """The attention flags the next restart of ``profile`` uses (its fields, and what the
        attention picker changed)."""
        try:
            name, prof = self._profile(profile)
        except (UserError, ConfigError):
            return {}
        out: dict[str, str | None] = {f: getattr(prof, f) for f in ATTENTION_FIELDS}
        out.update(self._attention_override.get(name, {}))
        return out

    def action_pick_attention(self) -> None:
        prof = self.model.profile()
        if prof is None or self.spec is None:
            self.notify("this host has no launch profiles", severity="warning")
            return
        name, profile = self._profile(prof.name)
        facts = self.host_facts
        cap = facts.get("compute_capability")
        version = (facts.get("sglang") or {}).get(name)
        choices = attention_choices(profile, self.attention_current(name), cap, version)
        from dsv4tui.core.server import sglang_choices

        lists, _ = sglang_choices.lists_for(version)
        arch = sglang_choices.sm_name(cap)
        intro = (f"profile [b]{esc(name)}[/b] · SGLang {esc(version or '?')} (choices of "
                 f"{esc(lists.version)}) · GPUs {esc(arch or 'unknown')}"
                 f"{' (SIMULATED)' if self.model.simulated else ''}\n"
                 "✗: SGLang's kernels for it do not run on these GPUs")

        def chosen(value: str | None) -> None:
            if not value or value.startswith("#"):
                return
            field_name, _, picked = value.partition("=")
            if self.attention_current(name).get(field_name) != (picked or None):
                self._confirm_restart(name, None, {field_name: picked or None})
        self.push_screen(PickerScreen("attention backend", intro, choices), chosen)

    @work(group="facts", exclusive=True, exit_on_error=False)
    async def load_host_facts(self) -> None:
        """What the pickers need to know of the host: the GPUs' compute capability (its
        hello, the simulator's on the demo) and each profile's SGLang version."""
        from dsv4tui.core.server import sglang_version

        try:
            host = self.host()
        except ConnectError:
            return
        with contextlib.suppress(UserError, OSError):
            events = await host.agent.call("hello", timeout=90.0)
            hello: dict[str, Any] = next((e for e in events if e.get("type") == "hello"), {})
            self.host_facts["compute_capability"] = hello.get("compute_capability")
        versions: dict[str, str | None] = {}
        for name, prof in host.config.profiles.items():
            versions[name] = (await sglang_version.probe(host, prof)).version
        self.host_facts["sglang"] = versions

    def _offer_adopt(self, status: dict[str, Any]) -> None:
        """Met a server on the profile's port that dsv4tui did not start: say once that
        ``A`` takes it over."""
        owner = status.get("foreign") or {}
        pid = owner.get("pid")
        if status.get("state") != "foreign" or not self.live or pid in self._adopt_offered:
            return
        self._adopt_offered.add(pid)
        if not pid or self.model.simulated:
            return
        key = keymap.display_key(self.settings.keymap.get("adopt", keymap.BY_ID["adopt"].key))
        self.notify(f"port {status.get('port')} is served by pid {pid}, which dsv4tui did not "
                    f"start: press {key} to adopt it (its launch becomes a profile, a restart "
                    "can then change one flag)", title="a server we did not start",
                    timeout=15, markup=False)

    def action_adopt(self) -> None:
        if not self._need_live():
            return
        if self.model.server.state != "foreign":
            self.notify("no server that dsv4tui did not start on the profile's port",
                        timeout=4)
            return
        if self.model.simulated:
            self.notify("the demo host's profiles are built in: nothing to adopt there",
                        severity="warning")
            return
        self.adopt_server()

    @work(group="server", exclusive=True, exit_on_error=False)
    async def adopt_server(self) -> None:
        """Inspect the foreign server, show its launch as a profile diff, write it (after the
        confirm) and record it on the host as ours: the core's adopt, as the CLI does."""
        from dsv4tui.core.server import adopt

        host = self.host()
        assert self.spec is not None
        path = self.config_path or paths.config_file()
        prof = self.model.profile()
        cfg: HostConfig = self.spec.config
        port, bind = 30000, None
        if cfg.profiles and prof is not None:
            _, p = self._profile(prof.name)
            port, bind = p.port, p.host
        foreign = await adopt.inspect(host, port, bind)
        proposal = adopt.propose(self.spec.name, cfg, foreign)
        await asyncio.to_thread(adopt.write, path, proposal, dry_run=True)
        text = "\n".join(esc(line) for line in adopt.proposal_lines(proposal))
        msg = f"{text}\n\nwrite it to [b]{esc(str(path))}[/b]? Nothing is stopped."
        answer: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self.push_screen(ConfirmScreen("adopt this server?", msg, yes="Adopt"),
                         lambda yes: answer.set_result(yes) if not answer.done() else None)
        if not await answer:
            return
        await adopt.record(host, proposal)
        settings = await asyncio.to_thread(adopt.write, path, proposal)
        new = settings.hosts.get(self.spec.name)
        if new is not None:  # the same objects the host's session reads: no reconnect
            cfg.profiles.clear()
            cfg.profiles.update(new.profiles)
            cfg.default_profile = new.default_profile
        self.model.profiles = [profile_choice(n, p) for n, p in cfg.profiles.items()]
        self.model.active_profile = proposal.name
        self.notify(f"adopted pid {foreign.pid} as profile {proposal.name!r} (written to "
                    f"{path}); r restarts it, a and b change one flag", timeout=8, markup=False)
        self._status_gen += 1
        await self._refresh_status()
        self.mark(PROFILES, SERVER)
        self.load_host_facts()

    def action_pick_profile(self) -> None:
        profiles = self.model.profiles
        if not profiles:
            self.notify("this host has no launch profiles", severity="warning")
            return
        current = self.model.active_profile
        choices = [Choice(p.name, p.name, f"{p.checkpoint} · {self.backend_for(p.name)} · "
                          f"{p.model_path}", current=p.name == current) for p in profiles]

        def chosen(value: str | None) -> None:
            if value and value != current:
                self._confirm_restart(value, None)
        self.push_screen(PickerScreen("launch profile", "the host's launch profiles", choices),
                         chosen)

    def action_restart(self) -> None:
        if self.model.profile() is None:
            self.notify("this host has no launch profiles", severity="warning")
            return
        self._confirm_restart(self.model.active_profile, None)

    def _confirm_restart(self, profile: str | None, backend: str | None,
                         overrides: dict[str, str | None] | None = None) -> None:
        if not self._need_live():
            return
        if self.model.busy in ("sweep", "campaign"):
            self.notify(f"a {self.model.busy} is running: cancel it first (x)",
                        severity="warning")
            return
        if self.model.startup.active:
            self.notify("a restart is already running", severity="warning")
            return
        prof = self.model.profile(profile)
        assert prof is not None
        be = backend or self.backend_for(prof.name)
        state = self.model.server.state
        stop = ("the running server is stopped first" if state in ("ready", "starting")
                else f"the server is {state}")
        msg = (f"profile [b]{esc(prof.name)}[/b] · checkpoint [b]{esc(prof.checkpoint)}[/b] · "
               f"backend [b]{esc(be)}[/b]\n{esc(stop)}; then the sanity prompts run.")
        for key, value in (overrides or {}).items():
            before = self.attention_current(prof.name).get(key)
            msg += (f"\n[b]--{esc(key.replace('_', '-'))}[/b]: {esc(before or 'unset')} → "
                    f"[b]{esc(value or 'unset')}[/b]")

        def answer(yes: bool | None) -> None:
            if yes:
                self.switch_mode("launch")
                self.restart_server(prof.name, backend, overrides)
        self.push_screen(ConfirmScreen("restart the server?", msg, yes="Restart"), answer)

    def action_sanity(self) -> None:
        if not self._need_live():
            return
        if self.model.startup.active:
            self.notify("the server is restarting; sanity runs when it is ready", timeout=4)
            return
        self.run_sanity()

    def default_label(self) -> str:
        srv = self.model.server
        prof = self.model.profile(srv.profile)
        ckpt = srv.checkpoint or (prof.checkpoint if prof else "run")
        backend = srv.backend or (self.backend_for(prof.name) if prof else "auto")
        return f"{ckpt}_{backend}"

    def action_sweep(self) -> None:
        if self.current_mode != "bench":
            self.switch_mode("bench")
        if not self._need_live():
            return
        if self.model.sweep.running or self._sweep_cid is not None:
            what = "a campaign" if self.model.campaign.running else "a sweep"
            self.notify(f"{what} is running on the host (x cancels it)", severity="warning")
            return
        if self.model.startup.active:
            self.notify("wait for the restart to finish", severity="warning")
            return
        plan = self.settings.sweep
        gate = f"the sanity prompts run first · last result: {esc(self.model.sanity.summary)}"
        init = PlanInput(self.default_label(), list(plan.levels), plan.input_len, plan.output_len,
                         list(plan.rates), plan.goodput,
                         plan.random_range_ratio, plan.seed)

        def start(result: PlanInput | None) -> None:
            if result is not None:
                self.run_sweep(result)
        self.push_screen(SweepPlanScreen(init, gate), start)

    def action_cancel(self) -> None:
        cancelled = False
        if self._sweep_cid is not None and self.model.conn.connected:
            self.cancel_sweep(self._sweep_cid)  # stopped on the host; the watcher collects
            cancelled = True
        for worker in self.workers:
            if worker.group == "sanity" and worker.is_running:
                worker.cancel()
                cancelled = True
        if cancelled:
            self.notify("cancelling …", timeout=3)
        else:
            self.notify("nothing to cancel", timeout=2)

    def action_compare(self) -> None:
        if isinstance(self.screen, CampaignScreen):
            ids = [v.run_ids[-1] for v in self.model.campaign.variants if v.run_ids]
            if len(ids) < 2:
                self.notify("two variants with runs are needed to compare", timeout=4)
                return
            self.load_runs()
            self.load_compare(ids)
            return
        marked = list(self.model.runs.marked)
        if len(marked) < 2:
            if self.current_mode != "runs":
                self.switch_mode("runs")
            self.notify("mark 2 or more runs with space, then c", timeout=4)
            return
        self.load_compare(marked)

    def action_export(self) -> None:
        self.export_compare()

    def action_reload_runs(self) -> None:
        self.load_runs()

    def action_focus_logs(self) -> None:
        screen = self.screen
        if not isinstance(screen, DsvScreen) or screen.log_panel() is None:
            self.switch_mode("dashboard")
        self.call_after_refresh(self._focus_log)

    def _focus_log(self) -> None:
        screen = self.screen
        if isinstance(screen, DsvScreen) and (panel := screen.log_panel()) is not None:
            panel.view.focus()

    def action_focus_gpus(self) -> None:
        if self.current_mode != "dashboard":
            self.switch_mode("dashboard")
        self.call_after_refresh(self._focus_gpus)

    def _focus_gpus(self) -> None:
        if isinstance(self.screen, DashboardScreen):
            self.screen.focus_gpus()

    def action_quit_app(self) -> None:
        busy = self.model.busy
        if busy is None:
            self.run_worker(self._quit_cleanly(), group="quit", exit_on_error=False)
            return
        # the demo cancels what it started itself (its simulated server goes with it);
        # anything else runs on the host without this console
        ours = self.model.simulated and self._sweep_cid is not None and \
            self._sweep_cid == self._own_cid
        goes_on = (f"a {busy} is running on the host"
                   + ("" if self._sweep_cid == self._own_cid else " (started elsewhere)")
                   + ": it goes on without this console; reconnect (or dsv4tui campaign "
                   "attach HOST) to collect it")
        what = {"restart": "a restart is running: the server keeps starting on the host"}.get(
            busy, f"a {busy} is running: quitting cancels it with the simulated server "
            "(finished requests stay stored)" if ours else goes_on)

        def answer(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._quit_cleanly(), group="quit", exit_on_error=False)
        self.push_screen(ConfirmScreen("quit?", what, yes="Quit", danger=True), answer)

    async def _quit_cleanly(self) -> None:
        """Cancel what runs (finished requests are stored), stop the demo's simulated server,
        close the agent streams, exit. After a hangup (SIGHUP) the terminal is gone, so there
        is no screen to restore and Textual's own exit would wait on it: the process ends
        once clean."""
        self._stopping = True
        cid = self._sweep_cid
        if cid is not None and cid == self._own_cid and self.model.simulated and \
                self.model.conn.connected:
            # the demo's simulated server stops with it: its sweep is cancelled, not orphaned
            from dsv4tui.core.campaign import session

            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.cancel(self.host(), None, cid, wait=10), 20)
        cancelled = [worker for worker in list(self.workers)
                     if worker.group in ("sweep", "sanity", "server", "status", "connect")]
        for worker in cancelled:
            worker.cancel()
        for worker in cancelled:  # they store what finished as they unwind
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.wait(), 5)
        if self.model.simulated and self._started_server and self.model.conn.connected:
            # the demo cleans up after itself: its simulated server goes with it
            from dsv4tui.core.server import control as server_control

            self.notify("stopping the simulated server …", timeout=5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server_control.stop(self.host(), grace=5), 15)
        await self.release_supervisor(10)
        await self.settle_screens()  # a screen mounting in the background (_warm_modes)
        if self._hangup:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.close()
            os._exit(128 + signal.SIGHUP)
        self.exit(0)

    async def on_unmount(self) -> None:
        self._stopping = True
        if self._node_streams is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._node_streams.stop(), 5)
        await self.release_supervisor(5)
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()

    # -- tests and benchmarks ---------------------------------------------------------------
    def refresh_all(self) -> None:
        self.mark(*ALL)


def _skip_seen(tail: list[str], lines: list[str]) -> list[str]:
    """After a stream restart the agent resends the file's last lines: drop those we have."""
    if not tail or not lines:
        return lines
    last = tail[-1]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] != last:
            continue
        k = min(len(tail), i + 1, 5)
        if lines[i - k + 1:i + 1] == tail[-k:]:
            return lines[i + 1:]
    return lines
