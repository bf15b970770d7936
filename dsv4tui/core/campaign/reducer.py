"""The one place that reads an event's ``type``: a journal's events (agent/events.py) and the
ones ingest adds (``run_stored``, ``run_finished``, ``store_waiting``, ``store_ok``,
``ingest_error``) folded into a :class:`Reader`'s typed callbacks.

The store's ingest, the CLI's printers, the sweep's outcome and the dashboard's views are
Readers: each overrides the callbacks it needs (a callback's result, e.g. "the view changed",
is what :func:`fold` returns; an event it does not read gives ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from dsv4tui.agent import events as ev_t


class RunStored(TypedDict, total=False):
    type: str
    run: str
    run_id: int | None
    label: str | None


class RunFinished(TypedDict, total=False):
    type: str
    run: str
    run_id: int | None
    status: str | None
    error: str | None


class StoreWaiting(TypedDict, total=False):
    type: str
    error: str
    pending: int
    waited_s: float


class IngestError(TypedDict, total=False):
    type: str
    seq: int | None
    error: str
    event_type: str | None


class Reader:
    """Does nothing with any event; subclasses override the callbacks they read."""

    def campaign_start(self, ev: ev_t.CampaignStartEvent) -> Any: return None
    def campaign_resume(self, ev: ev_t.CampaignResumeEvent) -> Any: return None
    def variant_start(self, ev: ev_t.VariantStartEvent) -> Any: return None
    def variant_end(self, ev: ev_t.VariantEndEvent) -> Any: return None
    def launch_start(self, ev: ev_t.LaunchStartEvent) -> Any: return None
    def launch_end(self, ev: ev_t.LaunchEndEvent) -> Any: return None
    def launch_retry(self, ev: ev_t.LaunchRetryEvent) -> Any: return None
    def server_step(self, ev: ev_t.ServerStepEvent) -> Any: return None  # stopping .. status
    def log_event(self, ev: ev_t.LogEvent) -> Any: return None
    def run_start(self, ev: ev_t.RunStartEvent) -> Any: return None
    def run_end(self, ev: ev_t.RunEndEvent) -> Any: return None
    def bench_target(self, ev: ev_t.BenchTargetEvent) -> Any: return None
    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> Any: return None
    def sanity(self, ev: ev_t.SanityEvent) -> Any: return None
    def canary(self, ev: ev_t.CanaryEvent) -> Any: return None
    def canary_gate(self, ev: ev_t.CanaryGateEvent) -> Any: return None
    def notice(self, ev: ev_t.NoticeEvent) -> Any: return None
    def level_prep(self, ev: ev_t.LevelPrepEvent) -> Any: return None
    def level_start(self, ev: ev_t.LevelStartEvent) -> Any: return None
    def request(self, ev: ev_t.RequestEvent) -> Any: return None
    def level_progress(self, ev: ev_t.LevelProgressEvent) -> Any: return None
    def level(self, ev: ev_t.LevelEvent) -> Any: return None
    def level_gpus(self, ev: ev_t.LevelGpusEvent) -> Any: return None
    def sweep(self, ev: ev_t.SweepEndEvent) -> Any: return None
    def kernels_target(self, ev: ev_t.KernelsTargetEvent) -> Any: return None
    def kernels_phase(self, ev: ev_t.KernelsPhaseEvent) -> Any: return None
    def kernels_traces(self, ev: ev_t.KernelsTracesEvent) -> Any: return None
    def kernels(self, ev: ev_t.KernelsEvent) -> Any: return None
    def kernels_failed(self, ev: ev_t.KernelsFailedEvent) -> Any: return None
    def campaign_end(self, ev: ev_t.CampaignEndEvent) -> Any: return None
    def journal_pos(self, ev: ev_t.JournalPosEvent) -> Any: return None
    def journal_torn(self, ev: ev_t.JournalTornEvent) -> Any: return None
    def journal_end(self, ev: ev_t.JournalEndEvent) -> Any: return None
    # what ingest tells besides the journal's events
    def run_stored(self, ev: RunStored) -> Any: return None
    def run_finished(self, ev: RunFinished) -> Any: return None
    def store_waiting(self, ev: StoreWaiting) -> Any: return None
    def store_ok(self, ev: StoreWaiting) -> Any: return None
    def ingest_error(self, ev: IngestError) -> Any: return None


_SERVER_STEPS = ("stopping", "stopped", "started", "status")
_CONSOLE = ("run_stored", "run_finished", "store_waiting", "store_ok", "ingest_error")
_CALLBACKS: dict[str, str] = {name: "server_step" if name in _SERVER_STEPS else name
                              for name in (*ev_t.EVENTS, *_CONSOLE)}


def fold(reader: Reader, ev: Mapping[str, Any]) -> Any:
    """Hand ``ev`` to the ``reader``'s callback for its type (None for any other type)."""
    name = _CALLBACKS.get(cast(str, ev.get("type")))
    return None if name is None else getattr(reader, name)(ev)


def is_journal_end(ev: Mapping[str, Any]) -> bool:
    """The follow stream's last event (the campaign ended, or its runner is gone)."""
    return _CALLBACKS.get(cast(str, ev.get("type"))) == "journal_end"
