"""Kernel profiles in the run store: one row per ``dsv4tui profile``, tied to a run when given.

The table comes with ``PROFILES_MIGRATION`` below. Until schema.MIGRATIONS carries it (append
it there as the next migration; every statement is ``IF NOT EXISTS``, so a store that already
made the table here migrates cleanly), :func:`ensure_table` creates it on first use.

The summary is the agent's ``profile`` event as it arrived (docs/profile.md); the columns
beside it are what the listing and the side-by-side comparison filter on. A profile records
the server launch it measured (``launch_id``, the server's ``server_pid``) and the load it ran
under (``load_json``); those columns came after the table (``PROFILES_COLUMNS``, added by
:func:`ensure_table` where missing). Which run a profile belongs to is decided in
``dsv4tui.core.campaign.kernels`` (the same launch, during or right after the run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsv4tui.core.store.runstore import RunStore

PROFILES_MIGRATION: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS kernel_profiles (
        id INTEGER PRIMARY KEY,
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        host TEXT NOT NULL,
        url TEXT,
        model TEXT,
        backend TEXT,
        checkpoint TEXT,
        label TEXT,
        steps INTEGER,
        concurrency INTEGER,
        basis TEXT,
        decode_step_ms REAL,
        tensor_active_pct REAL,
        simulated INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        summary_json TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS kernel_profiles_by_run ON kernel_profiles(run_id, created_at)",
    "CREATE INDEX IF NOT EXISTS kernel_profiles_by_host ON kernel_profiles(host, created_at)",
)


# Columns added after PROFILES_MIGRATION shipped: (name, SQL type).
PROFILES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("launch_id", "INTEGER"), ("server_pid", "INTEGER"), ("load_json", "TEXT"))


@dataclass
class KernelProfile:
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

    @property
    def title(self) -> str:
        """``#3 triton/MXFP4 (run 12)``: how screens and tables name it."""
        what = "/".join(x for x in (self.backend, self.checkpoint) if x) or self.label or "profile"
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f"#{self.id} {what}{run}"

    @property
    def launch_text(self) -> str:
        """``launch 7, pid 4242, C=16`` (what it measured), or "-"."""
        bits = []
        if self.launch_id is not None:
            bits.append(f"launch {self.launch_id}")
        if self.server_pid is not None:
            bits.append(f"pid {self.server_pid}")
        if self.concurrency is not None:
            bits.append(f"C={self.concurrency}")
        return ", ".join(bits) or "-"

    def to_dict(self, with_summary: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not with_summary:
            d.pop("summary")
        return d


def _store_error(message: str) -> Exception:
    # Imported here so that schema.py may import PROFILES_MIGRATION from this module.
    from dsv4tui.core.store.schema import StoreError

    return StoreError(message)


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text or "null")
    except ValueError:
        return None


def _row(r: Any) -> KernelProfile:
    summary = _loads(r["summary_json"]) or {}
    keys = r.keys()
    load = _loads(r["load_json"]) if "load_json" in keys else None
    return KernelProfile(
        id=r["id"], run_id=r["run_id"], host=r["host"], url=r["url"], model=r["model"],
        backend=r["backend"], checkpoint=r["checkpoint"], label=r["label"], steps=r["steps"],
        concurrency=r["concurrency"], basis=r["basis"], decode_step_ms=r["decode_step_ms"],
        tensor_active_pct=r["tensor_active_pct"], simulated=bool(r["simulated"]),
        created_at=r["created_at"], summary=summary if isinstance(summary, dict) else {},
        launch_id=r["launch_id"] if "launch_id" in keys else None,
        server_pid=r["server_pid"] if "server_pid" in keys else None,
        load=load if isinstance(load, dict) else None)


def ensure_table(store: RunStore) -> None:
    """Create the table where the store's own migrations do not (yet) make it."""
    if getattr(store, "_kernel_profiles_ready", False):
        return
    have = store._query("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                        "name = 'kernel_profiles'")
    with store._tx() as db:
        if not have:
            for statement in PROFILES_MIGRATION:
                db.execute(statement)
        cols = {row[1] for row in db.execute("PRAGMA table_info(kernel_profiles)")}
        for name, kind in PROFILES_COLUMNS:
            if name not in cols:
                db.execute(f"ALTER TABLE kernel_profiles ADD COLUMN {name} {kind}")
    store._kernel_profiles_ready = True  # type: ignore[attr-defined]


def _part(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def save_profile(store: RunStore, summary: Mapping[str, Any], *, host: str,
                 run_id: int | None = None, label: str | None = None,
                 backend: str | None = None, checkpoint: str | None = None,
                 simulated: bool | None = None, launch_id: int | None = None,
                 server_pid: int | None = None) -> int:
    """Store one ``profile`` event; returns the profile's id. Labels default to the run's;
    the backend and checkpoint given (what the server ran) win over the run's."""
    ensure_table(store)
    server, load = _part(summary, "server"), _part(summary, "load")
    decision = _part(summary, "tensor_decision")
    decode = _part(_part(summary, "steps"), "decode")
    if run_id is not None:
        run = store.run(run_id)
        if run is None:
            raise _store_error(f"no run with id {run_id} (see `dsv4tui runs list`)")
        backend = backend or run.backend
        checkpoint = checkpoint or run.checkpoint
        label = label or run.label
    step_ms = decode.get("interval_ms") or decode.get("mean_ms")
    with store._tx() as db:
        cur = db.execute(
            "INSERT INTO kernel_profiles (run_id, host, url, model, backend, checkpoint, label, "
            "steps, concurrency, basis, decode_step_ms, tensor_active_pct, simulated, "
            "created_at, summary_json, launch_id, server_pid, load_json) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, host, summary.get("url"), summary.get("model"),
             backend or server.get("backend"), checkpoint or server.get("checkpoint")
             or server.get("quantization"), label, summary.get("profiled_steps"),
             load.get("concurrency"), summary.get("basis"), step_ms,
             decision.get("tensor_active_pct"),
             int(bool(server.get("simulated") if simulated is None else simulated)),
             float(summary.get("time") or time.time()),
             json.dumps(dict(summary), separators=(",", ":"), default=str),
             launch_id, server_pid,
             json.dumps(dict(load), separators=(",", ":"), default=str) if load else None))
        return int(cur.lastrowid or 0)


def profiles(store: RunStore, *, host: str | None = None, run_id: int | None = None,
             limit: int | None = None) -> list[KernelProfile]:
    """Newest first."""
    ensure_table(store)
    where: list[str] = []
    args: list[Any] = []
    if host is not None:
        where.append("host = ?")
        args.append(host)
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)
    sql = ("SELECT * FROM kernel_profiles" + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY created_at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit else ""))
    return [_row(r) for r in store._query(sql, args)]


def get_profile(store: RunStore, profile_id: int) -> KernelProfile | None:
    ensure_table(store)
    rows = store._query("SELECT * FROM kernel_profiles WHERE id = ?", (profile_id,))
    return _row(rows[0]) if rows else None


def find_profile(store: RunStore, ref: str | int) -> KernelProfile:
    """``7`` (profile id), ``latest``, or ``run:12`` (the newest profile of run 12)."""
    text = str(ref).strip().lower()
    if text.isdigit():
        found = get_profile(store, int(text))
        if found is None:
            raise _store_error(f"no kernel profile with id {text} (see `dsv4tui profile --list`)")
        return found
    if text == "latest":
        rows = profiles(store, limit=1)
        if not rows:
            raise _store_error("no kernel profiles yet (dsv4tui profile HOST)")
        return rows[0]
    if text.startswith("run:") and text[4:].isdigit():
        rows = profiles(store, run_id=int(text[4:]), limit=1)
        if not rows:
            raise _store_error(f"run {text[4:]} has no kernel profile")
        return rows[0]
    raise _store_error(f"{ref!r} is not a profile id, 'latest' or 'run:ID'")


def delete_profile(store: RunStore, profile_id: int) -> bool:
    ensure_table(store)
    with store._tx() as db:
        return db.execute("DELETE FROM kernel_profiles WHERE id = ?",
                          (profile_id,)).rowcount > 0
