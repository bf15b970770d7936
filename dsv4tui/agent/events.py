"""The journal and sweep events the console reads, declared once (fields: docs/campaigns.md,
docs/metrics.md). Each is a JSON object with ``type`` and ``v`` (protocol.PROTOCOL_VERSION);
the runner stamps ``variant``/``launch``/``run``, the journal ``seq`` and ``t``. Every field
but ``type`` may be missing in an older journal: readers use ``.get``. Python >= 3.9, stdlib.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class Event(TypedDict, total=False):
    type: str
    v: int
    seq: int
    t: float
    variant: int
    launch: str
    run: str


class CampaignStartEvent(Event, total=False):
    id: str
    name: str
    kind: str  # campaign | sweep
    variants: List[Dict[str, Any]]  # {name, label, restart}
    repeats: int
    plan: Dict[str, Any]
    on_failure: str
    attempt: int


class CampaignResumeEvent(Event, total=False):
    attempt: int


class VariantStartEvent(Event, total=False):
    name: str
    restart: bool


class VariantEndEvent(Event, total=False):
    name: str
    state: str  # done | partial | failed | cancelled | skipped
    reason: Optional[str]
    error_lines: List[str]


class LaunchStartEvent(Event, total=False):
    profile_name: str
    backend: str
    checkpoint: str
    changes: Dict[str, Any]
    argv: List[str]
    profile: Dict[str, Any]


class LaunchEndEvent(Event, total=False):
    ok: bool
    pid: int
    startup_s: float
    started_at: float
    kind: str
    error: str
    last_errors: List[str]
    tail: List[str]
    phases: List[Dict[str, Any]]  # the startup's phases, as the log gave them


class LaunchRetryEvent(Event, total=False):
    """``on_failure = "retry-suggested"``: a failed start's cause and the one-flag move tried
    once (``move`` None: this cause has no flag to change, nothing retried)."""

    launch: str
    cause: Optional[str]
    failure_class: Optional[str]
    move: Optional[Dict[str, Any]]  # flag, from, to
    retry: Optional[str]  # the retry's launch key


class ServerStepEvent(Event, total=False):
    """``stopping``, ``stopped``, ``started``, ``status``: a restart as ``server start
    --wait-ready`` emits it (core/server/startup.py reads the steps)."""

    state: str
    pid: int


class LogEvent(Event, total=False):
    event: Dict[str, Any]  # the parsed log line: kind (phase, decode, ...), name, duration_s


class RunStartEvent(Event, total=False):
    repeat: int
    label: str
    plan: Dict[str, Any]
    url: str
    model: str
    meta: Dict[str, Any]  # what runs: source, backend, checkpoint, sglang_version, pid, ...


class RunEndEvent(Event, total=False):
    status: str  # done | partial | failed | cancelled | interrupted
    reason: Optional[str]
    error_lines: List[str]


class BenchTargetEvent(Event, total=False):
    url: str
    model: str
    server_version: str


class SanityCaseEvent(Event, total=False):
    index: int
    name: str
    prompt: str
    expect: str
    answer: Optional[str]
    passed: bool
    latency_s: float
    error: Optional[str]


class SanityEvent(Event, total=False):
    passed: bool
    total: int
    failed: int


class CanaryEvent(Event, total=False):
    correct: int
    total: int
    share: float
    source: str


class CanaryGateEvent(Event, total=False):
    passed: bool
    text: str


class NoticeEvent(Event, total=False):
    kind: str
    message: str


class LevelPrepEvent(Event, total=False):
    level: int
    name: str
    phase: str  # preparing | warmup
    message: str
    announce: bool


class LevelStartEvent(Event, total=False):
    level: int
    name: str
    concurrency: int
    requests: int


class RequestEvent(Event, total=False):
    level: int
    index: int
    ok: bool
    start_s: float
    e2e_s: float
    ttft_s: Optional[float]
    output_tokens: int
    error_kind: Optional[str]


class LevelProgressEvent(Event, total=False):
    """The running level's aggregate, about once a second (agent/bench/progress.py): the
    final ``level``'s formulas over the requests finished so far."""

    level: int
    concurrency: int
    requests: int  # planned
    completed: int
    errors: int
    in_flight: int
    duration_s: float
    output_tokens: int
    output_tok_s: Optional[float]
    ttft_ms: Dict[str, Optional[float]]  # p50, p99
    tpot_ms: Dict[str, Optional[float]]  # p50


class LevelEvent(Event, total=False):
    level: int
    name: str
    concurrency: int
    requests: int
    completed: int
    errors: int
    status: str  # done | partial | failed
    partial: bool
    output_tok_s: Optional[float]
    ttft_ms: Dict[str, Optional[float]]
    tpot_ms: Dict[str, Optional[float]]
    started_at: float
    finished_at: float
    goodput: Optional[Dict[str, Any]]  # share, rate, ...
    saturation: Optional[Dict[str, Any]]  # saturated, source, ...
    errors_by_kind: Dict[str, int]


class LevelGpusEvent(Event, total=False):
    level: int
    gpus: List[Dict[str, Any]]
    final: bool


class KernelsTargetEvent(Event, total=False):
    """A kernel capture begins (agent/kernels/capture.py): the server, where its traces go."""

    url: str
    model: str
    output_dir: str
    trace_dir: str
    steps: int
    concurrency: int
    expected_files: int
    backend: Optional[str]
    checkpoint: Optional[str]
    tp_size: Optional[int]
    simulated: bool


class KernelsPhaseEvent(Event, total=False):
    phase: str  # load | ramp | profiling | waiting_traces | stopping | parsing | flagged
    message: str
    time: float


class KernelsTracesEvent(Event, total=False):
    files: List[Dict[str, Any]]  # path, bytes (on the host: the traces stay there)
    stopped_by: Optional[str]  # num_steps | stop_profile


class KernelsEvent(Event, total=False):
    """A kernel capture's summary (docs/kernels.md): per kernel family its share of a decode
    step and whether it ran on tensor cores, the top kernels, the load it ran under. In a
    campaign (``kernels = { level = C }``), stamped with the variant and run, and with the
    sweep ``level`` index and its ``concurrency``."""

    families: List[Dict[str, Any]]  # family, share, total_us, tensor_cores, tensor_basis, ...
    kernels: List[Dict[str, Any]]
    steps: Dict[str, Any]  # decode / prefill: count, mean_bs, interval_ms, ...
    basis: str  # decode | all
    load: Dict[str, Any]  # concurrency, measured_bs, batch_far, batch_note, ...
    telemetry: Dict[str, Any]
    tensor_decision: Dict[str, Any]
    server: Dict[str, Any]  # backend, checkpoint, tp_size, simulated, ...
    url: str
    model: str
    profiled_steps: int
    output_dir: str
    time: float
    level: Optional[int]
    concurrency: int
    server_pid: Optional[int]


class KernelsFailedEvent(Event, total=False):
    """A campaign's kernel capture of a variant that was not taken or failed (the run and its
    sweep are kept)."""

    kind: str  # not_taken, or the capture's error kind (output_dir, start_profile, ...)
    message: str
    level: Optional[int]
    concurrency: int


class SweepEndEvent(Event, total=False):
    status: str
    reason: Optional[str]


class CampaignEndEvent(Event, total=False):
    state: str  # done | failed | cancelled
    reason: Optional[str]
    server: Dict[str, Any]  # running, pid, text


class JournalPosEvent(Event, total=False):
    offset: int


class JournalTornEvent(Event, total=False):
    offset: int
    end: int
    text: str


class JournalEndEvent(Event, total=False):
    state: str  # done | failed | cancelled | interrupted | running
    reason: Optional[str]
    offset: int


# type -> its declaration: the events the console folds (core/campaign/reducer.py)
EVENTS: Dict[str, Any] = {
    "campaign_start": CampaignStartEvent, "campaign_resume": CampaignResumeEvent,
    "variant_start": VariantStartEvent, "variant_end": VariantEndEvent,
    "launch_start": LaunchStartEvent, "launch_end": LaunchEndEvent,
    "launch_retry": LaunchRetryEvent, "log_event": LogEvent, "stopping": ServerStepEvent,
    "stopped": ServerStepEvent, "started": ServerStepEvent, "status": ServerStepEvent,
    "run_start": RunStartEvent, "run_end": RunEndEvent, "bench_target": BenchTargetEvent,
    "sanity_case": SanityCaseEvent, "sanity": SanityEvent, "canary": CanaryEvent,
    "canary_gate": CanaryGateEvent, "notice": NoticeEvent, "level_prep": LevelPrepEvent,
    "level_start": LevelStartEvent, "request": RequestEvent, "level_progress": LevelProgressEvent,
    "level": LevelEvent, "level_gpus": LevelGpusEvent, "sweep": SweepEndEvent,
    "kernels_target": KernelsTargetEvent, "kernels_phase": KernelsPhaseEvent,
    "kernels_traces": KernelsTracesEvent, "kernels": KernelsEvent,
    "kernels_failed": KernelsFailedEvent,
    "campaign_end": CampaignEndEvent, "journal_pos": JournalPosEvent,
    "journal_torn": JournalTornEvent, "journal_end": JournalEndEvent,
}
