"""Journal events into the run store: the console's half of a campaign.

:class:`Collector` applies journal events to the store (runs, launches, requests, levels, GPU
summaries, sanity answers, kernel captures, the campaign's state) — idempotently, so events
read twice add nothing — and keeps the journal offset already stored, so attaching again reads only what is
missing. :func:`collect` is the loop: the agent's ``campaign follow`` stream -> a bounded queue
-> one writer (batches in one transaction each, retried while the store is busy, never
dropped: the journal on the host stays the backstop) -> the store.

Listeners (the CLI's progress line, the dashboard) get each event as it arrives, before it is
stored, plus ``run_finished`` / ``run_stored`` (the store's run id for a run
key) and ``store_waiting`` / ``store_ok`` when the store is busy and recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsv4tui.agent import events as ev_t
from dsv4tui.core.campaign import reducer
from dsv4tui.core.errors import UserError
from dsv4tui.core.store import RunStore, StoreBusy, StoreError, StoreReadOnly, StoreReplaced
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.core.store import kernels as kernel_store

EventCallback = Callable[[dict[str, Any]], None]
BATCH = 1000
QUEUE_MAX = 100_000  # ~ 200 MB of request events at worst; the reader waits beyond it
FINAL_STATES = ("done", "failed", "cancelled", "interrupted")


class AgentLike(Protocol):
    def events(self, *args: str) -> Any: ...


class IngestFailed(UserError):
    """The journal's events could not be stored (they stay on the host; attach again)."""


class _Stopped(Exception):
    """The collector was asked to stop between two events."""


class Collector(reducer.Reader):
    """Applies one campaign's journal events to the store (call from one thread at a time)."""

    PATIENCE_S = 2.0  # one store write waits this long for another process's lock, then the
    #                   writer says so (store_waiting) and tries again: nothing is dropped

    def __init__(self, store: RunStore, host: str, cid: str, *, gpu_names: Iterable[str] = (),
                 simulated: bool = False) -> None:
        self.stopping = False
        self.store = store
        self.host = host
        self.cid = cid
        self.gpu_names = list(gpu_names)
        self.simulated = simulated
        # a host made of nodes: the other nodes' per-GPU rows over [t0, t1], numbered from
        # the given index on (node_gpus.NodeGpuSampler.summary)
        self.extra_gpus: Any = None
        self._level_windows: dict[tuple[str, int], tuple[float, float]] = {}
        cstore.ensure(store, cid, host=host, name=cid, kind="campaign")
        self.reload()

    def reload(self) -> None:
        """In-memory state from the store (after a failed batch rolled back)."""
        row = cstore.get(self.store, self.cid)
        self.offset = row.journal_offset if row else 0
        self.state = row.state if row else "running"
        self.kind = row.kind if row else "campaign"  # a sweep is a one-variant campaign
        self.detail: dict[str, Any] = dict(row.detail) if row else {}
        self.detail.setdefault("variants", [])
        self.detail.setdefault("torn", [])
        self.detail.setdefault("bad_events", [])
        self.runs = cstore.run_ids(self.store, self.cid)
        self.launches = cstore.launch_ids(self.store, self.cid)
        self.run_target: dict[str, tuple[str | None, str | None]] = {}
        self._dirty = False
        self._told: list[dict[str, Any]] = []

    # -- the detail dict: variants as the matrix shows them ---------------------------------
    def _variant(self, vi: Any) -> dict[str, Any]:
        variants = self.detail["variants"]
        idx = int(vi or 0)
        while len(variants) <= idx:
            variants.append({"name": f"variant {len(variants)}", "state": "pending",
                             "runs": [], "reason": None})
        return variants[idx]  # type: ignore[no-any-return]

    def apply_batch(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store ``events`` in one transaction; returns the events to tell listeners. An
        event that is not what it should be (a field missing or of the wrong type) is kept out
        and recorded (``detail.bad_events``, an ``ingest_error`` to tell), never fatal."""
        told: list[dict[str, Any]] = []
        with self.store.transaction(patience_s=self.PATIENCE_S):
            for ev in events:
                if self.stopping:
                    raise _Stopped()
                try:
                    self._apply(ev, told)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    self.bad(ev, exc, told)
            if self._dirty:
                cstore.update(self.store, self.cid, detail=self.detail)
                self._dirty = False
        return told

    def bad(self, ev: Mapping[str, Any], exc: BaseException,
            told: list[dict[str, Any]] | None = None) -> None:
        entry = {"seq": ev.get("seq"), "type": ev.get("type"),
                 "error": f"{type(exc).__name__}: {exc}"[:300]}
        bad = self.detail["bad_events"]
        bad.append(entry)
        del bad[:-20]
        self.detail["bad_count"] = int(self.detail.get("bad_count") or 0) + 1
        self._dirty = True
        if told is not None:
            told.append({"type": "ingest_error", "seq": entry["seq"],
                         "event_type": entry["type"], "error": entry["error"]})

    def _run_id(self, ev: Mapping[str, Any]) -> int | None:
        key = ev.get("run")
        return self.runs.get(str(key)) if key is not None else None

    def _apply(self, ev: dict[str, Any], told: list[dict[str, Any]]) -> None:
        self._told = told
        reducer.fold(self, ev)

    # -- the journal's events, each into the store (reducer.Reader's callbacks) ----------------
    def journal_pos(self, ev: ev_t.JournalPosEvent) -> None:
        self.offset = int(ev.get("offset") or 0)
        cstore.update(self.store, self.cid, offset=self.offset)

    def campaign_start(self, ev: ev_t.CampaignStartEvent) -> None:
        store, cid = self.store, self.cid
        variants: list[dict[str, Any]] = [
            {"name": v.get("name"), "label": v.get("label"), "state": "pending", "runs": [],
             "reason": None, "restart": v.get("restart")} for v in ev.get("variants") or []]
        if not self.detail["variants"]:
            self.detail["variants"] = variants
        self.detail.update(repeats=ev.get("repeats"), plan=ev.get("plan"),
                           on_failure=ev.get("on_failure"))
        self._dirty = True
        self.kind = str(ev.get("kind") or "campaign")
        cstore.update(store, cid, name=str(ev.get("name") or cid), kind=self.kind,
                      state="running")
        cstore.ensure(store, cid, host=self.host, name=str(ev.get("name") or cid),
                      kind=self.kind, spec={
                          "plan": ev.get("plan"), "variants": ev.get("variants"),
                          "repeats": ev.get("repeats")})  # kept when the console had one
        self.state = "running"

    def campaign_resume(self, ev: ev_t.CampaignResumeEvent) -> None:
        self.detail["attempt"] = ev.get("attempt")
        self._dirty = True
        # why it stopped (a full disk, a killed runner) is past: its runs keep their reasons
        cstore.update(self.store, self.cid, state="running", clear_error=True)
        self.state = "running"

    def variant_start(self, ev: ev_t.VariantStartEvent) -> None:
        v = self._variant(ev.get("variant"))
        v.update(state="restarting" if ev.get("restart") else "running", reason=None,
                 name=ev.get("name") or v.get("name"), started_at=ev.get("t"))
        self.detail["current"] = ev.get("variant")
        self._dirty = True

    def launch_start(self, ev: ev_t.LaunchStartEvent) -> None:
        key = str(ev.get("launch"))
        self.launches[key] = cstore.add_launch(
            self.store, self.cid, key, host=self.host, profile_name=ev.get("profile_name"),
            profile=ev.get("profile"), backend=ev.get("backend"),
            checkpoint=ev.get("checkpoint"), changes=ev.get("changes"),
            argv=ev.get("argv"), created_at=ev.get("t"))

    def launch_end(self, ev: ev_t.LaunchEndEvent) -> None:
        lid = self.launches.get(str(ev.get("launch")))
        if lid is not None:
            cstore.end_launch(self.store, lid, ok=bool(ev.get("ok")), startup_s=ev.get(
                "startup_s"), error=ev.get("error"), pid=ev.get("pid"),
                started_at=ev.get("started_at"), phases=ev.get("phases"))

    def sanity_case(self, ev: ev_t.SanityCaseEvent) -> None:
        rid = self._run_id(ev)
        url, model = self.run_target.get(str(ev.get("run")), (None, None))
        cstore.add_sanity(self.store, self.cid, int(ev.get("seq") or 0), ev, host=self.host,
                          url=url, model=model, run_id=rid)

    def sanity(self, ev: ev_t.SanityEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None:
            self.store.update_run(rid, sanity_passed=bool(ev.get("passed")))

    def canary(self, ev: ev_t.CanaryEvent) -> None:  # the run's accuracy canary
        rid = self._run_id(ev)
        if rid is not None:
            cstore.set_canary(self.store, rid, _own_fields(ev))

    def canary_gate(self, ev: ev_t.CanaryGateEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None:
            cstore.set_canary(self.store, rid, {"gate": _own_fields(ev)})

    def bench_target(self, ev: ev_t.BenchTargetEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None:
            fields = {k: ev[k] for k in ("model", "url", "server_version")
                      if ev.get(k) is not None}
            self.store.update_run(rid, **fields)

    def request(self, ev: ev_t.RequestEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None:
            self.store.add_request(rid, ev)

    # level_progress is not stored: the requests and the final level are

    def level(self, ev: ev_t.LevelEvent) -> None:
        rid = self._run_id(ev)
        if isinstance(ev.get("started_at"), (int, float)) and \
                isinstance(ev.get("finished_at"), (int, float)):
            self._level_windows[(str(ev.get("run")), int(ev.get("level") or 0))] = (
                float(ev["started_at"]), float(ev["finished_at"]))
        if rid is not None:
            self.store.add_level(rid, ev)

    def level_gpus(self, ev: ev_t.LevelGpusEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None and ev.get("gpus"):
            self.store.set_level_gpus(rid, int(ev.get("level") or 0), self._every_node(ev))

    def kernels(self, ev: ev_t.KernelsEvent) -> None:
        """A campaign's kernel capture of a variant (``kernels = { level = C }``): into the
        ``kernels`` table with the variant's run, once per journal event (a re-read adds
        nothing); the variant's ``kernels`` entry in the detail points at it."""
        rid = self._run_id(ev)
        run = self.store.run(rid) if rid is not None else None
        seq = ev.get("seq")
        capture_id = kernel_store.save_capture(
            self.store, _own_fields(ev), host=self.host, run_id=rid,
            simulated=True if self.simulated else None,
            launch_id=run.launch_id if run is not None else None,
            server_pid=ev.get("server_pid"), campaign_id=self.cid,
            journal_seq=int(seq) if seq is not None else None)
        self._variant_kernels(ev, rid, capture_id=capture_id, error=None, kind=None)

    def kernels_failed(self, ev: ev_t.KernelsFailedEvent) -> None:
        self._variant_kernels(ev, self._run_id(ev), capture_id=None,
                              error=str(ev.get("message") or "the kernel capture failed"),
                              kind=ev.get("kind"))

    def _variant_kernels(self, ev: ev_t.KernelsEvent | ev_t.KernelsFailedEvent,
                         rid: int | None, **fields: Any) -> None:
        v = self._variant(ev.get("variant"))
        v["kernels"] = {"run": ev.get("run"), "run_id": rid, "level": ev.get("level"),
                        "concurrency": ev.get("concurrency"), **fields}
        self._dirty = True

    def run_start(self, ev: ev_t.RunStartEvent) -> None:
        self._run_start(ev, self._told)

    def run_end(self, ev: ev_t.RunEndEvent) -> None:
        rid = self._run_id(ev)
        if rid is not None:
            cstore.finish_run(self.store, rid, str(ev.get("status") or "failed"),
                              ev.get("reason"), ev.get("t"))
        self._told.append({"type": "run_finished", "run": ev.get("run"), "run_id": rid,
                           "status": ev.get("status"), "error": ev.get("reason")})

    def variant_end(self, ev: ev_t.VariantEndEvent) -> None:
        v = self._variant(ev.get("variant"))
        v.update(state=ev.get("state"), reason=ev.get("reason"),
                 error_lines=ev.get("error_lines") or [], ended_at=ev.get("t"))
        self._dirty = True

    def campaign_end(self, ev: ev_t.CampaignEndEvent) -> None:
        self.state = str(ev.get("state") or "done")
        self.detail["server"] = ev.get("server")
        self.detail["current"] = None
        self._dirty = True
        self._close_open_runs(f"the campaign ended ({self.state}) before this run "
                              "reported its end", ev.get("t"))
        cstore.update(self.store, self.cid, state=self.state,
                      ended_at=ev.get("t") or time.time(), error=ev.get("reason"))

    def journal_torn(self, ev: ev_t.JournalTornEvent) -> None:
        torn = self.detail["torn"]
        if all(t.get("offset") != ev.get("offset") for t in torn):
            torn.append({k: ev.get(k) for k in ("offset", "end", "text")})
            self._dirty = True

    def journal_end(self, ev: ev_t.JournalEndEvent) -> None:
        state = str(ev.get("state") or "")
        if state in FINAL_STATES and self.state == "running":
            self.state = state
            self._close_open_runs(ev.get("reason") or "the campaign runner stopped before "
                                  "the run finished", None)
            cstore.update(self.store, self.cid, state=state, error=ev.get("reason"))

    def _every_node(self, ev: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A level's GPU rows: node 0's (the runner's) and, on a host made of nodes, the
        other nodes' over the same window."""
        rows = list(ev["gpus"])
        window = self._level_windows.get((str(ev.get("run")), int(ev.get("level") or 0)))
        if self.extra_gpus is None or window is None:
            return rows
        first = max((int(r.get("gpu") or 0) for r in rows), default=-1) + 1
        return rows + list(self.extra_gpus(window[0], window[1], first))

    def _close_open_runs(self, reason: str, at: float | None) -> None:
        """Runs of this campaign still ``running`` when it ended: they did not finish."""
        for rid in cstore.open_runs(self.store, self.cid):
            cstore.finish_run(self.store, rid, "interrupted", reason, at)

    def _run_start(self, ev: ev_t.RunStartEvent, told: list[dict[str, Any]]) -> None:
        key = str(ev.get("run"))
        meta = ev.get("meta") or {}
        launch_id = self.launches.get(str(ev.get("launch"))) if ev.get("launch") else None
        if launch_id is None:
            launch_id = cstore.launch_for_pid(self.store, self.host, meta.get("pid"),
                                              meta.get("launch_started_at"))
        variant = self._variant(ev.get("variant"))
        rid = cstore.add_run(
            self.store, self.cid, key, label=str(ev.get("label") or key), host=self.host,
            meta=meta, url=ev.get("url"), model=ev.get("model"), plan=ev.get("plan"),
            variant=variant.get("name"), repeat=ev.get("repeat"), launch_id=launch_id,
            gpu_names=self.gpu_names, simulated=self.simulated or bool(meta.get("simulated")),
            started_at=ev.get("t"))
        self.runs[key] = rid
        self.run_target[key] = (ev.get("url"), ev.get("model"))
        if key not in variant.setdefault("runs", []):
            variant["runs"].append(key)
            self._dirty = True
        told.append({"type": "run_stored", "run": key, "run_id": rid,
                     "label": ev.get("label")})


@dataclass
class Collected:
    """What an attach ended with."""

    id: str
    state: str  # done | failed | cancelled | interrupted | running (not followed to the end)
    reason: str | None
    offset: int
    runs: dict[str, int] = field(default_factory=dict)
    torn: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0
    unstored: int = 0  # events not yet in the store when the attach gave up waiting for it


async def collect(agent: AgentLike, collector: Collector, *, follow: bool = True,
                  on_event: EventCallback | None = None, flush_timeout: float = 120.0,
                  queue_max: int = QUEUE_MAX) -> Collected:
    """Stream the campaign's journal from the stored offset into the store.

    Returns when the journal ends (the campaign ended, or its runner is gone; with
    ``follow=False`` at the journal's current end). Raises ConnectError when the link drops,
    after storing what arrived (the next attach continues from there).
    """
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(queue_max)
    tell = on_event or (lambda ev: None)
    end: dict[str, Any] = {}
    count = 0
    writer = asyncio.create_task(_write_loop(queue, collector, tell))
    args = ["campaign", "follow", collector.cid, "--offset", str(collector.offset)]
    if not follow:
        args.append("--no-wait")
    unstored = 0
    try:
        async for ev in agent.events(*args):
            if writer.done():  # the store cannot take the events: stop reading, keep the offset
                writer.result()
            count += 1
            tell(ev)
            await queue.put(ev)
            if reducer.is_journal_end(ev):
                end = ev
    finally:
        try:
            await asyncio.wait_for(queue.put(None), flush_timeout)
            await asyncio.wait_for(asyncio.shield(writer), flush_timeout)
        except TimeoutError:
            unstored = queue.qsize()
            collector.stopping = True  # the writer's thread ends at the next event
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(writer, Collector.PATIENCE_S + 30.0)
        except IngestFailed:
            unstored = queue.qsize()
    failed = writer.exception() if writer.done() and not writer.cancelled() else None
    if failed is not None and not isinstance(failed, _Stopped):
        raise failed
    try:  # the last rows went into the file the store's path names, not one deleted since
        await asyncio.to_thread(collector.store.check_same_file)
    except StoreReplaced as exc:
        raise _replaced(collector, exc) from None
    return Collected(collector.cid, str(end.get("state") or collector.state),
                     end.get("reason"), collector.offset, dict(collector.runs),
                     list(collector.detail.get("torn") or []), count, unstored)


async def _write_loop(queue: asyncio.Queue[dict[str, Any] | None], collector: Collector,
                      tell: EventCallback) -> None:
    done = False
    while not done:
        item = await queue.get()
        if item is None:
            return
        batch = [item]
        while len(batch) < BATCH:
            try:
                nxt = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if nxt is None:
                done = True
                break
            batch.append(nxt)
        told = await _store_batch(collector, batch, lambda: queue.qsize(), tell)
        for ev in told:
            tell(ev)


async def _store_batch(collector: Collector, batch: list[dict[str, Any]],
                       pending: Callable[[], int], tell: EventCallback) -> list[dict[str, Any]]:
    """One batch into the store: while another process holds the store's lock, wait and try
    again (saying so); a batch SQLite refuses is stored event by event, the events it refuses
    kept out and recorded; when it refuses every one (a full disk, a read-only store) the
    attach fails, the offset not moved past them (the host's journal keeps them). A store
    file deleted or replaced meanwhile fails the attach at once, naming the recovery."""
    delay, waited_since = 0.2, None
    while True:
        try:
            told = await asyncio.to_thread(collector.apply_batch, batch)
            break
        except StoreBusy as exc:
            if waited_since is None:
                waited_since = time.monotonic()
            tell({"type": "store_waiting", "error": exc.message, "pending": pending()
                  + len(batch), "waited_s": round(time.monotonic() - waited_since, 1)})
            await asyncio.to_thread(_reload_quietly, collector)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        except StoreReadOnly as exc:
            raise IngestFailed(f"cannot store the campaign's events: {exc.message}") from None
        except StoreReplaced as exc:
            raise _replaced(collector, exc) from None
        except StoreError as exc:
            await asyncio.to_thread(_reload_quietly, collector)
            told = await _one_by_one(collector, batch, exc)
            break
    if waited_since is not None:
        tell({"type": "store_ok", "waited_s": round(time.monotonic() - waited_since, 1)})
    return told


async def _one_by_one(collector: Collector, batch: list[dict[str, Any]],
                      first: StoreError) -> list[dict[str, Any]]:
    told: list[dict[str, Any]] = []
    refused: list[tuple[dict[str, Any], StoreError]] = []
    for ev in batch:
        try:
            told += await asyncio.to_thread(collector.apply_batch, [ev])
        except StoreBusy:
            told += await asyncio.to_thread(collector.apply_batch, [ev])  # once more
        except StoreError as exc:
            await asyncio.to_thread(_reload_quietly, collector)
            refused.append((ev, exc))
    if refused and len(refused) == len(batch):
        raise IngestFailed(f"the run store refuses the campaign's events: {first.message} "
                           "(they are kept on the host; attach again once it is fixed)")
    for ev, why in refused:
        collector.bad(ev, why, told)
    return told


def _own_fields(ev: Mapping[str, Any]) -> dict[str, Any]:
    """An event's own fields (not its type, version, stamps)."""
    return {k: v for k, v in ev.items()
            if k not in ("type", "v", "t", "seq", "run", "variant", "launch")}


def _replaced(collector: Collector, exc: StoreReplaced) -> IngestFailed:
    """The store's file went from under the attach: say so, and where the events still are."""
    kind, host = collector.kind, collector.host
    return IngestFailed(
        f"{exc.message}. Every event is kept in the {kind}'s journal on {host} (the {kind} "
        f"itself runs on there): dsv4tui campaign attach {host} {collector.cid} collects them "
        f"into the store at {collector.store.path}")


def _reload_quietly(collector: Collector) -> None:
    with contextlib.suppress(StoreError):
        collector.reload()
