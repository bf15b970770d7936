"""The fleet: several hosts at once, one summary per host (``dsv4tui fleet``, the Fleet screen).

:class:`Fleet` connects every host in parallel, each through its own :class:`HostSupervisor`
(so a host that does not answer only ever delays itself, and a dropped link reconnects as in
the dashboard), follows each one's ``telemetry`` stream and polls its server status, and keeps
a :class:`HostSummary` per host: connection state (or the one-line reason it is not
connected), GPU count and model, the mean utilisation / tensor pipe / memory / power of its
GPUs, the server's state, profile and backend, and the best tok/s of the host's last run in
the run store. The CLI prints :meth:`Fleet.summaries` once; the Fleet screen redraws it live.

Only the latest frame of each host is kept (no history rings): eight hosts of eight GPUs at
1 Hz cost the console a frame parse per host per second (benchmarks/fleet_cost.py).

No textual here: the console's core, shared by the CLI and the UI.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.core.errors import UserError
from dsv4tui.core.hosts.resolve import Host, HostSpec
from dsv4tui.core.hosts.session import ConnectionState
from dsv4tui.core.hosts.supervisor import HostSupervisor
from dsv4tui.core.telemetry import (
    STALE_TICKS,
    Frame,
    FrameError,
    mean_of,
    model_summary,
    total_of,
)

STREAM = "fleet:telemetry"  # the fleet's own stream name (a host's dashboard adds its own)
STATUS_EVERY_S = 10.0  # the server state changes slowly; each poll is an agent process
RUNS_EVERY_S = 30.0
SETTLE_TIMEOUT_S = 20.0

# what a host shows while it is not (yet) connected
_DOWN = (ConnectionState.LOST, ConnectionState.RECONNECTING, ConnectionState.FAILED)


@dataclass
class HostSummary:
    """One row of the fleet: what the console knows of one host right now."""

    host: str
    state: str = ConnectionState.CONNECTING.value
    error: str | None = None  # one line: why it is not connected (None when connected)
    retry_in: float | None = None  # seconds to the next reconnect attempt
    simulated: bool = False
    gpu_count: int | None = None
    gpu_model: str | None = None  # "8x NVIDIA H200" (model_summary)
    util_pct: float | None = None  # mean over the GPUs
    tensor_pct: float | None = None  # mean tensor-pipe activity (None: no GPM)
    mem_used_mib: float | None = None  # summed over the GPUs
    mem_total_mib: float | None = None
    power_w: float | None = None  # summed over the GPUs
    power_limit_w: float | None = None
    telemetry_error: str | None = None  # the telemetry stream failed (no driver, ...)
    stale: bool = False  # connected, but no frame for STALE_TICKS intervals
    server: str | None = None  # ready / starting / stopped / crashed / foreign / unknown
    profile: str | None = None
    backend: str | None = None
    status_error: str | None = None
    last_run: int | None = None  # the host's newest run in the store
    last_label: str | None = None
    best_tok_s: float | None = None  # that run's best level output tok/s
    frames: int = 0

    @property
    def connected(self) -> bool:
        return self.state == ConnectionState.CONNECTED.value

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib

    def to_json(self) -> dict[str, Any]:
        """``fleet --json``'s object: ``host`` and either its figures or ``error``."""
        if self.error is not None and not self.connected:
            return {"host": self.host, "state": self.state, "error": self.error}
        return {
            "host": self.host, "state": self.state, "simulated": self.simulated,
            "gpu_count": self.gpu_count, "gpu_model": self.gpu_model,
            "util_pct": _round(self.util_pct), "tensor_pct": _round(self.tensor_pct),
            "mem_used_mib": _round(self.mem_used_mib), "mem_total_mib": _round(self.mem_total_mib),
            "mem_pct": _round(self.mem_pct), "power_w": _round(self.power_w),
            "power_limit_w": _round(self.power_limit_w), "telemetry_error": self.telemetry_error,
            "server": self.server, "profile": self.profile, "backend": self.backend,
            "status_error": self.status_error, "last_run": self.last_run,
            "last_label": self.last_label, "best_tok_s": _round(self.best_tok_s),
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(float(value), digits)


@dataclass
class _Member:
    spec: HostSpec
    supervisor: HostSupervisor
    summary: HostSummary
    frame: Frame | None = None
    frame_at: float | None = None  # console monotonic clock at receipt
    status_seen: bool = False
    runs_seen: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # poll the status now


class Fleet:
    """``Fleet(specs)``; ``start()`` connects every host at once; ``summaries()`` is the
    fleet now; ``await settled()`` waits until each host has answered or failed (the CLI);
    ``await stop()`` closes everything. ``on_change(host)`` hears of every update."""

    def __init__(self, specs: Iterable[HostSpec], *, interval: float = 1.0,
                 status_every: float = STATUS_EVERY_S, runs_every: float = RUNS_EVERY_S,
                 store: Any = None, on_change: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.status_every = status_every
        self.runs_every = runs_every
        self.on_change = on_change
        self.clock = clock
        self._store = store
        self._own_store = store is None
        self._changed = asyncio.Event()
        self._members: dict[str, _Member] = {}
        for spec in specs:
            if spec.name in self._members:
                continue  # a host named twice is one row
            summary = HostSummary(spec.name, simulated=spec.simulated)
            sup = HostSupervisor(spec, on_state=self._on_state,
                                 on_stream_error=self._error_handler(summary))
            self._members[spec.name] = _Member(spec, sup, summary)
        self._tasks: list[asyncio.Task[None]] = []
        self._runs_wake = asyncio.Event()
        self._started = False

    # -- what the faces read ----------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self._members)

    def spec(self, name: str) -> HostSpec:
        return self._members[name].spec

    def supervisor(self, name: str) -> HostSupervisor:
        """The host's live connection (a dashboard opened from the fleet shares it)."""
        return self._members[name].supervisor

    def summaries(self) -> list[HostSummary]:
        """Every host's summary, in the order the hosts were given (stale flags refreshed)."""
        now = self.clock()
        out = []
        for member in self._members.values():
            s = member.summary
            sup = member.supervisor
            s.retry_in = sup.retry_in() if s.state in (ConnectionState.LOST.value,
                                                       ConnectionState.RECONNECTING.value) \
                else None
            s.stale = (s.connected and member.frame_at is not None
                       and now - member.frame_at > STALE_TICKS * max(self.interval, 0.2))
            out.append(s)
        return out

    def summary(self, name: str) -> HostSummary:
        return self._members[name].summary

    # -- life -------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect every host in parallel (needs a running event loop)."""
        if self._started:
            return
        self._started = True
        for member in self._members.values():
            member.supervisor.add_stream(
                STREAM, ["telemetry", "--interval", f"{self.interval:g}"],
                self._frame_handler(member))
            member.supervisor.start()
            self._tasks.append(asyncio.create_task(self._poll(member),
                                                   name=f"fleet-status:{member.spec.name}"))
        if self.runs_every > 0:
            self._tasks.append(asyncio.create_task(self._poll_runs(), name="fleet-runs"))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.gather(*(asyncio.wait_for(m.supervisor.stop(), 10)
                               for m in self._members.values()), return_exceptions=True)
        if self._own_store and self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
            self._store = None

    def settled_host(self, name: str) -> bool:
        """Has this host answered (a frame or a telemetry error, and its server status) or
        failed to connect at least once?"""
        member = self._members[name]
        s = member.summary
        if not s.connected:
            return s.state in {state.value for state in _DOWN} and s.error is not None
        gpus = member.frame is not None or s.telemetry_error is not None
        return gpus and member.status_seen and (member.runs_seen or self.runs_every <= 0)

    async def settled(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until every host has settled (:meth:`settled_host`), at most ``timeout`` s;
        a host still silent then gets the error ``no answer within N s``."""
        self.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not all(self.settled_host(n) for n in self._members):
            left = deadline - loop.time()
            if left <= 0:
                break
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
        for name in self._members:
            s = self._members[name].summary
            if not self.settled_host(name) and not s.connected and s.error is None:
                s.error = f"{name}: no answer within {timeout:g} s ({s.state})"

    # -- feeding the summaries --------------------------------------------------------------
    def _changed_host(self, name: str) -> None:
        self._changed.set()
        if self.on_change is not None:
            self.on_change(name)

    def _on_state(self, sup: HostSupervisor) -> None:
        member = self._members.get(sup.name)
        if member is None:
            return
        s = member.summary
        s.state = sup.state.value
        if sup.state is ConnectionState.CONNECTED:
            s.error = None
            self._wake(member)
        elif sup.state in _DOWN:
            s.error = _one_line(sup.detail) or f"{sup.name}: {sup.state.value}"
        self._changed_host(sup.name)

    def _error_handler(self, s: HostSummary) -> Callable[[str, UserError], None]:
        def on_error(name: str, error: UserError) -> None:
            if name == STREAM:  # no driver, the agent could not run ...: said in the row
                s.telemetry_error = _one_line(error.message) or "telemetry failed"
                self._changed_host(s.host)
        return on_error

    def _frame_handler(self, member: _Member) -> Callable[[dict[str, Any]], None]:
        def on_event(ev: dict[str, Any]) -> None:
            kind = ev.get("type")
            if kind == "error":
                member.summary.telemetry_error = _one_line(str(ev.get("message") or "")) \
                    or "telemetry failed"
                self._changed_host(member.spec.name)
                return
            if kind != "frame":
                return
            try:
                frame = Frame.from_event(ev)
            except FrameError:
                return
            member.frame, member.frame_at = frame, self.clock()
            self._apply_frame(member.summary, frame)
            self._changed_host(member.spec.name)
        return on_event

    def _apply_frame(self, s: HostSummary, frame: Frame) -> None:
        gpus = frame.gpus
        s.frames += 1
        s.telemetry_error = None
        s.simulated = s.simulated or frame.simulated
        s.gpu_count = len(gpus)
        s.gpu_model = model_summary(gpus)
        s.util_pct = mean_of(g.util_gpu for g in gpus)
        s.tensor_pct = mean_of(g.tensor_active for g in gpus)
        s.mem_used_mib = total_of(g.mem_used_mib for g in gpus)
        s.mem_total_mib = total_of(g.mem_total_mib for g in gpus)
        s.power_w = total_of(g.power_w for g in gpus)
        s.power_limit_w = total_of(g.power_limit_w for g in gpus)

    def _wake(self, member: _Member) -> None:
        """Connected (again): poll its status now rather than at the next tick."""
        member.wake.set()

    async def _poll(self, member: _Member) -> None:
        """Timer-chained server status of one host while it is connected."""
        from dsv4tui.core.server import control as server_control

        sup = member.supervisor
        s = member.summary
        while True:
            member.wake.clear()
            host: Host | None = sup.host if sup.state is ConnectionState.CONNECTED else None
            if host is not None:
                try:
                    status = await asyncio.wait_for(server_control.status(host), 30)
                except (UserError, OSError, TimeoutError) as exc:
                    s.status_error = _one_line(getattr(exc, "message", None) or str(exc)) \
                        or type(exc).__name__
                else:
                    s.status_error = None
                    apply_status(s, status)
                member.status_seen = True
                self._changed_host(member.spec.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(member.wake.wait(), self.status_every)

    async def _poll_runs(self) -> None:
        """Each host's newest run and its best tok/s, from the run store (a thread)."""
        while True:
            try:
                found = await asyncio.to_thread(self._read_runs)
            except Exception:  # a store that cannot be read shows no runs, never a crash
                found = {}
            for name, member in self._members.items():
                run = found.get(name)
                s = member.summary
                if run is not None:
                    s.last_run, s.last_label, s.best_tok_s = run.id, run.label, run.best_tok_s
                member.runs_seen = True
            self._changed.set()
            if self.on_change is not None:
                for name in self._members:
                    self.on_change(name)
            self._runs_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._runs_wake.wait(), self.runs_every)

    def reread_runs(self) -> None:
        """Read the run store again now (a host's dashboard may have stored a run)."""
        self._runs_wake.set()

    def _read_runs(self) -> dict[str, Any]:
        if self._store is None:
            from dsv4tui.core.store import RunStore

            self._store = RunStore()
        out: dict[str, Any] = {}
        for name in self._members:
            runs = self._store.runs(host=name, limit=1)
            if runs:
                out[name] = runs[0]
        return out


def apply_status(s: HostSummary, ev: dict[str, Any]) -> None:
    """An agent ``server status`` event into the summary (the server's profile, if any)."""
    s.server = str(ev.get("state") or "unknown")
    prof = ev.get("profile")
    if isinstance(prof, dict):
        s.profile = prof.get("name") or None
        s.backend = prof.get("moe_runner_backend") or "auto"
    else:
        s.profile = s.backend = None


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(text.split())
    return line[:300] + "…" if len(line) > 300 else line


def specs_for(names: Iterable[str], settings: Any, *, accept_new: bool = False) -> list[HostSpec]:
    """Host specs for ``names`` (each as ``connect`` takes it); with no names, every host in
    the config's ``[hosts]``. ConfigError for a name that cannot be a host; UserError
    (exit 2) when there is nothing to show."""
    from dsv4tui.core.errors import ConfigError
    from dsv4tui.core.hosts.resolve import host_spec

    wanted = list(names) or list(settings.hosts)
    if not wanted:
        raise ConfigError("no hosts: name them (dsv4tui fleet h200a h200b) or add [hosts.NAME] "
                          "tables to the config (dsv4tui config path); dsv4tui fleet demo "
                          "shows simulated ones")
    return [host_spec(n, settings, accept_new=accept_new) for n in wanted]

