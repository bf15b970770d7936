"""What a start of a server says as it goes, the same for one host (server/control) and for
a host made of nodes (nodes/control): the agent's events of a start become StartupSteps
(reported as they happen) and fill a StartResult; a failed startup is StartupFailed with the
log lines that say why; a launch that started a process is recorded in the run store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import EXIT_FAILED, UserError
from dsv4tui.core.server.launch import LaunchPlan

if TYPE_CHECKING:
    from dsv4tui.core.store import RunStore

# What ``startup_s`` is, wherever it is shown (server start and status, campaigns, the
# Launch screen): the agent's server_state.startup_s.
STARTUP = "launch -> ready, wall clock on the host"
OTHER = "python start, imports, gaps between phases"  # the startup less its phases

DEFAULT_GRACE_S = 60.0
DEFAULT_TIMEOUT_S = 1800.0
FAILURES = ("crashed", "timeout")  # agent error kinds of a startup that failed (not a refusal)


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
    launch: LaunchPlan
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
    slurm: dict[str, Any] | None = None  # a Slurm host: job_id, output, nodes, queue_wait_s

    @property
    def other_s(self) -> float | None:
        """The startup less its phases (:data:`OTHER`): with it the phases add up."""
        if self.startup_s is None or not self.phases or self.nodes is not None:
            return None
        spent = sum(float(p.get("duration_s") or 0.0) for p in self.phases)
        return round(max(0.0, self.startup_s - spent), 3)

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"nodes": self.nodes} if self.nodes is not None else {}
        if self.slurm is not None:
            extra["slurm"] = self.slurm
        return {**extra, "host": self.host, "profile": self.profile, "pid": self.pid,
                "ready": self.ready,
                "launch_id": self.launch_id,
                "startup_s": self.startup_s, "other_s": self.other_s, "phases": self.phases,
                "backend": self.launch.backend, "checkpoint": self.launch.checkpoint,
                "changes": self.launch.changes, "previous_stop": self.previous_stop,
                "log_file": (self.status or {}).get("log") or self.launch.log_file,
                "argv": self.launch.argv}


class StartupFailed(UserError):
    """The server died or did not become ready; ``excerpt`` holds the log lines that say why,
    ``failure`` the agent's class of the cause."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, kind: str, excerpt: list[str],
                 result: StartResult, failure: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.excerpt = excerpt
        self.result = result
        self.failure = failure  # the agent's class of it (agent/host/failure.py), if any


def startup_text(seconds: float | None) -> str:
    """``startup 5.1 s`` (:data:`STARTUP`), the same in every command that prints it."""
    return "startup ?" if seconds is None else f"startup {seconds:.1f} s"


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


def log_excerpt(event: dict[str, Any]) -> list[str]:
    """A failed start's error lines, then the log's last lines that are not among them."""
    errors = [str(x) for x in event.get("last_errors") or []]
    tail = [str(x) for x in event.get("tail") or []]
    seen = set(errors)
    return errors + [t for t in tail if t not in seen]


def record_launch(store: RunStore | None, result: StartResult, ok: bool,
                  error: str | None) -> None:
    """Record a launch that started a process (refusals before launching are not launches)."""
    if store is None or result.pid is None or result.launch_id is not None:
        return
    from dsv4tui.core.store import StoreError

    launch = result.launch
    try:
        result.launch_id = store.record_launch(
            result.host, result.profile, {**launch.profile, "argv": launch.argv, "pid": result.pid,
                                          "started_at": result.started_at,
                                          "phases": result.phases},
            launch.backend, launch.checkpoint, launch.changes, result.startup_s, ok, error)
    except StoreError as exc:
        result.store_error = str(exc)


def apply_event(result: StartResult, ev: dict[str, Any],
                on_step: Callable[[StartupStep], None] | None) -> None:
    """One agent event of a start into ``result``; its step (if any) to ``on_step``."""
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
