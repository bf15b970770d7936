"""A server launch and its sanity gate as the model shows them: the Launch screen's phases and
the host bar's server state through a restart (``server_control.restart``'s steps, or a
campaign's launch read from its journal), then the gate's prompts and their verdict.

Each function changes the model and returns the parts it changed (``dsv4tui.core.view.parts``);
the ones that see the server start return the log file to follow. :func:`restart` and
:func:`sanity` run the whole sequence against the host, marking as they go."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import UserError
from dsv4tui.core.view import model as m
from dsv4tui.core.view.parts import PROFILES, SANITY, SERVER, STARTUP

if TYPE_CHECKING:
    from dsv4tui.core.config import ServerProfile
    from dsv4tui.core.view.host_link import HostLink


@dataclass(frozen=True)
class Launched:
    """What a restart launches: the profile, the backend and checkpoint it runs."""

    profile: str
    backend: str
    checkpoint: str
    tp_size: int | None = None


def why_not_restart(model: m.UiModel) -> str | None:
    """Why the server cannot be restarted now (a sweep or campaign runs, or a restart does)."""
    if model.busy in ("sweep", "campaign"):
        return f"a {model.busy} is running: cancel it first (x)"
    if model.startup.active:
        return "a restart is already running"
    return None


def begins(model: m.UiModel, profile: str | None, backend: str | None,
           checkpoint: str | None, now: float) -> tuple[str, ...]:
    """The running server is being stopped for a new launch: the phases start over."""
    model.startup.reset(profile, backend, checkpoint, now)
    srv = model.server
    srv.state, srv.phase = "stopping", None
    model.decode.clear()
    return STARTUP, SERVER


def restart_begins(model: m.UiModel, launched: Launched, now: float) -> tuple[str, ...]:
    """This console restarts the server: the last sanity verdict is not this launch's."""
    begins(model, launched.profile, launched.backend, launched.checkpoint, now)
    model.sanity = m.SanityView()
    return STARTUP, SERVER, SANITY, PROFILES


def campaign_launch_begins(model: m.UiModel, ev: Mapping[str, Any], now: float) -> tuple[str, ...]:
    """A campaign's ``launch_start``: its variant's server is being launched."""
    begins(model, ev.get("profile_name"), ev.get("backend"), ev.get("checkpoint"), now)
    srv = model.server
    srv.profile = ev.get("profile_name") or srv.profile
    srv.backend = ev.get("backend") or srv.backend
    srv.checkpoint = ev.get("checkpoint") or srv.checkpoint
    return STARTUP, SERVER


def step(model: m.UiModel, step: Any, now: float,
         launched: Launched | None = None) -> str | None:
    """One ``server_control.StartupStep`` (``launched``: what this console launched); returns
    the server's log when this step says the server process started."""
    m.apply_step(model.startup, step, now)
    srv = model.server
    if step.kind == "started":
        srv.state, srv.phase = "starting", "load_weights"
        if launched is not None:
            srv.profile, srv.backend = launched.profile, launched.backend
            srv.checkpoint, srv.tp_size = launched.checkpoint, launched.tp_size
        srv.started_at = time.time()
        log = (step.event or {}).get("log")
        return str(log) if log else None
    if step.kind in ("phase", "progress"):
        srv.phase = model.startup.current
    elif step.kind == "ready":
        srv.state, srv.phase = "ready", "ready"
    return None


def ready(model: m.UiModel, now: float, status: dict[str, Any] | None = None) -> str | None:
    """The server answers (``status``: the agent's last status of it); returns its log."""
    su = model.startup
    su.status, su.ended = "ready", now
    log = None
    if status:
        m.apply_status(model, status)
        log = str(status["log"]) if status.get("log") else None
    model.server.state, model.server.phase = "ready", "ready"
    return log


def failed(model: m.UiModel, message: str, now: float, *, lines: list[str] | None = None,
           crashed: bool = True) -> tuple[str, ...]:
    """The launch failed: every phase clock stops; ``lines`` (when given) explain why."""
    su = model.startup
    su.finish("failed", now)
    if lines is not None:
        su.error_lines = lines
    su.message = message
    model.server.state = "crashed" if crashed else "unknown"
    return STARTUP, SERVER


def restart_failed(model: m.UiModel, exc: BaseException, now: float) -> tuple[str, ...]:
    """``server_control.restart`` raised ``exc`` (or was cancelled): a server that left error
    lines crashed; otherwise its state is not known until the next status."""
    excerpt = list(getattr(exc, "excerpt", None) or [])
    message = getattr(exc, "message", None) or (
        "cancelled" if isinstance(exc, asyncio.CancelledError) else str(exc))
    return failed(model, message, now, lines=excerpt or None, crashed=bool(excerpt))


def campaign_launch_ended(model: m.UiModel, ev: Mapping[str, Any], now: float) -> tuple[str, ...]:
    """A campaign's ``launch_end``: ready, or failed with the server's last errors."""
    if ev.get("ok"):
        ready(model, now)
        return STARTUP, SERVER
    return failed(model, str(ev.get("error") or "the server did not start"), now,
                  lines=[str(x) for x in ev.get("last_errors") or []])


def sanity_starts(model: m.UiModel) -> m.SanityView:
    """The gate runs against the server as the host bar shows it."""
    srv = model.server
    model.sanity = m.SanityView(status="running", backend=srv.backend, checkpoint=srv.checkpoint)
    return model.sanity


def sanity_ended(s: m.SanityView, outcome: Any = None, error: str | None = None) -> None:
    """The gate's verdict (a ``bench_runner.SanityOutcome``), or why it could not run."""
    s.at = time.time()
    error = error or (outcome.error if outcome is not None else None)
    if error:
        s.status, s.detail = "error", error
    else:
        s.status = "passed" if outcome.passed else "failed"


async def restart(link: HostLink, host: Any, name: str, prof: ServerProfile,
                  backend: str | None, flags: dict[str, str | None], store: Any, *,
                  on_started: Callable[[], None]) -> None:
    """Restart ``host``'s server with profile ``name`` (``backend``, attention ``flags``:
    what the dashboard picked) until it is ready, the Launch screen following each step;
    raises what ``server_control.restart`` raised, the model saying how it ended."""
    from dsv4tui.core.server import control

    model = link.model
    launched = Launched(name, backend or prof.backend_label, prof.checkpoint_label, prof.tp_size)
    link.restarted()
    link.mark(*restart_begins(model, launched, model.mono()))

    def on_step(s: Any) -> None:
        if s.kind == "started":
            on_started()
        link.follow_log(step(model, s, model.mono(), launched))
        link.mark(STARTUP, SERVER)
    try:
        result = await control.restart(host, name, backend, on_phase=on_step, store=store,
                                       overrides=flags or None)
    except BaseException as exc:
        link.mark(*restart_failed(model, exc, model.mono()))
        raise
    link.restarted()
    link.follow_log(ready(model, model.mono(), result.status))
    link.mark(STARTUP, SERVER, PROFILES)


async def sanity(model: m.UiModel, runner: Any, find_target: Callable[[], Awaitable[Any]],
                 cases: Any, mark: Callable[..., None]) -> None:
    """The sanity gate against the server ``find_target()`` finds (``runner``: a
    ``bench_runner.BenchRunner``); a target that cannot be found is the gate's error."""
    gate = sanity_starts(model)
    mark(SANITY)
    try:
        target, _ = await find_target()
    except UserError as err:
        sanity_ended(gate, error=err.message)
        mark(SANITY)
        return
    outcome = await runner.sanity(target, cases, host=model.conn.host)
    sanity_ended(model.sanity, outcome)
    mark(SANITY)
