"""RunStore: every run, level, request, sanity result and launch, in one SQLite file.

WAL journal, ``synchronous=NORMAL``: each write commits at once (a request row is on disk
before the next event is read), and a killed console loses nothing that committed. Runs
still ``running`` whose owning process is gone become ``interrupted`` when a store opens.
Safe to share between threads (one lock) and processes (WAL + busy timeout).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsv4tui import paths
from dsv4tui.store import schema
from dsv4tui.store.models import Launch, Level, Run
from dsv4tui.store.schema import StoreError

_REQUEST_COLS = ("ok", "start_s", "ttft_s", "ttfat_s", "e2e_s", "tpot_s", "output_tokens",
                 "prompt_tokens", "token_source", "chunks", "finish_reason", "status",
                 "error_kind", "error")
_GPU_COLS = ("frames", "util_mean", "util_max", "tensor_mean", "tensor_max", "sm_mean", "sm_max",
             "dram_mean", "dram_max", "power_mean_w", "power_max_w")
_RUN_FIELDS = {"label", "url", "model", "server_version", "sanity_passed", "error", "backend",
               "checkpoint", "launch_id", "profile_name", "simulated"}


def _dumps(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":"), default=str)


def _proc_start(pid: int) -> str:
    """The process's start time in clock ticks (Linux), so a reused pid is not mistaken."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_token(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_proc_start(pid)}"


def owner_alive(token: str | None) -> bool:
    """False when the owner ran on this machine and is gone; True when unsure."""
    if not token:
        return False
    try:
        host, pid_s, start = token.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or _proc_start(pid) == start


class RunStore:
    """Open (creating and migrating) the store at ``path`` (default: paths.store_file())."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else paths.store_file()
        self._lock = threading.RLock()
        self._depth = 0  # nesting of _tx (inner blocks join the outer transaction)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                                       check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the run store {self.path}: {exc}") from None
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA busy_timeout = 10000")
            schema.check_version(self._db, str(self.path))  # before anything writes
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            schema.migrate(self._db, str(self.path))
            self.mark_orphans_interrupted()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"cannot use the run store {self.path}: {exc} (the file was "
                             "left as it is)") from None
        except BaseException:
            self._db.close()
            raise

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One committed write; nested uses join the outer transaction (all or nothing)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._db
                finally:
                    self._depth -= 1
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._depth = 1
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"run store {self.path}: {exc}") from None
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, tuple(args)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"run store {self.path}: {exc}") from None

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Read rows (for modules that keep their own tables in the store, e.g. profiles)."""
        return self._query(sql, args)

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """``with store.transaction() as db: db.execute(...)``: one committed write. Store
        methods called inside join it, so several writes commit together or not at all."""
        return self._tx()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return schema.version(self._db)

    # --- runs ----------------------------------------------------------------------------

    def start_run(self, *, label: str, host: str, url: str | None = None,
                  model: str | None = None, profile_name: str | None = None,
                  profile: Mapping[str, Any] | None = None, backend: str | None = None,
                  checkpoint: str | None = None, launch_id: int | None = None,
                  server_version: str | None = None, gpu_names: list[str] | None = None,
                  plan: Mapping[str, Any] | None = None, simulated: bool = False) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (label, host, url, model, profile_name, profile_json, backend, "
                "checkpoint, launch_id, server_version, gpu_names_json, plan_json, started_at, "
                "status, owner, simulated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (label, host, url, model, profile_name, _dumps(profile), backend, checkpoint,
                 launch_id, server_version, _dumps(gpu_names or []), _dumps(plan), time.time(),
                 "running", owner_token(), int(simulated)))
            return int(cur.lastrowid or 0)

    def update_run(self, run_id: int, **fields: Any) -> None:
        bad = set(fields) - _RUN_FIELDS - {"gpu_names"}
        if bad:
            raise ValueError(f"unknown run fields: {', '.join(sorted(bad))}")
        cols = {("gpu_names_json" if k == "gpu_names" else k):
                (_dumps(v) if k == "gpu_names" else v) for k, v in fields.items()}
        if not cols:
            return
        with self._tx() as db:
            db.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in cols)} WHERE id = ?",
                       (*cols.values(), run_id))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, error = coalesce(?, error), finished_at = ? "
                       "WHERE id = ?", (status, error, time.time(), run_id))

    def mark_orphans_interrupted(self) -> list[int]:
        """Runs left ``running`` by a process that is gone become ``interrupted``."""
        # a campaign's runs belong to its runner on the host: the journal says how they end
        rows = self._query("SELECT id, owner FROM runs WHERE status = 'running' "
                           "AND campaign_id IS NULL")
        dead = [r["id"] for r in rows if not owner_alive(r["owner"])]
        for run_id in dead:
            last = self._query("SELECT max(finished_at) AS t FROM levels WHERE run_id = ?",
                               (run_id,))[0]["t"]
            with self._tx() as db:
                db.execute("UPDATE runs SET status = 'interrupted', finished_at = coalesce(?, "
                           "started_at), error = coalesce(error, 'the console stopped before "
                           "the run finished') WHERE id = ?", (last, run_id))
        return dead

    def delete_run(self, run_id: int) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0

    def runs(self, host: str | None = None, label: str | None = None,
             limit: int | None = None) -> list[Run]:
        """Newest first, each with ``best_tok_s`` (the highest level output tok/s)."""
        where: list[str] = []
        args: list[Any] = []
        if host is not None:
            where.append("host = ?")
            args.append(host)
        if label is not None:
            where.append("label = ?")
            args.append(label)
        sql = ("SELECT runs.*, (SELECT max(output_tok_s) FROM levels WHERE run_id = runs.id) "
               "AS best_tok_s FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY started_at DESC, id DESC")
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [Run.from_row(r) for r in self._query(sql, args)]

    def run(self, run_id: int) -> Run | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        return Run.from_row(rows[0]) if rows else None

    def find_run(self, ref: str | int) -> Run:
        """A run by id, or the newest with that label; StoreError if none."""
        text = str(ref).strip()
        if text.isdigit():
            run = self.run(int(text))
            if run is None:
                raise StoreError(f"no run with id {text} (see `dsv4tui runs list`)")
            return run
        found = self.runs(label=text, limit=1)
        if not found:
            raise StoreError(f"no run with id or label {text!r} (see `dsv4tui runs list`)")
        return found[0]

    # --- levels and requests -------------------------------------------------------------

    def add_request(self, run_id: int, event: Mapping[str, Any]) -> None:
        """Store one ``request`` event (committed before returning)."""
        values = [event.get(c) for c in _REQUEST_COLS]
        values[0] = int(bool(event.get("ok")))
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO requests (run_id, level_idx, idx, chunk_gaps_json, "
                f"{', '.join(_REQUEST_COLS)}) VALUES (?,?,?,?,{','.join('?' * len(_REQUEST_COLS))})",
                (run_id, int(event.get("level") or 0), int(event.get("index") or 0),
                 _dumps(event.get("chunk_gaps_ms")), *values))

    def requests(self, run_id: int, level_idx: int | None = None) -> list[dict[str, Any]]:
        """Request rows as dicts in the ``request`` event's shape (stats.level_metrics input)."""
        sql = "SELECT * FROM requests WHERE run_id = ?"
        args: list[Any] = [run_id]
        if level_idx is not None:
            sql += " AND level_idx = ?"
            args.append(level_idx)
        out = []
        for r in self._query(sql + " ORDER BY level_idx, start_s, idx", args):
            d = {c: r[c] for c in _REQUEST_COLS}
            d.update(level=r["level_idx"], index=r["idx"], ok=bool(r["ok"]),
                     chunk_gaps_ms=json.loads(r["chunk_gaps_json"] or "[]"))
            out.append(d)
        return out

    def add_level(self, run_id: int, level: Mapping[str, Any]) -> None:
        """Store (or replace) one ``level`` event."""
        ttft, tpot = level.get("ttft_ms") or {}, level.get("tpot_ms") or {}
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO levels (run_id, idx, concurrency, requests, completed, "
                "errors, duration_s, output_tokens, output_tok_s, ttft_mean_ms, tpot_mean_ms, "
                "token_count_source, started_at, finished_at, partial, stats_json) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, int(level.get("level") or 0), int(level["concurrency"]),
                 int(level.get("requests") or 0), level.get("completed"), level.get("errors"),
                 level.get("duration_s"), level.get("output_tokens"), level.get("output_tok_s"),
                 ttft.get("mean"), tpot.get("mean"), level.get("token_count_source"),
                 level.get("started_at"), level.get("finished_at"), int(bool(level.get("partial"))),
                 _dumps(dict(level))))

    def set_level_gpus(self, run_id: int, level_idx: int,
                       gpus: Iterable[Mapping[str, Any]]) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM level_gpus WHERE run_id = ? AND level_idx = ?",
                       (run_id, level_idx))
            for g in gpus:
                db.execute(f"INSERT INTO level_gpus (run_id, level_idx, gpu, {', '.join(_GPU_COLS)})"
                           f" VALUES (?,?,?,{','.join('?' * len(_GPU_COLS))})",
                           (run_id, level_idx, int(g["gpu"]), *(g.get(c) for c in _GPU_COLS)))

    def levels(self, run_id: int) -> list[Level]:
        levels = [Level.from_row(r) for r in
                  self._query("SELECT * FROM levels WHERE run_id = ? ORDER BY idx", (run_id,))]
        gpus: dict[int, list[dict[str, Any]]] = {}
        for r in self._query("SELECT * FROM level_gpus WHERE run_id = ? ORDER BY level_idx, gpu",
                             (run_id,)):
            gpus.setdefault(r["level_idx"], []).append(
                {"gpu": r["gpu"], **{c: r[c] for c in _GPU_COLS}})
        for lv in levels:
            lv.gpus = gpus.get(lv.idx, [])
        return levels

    # --- sanity --------------------------------------------------------------------------

    def add_sanity(self, cases: Iterable[Mapping[str, Any]], *, host: str, url: str | None = None,
                   model: str | None = None, run_id: int | None = None) -> None:
        now = time.time()
        with self._tx() as db:
            for c in cases:
                db.execute(
                    "INSERT INTO sanity_results (run_id, host, url, model, name, prompt, expect, "
                    "answer, passed, latency_s, error_kind, error, created_at) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, host, url, model, c.get("name"), c.get("prompt"), c.get("expect"),
                     c.get("answer"), int(bool(c.get("passed"))), c.get("latency_s"),
                     c.get("error_kind"), c.get("error"), now))

    def sanity_results(self, run_id: int | None = None, host: str | None = None,
                       limit: int = 100) -> list[dict[str, Any]]:
        where: list[str] = []
        args: list[Any] = []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if host is not None:
            where.append("host = ?")
            args.append(host)
        sql = ("SELECT * FROM sanity_results" + (" WHERE " + " AND ".join(where) if where else "")
               + f" ORDER BY created_at DESC, id LIMIT {int(limit)}")
        return [{**dict(r), "passed": bool(r["passed"])} for r in self._query(sql, args)]

    # --- launches ------------------------------------------------------------------------

    def record_launch(self, host: str, profile_name: str | None, profile: Mapping[str, Any] | None,
                      backend: str | None, checkpoint: str | None, changes: Mapping[str, Any],
                      startup_s: float | None, ok: bool, error: str | None) -> int:
        """One server launch (the server-control side calls this); returns its id."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO launches (host, profile_name, profile_json, backend, checkpoint, "
                "changes_json, startup_s, ok, error, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (host, profile_name, _dumps(profile), backend, checkpoint,
                 _dumps(dict(changes or {})), startup_s, int(bool(ok)), error, time.time()))
            return int(cur.lastrowid or 0)

    def launches(self, host: str | None = None, limit: int | None = None) -> list[Launch]:
        """Newest first."""
        sql = "SELECT * FROM launches" + (" WHERE host = ?" if host is not None else "")
        sql += " ORDER BY created_at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit else "")
        return [Launch.from_row(r) for r in self._query(sql, [host] if host is not None else [])]

    def latest_launch(self, host: str, profile_name: str | None = None) -> Launch | None:
        for launch in self.launches(host):
            if launch.ok and (profile_name is None or launch.profile_name == profile_name):
                return launch
        return None
