"""Server control shared by the CLI and the dashboard: plan, start/restart, stop, status.

``restart`` is one agent command (``server start --replace --wait-ready``) holding the host's
server lock throughout: stop ours (if running) -> start -> follow the log until ready. Every
step is reported to ``on_step`` as it happens, so the UI and the CLI print the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsv4tui.core.config import HostConfig
from dsv4tui.core.errors import AgentFailed
from dsv4tui.core.nodes import control as group_control
from dsv4tui.core.server.launch import LaunchPlan, build_launch
from dsv4tui.core.server.startup import (
    DEFAULT_GRACE_S,
    DEFAULT_TIMEOUT_S,
    FAILURES,
    StartResult,
    StartupFailed,
    StartupStep,
    apply_event,
    log_excerpt,
    record_launch,
    startup_step,
)

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host
    from dsv4tui.core.server.sglang_version import SglangVersion
    from dsv4tui.core.store import RunStore

__all__ = ["DEFAULT_GRACE_S", "DEFAULT_TIMEOUT_S", "StartResult", "StartupFailed", "StartupStep",
           "plan", "restart", "running_backend", "start", "startup_step", "status", "stop"]


def plan(config: HostConfig, profile_name: str | None = None,
         backend: str | None = None, *, overrides: Mapping[str, Any] | None = None,
         sglang_version: str | None = None) -> tuple[str, LaunchPlan]:
    """Validate a host's profile (with the backend switched, ``overrides``: other profile
    fields changed for this launch) into a LaunchPlan, against SGLang ``sglang_version``'s choice
    lists (the newest when unknown); no connection."""
    name, profile = config.profile(profile_name)
    return name, build_launch(profile, backend, name, overrides=overrides,
                              sglang_version=sglang_version)


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

    if host.config.slurm is not None:  # a Slurm host: one job (launchers/slurm)
        from dsv4tui.core.launchers import slurm

        return await slurm.start(host, profile_name, backend, replace=replace, wait=wait,
                                 timeout=timeout, on_step=on_step, store=store,
                                 overrides=overrides)
    if host.spec.group:  # a host made of nodes: every node (group_control)
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
                apply_event(result, ev, on_step)
        else:
            for ev in await host.agent.call(*args):
                apply_event(result, ev, on_step)
    except AgentFailed as err:
        record_launch(store, result, False, err.message)
        if err.kind not in FAILURES:
            raise
        raise StartupFailed(err.message, kind=err.kind, excerpt=log_excerpt(err.event),
                            result=result, failure=err.event.get("failure")) from None
    except BaseException:
        record_launch(store, result, False, "interrupted while starting")
        raise
    record_launch(store, result, result.ready or not wait, None)
    return result


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
    nodes: every node's, in ``nodes``; a Slurm host: scancel, ``job_id``)."""
    if host.config.slurm is not None:
        from dsv4tui.core.launchers import slurm

        return await slurm.stop(host, grace)
    if host.spec.group:
        return await group_control.stop(host, grace)
    events = await host.agent.call("server", "stop", "--grace", f"{grace:g}")
    return next((e for e in events if e.get("type") == "stopped"), {"how": "not_running"})


def running_backend(status: Mapping[str, Any]) -> str | None:
    """The MoE backend of the server dsv4tui started that runs now (its launch record: the
    backend it was launched with, whatever the profile says since), from a ``status``
    event; None when none of ours runs."""
    prof = status.get("profile")
    if not status.get("ours") or status.get("state") not in ("ready", "starting") \
            or not isinstance(prof, Mapping):
        return None
    return str(prof.get("moe_runner_backend") or "auto")


async def status(host: Host, profile_name: str | None = None) -> dict[str, Any]:
    """The ``status`` event; the port/host checked for a foreign server come from the profile
    (a host made of nodes: the group's state, every node's in ``nodes``)."""
    if host.config.slurm is not None:  # its job's state (``slurm``: True, ``job_id``)
        from dsv4tui.core.launchers import slurm

        return await slurm.status(host, profile_name)
    if host.spec.group:
        return await group_control.status(host, profile_name)
    args = ["server", "status"]
    if host.config.profiles:
        _, profile = host.config.profile(profile_name)
        args += ["--port", str(profile.port), "--host", profile.host]
    events = await host.agent.call(*args)
    return next((e for e in events if e.get("type") == "status"), {"state": "unknown"})
