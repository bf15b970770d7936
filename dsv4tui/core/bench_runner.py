"""Reaching a host's server for a benchmark, and the sanity prompts (CLI and dashboard).

Which server a benchmark measures is decided on the host (the agent's ``target`` command,
:mod:`dsv4tui.agent.host.target`): the server dsv4tui started there, whichever profile, else what
answers on the default profile's port (said to be someone else's), else a clear "no server
running". What that server runs (backend, checkpoint, argv, version, simulated) comes from its
launch record or its ``/server_info``, never from the console's config (:class:`RunMeta`).

Sweeps run on the host through the campaign runner (:mod:`dsv4tui.core.campaign.sweep`), so a
dropped link never stops one; :class:`BenchRunner` runs the sanity prompts directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsv4tui.agent import events as ev_t
from dsv4tui.core.campaign import reducer
from dsv4tui.core.config import SanityCase, Settings
from dsv4tui.core.errors import EXIT_FAILED, AgentFailed, ConnectError
from dsv4tui.core.store import RunStore

EventCallback = Callable[[dict[str, Any]], None]


class AgentLike(Protocol):
    """What the runner needs of ``host.agent`` (dsv4tui.core.hosts.agent_runner.AgentRunner)."""

    def events(self, *args: str) -> AsyncIterator[dict[str, Any]]: ...


@dataclass(frozen=True)
class BenchTarget:
    """The OpenAI-compatible server, as the agent on the host reaches it."""

    url: str
    model: str | None = None
    api_key_env: str | None = None
    transport: str = "raw"
    ours: bool = False  # the server dsv4tui started on the host

    def agent_args(self) -> list[str]:
        out = ["--url", self.url, "--transport", self.transport]
        if self.model:
            out += ["--model", self.model]
        if self.api_key_env:
            out += ["--api-key-env", self.api_key_env]
        return out

    def spec(self) -> dict[str, Any]:
        """The host runner's target (``dsv4tui.agent.host.target.find``): this URL."""
        return {"mode": "url", "url": self.url, "model": self.model,
                "api_key_env": self.api_key_env}


@dataclass
class RunMeta:
    """What a server runs, as the host reported it (``source``: launch | server_info |
    unknown)."""

    host: str
    profile_name: str | None = None
    profile: dict[str, Any] | None = None
    backend: str | None = None
    checkpoint: str | None = None
    quantization: str | None = None
    attention_backend: str | None = None
    argv: list[str] | None = None
    pid: int | None = None
    source: str = "unknown"
    sglang_version: str | None = None
    launch_id: int | None = None
    gpu_names: list[str] = field(default_factory=list)
    simulated: bool = False

    @classmethod
    def from_host(cls, host: str, meta: Mapping[str, Any], *, simulated: bool = False,
                  gpu_names: list[str] | None = None) -> RunMeta:
        return cls(host=host, profile_name=meta.get("profile_name"),
                   backend=meta.get("backend"), checkpoint=meta.get("checkpoint"),
                   quantization=meta.get("quantization"),
                   attention_backend=meta.get("attention_backend"), argv=meta.get("argv"),
                   pid=meta.get("pid"), source=str(meta.get("source") or "unknown"),
                   sglang_version=meta.get("sglang_version"), gpu_names=gpu_names or [],
                   simulated=simulated or bool(meta.get("simulated")))


@dataclass
class SanityOutcome:
    passed: bool
    cases: list[dict[str, Any]]
    error: str | None = None  # why it could not run (server down, no model ...)
    error_kind: str | None = None
    exit_code: int = EXIT_FAILED  # when not passed: 4 when the server could not be reached

    def to_json(self) -> dict[str, Any]:
        keys = ("name", "prompt", "expect", "answer", "passed", "latency_s", "error_kind", "error")
        return {"passed": self.passed, "error": self.error,
                "cases": [{k: c.get(k) for k in keys} for c in self.cases]}


def case_dicts(cases: Iterable[SanityCase | Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in cases:
        out.append(c.model_dump() if isinstance(c, SanityCase) else dict(c))
    return out


class BenchRunner:
    """Runs ``bench sanity`` through ``agent`` and records the answers in ``store``."""

    def __init__(self, agent: AgentLike, store: RunStore | None = None,
                 on_event: EventCallback | None = None) -> None:
        self.agent = agent
        self.store = store
        self.on_event = on_event

    def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def sanity(self, target: BenchTarget, cases: Iterable[SanityCase | Mapping[str, Any]],
                     *, host: str, run_id: int | None = None, timeout_s: float = 120.0
                     ) -> SanityOutcome:
        """Ask every case; results are stored (with ``run_id`` when part of a run)."""
        args = ["bench", "sanity", *target.agent_args(), "--cases-json",
                json.dumps(case_dicts(cases)), "--timeout", f"{timeout_s:g}"]
        got = _SanityRead(target.model)
        results = got.results
        outcome: SanityOutcome | None = None
        try:
            async for ev in self.agent.events(*args):
                self._emit(ev)
                reducer.fold(got, ev)
        except AgentFailed as exc:
            if got.final is None or exc.kind != "sanity_failed":
                outcome = SanityOutcome(False, results, exc.message, exc.kind, exc.exit_code)
        final, model = got.final, got.model
        if outcome is None:
            if final is None:
                outcome = SanityOutcome(False, results, "sanity was cancelled", "cancelled")
            else:
                outcome = SanityOutcome(bool(final.get("passed")), results)
        if self.store is not None and results:
            self.store.add_sanity(results, host=host, url=target.url, model=model, run_id=run_id)
        return outcome


class _SanityRead(reducer.Reader):
    """What a ``bench sanity`` stream says: the target's model, each case, the verdict."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.results: list[dict[str, Any]] = []
        self.final: dict[str, Any] | None = None

    def bench_target(self, ev: ev_t.BenchTargetEvent) -> None:
        self.model = ev.get("model") or self.model

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> None:
        self.results.append(dict(ev))

    def sanity(self, ev: ev_t.SanityEvent) -> None:
        self.final = dict(ev)


# --- reaching a target (CLI and dashboard) -------------------------------------------------

async def find_target(agent: Any, spec: Mapping[str, Any], *, host: str,
                      transport: str = "raw", simulated: bool = False,
                      store: RunStore | None = None) -> tuple[BenchTarget, RunMeta, str | None]:
    """Ask the host which server ``spec`` means and what it runs: ``(target, meta, notice)``.
    Raises AgentFailed ``no_server`` (one clear line) when nothing is running."""
    from dsv4tui.core.store import campaigns as cstore

    try:
        events = await agent.call("target", "--target-json", json.dumps(dict(spec)),
                                  timeout=60.0)
    except AgentFailed as exc:
        if exc.kind == "no_server":
            raise AgentFailed(exc.kind, f"{host}: {exc.message}", exc.exit_code,
                              exc.event) from None
        raise
    info = next((e for e in events if e.get("type") == "bench_target_info"), None)
    if info is None:
        raise AgentFailed("target", f"{host}: the agent did not say which server to measure")
    t, m = info.get("target") or {}, info.get("meta") or {}
    target = BenchTarget(str(t["url"]), t.get("model"), t.get("api_key_env"), transport,
                         bool(t.get("ours")))
    meta = RunMeta.from_host(host, m, simulated=simulated)
    if store is not None:
        meta.launch_id = await asyncio.to_thread(cstore.launch_for_pid, store, host, meta.pid,
                                                 m.get("launch_started_at"))
    return target, meta, t.get("notice")


@dataclass
class BenchSetup:
    agent: Any
    target: BenchTarget
    meta: RunMeta
    host: Any  # dsv4tui.core.hosts.resolve.Host
    spec: dict[str, Any]  # the host runner's target (campaign.plan.bench_target)
    notice: str | None = None


@contextlib.asynccontextmanager
async def open_bench(settings: Settings, *, host: str | None = None, url: str | None = None,
                     profile: str | None = None, model: str | None = None,
                     api_key_env: str | None = None, store: RunStore | None = None,
                     transport: str = "raw") -> AsyncIterator[BenchSetup]:
    """Connect to ``host`` and find the server to measure there (see :func:`find_target`),
    or run the agent locally against ``url``."""
    from dsv4tui.core.campaign.plan import bench_target
    from dsv4tui.core.config import LOCAL
    from dsv4tui.core.hosts.resolve import open_host

    async with open_host(host or LOCAL, settings) as h:
        job: dict[str, Any] | None = None
        spec: dict[str, Any]
        if not url and h.config.slurm is not None:
            spec, job = await slurm_target(h, profile, model, api_key_env)
        elif url:
            spec = {"mode": "url", "url": url, "model": model,
                                    "api_key_env": api_key_env}
        else:
            spec = bench_target(h.config, profile)
            if model:
                spec["model"] = model
            if api_key_env:
                spec["api_key_env"] = api_key_env
        target, meta, notice = await find_target(h.agent, spec, host=h.name,
                                                 transport=transport, simulated=h.simulated,
                                                 store=store)
        if job is not None:  # the job's launch, stored at submission (its job id)
            prof = job.get("profile") or {}
            meta.launch_id = job.get("launch_id")
            meta.profile_name = meta.profile_name or prof.get("name")
            meta.backend = prof.get("moe_runner_backend") or meta.backend or "auto"
            meta.checkpoint = prof.get("checkpoint") or prof.get("quantization") or \
                meta.checkpoint
            meta.argv = prof.get("argv") or meta.argv
            meta.source = "launch"
        elif not url:
            meta.gpu_names = await gpu_names(h.agent)
        yield BenchSetup(h.agent, target, meta, h, spec, notice)


async def slurm_target(h: Any, profile: str | None, model: str | None,
                        api_key_env: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Slurm host: node 0 of its running job, reached from the login node (a URL target;
    the job is ours by its id); AgentFailed ``no_server`` when no job of ours is ready."""
    from dsv4tui.core.launchers import slurm

    job = await slurm.status(h, profile)
    if job.get("state") != "ready":
        what = (f"Slurm job {job['job_id']} is {job.get('job_state')}" if job.get("job_id")
                else "no Slurm job was launched from here")
        raise AgentFailed("no_server", f"{h.name}: {what}, node 0 does not serve; start one "
                          f"first (dsv4tui server start {h.name})")
    _, prof = h.config.profile(profile)
    return ({"mode": "url", "url": job["url"],
             "model": model or prof.served_model_name or prof.model_path,
             "api_key_env": api_key_env or prof.api_key_env}, job)


async def gpu_names(agent: Any) -> list[str]:
    try:
        events = await agent.call("hello", timeout=60.0)
    except (AgentFailed, ConnectError, OSError):
        return []
    for ev in events:
        if ev.get("type") == "hello":
            return [str(g) for g in ev.get("gpus") or []]
    return []
