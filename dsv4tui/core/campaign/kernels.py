"""Taking a kernel capture and storing it with what it measured, for the CLI (``dsv4tui
kernels``) and the dashboard (``k`` on the Kernels screen).

A capture measures one running server under the steady load it generated. So it is stored
with that server's launch (the run store's launch whose pid is the server's), the backend
and checkpoint the server really runs (not the launch profile's configured ones) and the load; it is
linked to a run only when it was taken during that run or right after it (``LINK_WINDOW_S``)
on the same launch, never to "the host's latest run" of another backend or a cancelled one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign.kernel_load import load_text
from dsv4tui.core.errors import AgentFailed, UserError

if TYPE_CHECKING:
    from dsv4tui.core.store.models import Launch, Run
    from dsv4tui.core.store.runstore import RunStore

EventCallback = Callable[[dict[str, Any]], None]
LINK_WINDOW_S = 300.0  # a capture taken this soon after a run ended (same launch) belongs to it


def agent_args(url: str, *, steps: int = 5, concurrency: int = 16, warmup: float = 3.0,
               output_len: int = 1024, output_dir: str | None = None, timeout: float = 300.0,
               top: int = 25, model: str | None = None,
               api_key_env: str | None = None) -> list[str]:
    """The ``agent kernels run`` argv for these settings."""
    out = ["kernels", "run", "--url", url, "--steps", str(steps), "--concurrency",
           str(concurrency), "--warmup", f"{warmup:g}", "--output-len", str(output_len),
           "--timeout", f"{timeout:g}", "--top", str(top)]
    if output_dir:
        out += ["--output-dir", output_dir]
    if model:
        out += ["--model", model]
    if api_key_env:
        out += ["--api-key-env", api_key_env]
    return out


async def collect_kernels(agent: Any, args: Sequence[str],
                          on_event: EventCallback | None = None) -> dict[str, Any]:
    """Run ``agent kernels run`` (argv from :func:`agent_args`) through a host's agent;
    every event goes to ``on_event``; returns the final ``kernels`` event."""
    final: dict[str, Any] | None = None
    async for ev in agent.events(*args):
        if on_event is not None:
            on_event(ev)
        if ev.get("type") == "kernels":
            final = ev
    if final is None:
        raise AgentFailed("kernels", "the agent ended without a kernel capture")
    return final


@dataclass
class ServerContext:
    """The server a capture measures, as the host and the run store know it."""

    host: str
    profile_name: str | None = None
    server_pid: int | None = None
    launch_id: int | None = None  # the run store's launch of that pid (None: not ours/known)
    backend: str | None = None  # what the server runs
    checkpoint: str | None = None
    simulated: bool = False
    server_started_at: float | None = None  # epoch: runs after it measured this server


def launch_of(store: RunStore, host: str, pid: int | None) -> Launch | None:
    """The store's newest launch on ``host`` that started server ``pid``."""
    if pid is None:
        return None
    for launch in store.launches(host, limit=50):
        if (launch.profile or {}).get("pid") == pid:
            return launch
    return None


def context_from_status(store: RunStore | None, host: str, status: Mapping[str, Any], *,
                        simulated: bool = False) -> ServerContext:
    """A :class:`ServerContext` from an agent ``server status`` event (what really runs)."""
    prof = status.get("profile") if isinstance(status.get("profile"), Mapping) else {}
    assert isinstance(prof, Mapping)
    pid = status.get("pid") if status.get("state") in ("ready", "starting") else None
    launch = launch_of(store, host, pid) if store is not None else None
    backend = prof.get("moe_runner_backend") or (launch.backend if launch else None)
    if prof and not backend:
        backend = "auto"
    return ServerContext(
        host=host, profile_name=prof.get("name") or (launch.profile_name if launch else None),
        server_pid=pid if isinstance(pid, int) else None,
        launch_id=launch.id if launch else None, backend=backend,
        checkpoint=prof.get("checkpoint") or prof.get("quantization")
        or (launch.checkpoint if launch else None), simulated=simulated,
        server_started_at=float(status["started_at"]) if pid is not None and isinstance(
            status.get("started_at"), (int, float)) else None)


async def server_context(host: Any, store: RunStore | None,
                         profile_name: str | None = None) -> ServerContext:
    """Ask ``host`` (a connected ``hosts.resolve.Host``) which server runs, and the store
    which launch started it."""
    from dsv4tui.core.server import control as server_control

    try:
        status = await server_control.status(host, profile_name)
    except UserError:
        status = {}
    return context_from_status(store, host.name, status, simulated=bool(host.simulated))


def run_for_capture(store: RunStore, ctx: ServerContext, taken_at: float,
                    window_s: float = LINK_WINDOW_S) -> int | None:
    """The run a capture taken at ``taken_at`` belongs to: the host's newest run on the same
    launch that was running then or had ended at most ``window_s`` before; else None.

    The same launch: the run records the launch id; a run without one (the launch was not
    recorded) counts when it started after the server process did (the host runs one server
    of ours: a run that started after it, on the same profile, measured it)."""
    if ctx.launch_id is None and ctx.server_started_at is None:
        return None
    for run in store.runs(host=ctx.host, limit=50):
        if not _same_launch(run, ctx):
            continue
        return run.id if _during_or_after(run, taken_at, window_s) else None
    return None


def _same_launch(run: Run, ctx: ServerContext) -> bool:
    if ctx.launch_id is not None and run.launch_id is not None:
        return run.launch_id == ctx.launch_id
    if run.launch_id is not None and ctx.launch_id is None:
        return False  # the run names a launch; the server is not a launch we know of
    if ctx.server_started_at is None or run.started_at < ctx.server_started_at:
        return False
    return not (run.profile_name and ctx.profile_name and run.profile_name != ctx.profile_name)


def _during_or_after(run: Run, taken_at: float, window_s: float) -> bool:
    if run.started_at > taken_at + 1.0:
        return False
    if run.status == "running" or run.finished_at is None:
        return True
    return taken_at - run.finished_at <= window_s


def store_capture(store: RunStore, summary: Mapping[str, Any], ctx: ServerContext | None, *,
                  run_id: int | None = None, label: str | None = None,
                  taken_at: float | None = None) -> tuple[int, int | None]:
    """Save ``summary`` with the launch and load it measured; ``run_id`` (given by the user)
    or else the run it was taken during / right after (:func:`run_for_capture`).
    Returns ``(capture id, run id or None)``."""
    from dsv4tui.core.store import kernels as kernel_store

    started = taken_at if taken_at is not None else float(summary.get("time") or time.time())
    if run_id is None and ctx is not None:
        run_id = run_for_capture(store, ctx, started)
    if label is None and ctx is not None and ctx.backend:
        label = "_".join(x for x in (ctx.checkpoint, ctx.backend) if x)
    capture_id = kernel_store.save_capture(
        store, summary, host=ctx.host if ctx else str(summary.get("host") or "local"),
        run_id=run_id, label=label, backend=ctx.backend if ctx else None,
        checkpoint=ctx.checkpoint if ctx else None,
        simulated=(ctx.simulated or None) if ctx else None,
        launch_id=ctx.launch_id if ctx else None, server_pid=ctx.server_pid if ctx else None)
    return capture_id, run_id


def progress_text(ev: Mapping[str, Any]) -> str | None:
    """What the Kernels screen says while a capture is being taken (None: not a step)."""
    if ev.get("type") not in ("kernels_target", "kernels_phase"):
        return None
    return str(ev.get("message") or f"capturing kernels of {ev.get('url')} ...")


@dataclass(frozen=True)
class Taken:
    """A capture the dashboard took and stored."""

    capture_id: int
    run_id: int | None
    ctx: ServerContext
    profile: str
    concurrency: int
    load: dict[str, Any] | None = None  # the agent's load record (measured batch, flag)

    def text(self) -> str:
        ctx = self.ctx
        what = "/".join(x for x in (ctx.backend, ctx.checkpoint) if x) or self.profile
        launch = f"launch {ctx.launch_id}" if ctx.launch_id is not None else "launch unknown"
        link = (f"with run {self.run_id}" if self.run_id is not None else
                "not linked to a run (no run on this launch ran in the last "
                f"{LINK_WINDOW_S / 60:.0f} min)")
        load = load_text(self.concurrency, self.load, why=True) or f"C={self.concurrency}"
        return f"stored capture #{self.capture_id} of {what} at {load} ({launch}), {link}"


async def take(host: Any, store: RunStore, profile_name: str, profile: Any, *, steps: int,
               concurrency: int, on_event: EventCallback | None = None) -> Taken:
    """Steady load + SGLang's /start_profile on ``host``'s server of ``profile`` (a
    ``config.ServerProfile``), stored with the launch it measured and the load."""
    url = f"http://{profile.host}:{profile.port}"
    ctx = await server_context(host, store, profile_name)
    taken_at = time.time()
    summary = await collect_kernels(
        host.agent, agent_args(url, steps=steps, concurrency=concurrency,
                               model=profile.served_model_name,
                               api_key_env=profile.api_key_env), on_event)
    capture_id, run_id = await asyncio.to_thread(store_capture, store, summary, ctx,
                                                 taken_at=taken_at)
    load = summary.get("load")
    return Taken(capture_id, run_id, ctx, profile_name, concurrency,
                 dict(load) if isinstance(load, Mapping) else None)
