"""Campaigns in the run store: what the console has collected of each host-side campaign.

One ``campaigns`` row per campaign (its state, the journal offset already stored, a detail
dict with the variants' states); its variants' runs are ordinary ``runs`` rows tied by
``campaign_id`` + ``campaign_key`` (the runner's run key, ``v<variant>.r<repeat>.a<attempt>``),
its launches ``launches`` rows keyed the same way, its sanity answers ``sanity_results`` rows
keyed by the journal line (``journal_seq``). Every write here is idempotent, so reading the
same journal events twice adds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dsv4tui.core.store import sql

if TYPE_CHECKING:
    from dsv4tui.core.store.runstore import RunStore

@dataclass
class CampaignRow:
    id: str
    host: str
    name: str
    kind: str
    state: str
    journal_offset: int
    created_at: float
    updated_at: float | None
    ended_at: float | None
    error: str | None
    spec: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("spec")
        return out


def _row(r: Any) -> CampaignRow:
    return CampaignRow(r["id"], r["host"], r["name"], r["kind"], r["state"],
                       int(r["journal_offset"] or 0), r["created_at"], r["updated_at"],
                       r["ended_at"], r["error"], sql.loads(r["spec_json"]) or {},
                       sql.loads(r["detail_json"]) or {})


def ensure(store: RunStore, cid: str, *, host: str, name: str, kind: str,
           spec: Mapping[str, Any] | None = None, created_at: float | None = None) -> None:
    """The campaign's row (created once; later calls fill a missing spec)."""
    with store.transaction() as db:
        db.execute("INSERT OR IGNORE INTO campaigns (id, host, name, kind, spec_json, state, "
                   "journal_offset, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                   (cid, host, name, kind, sql.dumps(spec), "running", 0,
                    created_at or time.time(), time.time()))
        if spec is not None:
            db.execute("UPDATE campaigns SET spec_json = coalesce(spec_json, ?) WHERE id = ?",
                       (sql.dumps(spec), cid))


def update(store: RunStore, cid: str, *, state: str | None = None, error: str | None = None,
           ended_at: float | None = None, detail: Mapping[str, Any] | None = None,
           offset: int | None = None, name: str | None = None, kind: str | None = None,
           spec: Mapping[str, Any] | None = None, clear_error: bool = False) -> None:
    """Set the columns given (None: left as they are; ``clear_error``: no error any more)."""
    cols: dict[str, Any] = {"updated_at": time.time()}
    if clear_error:
        cols["error"] = None
    if name is not None:
        cols["name"] = name
    if kind is not None:
        cols["kind"] = kind
    if spec is not None:
        cols["spec_json"] = sql.dumps(dict(spec))
    if state is not None:
        cols["state"] = state
    if error is not None:
        cols["error"] = error
    if ended_at is not None:
        cols["ended_at"] = ended_at
    if detail is not None:
        cols["detail_json"] = sql.dumps(dict(detail))
    if offset is not None:
        cols["journal_offset"] = int(offset)
    with store.transaction() as db:
        db.execute(*sql.update("campaigns", cid, cols))


def get(store: RunStore, cid: str) -> CampaignRow | None:
    rows = store.query("SELECT * FROM campaigns WHERE id = ?", (cid,))
    return _row(rows[0]) if rows else None


def listing(store: RunStore, host: str | None = None) -> list[CampaignRow]:
    return [_row(r) for r in store.query(*sql.select(
        "SELECT * FROM campaigns", {"host": host or None}, order="created_at DESC"))]


def _keys(store: RunStore, table: str, cid: str) -> dict[str, int]:
    return {r["campaign_key"]: int(r["id"]) for r in store.query(
        f"SELECT id, campaign_key FROM {table} WHERE campaign_id = ?", (cid,))}


def run_ids(store: RunStore, cid: str) -> dict[str, int]:
    """campaign_key -> run id for the campaign's runs already stored."""
    return _keys(store, "runs", cid)


def launch_ids(store: RunStore, cid: str) -> dict[str, int]:
    return _keys(store, "launches", cid)


def add_run(store: RunStore, cid: str, key: str, *, label: str, host: str,
            meta: Mapping[str, Any], url: str | None, model: str | None,
            plan: Mapping[str, Any] | None, variant: str | None, repeat: int | None,
            launch_id: int | None, gpu_names: list[str], simulated: bool,
            started_at: float | None = None) -> int:
    """The run of campaign key ``key`` (created once; its id either way)."""
    found = run_ids(store, cid).get(key)
    if found is not None:
        return found
    profile = meta.get("profile") if isinstance(meta.get("profile"), Mapping) else None
    with store.transaction() as db:
        run_id = store.start_run(
            label=label, host=host, url=url, model=model,
            profile_name=meta.get("profile_name"), profile=profile,
            backend=meta.get("backend") or "unknown",
            checkpoint=meta.get("checkpoint") or "unknown", launch_id=launch_id,
            server_version=meta.get("sglang_version"), gpu_names=gpu_names, plan=plan,
            simulated=simulated)
        db.execute(
            "UPDATE runs SET campaign_id = ?, campaign_key = ?, variant = ?, repeat_idx = ?, "
            "quantization = ?, attention_backend = ?, argv_json = ?, server_args_json = ?, "
            "meta_source = ?, owner = ?, started_at = coalesce(?, started_at) WHERE id = ?",
            (cid, key, variant, repeat, meta.get("quantization"), meta.get("attention_backend"),
             sql.dumps(meta.get("argv")), sql.dumps(meta.get("server_args")),
             meta.get("source") or "unknown", f"campaign:{cid}", started_at, run_id))
    return run_id


def add_launch(store: RunStore, cid: str, key: str, *, host: str, profile_name: str | None,
               profile: Mapping[str, Any] | None, backend: str | None, checkpoint: str | None,
               changes: Mapping[str, Any] | None, argv: list[str] | None,
               created_at: float | None = None) -> int:
    """A campaign's launch, recorded when it begins (``ok`` false until it is ready)."""
    found = launch_ids(store, cid).get(key)
    if found is not None:
        return found
    with store.transaction() as db:
        cur = db.execute(
            "INSERT INTO launches (host, profile_name, profile_json, backend, checkpoint, "
            "changes_json, startup_s, ok, error, created_at, campaign_id, campaign_key, "
            "argv_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (host, profile_name, sql.dumps(dict(profile or {}, argv=argv)), backend, checkpoint,
             sql.dumps(dict(changes or {})), None, 0, "starting", created_at or time.time(), cid,
             key, sql.dumps(argv)))
        return int(cur.lastrowid or 0)


def end_launch(store: RunStore, launch_id: int, *, ok: bool, startup_s: float | None,
               error: str | None, pid: int | None, started_at: float | None = None,
               phases: Any = None) -> None:
    """``phases``: its startup phases ([{name, duration_s}], kept in the profile record)."""
    with store.transaction() as db:
        row = db.execute("SELECT profile_json FROM launches WHERE id = ?", (launch_id,)).fetchone()
        profile = dict(sql.loads(row["profile_json"]) or {}) if row else {}
        if pid is not None:
            profile["pid"] = pid
        if started_at is not None:
            profile["started_at"] = started_at
        if isinstance(phases, list):
            profile["phases"] = phases
        db.execute("UPDATE launches SET ok = ?, startup_s = ?, error = ?, pid = ?, "
                   "profile_json = ? WHERE id = ?",
                   (int(ok), startup_s, error, pid, sql.dumps(profile), launch_id))


def launch_for_pid(store: RunStore, host: str, pid: int | None,
                   started_at: float | None = None) -> int | None:
    """The stored launch of the server with this pid on ``host`` (newest), if any; with
    ``started_at`` (the host's clock) a launch of a reused pid that started at another time
    does not count."""
    if not pid:
        return None
    for r in store.query("SELECT id, pid, profile_json FROM launches WHERE host = ? "
                         "ORDER BY created_at DESC, id DESC LIMIT 200", (host,)):
        prof = sql.loads(r["profile_json"]) or {}
        if r["pid"] != pid and prof.get("pid") != pid:
            continue
        known = prof.get("started_at")
        if started_at is not None and isinstance(known, (int, float)) and \
                abs(float(known) - float(started_at)) > 5.0:
            continue
        return int(r["id"])
    return None


def add_sanity(store: RunStore, cid: str, seq: int, case: Mapping[str, Any], *, host: str,
               url: str | None, model: str | None, run_id: int | None) -> None:
    with store.transaction() as db:
        db.execute(
            "INSERT OR IGNORE INTO sanity_results (run_id, host, url, model, name, prompt, "
            "expect, answer, passed, latency_s, error_kind, error, created_at, campaign_id, "
            "journal_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, host, url, model, case.get("name"), case.get("prompt"), case.get("expect"),
             case.get("answer"), int(bool(case.get("passed"))), case.get("latency_s"),
             case.get("error_kind"), case.get("error"), case.get("t") or time.time(), cid, seq))


def finish_run(store: RunStore, run_id: int, status: str, reason: str | None,
               at: float | None) -> None:
    """A campaign run ended (the host's clock; applying it twice changes nothing)."""
    with store.transaction() as db:
        db.execute("UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                   (status, reason, at or time.time(), run_id))


def open_runs(store: RunStore, cid: str) -> list[int]:
    return [int(r["id"]) for r in store.query(
        "SELECT id FROM runs WHERE campaign_id = ? AND status = 'running'", (cid,))]


def set_run_meta(store: RunStore, run_id: int, **cols: Any) -> None:
    """Columns of a campaign run that RunStore.update_run does not cover."""
    allowed = {"meta_source", "argv_json", "server_args_json", "quantization",
               "attention_backend"}
    bad = set(cols) - allowed
    if bad:
        raise ValueError(f"unknown columns {sorted(bad)}")
    if not cols:
        return
    with store.transaction() as db:
        db.execute(*sql.update("runs", run_id, cols))


def set_canary(store: RunStore, run_id: int, canary: Mapping[str, Any]) -> None:
    """A run's accuracy canary (its summary; a later ``gate`` is merged in)."""
    import json

    rows = store.query("SELECT canary_json FROM runs WHERE id = ?", (run_id,))
    old: dict[str, Any] = {}
    if rows and rows[0]["canary_json"]:
        try:
            old = dict(json.loads(rows[0]["canary_json"]))
        except (ValueError, TypeError):
            old = {}
    with store.transaction() as db:
        db.execute("UPDATE runs SET canary_json = ? WHERE id = ?",
                   (json.dumps({**old, **canary}), run_id))


def canaries(store: RunStore, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """run id -> its stored canary (runs without one are left out)."""
    import json

    if not run_ids:
        return {}
    marks = ",".join("?" for _ in run_ids)
    out: dict[int, dict[str, Any]] = {}
    for row in store.query(f"SELECT id, canary_json FROM runs WHERE id IN ({marks}) AND "
                           "canary_json IS NOT NULL", list(run_ids)):
        try:
            out[int(row["id"])] = dict(json.loads(row["canary_json"]))
        except (ValueError, TypeError):
            continue
    return out
