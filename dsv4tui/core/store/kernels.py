"""Kernel captures in the run store: one row per ``dsv4tui kernels``, tied to a run when given.

The summary is the agent's ``kernels`` event as it arrived (docs/kernels.md); the columns
beside it are what the listing and the side-by-side comparison filter on. A capture records
the server launch it measured (``launch_id``, the server's ``server_pid``) and the load it ran
under (``load_json``). The table is the schema's (``kernels``, migration 5 -> 6). Which run a
capture belongs to is decided in ``dsv4tui.core.campaign.kernels`` (the same launch, during or
right after the run).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.errors import EXIT_CONFIG
from dsv4tui.core.store import sql
from dsv4tui.core.store.schema import NotInStore, StoreError

if TYPE_CHECKING:
    from dsv4tui.core.store.runstore import RunStore


@dataclass
class KernelCapture:
    id: int
    run_id: int | None
    host: str
    url: str | None
    model: str | None
    backend: str | None
    checkpoint: str | None
    label: str | None
    steps: int | None
    concurrency: int | None
    basis: str | None
    decode_step_ms: float | None
    tensor_active_pct: float | None
    simulated: bool
    created_at: float
    summary: dict[str, Any]
    launch_id: int | None = None
    server_pid: int | None = None
    load: dict[str, Any] | None = None
    campaign_id: str | None = None  # a campaign's capture per variant (its journal's event)
    journal_seq: int | None = None

    @property
    def title(self) -> str:
        """``#3 triton/MXFP4 (run 12)``: how screens and tables name it."""
        what = "/".join(x for x in (self.backend, self.checkpoint) if x) or self.label or "kernels"
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f"#{self.id} {what}{run}"

    @property
    def launch_text(self) -> str:
        """``launch 7, pid 4242, C=16, bs 15.9 measured`` (what it measured), or "-"."""
        bits = []
        if self.launch_id is not None:
            bits.append(f"launch {self.launch_id}")
        if self.server_pid is not None:
            bits.append(f"pid {self.server_pid}")
        from dsv4tui.core.campaign.kernel_load import load_text

        load = load_text(self.concurrency, self.load or _part(self.summary, "load"))
        if load is not None:
            bits.append(load)
        return ", ".join(bits) or "-"

    @property
    def batch_far(self) -> bool:
        """The batch it measured is far from the load it names (flagged by the agent)."""
        return bool((self.load or _part(self.summary, "load")).get("batch_far"))

    def to_dict(self, with_summary: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_summary:
            d.pop("summary")
        return d


def _row(r: Any) -> KernelCapture:
    summary = sql.loads(r["summary_json"]) or {}
    load = sql.loads(r["load_json"])
    return KernelCapture(
        id=r["id"], run_id=r["run_id"], host=r["host"], url=r["url"], model=r["model"],
        backend=r["backend"], checkpoint=r["checkpoint"], label=r["label"], steps=r["steps"],
        concurrency=r["concurrency"], basis=r["basis"], decode_step_ms=r["decode_step_ms"],
        tensor_active_pct=r["tensor_active_pct"], simulated=bool(r["simulated"]),
        created_at=r["created_at"], summary=summary if isinstance(summary, dict) else {},
        launch_id=r["launch_id"], server_pid=r["server_pid"],
        load=load if isinstance(load, dict) else None,
        campaign_id=_col(r, "campaign_id"), journal_seq=_col(r, "journal_seq"))


def _col(r: Any, name: str) -> Any:
    """A column an older (read-only, not migrated) store file lacks reads as None."""
    return r[name] if name in r.keys() else None  # noqa: SIM118 (a Row: its keys)


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def save_capture(store: RunStore, summary: Mapping[str, Any], *, host: str,
                 run_id: int | None = None, label: str | None = None,
                 backend: str | None = None, checkpoint: str | None = None,
                 simulated: bool | None = None, launch_id: int | None = None,
                 server_pid: int | None = None, campaign_id: str | None = None,
                 journal_seq: int | None = None) -> int:
    """Store one ``kernels`` event; returns the capture's id. Labels default to the run's;
    the backend and checkpoint given (what the server ran) win over the run's. A campaign's
    capture (``campaign_id`` and its journal ``journal_seq``) is stored once: the same event
    read again returns the capture stored the first time."""
    server, load = _part(summary, "server"), _part(summary, "load")
    decision = _part(summary, "tensor_decision")
    decode = _part(_part(summary, "steps"), "decode")
    if run_id is not None:
        run = store.run(run_id)
        if run is None:
            raise NotInStore(f"no run with id {run_id} (see `dsv4tui runs list`)")
        backend = backend or run.backend
        checkpoint = checkpoint or run.checkpoint
        label = label or run.label
    step_ms = decode.get("interval_ms") or decode.get("mean_ms")
    with store.transaction() as db:
        if campaign_id is not None and journal_seq is not None:
            had = db.execute("SELECT id FROM kernels WHERE campaign_id = ? AND journal_seq = ?",
                             (campaign_id, journal_seq)).fetchone()
            if had is not None:
                return int(had[0])
        cur = db.execute(
            "INSERT INTO kernels (run_id, host, url, model, backend, checkpoint, label, "
            "steps, concurrency, basis, decode_step_ms, tensor_active_pct, simulated, "
            "created_at, summary_json, launch_id, server_pid, load_json, campaign_id, "
            "journal_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, host, summary.get("url"), summary.get("model"),
             backend or server.get("backend"), checkpoint or server.get("checkpoint")
             or server.get("quantization"), label, summary.get("profiled_steps"),
             load.get("concurrency"), summary.get("basis"), step_ms,
             decision.get("tensor_active_pct"),
             int(bool(server.get("simulated") if simulated is None else simulated)),
             float(summary.get("time") or time.time()),
             sql.dumps(dict(summary)),
             launch_id, server_pid,
             sql.dumps(dict(load)) if load else None, campaign_id, journal_seq))
        return int(cur.lastrowid or 0)


def captures(store: RunStore, *, host: str | None = None, run_id: int | None = None,
             limit: int | None = None) -> list[KernelCapture]:
    """Newest first."""
    return [_row(r) for r in store.query(*sql.select(
        "SELECT * FROM kernels", {"host": host, "run_id": run_id},
        order="created_at DESC, id DESC", limit=limit))]


def campaign_captures(store: RunStore, campaign_id: str) -> dict[int, KernelCapture]:
    """A campaign's captures per variant, by the run id each belongs to (the run at the
    campaign's ``kernels.level``; the newest when a run has several)."""
    if not store.has("kernels", "campaign_id"):
        return {}
    out: dict[int, KernelCapture] = {}
    for r in store.query("SELECT * FROM kernels WHERE campaign_id = ? AND run_id IS NOT NULL "
                         "ORDER BY created_at, id", (campaign_id,)):
        cap = _row(r)
        assert cap.run_id is not None
        out[cap.run_id] = cap
    return out


def get_capture(store: RunStore, capture_id: int) -> KernelCapture | None:
    rows = store.query("SELECT * FROM kernels WHERE id = ?", (capture_id,))
    return _row(rows[0]) if rows else None


def find_capture(store: RunStore, ref: str | int) -> KernelCapture:
    """``7`` (capture id), ``latest``, or ``run:12`` (the newest capture of run 12)."""
    text = str(ref).strip().lower()
    if text.isdigit():
        found = get_capture(store, int(text))
        if found is None:
            raise NotInStore(f"no kernel capture with id {text} (see `dsv4tui kernels --list`)")
        return found
    if text == "latest":
        rows = captures(store, limit=1)
        if not rows:
            raise NotInStore("no kernel captures yet (dsv4tui kernels HOST)")
        return rows[0]
    if text.startswith("run:") and text[4:].isdigit():
        rows = captures(store, run_id=int(text[4:]), limit=1)
        if not rows:
            raise NotInStore(f"run {text[4:]} has no kernel capture")
        return rows[0]
    raise StoreError(f"{ref!r} is not a capture id, 'latest' or 'run:ID'", EXIT_CONFIG)


def delete_capture(store: RunStore, capture_id: int) -> bool:
    with store.transaction() as db:
        return db.execute("DELETE FROM kernels WHERE id = ?", (capture_id,)).rowcount > 0
