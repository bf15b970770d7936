"""Sanity prompts and sweeps on a host, through its agent, saved in the run store.

The CLI and the dashboard share this: :class:`BenchRunner` never prints; it hands every agent
event (and its own ``run_started`` / ``run_finished``) to ``on_event``. Each ``request``
event is written to the store before the next event is read, so a console killed or a link
dropped mid-sweep loses no finished request; the run ends ``interrupted`` (link lost, or the
console died: see RunStore.mark_orphans_interrupted) or ``cancelled`` (task cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsv4tui.agent import stats
from dsv4tui.config import SanityCase, ServerProfile, SweepPlan
from dsv4tui.errors import AgentFailed, ConnectError
from dsv4tui.store import GpuWindow, RunStore

EventCallback = Callable[[dict[str, Any]], None]


class AgentLike(Protocol):
    """What the runner needs of ``host.agent`` (dsv4tui.hosts.agent_runner.AgentRunner)."""

    def events(self, *args: str) -> AsyncIterator[dict[str, Any]]: ...


@dataclass(frozen=True)
class BenchTarget:
    """The OpenAI-compatible server, as the agent on the host reaches it."""

    url: str
    model: str | None = None
    api_key_env: str | None = None
    transport: str = "raw"

    def agent_args(self) -> list[str]:
        out = ["--url", self.url, "--transport", self.transport]
        if self.model:
            out += ["--model", self.model]
        if self.api_key_env:
            out += ["--api-key-env", self.api_key_env]
        return out

    @classmethod
    def for_profile(cls, profile: ServerProfile) -> BenchTarget:
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(profile.host, profile.host)
        if ":" in host:
            host = f"[{host}]"
        return cls(f"http://{host}:{profile.port}",
                   profile.served_model_name or profile.model_path, profile.api_key_env)


@dataclass
class RunMeta:
    """What is stored with a run besides its numbers."""

    host: str
    profile_name: str | None = None
    profile: dict[str, Any] | None = None
    backend: str | None = None
    checkpoint: str | None = None
    launch_id: int | None = None
    gpu_names: list[str] = field(default_factory=list)
    simulated: bool = False


@dataclass
class SanityOutcome:
    passed: bool
    cases: list[dict[str, Any]]
    error: str | None = None  # why it could not run (server down, no model ...)
    error_kind: str | None = None

    def to_json(self) -> dict[str, Any]:
        keys = ("name", "prompt", "expect", "answer", "passed", "latency_s", "error_kind", "error")
        return {"passed": self.passed, "error": self.error,
                "cases": [{k: c.get(k) for k in keys} for c in self.cases]}


@dataclass
class SweepOutcome:
    run_id: int | None
    label: str
    status: str  # done | cancelled | failed | interrupted
    sanity: SanityOutcome | None
    levels: list[dict[str, Any]]
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The exact shape ``dsv4tui sweep --json`` prints."""
        sanity = self.sanity.to_json() if self.sanity else {"skipped": True, "passed": None,
                                                              "cases": []}
        return {"run_id": self.run_id, "label": self.label, "sanity": sanity,
                "levels": [stats.level_json(lv) for lv in self.levels]}


def case_dicts(cases: Iterable[SanityCase | Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in cases:
        out.append(c.model_dump() if isinstance(c, SanityCase) else dict(c))
    return out


def plan_dict(plan: SweepPlan) -> dict[str, Any]:
    return plan.model_dump(mode="json")


@dataclass
class _SweepState:
    run_id: int | None
    levels: list[dict[str, Any]] = field(default_factory=list)
    current: dict[str, Any] | None = None  # level_start of the level in progress
    final: dict[str, Any] | None = None  # the agent's `sweep` event
    model: str | None = None


class BenchRunner:
    """Runs ``bench sanity`` / ``bench sweep`` through ``agent`` and records them in ``store``.

    ``feed_frame(frame)``: give it the host's telemetry frames (or use
    :meth:`follow_telemetry`); each level then stores its GPU summary.
    """

    def __init__(self, agent: AgentLike, store: RunStore | None = None,
                 on_event: EventCallback | None = None, gpu: GpuWindow | None = None) -> None:
        self.agent = agent
        self.store = store
        self.on_event = on_event
        self.gpu = gpu or GpuWindow()

    def feed_frame(self, frame: Mapping[str, Any]) -> None:
        self.gpu.add(frame)

    async def follow_telemetry(self, agent: AgentLike | None = None, interval: float = 1.0) -> None:
        """Feed frames from the host's ``telemetry`` stream until cancelled (quietly gives up
        when the host has no telemetry)."""
        with contextlib.suppress(AgentFailed, ConnectError):
            async for ev in (agent or self.agent).events("telemetry", "--interval", f"{interval:g}"):
                if ev.get("type") == "frame":
                    self.gpu.add(ev)

    def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event)

    # --- sanity --------------------------------------------------------------------------

    async def sanity(self, target: BenchTarget, cases: Iterable[SanityCase | Mapping[str, Any]],
                     *, host: str, run_id: int | None = None, timeout_s: float = 120.0
                     ) -> SanityOutcome:
        """Ask every case; results are stored (with ``run_id`` when part of a run)."""
        args = ["bench", "sanity", *target.agent_args(), "--cases-json",
                json.dumps(case_dicts(cases)), "--timeout", f"{timeout_s:g}"]
        results: list[dict[str, Any]] = []
        final: dict[str, Any] | None = None
        model = target.model
        outcome: SanityOutcome | None = None
        try:
            async for ev in self.agent.events(*args):
                self._emit(ev)
                kind = ev.get("type")
                if kind == "bench_target":
                    model = ev.get("model") or model
                elif kind == "sanity_case":
                    results.append(ev)
                elif kind == "sanity":
                    final = ev
        except AgentFailed as exc:
            if final is None or exc.kind != "sanity_failed":
                outcome = SanityOutcome(False, results, exc.message, exc.kind)
        if outcome is None:
            if final is None:
                outcome = SanityOutcome(False, results, "sanity was cancelled", "cancelled")
            else:
                outcome = SanityOutcome(bool(final.get("passed")), results)
        if self.store is not None and results:
            self.store.add_sanity(results, host=host, url=target.url, model=model, run_id=run_id)
        return outcome

    # --- sweep ---------------------------------------------------------------------------

    async def sweep(self, target: BenchTarget, plan: SweepPlan, label: str, meta: RunMeta, *,
                    sanity_cases: Iterable[SanityCase | Mapping[str, Any]] | None = None
                    ) -> SweepOutcome:
        """Sanity first (when cases are given; a failure stops here), then the sweep.

        Returns the outcome (status done/failed); raises ConnectError when the link drops
        (run: interrupted) and CancelledError when cancelled (run: cancelled), after saving
        the finished requests and the partial level.
        """
        run_id = None
        if self.store is not None:
            run_id = self.store.start_run(
                label=label, host=meta.host, url=target.url, model=target.model,
                profile_name=meta.profile_name, profile=meta.profile, backend=meta.backend,
                checkpoint=meta.checkpoint, launch_id=meta.launch_id, gpu_names=meta.gpu_names,
                plan=plan_dict(plan), simulated=meta.simulated)
        self._emit({"type": "run_started", "run_id": run_id, "label": label})
        state = _SweepState(run_id)
        sanity: SanityOutcome | None = None
        try:
            if sanity_cases is not None:
                sanity = await self.sanity(target, sanity_cases, host=meta.host, run_id=run_id)
                self._update_run(run_id, sanity_passed=sanity.passed)
                if not sanity.passed:
                    failed = sum(not c.get("passed") for c in sanity.cases)
                    why = sanity.error or f"{failed} of {len(sanity.cases)} cases failed"
                    return self._finish(state, label, sanity, "failed", f"sanity failed: {why}")
            await self._run_sweep(target, plan, state)
        except AgentFailed as exc:
            reason = (state.final or {}).get("reason") or exc.message
            self._close_partial(state)
            return self._finish(state, label, sanity, "failed", reason)
        except ConnectError as exc:
            self._close_partial(state)
            self._finish(state, label, sanity, "interrupted", exc.message)
            raise
        except asyncio.CancelledError:
            self._close_partial(state)
            self._finish(state, label, sanity, "cancelled", "cancelled")
            raise
        status = (state.final or {}).get("status") or "interrupted"
        self._close_partial(state)
        return self._finish(state, label, sanity, status,
                            None if status == "done" else (state.final or {}).get("reason")
                            or "the agent stopped without finishing the sweep")

    async def _run_sweep(self, target: BenchTarget, plan: SweepPlan, state: _SweepState) -> None:
        args = ["bench", "sweep", *target.agent_args(), "--plan-json", json.dumps(plan_dict(plan))]
        async for ev in self.agent.events(*args):
            self._on_sweep_event(state, ev)
            self._emit(ev)

    def _update_run(self, run_id: int | None, **fields: Any) -> None:
        if self.store is not None and run_id is not None:
            self.store.update_run(run_id, **fields)

    def _on_sweep_event(self, state: _SweepState, ev: dict[str, Any]) -> None:
        kind, store, run_id = ev.get("type"), self.store, state.run_id
        if kind == "request":
            if store is not None and run_id is not None:
                store.add_request(run_id, ev)
        elif kind == "level_start":
            state.current = ev
        elif kind == "level":
            self._save_level(state, ev)
        elif kind == "bench_target":
            state.model = ev.get("model")
            self._update_run(run_id, model=ev.get("model"), url=ev.get("url"),
                             server_version=ev.get("server_version"))
        elif kind == "sweep":
            state.final = ev

    def _save_level(self, state: _SweepState, level: dict[str, Any]) -> None:
        state.current = None
        state.levels.append(level)
        if self.store is None or state.run_id is None:
            return
        self.store.add_level(state.run_id, level)
        self._save_gpus(state.run_id, level)

    def _save_gpus(self, run_id: int, level: Mapping[str, Any]) -> None:
        t0, t1 = level.get("started_at"), level.get("finished_at")
        if self.store is None or not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)):
            return
        gpus = self.gpu.summary(t0, t1)
        if gpus:
            self.store.set_level_gpus(run_id, int(level.get("level") or 0), gpus)

    def _close_partial(self, state: _SweepState) -> None:
        """A level that started but never reported: rebuild it from the stored requests."""
        cur, state.current = state.current, None
        if cur is None:
            return
        idx, c, n = int(cur.get("level") or 0), int(cur["concurrency"]), int(cur["requests"])
        reqs = (self.store.requests(state.run_id, idx)
                if self.store is not None and state.run_id is not None else [])
        level = stats.level_metrics(reqs, c, n)
        level.update(level=idx, partial=True, started_at=cur.get("time"), finished_at=time.time(),
                     rebuilt=True)
        self._save_level(state, level)

    def _finish(self, state: _SweepState, label: str, sanity: SanityOutcome | None, status: str,
                error: str | None) -> SweepOutcome:
        if self.store is not None and state.run_id is not None:
            for level in state.levels:  # frames that arrived after the level event
                self._save_gpus(state.run_id, level)
            self.store.finish_run(state.run_id, status, error)
        self._emit({"type": "run_finished", "run_id": state.run_id, "status": status,
                    "error": error})
        return SweepOutcome(state.run_id, label, status, sanity, state.levels, error)


# --- reaching a target (CLI and dashboard) -------------------------------------------------


@dataclass
class BenchSetup:
    agent: AgentLike
    target: BenchTarget
    meta: RunMeta
    host: Any  # dsv4tui.hosts.resolve.Host


@contextlib.asynccontextmanager
async def open_bench(settings: Any, *, host: str | None = None, url: str | None = None,
                     profile: str | None = None, model: str | None = None,
                     api_key_env: str | None = None, store: RunStore | None = None,
                     transport: str = "raw") -> AsyncIterator[BenchSetup]:
    """Connect to ``host`` (its profile's server) or run the agent locally against ``url``."""
    from dsv4tui.config import LOCAL
    from dsv4tui.hosts.resolve import open_host

    async with open_host(host or LOCAL, settings) as h:
        if url:
            target = BenchTarget(url, model, api_key_env, transport)
            meta = RunMeta(host=LOCAL)
        else:
            pname, prof = h.config.profile(profile)
            base = BenchTarget.for_profile(prof)
            target = BenchTarget(base.url, model or base.model, api_key_env or base.api_key_env,
                                 transport)
            launch = store.latest_launch(h.name, pname) if store is not None else None
            meta = RunMeta(host=h.name, profile_name=pname, profile=prof.model_dump(mode="json"),
                           backend=prof.backend_label, checkpoint=prof.checkpoint_label,
                           launch_id=launch.id if launch else None,
                           gpu_names=await _gpu_names(h.agent), simulated=h.simulated)
        yield BenchSetup(h.agent, target, meta, h)


async def _gpu_names(agent: Any) -> list[str]:
    try:
        events = await agent.call("hello", timeout=60.0)
    except (AgentFailed, ConnectError, OSError):
        return []
    for ev in events:
        if ev.get("type") == "hello":
            return [str(g) for g in ev.get("gpus") or []]
    return []
