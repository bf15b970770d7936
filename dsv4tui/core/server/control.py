"""Server control shared by the CLI and the dashboard: plan, start/restart, stop, status.

``restart`` is one agent command (``server start --replace --wait-ready``) holding the host's
server lock throughout: stop ours (if running) -> start -> follow the log until ready. Every
step is reported to ``on_step`` as it happens, so the UI and the CLI print the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsv4tui.core.config import HostConfig
from dsv4tui.core.errors import EXIT_FAILED, AgentFailed, UserError
from dsv4tui.core.server.launch import Launch, build_launch

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host
    from dsv4tui.core.server.sglang_version import SglangVersion
    from dsv4tui.core.store import RunStore

DEFAULT_GRACE_S = 60.0
DEFAULT_TIMEOUT_S = 1800.0
_STARTUP_FAILURES = ("crashed", "timeout")


@dataclass(frozen=True)
class StartupStep:
    """One thing that happened during a start/restart.

    kind: stopping | stopped | started | progress (weight loading %) | phase (a startup phase
    finished: name, duration_s) | error (an error line in the log) | ready.
    ``elapsed_s`` is seconds since launch, on the host's clock.
    """

    kind: str
    name: str | None = None
    duration_s: float | None = None
    elapsed_s: float | None = None
    percent: int | None = None
    text: str | None = None
    event: dict[str, Any] = field(default_factory=dict)
    node: str | None = None  # which node of a host made of nodes (None: the host itself)
    rank: int | None = None  # ... and its rank


@dataclass
class StartResult:
    host: str
    profile: str
    launch: Launch
    pid: int | None = None
    ready: bool = False
    startup_s: float | None = None  # launch -> ready, the number compared between backends
    phases: list[dict[str, Any]] = field(default_factory=list)
    previous_stop: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    launch_id: int | None = None  # the run store's record of this launch
    started_at: float | None = None  # when the server process started (the host's clock)
    store_error: str | None = None
    nodes: list[dict[str, Any]] | None = None  # a host made of nodes: node, rank, pid, argv

    def to_json(self) -> dict[str, Any]:
        extra = {"nodes": self.nodes} if self.nodes is not None else {}
        return {**extra, "host": self.host, "profile": self.profile, "pid": self.pid,
                "ready": self.ready,
                "launch_id": self.launch_id,
                "startup_s": self.startup_s, "phases": self.phases,
                "backend": self.launch.backend, "checkpoint": self.launch.checkpoint,
                "changes": self.launch.changes, "previous_stop": self.previous_stop,
                "log_file": (self.status or {}).get("log") or self.launch.log_file,
                "argv": self.launch.argv}


class StartupFailed(UserError):
    """The server died or did not become ready; ``excerpt`` holds the log lines that say why."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, kind: str, excerpt: list[str],
                 result: StartResult) -> None:
        super().__init__(message)
        self.kind = kind
        self.excerpt = excerpt
        self.result = result


def plan(config: HostConfig, profile_name: str | None = None,
         backend: str | None = None, *, overrides: Mapping[str, Any] | None = None,
         sglang_version: str | None = None) -> tuple[str, Launch]:
    """Validate a host's profile (with the backend switched, ``overrides``: other profile
    fields changed for this launch) into a Launch, against SGLang ``sglang_version``'s choice
    lists (the newest when unknown); no connection."""
    name, profile = config.profile(profile_name)
    return name, build_launch(profile, backend, name, overrides=overrides,
                              sglang_version=sglang_version)


def startup_step(ev: dict[str, Any]) -> StartupStep | None:
    """The startup step an agent event of a start (or a campaign's launch) is, if any."""
    kind = ev.get("type")
    if kind == "stopping":
        return StartupStep("stopping", text=f"stopping pid {ev.get('pid')}", event=ev)
    if kind == "stopped":
        return StartupStep("stopped", duration_s=ev.get("stop_s"), text=ev.get("how"), event=ev)
    if kind == "started":
        return StartupStep("started", elapsed_s=0.0, text=f"pid {ev.get('pid')}", event=ev)
    if kind == "status" and ev.get("state") == "ready":
        return StartupStep("ready", elapsed_s=ev.get("startup_s"), event=ev)
    if kind != "log_event":
        return None
    inner = ev.get("event") or {}
    elapsed = ev.get("elapsed_s")
    if inner.get("kind") == "phase":
        return StartupStep("phase", name=inner.get("name"), duration_s=inner.get("duration_s"),
                           elapsed_s=elapsed, text=inner.get("stage"), event=inner)
    if inner.get("kind") == "load_weights_progress":
        return StartupStep("progress", name="load_weights", percent=inner.get("percent"),
                           elapsed_s=elapsed, event=inner)
    if "text" in inner:
        return StartupStep("error", name=inner.get("kind"), elapsed_s=elapsed,
                           text=inner.get("text"), event=inner)
    return None


def _excerpt(event: dict[str, Any]) -> list[str]:
    errors = [str(x) for x in event.get("last_errors") or []]
    tail = [str(x) for x in event.get("tail") or []]
    seen = set(errors)
    return errors + [t for t in tail if t not in seen]


async def start(host: Host, profile_name: str | None = None, backend: str | None = None, *,
                replace: bool = False, wait: bool = True, grace: float = DEFAULT_GRACE_S,
                timeout: float = DEFAULT_TIMEOUT_S,
                on_step: Callable[[StartupStep], None] | None = None,
                store: RunStore | None = None,
                overrides: Mapping[str, Any] | None = None,
                sglang: SglangVersion | None = None,
                config_path: str | None = None) -> StartResult:
    """Start the profile on ``host`` (``replace``: stop ours first); follow it until ready.
    (A host made of nodes: every node, and a watcher started with ``config_path``.)

    Raises StartupFailed (with the log excerpt) when the server dies or times out, AgentFailed
    for refusals (busy, port taken, already running), ConfigError for an invalid profile.
    Every launch that started a process is recorded in ``store`` (ok or not).
    """
    from dsv4tui.core.server import sglang_version

    if host.spec.group:  # a host made of nodes: every node (group_control)
        from dsv4tui.core.nodes import control as group_control

        return await group_control.start(
            host, profile_name, backend, replace=replace, wait=wait, grace=grace,
            timeout=timeout, on_step=on_step, store=store, overrides=overrides, sglang=sglang,
            config_path=config_path)
    _, profile = host.config.profile(profile_name)
    # validated against the choice lists of the host's SGLang (``sglang``: already probed)
    found = sglang or await sglang_version.probe(host, profile)
    name, launch = plan(host.config, profile_name, backend, overrides=overrides,
                        sglang_version=found.version)
    result = StartResult(host.name, name, launch)
    args = launch.agent_args(replace=replace, wait_ready=wait, grace=grace, timeout=timeout)
    try:
        if wait:
            async for ev in host.agent.events(*args):
                _apply(result, ev, on_step)
        else:
            for ev in await host.agent.call(*args):
                _apply(result, ev, on_step)
    except AgentFailed as err:
        _record(store, result, False, err.message)
        if err.kind not in _STARTUP_FAILURES:
            raise
        raise StartupFailed(err.message, kind=err.kind, excerpt=_excerpt(err.event),
                            result=result) from None
    except BaseException:
        _record(store, result, False, "interrupted while starting")
        raise
    _record(store, result, result.ready or not wait, None)
    return result


def _record(store: RunStore | None, result: StartResult, ok: bool, error: str | None) -> None:
    """Record a launch that started a process (refusals before launching are not launches)."""
    if store is None or result.pid is None or result.launch_id is not None:
        return
    from dsv4tui.core.store import StoreError

    launch = result.launch
    try:
        result.launch_id = store.record_launch(
            result.host, result.profile, {**launch.profile, "argv": launch.argv, "pid": result.pid,
                                          "started_at": result.started_at},
            launch.backend, launch.checkpoint, launch.changes, result.startup_s, ok, error)
    except StoreError as exc:
        result.store_error = str(exc)


def _apply(result: StartResult, ev: dict[str, Any],
           on_step: Callable[[StartupStep], None] | None) -> None:
    kind = ev.get("type")
    if kind == "stopped":
        result.previous_stop = {k: v for k, v in ev.items() if k not in ("type", "v")}
    elif kind == "started":
        result.pid = ev.get("pid")
        result.started_at = ev.get("started_at")
    elif kind == "status":
        result.status = ev
        if ev.get("state") == "ready":
            result.ready = True
            result.startup_s = ev.get("startup_s")
    step = startup_step(ev)
    if step is not None and step.kind == "phase":
        result.phases.append({"name": step.name, "duration_s": step.duration_s,
                              "elapsed_s": step.elapsed_s,
                              **({"stage": step.text} if step.text else {})})
    if step is not None and on_step is not None:
        on_step(step)


async def restart(host: Host, profile_name: str | None = None, backend: str | None = None,
                  on_phase: Callable[[StartupStep], None] | None = None, *,
                  grace: float = DEFAULT_GRACE_S, timeout: float = DEFAULT_TIMEOUT_S,
                  store: RunStore | None = None,
                  overrides: Mapping[str, Any] | None = None) -> StartResult:
    """Stop ours (if running) -> start the profile (backend switched, ``overrides``
    applied) -> ready."""
    return await start(host, profile_name, backend, replace=True, wait=True, grace=grace,
                       timeout=timeout, on_step=on_phase, store=store, overrides=overrides)


async def stop(host: Host, grace: float = DEFAULT_GRACE_S) -> dict[str, Any]:
    """Stop the server we started on ``host``; the ``stopped`` event (a host made of
    nodes: every node's, in ``nodes``)."""
    if host.spec.group:
        from dsv4tui.core.nodes import control as group_control

        return await group_control.stop(host, grace)
    events = await host.agent.call("server", "stop", "--grace", f"{grace:g}")
    return next((e for e in events if e.get("type") == "stopped"), {"how": "not_running"})


async def status(host: Host, profile_name: str | None = None) -> dict[str, Any]:
    """The ``status`` event; the port/host checked for a foreign server come from the profile
    (a host made of nodes: the group's state, every node's in ``nodes``)."""
    if host.spec.group:
        from dsv4tui.core.nodes import control as group_control

        return await group_control.status(host, profile_name)
    args = ["server", "status"]
    if host.config.profiles:
        _, profile = host.config.profile(profile_name)
        args += ["--port", str(profile.port), "--host", profile.host]
    events = await host.agent.call(*args)
    return next((e for e in events if e.get("type") == "status"), {"state": "unknown"})
