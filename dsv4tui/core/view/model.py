"""What the screens show, as plain data: the App fills it from its workers, the screens read it.

No textual here and nothing that opens a connection: the snapshot tests build these objects
by hand (frozen data) and the live App updates them from agent events. Every number that a
source cannot give stays ``None`` and is shown as "n/a", never as a fake 0.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv4tui.agent import events as ev_t
from dsv4tui.agent.host import logparse
from dsv4tui.core.campaign import reducer
from dsv4tui.core.campaign.compare import Comparison, Point
from dsv4tui.core.campaign.view import CampaignView
from dsv4tui.core.server.metrics_window import MetricsWindow
from dsv4tui.core.view.log_lines import LogLines

PHASES = logparse.PHASES  # the agent's startup phases, in order: one list for both sides
PHASE_LABELS = {
    "load_weights": "weights", "kv_cache": "KV cache", "cuda_graph": "CUDA graphs",
    "http_up": "HTTP server", "ready": "ready",
}


@dataclass
class Connection:
    host: str = "—"
    simulated: bool = False
    state: str = "connecting"  # ConnectionState values
    detail: str | None = None
    retry_in: Callable[[], float | None] | None = None  # the supervisor's countdown
    attempts: int = 0

    @property
    def connected(self) -> bool:
        return self.state == "connected"

    @property
    def down(self) -> bool:
        return self.state in ("lost", "reconnecting", "failed")

    def update(self, state: str, detail: str | None, attempts: int) -> bool:
        """Where the link stands now (the host supervisor's news); True when it just came
        back after being down."""
        was_down = self.down
        self.state, self.detail, self.attempts = state, detail, attempts
        return self.connected and was_down


@dataclass
class ServerInfo:
    state: str = "unknown"  # unknown | stopped | starting | ready | failed | stopping
    phase: str | None = None
    profile: str | None = None
    backend: str | None = None
    checkpoint: str | None = None
    model: str | None = None
    tp_size: int | None = None
    started_at: float | None = None  # epoch seconds
    log_path: str | None = None
    url: str | None = None
    pid: int | None = None
    nodes: list[dict[str, Any]] | None = None  # a host made of nodes: node, rank, state, pid
    node_error: str | None = None  # the last error of any node ("h200b: NCCL error ...")
    job: str | None = None  # a Slurm host: "job 4242 PENDING (Resources)" / "job 4242 RUNNING"
    simulated: bool = False  # the server says it is the built-in simulator (reports_simulated)

    def uptime_s(self, now: float | None = None) -> float | None:
        if self.started_at is None or self.state not in ("ready", "starting"):
            return None
        return max(0.0, (time.time() if now is None else now) - self.started_at)


@dataclass(frozen=True)
class DecodeSample:
    t: float  # console monotonic
    gen_tok_s: float | None
    running: int | None
    queue: int | None
    token_usage: float | None = None


class DecodeHistory:
    """The server's own decode-log numbers (gen throughput, running, queue), newest last."""

    def __init__(self, maxlen: int = 240) -> None:
        self.samples: deque[DecodeSample] = deque(maxlen=maxlen)

    def add(self, sample: DecodeSample) -> None:
        self.samples.append(sample)

    @property
    def latest(self) -> DecodeSample | None:
        return self.samples[-1] if self.samples else None

    def current(self, now: float, max_age: float) -> DecodeSample | None:
        """The latest sample if it is at most ``max_age`` seconds old (else it is history)."""
        latest = self.latest
        return latest if latest is not None and now - latest.t <= max_age else None

    def throughput(self) -> list[float]:
        return [s.gen_tok_s or 0.0 for s in self.samples]

    def clear(self) -> None:
        self.samples.clear()


@dataclass
class PhaseView:
    name: str
    started: float | None = None  # monotonic or epoch; only differences are shown
    ended: float | None = None
    detail: str | None = None  # "62 %", "KV 1.2M tokens", "bs 1..160"
    seconds: float | None = None  # measured duration when the source knows it

    @property
    def label(self) -> str:
        return PHASE_LABELS.get(self.name, self.name)

    def elapsed(self, now: float) -> float | None:
        if self.seconds is not None:
            return self.seconds
        if self.started is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)


@dataclass
class StartupView:
    """A restart's progress: phases with time per phase, the total, and how it ended."""

    status: str = "idle"  # idle | stopping | starting | ready | failed
    profile: str | None = None
    backend: str | None = None
    checkpoint: str | None = None
    started: float | None = None  # monotonic
    ended: float | None = None
    phases: dict[str, PhaseView] = field(default_factory=lambda: {p: PhaseView(p) for p in PHASES})
    queue_wait_s: float | None = None  # a Slurm job: PENDING until its nodes were allocated
    current: str | None = None
    weights_pct: float | None = None
    message: str | None = None
    error_lines: list[str] = field(default_factory=list)
    startup_s: float | None = None  # the host's figure at ready (core.server.startup.STARTUP)

    def reset(self, profile: str | None, backend: str | None, checkpoint: str | None,
              now: float) -> None:
        self.status, self.profile, self.backend, self.checkpoint = "stopping", profile, backend, checkpoint
        self.started, self.ended, self.current, self.weights_pct = now, None, None, None
        self.message, self.error_lines, self.startup_s = None, [], None
        self.phases = {p: PhaseView(p) for p in PHASES}
        self.queue_wait_s = None

    def enter(self, phase: str, now: float, detail: str | None = None) -> None:
        """Phase ``phase`` begins now; the one before it ends."""
        if phase not in self.phases:
            self.phases[phase] = PhaseView(phase)
        if self.current and self.current != phase and self.current in self.phases:
            prev = self.phases[self.current]
            if prev.ended is None:
                prev.ended = now
        view = self.phases[phase]
        if view.started is None:
            view.started = now
        if detail is not None:
            view.detail = detail
        self.current = phase
        if phase == "ready":
            view.ended = now

    def total(self, now: float) -> float | None:
        """The console's clock since the restart began (the old server's stop included)."""
        if self.started is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)

    def other_s(self, now: float) -> float | None:
        """The startup less its phases (python's start, imports, the gaps between phases):
        the row that makes the phases add up to the startup."""
        if self.startup_s is None:
            return None
        spent = [ph.elapsed(now) for ph in self.phases.values()]
        return max(0.0, self.startup_s - sum(x for x in spent if x is not None))

    @property
    def active(self) -> bool:
        return self.status in ("stopping", "starting")

    def finish(self, status: str, now: float) -> None:
        """The restart ended (``failed``): every clock stops now, the open phase included."""
        self.status, self.ended = status, now
        for ph in self.phases.values():
            if ph.started is not None and ph.ended is None:
                ph.ended = now


@dataclass
class SanityCaseView:
    name: str
    passed: bool | None = None
    answer: str | None = None
    expect: str | None = None
    seconds: float | None = None
    error: str | None = None


@dataclass
class SanityView:
    status: str = "idle"  # idle | running | passed | failed | error
    cases: list[SanityCaseView] = field(default_factory=list)
    detail: str | None = None
    at: float | None = None  # epoch of the result
    backend: str | None = None
    checkpoint: str | None = None

    @property
    def summary(self) -> str:
        if self.status == "idle":
            return "not run"
        if self.status == "running":
            return "running…"
        done = [c for c in self.cases if c.passed is not None]
        ok = sum(1 for c in done if c.passed)
        if self.status == "error":
            return f"error: {self.detail or '?'}"
        return f"{'PASS' if self.status == 'passed' else 'FAIL'} {ok}/{len(self.cases)}"


@dataclass
class LevelRow:
    concurrency: int
    requests: int
    completed: int = 0
    errors: int = 0
    out_tok_s: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    server: dict[str, Any] | None = None  # the server's own /metrics view of the level
    status: str = "pending"  # pending | running | done | stopped
    tokens: int = 0
    started: float | None = None
    ended: float | None = None  # its ``level`` event came (the console's monotonic clock)

    @property
    def progress(self) -> str:
        return f"{self.completed}/{self.requests}"

    def stats(self) -> dict[str, Any]:
        """The numbers in the shape of a ``level`` event (campaign.columns reads it)."""
        return {"concurrency": self.concurrency, "requests": self.requests,
                "completed": self.completed, "errors": self.errors,
                "output_tok_s": self.out_tok_s,
                "ttft_ms": {"p50": self.ttft_p50_ms, "p99": self.ttft_p99_ms},
                "tpot_ms": {"p50": self.tpot_p50_ms}, "server": self.server}


@dataclass
class SweepView:
    status: str = "idle"  # idle | starting | running | done | cancelled | interrupted | failed
    label: str | None = None
    host: str | None = None
    backend: str | None = None
    checkpoint: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    levels: list[LevelRow] = field(default_factory=list)
    rates: list[tuple[float, int]] = field(default_factory=list)  # the open-loop levels' rates
    current: int | None = None
    started: float | None = None
    ended: float | None = None
    run_id: Any = None
    detail: str | None = None
    live: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=240))

    @property
    def total_requests(self) -> int:
        return sum(lv.requests for lv in self.levels)

    @property
    def completed_requests(self) -> int:
        return sum(lv.completed + lv.errors for lv in self.levels)

    @property
    def running(self) -> bool:
        return self.status in ("starting", "running")

    @property
    def best_tok_s(self) -> float | None:
        vals = [lv.out_tok_s for lv in self.levels if lv.out_tok_s is not None]
        return max(vals) if vals else None

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)

    def eta(self, now: float) -> float | None:
        """Seconds left, by time and not by requests (a C=1 level's requests take far longer
        each than a C=64 level's): the level in progress at the pace its requests finish;
        each closed-loop level after it as n / C rounds of the last measured request time
        (a level's time x C / n); a rate level n / rate. None until there is a pace."""
        if not self.running:
            return None
        first_rate = len(self.levels) - len(self.rates)
        left = 0.0
        per_request: float | None = None  # one request's time at the last measured level
        for i, lv in enumerate(self.levels):
            c = max(1, lv.concurrency)
            finished = lv.completed + lv.errors
            if lv.status in ("done", "partial", "stopped"):
                if lv.started is not None and lv.ended is not None and finished:
                    per_request = (lv.ended - lv.started) * min(c, finished) / finished
                continue
            if lv.status == "running" and lv.started is not None:
                spent = max(now - lv.started, 1e-6)
                if finished == 0:  # no pace of its own yet: the last level's, in rounds of C
                    if per_request is None:
                        return None
                    left += max(0.0, -(-lv.requests // c) * per_request - spent)
                    continue
                left += max(0, lv.requests - finished) * spent / finished
                per_request = spent * min(c, finished) / finished
            elif i >= first_rate:
                rate = self.rates[i - first_rate][0]
                left += lv.requests / rate if rate > 0 else 0.0
            elif per_request is None:
                return None
            else:
                left += -(-lv.requests // c) * per_request  # rounds of C requests
        return left


@dataclass(frozen=True)
class RunRow:
    run_id: Any
    label: str
    created: float  # epoch
    host: str
    backend: str | None
    checkpoint: str | None
    best_tok_s: float | None
    status: str
    simulated: bool = False
    sanity_passed: bool | None = None  # the run's sanity gate (None: not run)

    def matches(self, text: str) -> bool:
        if not text:
            return True
        hay = " ".join(str(x) for x in (f"#{self.run_id}", self.label, self.host, self.backend,
                                         self.checkpoint, self.status)).lower()
        return all(part in hay for part in text.lower().split())


# The comparison is computed in the core, once for both faces: a Comparison of Points.
LevelStats = Point
CompareView = Comparison


@dataclass
class RunsView:
    rows: list[RunRow] = field(default_factory=list)
    marked: list[Any] = field(default_factory=list)  # run ids, in marking order
    filter: str = ""
    baseline: Any = None
    compare: Comparison | None = None
    loading: bool = False
    error: str | None = None
    show_failed: bool = False  # runs whose sanity gate failed: hidden (and counted) by default

    def set_rows(self, rows: list[RunRow]) -> None:
        """A fresh read of the store: marks of runs that are gone are dropped."""
        self.rows = rows
        ids = {r.run_id for r in rows}
        self.marked = [i for i in self.marked if i in ids]
        self.loading = False

    def visible(self) -> list[RunRow]:
        return [r for r in self.rows if r.matches(self.filter)
                and (self.show_failed or r.sanity_passed is not False)]

    @property
    def hidden_failed(self) -> int:
        """Runs the filter would show but that are hidden because their sanity failed."""
        if self.show_failed:
            return 0
        return sum(1 for r in self.rows if r.matches(self.filter) and r.sanity_passed is False)


@dataclass
class ProfileChoice:
    name: str
    checkpoint: str
    quantization: str | None
    backend: str
    model_path: str
    tp_size: int | None = None
    fields: list[tuple[str, str]] = field(default_factory=list)  # (flag, value) for display


@dataclass
class UiModel:
    """Everything the screens show about the one host this console is attached to."""

    conn: Connection = field(default_factory=Connection)
    server: ServerInfo = field(default_factory=ServerInfo)
    decode: DecodeHistory = field(default_factory=DecodeHistory)
    server_metrics: MetricsWindow = field(default_factory=MetricsWindow)  # its /metrics
    startup: StartupView = field(default_factory=StartupView)
    sanity: SanityView = field(default_factory=SanityView)
    sweep: SweepView = field(default_factory=SweepView)
    campaign: CampaignView = field(default_factory=CampaignView)
    runs: RunsView = field(default_factory=RunsView)
    profiles: list[ProfileChoice] = field(default_factory=list)
    active_profile: str | None = None
    telemetry: Any = None  # dsv4tui.core.telemetry.HostTelemetry (the GPU panel reads it)
    gpu_interval: float = 1.0
    logs: LogLines = field(default_factory=LogLines)
    frozen: float | None = None  # a frozen clock (snapshot tests): both wall and monotonic

    def wall(self) -> float:
        return self.frozen if self.frozen is not None else time.time()

    def mono(self) -> float:
        return self.frozen if self.frozen is not None else time.monotonic()

    @property
    def simulated(self) -> bool:
        """The demo host (its built-in profiles, its simulated GPUs; it cleans up after
        itself)."""
        return self.conn.simulated

    @property
    def shows_simulated(self) -> bool:
        """The numbers on screen come from the simulator: the demo host, or any host whose
        server reports it is the simulator (``connect local`` to a profile that runs it)."""
        return self.conn.simulated or self.server.simulated

    def profile(self, name: str | None = None) -> ProfileChoice | None:
        key = name or self.active_profile
        for p in self.profiles:
            if p.name == key:
                return p
        return None

    @property
    def busy(self) -> str | None:
        """What a quit would interrupt: 'campaign', 'sweep', 'restart', or None."""
        if self.campaign.running:
            return "campaign"
        if self.sweep.running:
            return "sweep"
        if self.startup.active:
            return "restart"
        return None


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_num(value: float | None, decimals: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{decimals}f}{unit}"


def fmt_share(fraction: float | None) -> str:
    """A share 0..1 as a percentage: one decimal below 10 % (a KV use of 0.4 % is not 0 %)."""
    if fraction is None:
        return "n/a"
    pct = fraction * 100.0
    return f"{pct:.1f}%" if 0 < pct < 10 else f"{pct:.0f}%"


# -- turning agent events into the model (pure; the App calls these) -------------------------

_NEXT_PHASE = {"load_weights": "kv_cache", "kv_cache": "cuda_graph", "cuda_graph": "http_up",
               "http_up": "ready"}


def reports_simulated(ev: dict[str, Any]) -> bool | None:
    """Whether the server of a ``status`` event is the built-in simulator, from what the host
    reported: its ``/server_info`` (the simulator says ``simulated``), else the command line
    the agent launched (``python -m dsv4tui.sim...``: before the server answers); None when
    the event says neither."""
    info = ev.get("server_info")
    if isinstance(info, dict):
        return bool(info.get("simulated"))
    argv = ev.get("argv")
    if isinstance(argv, list) and argv:
        return any(a == "-m" and i + 1 < len(argv) and str(argv[i + 1]).startswith("dsv4tui.sim")
                   for i, a in enumerate(argv))
    return None


def slurm_job_text(ev: dict[str, Any]) -> str | None:
    """A Slurm host's job as its user reads it: ``job 4242 PENDING (Resources)``; None for
    another host or before any job."""
    if not ev.get("slurm") or not ev.get("job_id"):
        return None
    why = ev.get("reason") if ev.get("job_state") == "PENDING" else None
    return f"job {ev['job_id']} {ev.get('job_state') or '?'}" + (f" ({why})" if why else "")


def apply_status(model: UiModel, ev: dict[str, Any]) -> None:
    """An agent ``server status`` (or the final ``status`` of a start) event."""
    srv = model.server
    state = str(ev.get("state") or "unknown")
    srv.state = state
    sim = reports_simulated(ev)
    if sim is not None:
        srv.simulated = sim
    elif state == "stopped":
        srv.simulated = False
    srv.phase = ev.get("phase")
    srv.pid = ev.get("pid")
    srv.log_path = ev.get("log") or srv.log_path
    srv.job = slurm_job_text(ev)
    if isinstance(ev.get("nodes"), list):
        srv.nodes = ev["nodes"]
        if state == "ready":
            srv.node_error = None  # a fresh group: the errors of the last one are history
    if ev.get("port"):
        host = ev.get("host") or "127.0.0.1"
        srv.url = f"http://{host}:{ev.get('port')}"
    if isinstance(ev.get("started_at"), (int, float)):
        srv.started_at = float(ev["started_at"])
    prof = ev.get("profile")
    if isinstance(prof, dict):
        srv.profile = prof.get("name") or srv.profile
        srv.backend = prof.get("moe_runner_backend") or "auto"
        srv.checkpoint = prof.get("checkpoint") or prof.get("quantization") or srv.checkpoint
        srv.tp_size = prof.get("tp_size") or srv.tp_size
        srv.model = prof.get("model_path") or srv.model
        if srv.profile and any(p.name == srv.profile for p in model.profiles):
            model.active_profile = srv.profile
    elif state in ("stopped",):
        srv.profile = srv.backend = srv.checkpoint = None
        srv.started_at = None


def apply_step(su: StartupView, step: Any, now: float) -> None:
    """A ``server_control.StartupStep`` (duck-typed: kind, name, duration_s, percent, text)."""
    kind = step.kind
    if getattr(step, "rank", None) not in (None, 0) and kind not in ("error", "stopping"):
        return  # a host made of nodes: the startup view follows node rank 0 (ready last)
    if kind == "stopping":
        su.status = "stopping"
        su.message = step.text
    elif kind == "stopped":
        su.message = None
    elif kind == "started":
        su.status = "starting"
        su.message = None
        su.enter("load_weights", now)
    elif kind == "progress":
        if su.current in (None, "load_weights"):
            su.enter("load_weights", now)
        su.weights_pct = float(step.percent) if step.percent is not None else su.weights_pct
        su.phases["load_weights"].detail = (f"{step.percent}%" if step.percent is not None
                                            else None)
    elif kind == "phase" and step.name == "queue_wait":  # a Slurm job left the queue
        su.queue_wait_s = step.duration_s
    elif kind == "phase" and step.name:
        name = step.name
        view = su.phases.get(name)
        if view is None:
            return
        if view.started is None:
            view.started = now - (step.duration_s or 0.0)
        if step.duration_s is not None:
            view.seconds = (view.seconds or 0.0) + step.duration_s if name == "cuda_graph" \
                else step.duration_s
        view.ended = now
        if name == "load_weights":
            su.weights_pct = 100.0
            view.detail = "100%"
        nxt = _NEXT_PHASE.get(name)
        if nxt and su.phases[nxt].started is None:
            su.enter(nxt, now)
        elif name == "ready":
            su.current = "ready"
    elif kind == "error":
        if step.text:
            su.error_lines.append(str(step.text))
    elif kind == "ready":
        su.enter("ready", now)
        su.status = "ready"
        su.ended = now
        su.startup_s = getattr(step, "elapsed_s", None)  # the host's launch -> ready


def apply_log_event(model: UiModel, ev: dict[str, Any], now: float) -> str | None:
    """A parsed ``log_event`` from the log stream; returns the part it changed (or None)."""
    kind = ev.get("kind")
    if kind == "decode":
        model.decode.add(DecodeSample(now, ev.get("gen_throughput"), ev.get("running_req"),
                                      ev.get("queue_req"), ev.get("token_usage")))
        return "decode"
    su = model.startup
    if not su.active:
        return None
    if kind == "kv_cache":
        tokens, size = ev.get("tokens"), ev.get("size_gb")
        bits = []
        if tokens:
            bits.append(f"{tokens / 1e6:.2f}M tokens" if tokens >= 1e6 else f"{tokens:,} tokens")
        if size:
            bits.append(f"{size:.1f} GB")
        if ev.get("dtype"):
            bits.append(str(ev["dtype"]))
        su.phases["kv_cache"].detail = " · ".join(bits) or None
        return "startup"
    if kind == "cuda_graph_progress":
        su.phases["cuda_graph"].detail = (f"{ev.get('done')}/{ev.get('total')} batches"
                                          if ev.get("total") else None)
        return "startup"
    if kind == "load_weights_progress" and ev.get("percent") is not None:
        su.weights_pct = float(ev["percent"])
        su.phases["load_weights"].detail = f"{ev['percent']}%"
        return "startup"
    return None


def apply_sanity_event(s: SanityView, ev: dict[str, Any]) -> bool:
    """A ``sanity_case`` or ``sanity`` event; True when the view changed."""
    return bool(reducer.fold(_SanityFold(s), ev))


class _SanityFold(reducer.Reader):
    def __init__(self, s: SanityView) -> None:
        self.s = s

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> bool:
        s = self.s
        answer = ev.get("answer")
        s.cases.append(SanityCaseView(
            name=str(ev.get("name") or f"case {len(s.cases) + 1}"), passed=bool(ev.get("passed")),
            answer=None if answer is None else str(answer), expect=ev.get("expect"),
            seconds=ev.get("latency_s"), error=ev.get("error")))
        return True

    def sanity(self, ev: ev_t.SanityEvent) -> bool:
        self.s.status = "passed" if ev.get("passed") else "failed"
        return True


class LiveLevel:
    """The level in progress: the agent's latest running aggregate (``level_progress``), shown
    until its ``level`` comes."""

    def __init__(self) -> None:
        self.latest: ev_t.LevelProgressEvent | None = None
        self.dirty = False


def apply_sweep_event(sw: SweepView, ev: dict[str, Any], live: dict[int, LiveLevel],
                      now: float) -> bool:
    """One BenchRunner/agent event of a sweep; True when the view changed."""
    return bool(reducer.fold(_SweepFold(sw, live, now), ev))


class _SweepFold(reducer.Reader):
    """The Bench screen's reading of a sweep (each callback: True when the view changed)."""

    def __init__(self, sw: SweepView, live: dict[int, LiveLevel], now: float) -> None:
        self.sw, self.live, self.now = sw, live, now

    def _row(self, ev: Any) -> LevelRow | None:
        idx = int(ev.get("level") or 0)
        return self.sw.levels[idx] if idx < len(self.sw.levels) else None

    def run_stored(self, ev: reducer.RunStored) -> bool:  # the store's id of the run that started
        self.sw.run_id = ev.get("run_id")
        return True

    def bench_target(self, ev: ev_t.BenchTargetEvent) -> bool:
        sw = self.sw
        sw.status = "running"
        if sw.levels and sw.levels[0].status == "pending":
            sw.levels[0].status = "warm-up"
            sw.current = 0
        return True

    def level_start(self, ev: ev_t.LevelStartEvent) -> bool:
        sw = self.sw
        idx = int(ev.get("level") or 0)
        if idx < len(sw.levels):
            lv = sw.levels[idx]
            lv.status, lv.started = "running", self.now
            sw.current = idx
            sw.status = "running"
            self.live[idx] = LiveLevel()
        return True

    def request(self, ev: ev_t.RequestEvent) -> bool:
        lv = self._row(ev)
        if lv is None:
            return False
        if ev.get("ok"):
            lv.completed += 1
        else:
            lv.errors += 1
        return True

    def level_progress(self, ev: ev_t.LevelProgressEvent) -> bool:
        """Kept for :func:`refresh_live_levels` (the screen's pace), not applied at once."""
        if self._row(ev) is None:
            return False
        rec = self.live.setdefault(int(ev.get("level") or 0), LiveLevel())
        rec.latest, rec.dirty = ev, True
        return False

    def level(self, ev: ev_t.LevelEvent) -> bool:
        sw = self.sw
        idx = int(ev.get("level") or 0)
        lv = self._row(ev)
        if lv is None:
            return False
        fill_level(lv, ev)
        lv.status = "partial" if ev.get("partial") else "done"
        lv.ended = self.now
        self.live.pop(idx, None)
        if idx + 1 < len(sw.levels) and sw.levels[idx + 1].status == "pending" \
                and sw.status == "running" and not ev.get("partial"):
            sw.levels[idx + 1].status = "warm-up"
            sw.current = idx + 1
        if sw.live is not None and lv.out_tok_s is not None:
            sw.live.append((self.now, lv.out_tok_s))
        return True

    def sweep(self, ev: ev_t.SweepEndEvent) -> bool:
        self.sw.detail = ev.get("reason") or self.sw.detail
        return True

    def run_finished(self, ev: reducer.RunFinished) -> bool:
        sw = self.sw
        sw.status = str(ev.get("status") or "done")
        sw.detail = ev.get("error") or sw.detail
        sw.ended = self.now
        for lv in sw.levels:
            if lv.status in ("running", "warm-up"):
                lv.status = "stopped"
        sw.current = None
        return True


def fill_level(lv: LevelRow, metrics: Mapping[str, Any]) -> None:
    """Set a row's numbers from a ``level`` event (or live metrics of the same shape)."""
    lv.completed = int(metrics.get("completed") or 0)
    lv.errors = int(metrics.get("errors") or 0)
    lv.out_tok_s = metrics.get("output_tok_s")
    ttft, tpot = metrics.get("ttft_ms") or {}, metrics.get("tpot_ms") or {}
    lv.ttft_p50_ms, lv.ttft_p99_ms = ttft.get("p50"), ttft.get("p99")
    lv.tpot_p50_ms = tpot.get("p50")
    if isinstance(metrics.get("server"), dict):
        lv.server = metrics["server"]


def refresh_live_levels(sw: SweepView, live: dict[int, LiveLevel]) -> bool:
    """Show the running levels' latest aggregates from the agent (at most a few times/s; the
    work does not grow with the level's requests)."""
    changed = False
    for idx, rec in live.items():
        if not rec.dirty or rec.latest is None or idx >= len(sw.levels):
            continue
        rec.dirty = False
        lv, agg = sw.levels[idx], rec.latest
        # the counts stay the request events' (they may be ahead of the aggregate)
        lv.out_tok_s = agg.get("output_tok_s")
        ttft, tpot = agg.get("ttft_ms") or {}, agg.get("tpot_ms") or {}
        lv.ttft_p50_ms, lv.ttft_p99_ms = ttft.get("p50"), ttft.get("p99")
        lv.tpot_p50_ms = tpot.get("p50")
        changed = True
    return changed
