"""RunStore: every run, level, request, sanity result and launch, in one SQLite file.

WAL journal, ``synchronous=NORMAL``: each write commits at once (a request row is on disk
before the next event is read), and a killed console loses nothing that committed. Runs
still ``running`` whose owning process is gone become ``interrupted`` when a store opens,
their unfinished level rebuilt from its stored requests. Safe to share between threads (one
lock) and processes (WAL).

A busy store never drops a write: when another process holds the write lock, a write waits
for it (SQLite's busy handler for ``busy_timeout_s`` at a time, then a short pause with the
thread lock released, then again) for up to ``patience_s`` in all, and says so meanwhile
(``on_wait`` callback, ``waiting`` attribute). Only past its patience does it raise
:class:`StoreBusy`. A file the process cannot write is opened read-only (``mode=ro``): it
reads as usual, skips migrations and orphan marking, and every write raises
:class:`StoreReadOnly`, one line.

A store whose file is deleted or replaced while it is open (another file at its path, or
none) would take every later write into a file nobody can read again: each write first checks
that the path still names the file it opened (device and inode) and raises
:class:`StoreReplaced` when it does not, so nothing more is written there.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dsv4tui.agent.bench import stats
from dsv4tui.core import paths
from dsv4tui.core.errors import EXIT_BUSY
from dsv4tui.core.store import schema, sql
from dsv4tui.core.store.models import Launch, Level, Run
from dsv4tui.core.store.owner import owner_alive, owner_token
from dsv4tui.core.store.schema import NotInStore, StoreError

__all__ = ["RunStore", "StoreBusy", "StoreReadOnly", "StoreReplaced", "StoreWait", "owner_alive",
           "owner_token"]

T = TypeVar("T")

_REQUEST_COLS = ("ok", "start_s", "ttft_s", "ttfat_s", "e2e_s", "tpot_s", "output_tokens",
                 "prompt_tokens", "token_source", "chunks", "finish_reason", "status",
                 "error_kind", "error")
_GPU_COLS = ("frames", "util_mean", "util_max", "tensor_mean", "tensor_max", "sm_mean", "sm_max",
             "dram_mean", "dram_max", "power_mean_w", "power_max_w")
_RUN_FIELDS = {"label", "url", "model", "server_version", "sanity_passed", "error", "backend",
               "checkpoint", "launch_id", "profile_name", "simulated"}

READ_ONLY_ENV = "DSV4TUI_STORE_READ_ONLY"  # 1: open the store read-only whatever the file allows
DEFAULT_PATIENCE_S = 600.0
_PAUSE_S = (0.05, 0.1, 0.2, 0.4, 0.5)  # between attempts, the thread lock released
_DEFAULT: Any = object()


def _loads_list(text: Any) -> list[Any]:
    value = sql.loads(text)
    return [v for v in value if isinstance(v, (int, float))] if isinstance(value, list) else []


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _code(exc: BaseException) -> int:
    code = getattr(exc, "sqlite_errorcode", None)
    return code if isinstance(code, int) else -1


def _is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY (any extended code): another connection holds the lock."""
    return _code(exc) & 0xFF == sqlite3.SQLITE_BUSY or "database is locked" in str(exc)


def _is_read_only(exc: sqlite3.Error) -> bool:
    return (_code(exc) & 0xFF == sqlite3.SQLITE_READONLY
            or "readonly database" in str(exc) or "read-only" in str(exc))


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than the store's patience."""

    exit_code = EXIT_BUSY


class StoreReadOnly(StoreError):
    """A write to a store that was opened read-only (or whose file refuses writes)."""


class StoreReplaced(StoreError):
    """The store's path no longer names the file this process opened (deleted, or another
    file moved there): writes would go into a file nobody reads, so none is made."""


def _file_id(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` (None when there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


@dataclass(frozen=True)
class StoreWait:
    """A write (or read) waiting for the lock another process holds (``RunStore.waiting``)."""

    path: str
    what: str  # "write", "commit", "read", "open"
    since: float  # time.monotonic() when the wait began (the first attempt)
    attempts: int  # failed attempts so far
    patience_s: float | None  # how long it waits in all before StoreBusy (None: forever)

    @property
    def waited_s(self) -> float:
        return max(0.0, time.monotonic() - self.since)

    @property
    def message(self) -> str:
        return (f"waiting {self.waited_s:.0f} s for the store lock held by another process "
                f"({self.path})")


def _env_read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV, "").strip().lower() in ("1", "true", "yes")


def _writable(path: Path) -> bool:
    """Can this process write the store (the file, and the directory for its -wal/-shm)?"""
    if not os.access(path, os.W_OK):
        return False
    if os.access(path.parent, os.W_OK):
        return True
    wal, shm = (path.with_name(path.name + sfx) for sfx in ("-wal", "-shm"))
    return os.access(wal, os.W_OK) and os.access(shm, os.W_OK)


class RunStore:
    """Open (creating and migrating) the store at ``path`` (default: paths.store_file()).

    ``read_only``: None (default) opens read-only when the file is not writable (or
    ``$DSV4TUI_STORE_READ_ONLY`` is 1); True always; False never. ``patience_s``: how long a
    write waits in all for another process's lock (None: forever). ``busy_timeout_s``: how
    long SQLite waits inside one attempt, so how often ``on_wait`` hears (with a
    :class:`StoreWait` while waiting, then once with None when the write went through).
    """

    def __init__(self, path: Path | str | None = None, *, read_only: bool | None = None,
                 patience_s: float | None = DEFAULT_PATIENCE_S, busy_timeout_s: float = 1.0,
                 on_wait: Callable[[StoreWait | None], None] | None = None) -> None:
        self.path = Path(path) if path else paths.store_file()
        self.patience_s = patience_s
        self.busy_timeout_s = max(0.0, float(busy_timeout_s))
        self.on_wait = on_wait
        self.waiting: StoreWait | None = None  # read it from any thread
        self._lock = threading.RLock()
        self._depth = 0  # nesting of _tx (inner blocks join the outer transaction)
        self._cols: dict[str, set[str]] = {}
        if read_only is None:
            read_only = _env_read_only() or (self.path.exists() and not _writable(self.path))
        self.read_only = bool(read_only)
        self.read_only_reason: str | None = None
        self._db = self._connect()
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            found = self._retry(lambda: schema.check_version(self._db, str(self.path)), "open")
            self.schema_found = found  # the version the file had when opened
            if self.read_only:
                self._db.execute("PRAGMA foreign_keys = ON")
                if found < schema.LATEST:
                    self.read_only_reason = (
                        (self.read_only_reason or "opened read-only") + f"; its schema {found} "
                        f"is older than this dsv4tui's {schema.LATEST}: upgrading it needs write "
                        "access, reading shows what it has")
            else:
                self._retry(lambda: self._db.execute("PRAGMA journal_mode = WAL"), "open")
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._db.execute("PRAGMA foreign_keys = ON")
                self._retry(lambda: schema.migrate(self._db, str(self.path)), "open")
            self._cols = schema.tables(self._db)  # an older file, read-only, lacks some
            self._file = _file_id(str(self.path))  # the file opened (see check_same_file)
            if not self.read_only:
                # best effort: a store another process keeps locked still opens for reading
                with contextlib.suppress(StoreBusy):
                    self.mark_orphans_interrupted(patience_s=self.busy_timeout_s)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"cannot use the run store {self.path}: {exc} (the file was "
                             "left as it is)") from None
        except BaseException:
            self._db.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        if not self.read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                return sqlite3.connect(self.path, timeout=self.busy_timeout_s,
                                       isolation_level=None, check_same_thread=False)
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(f"cannot open the run store {self.path}: {exc}") from None
        if not self.path.exists():
            raise StoreError(f"no run store at {self.path} (opened read-only, so it cannot be "
                             "made)")
        if not os.access(self.path, os.W_OK):
            self.read_only_reason = "the file is not writable by this user"
        elif _env_read_only():
            self.read_only_reason = f"${READ_ONLY_ENV} is set"
        elif not os.access(self.path.parent, os.W_OK):
            self.read_only_reason = "its directory is not writable by this user"
        else:
            self.read_only_reason = "opened read-only"
        uri = self.path.resolve().as_uri()
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=self.busy_timeout_s,
                                 isolation_level=None, check_same_thread=False)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):  # a writer elsewhere: reads wait for it like any other
                    return db
                # a WAL file in a directory it may not write: SQLite cannot make the -shm.
                # With no -wal beside it (the last writer closed cleanly) the file alone is
                # the whole store, and immutable=1 reads it without the -shm.
                db.close()
                if wal.exists() and wal.stat().st_size > 0:
                    raise
            return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True,
                                   isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot read the run store {self.path} read-only: {exc} (its "
                             "-wal holds writes that need write access to the directory to "
                             "read)" if wal.exists() else
                             f"cannot read the run store {self.path} read-only: {exc}") from None

    def has(self, table: str, column: str | None = None) -> bool:
        """The file has ``table`` (and ``column``): an older one, opened read-only, may not."""
        cols = self._cols.get(table)
        return cols is not None and (column is None or column in cols)

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tell(self, wait: StoreWait | None) -> None:
        self.waiting = wait
        if self.on_wait is not None:
            try:
                self.on_wait(wait)
            except Exception:  # a broken listener must not cost a write
                pass

    def _retry(self, fn: Callable[[], T], what: str, patience_s: float | None = _DEFAULT) -> T:
        """``fn()``, again while SQLite says busy, for up to the patience in all.

        Called with the thread lock held (or before the store is shared); between attempts
        it is released unless a transaction is open, so other threads can read meanwhile.
        """
        patience = self.patience_s if patience_s is _DEFAULT else patience_s
        since: float | None = None
        attempts = 0
        while True:
            try:
                result = fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                now = time.monotonic()
                if since is None:
                    since = now - self.busy_timeout_s  # SQLite already waited that long
                attempts += 1
                if patience is not None and now - since >= patience:
                    self._tell(None)
                    raise StoreBusy(f"the run store {self.path} stayed locked by another "
                                    f"process for {now - since:.0f} s (patience "
                                    f"{patience:.0f} s); this {what} did not happen") from None
                self._tell(StoreWait(str(self.path), what, since, attempts, patience))
                pause = _PAUSE_S[min(attempts, len(_PAUSE_S)) - 1]
                if patience is not None:
                    pause = max(0.0, min(pause, since + patience - now))
                self._pause(pause)
                continue
            if since is not None:
                self._tell(None)
            return result

    def _pause(self, seconds: float) -> None:
        """Sleep, letting other threads use the store meanwhile unless a transaction is open."""
        if self._depth:
            time.sleep(seconds)
            return
        try:
            self._lock.release()
        except RuntimeError:  # not held (the store is still opening)
            time.sleep(seconds)
            return
        try:
            time.sleep(seconds)
        finally:
            self._lock.acquire()

    def check_same_file(self) -> None:
        """Raise StoreReplaced when the store's path no longer names the file opened."""
        now = _file_id(str(self.path))
        if now == self._file:
            return
        was = self._file or (0, 0)
        what = ("deleted" if now is None else "replaced by another file (device/inode "
                f"{now[0]}/{now[1]}, opened as {was[0]}/{was[1]})")
        if not self.read_only and not self._db.in_transaction:
            # this connection's -wal is still at the path: emptied into the file it belongs
            # to, so SQLite does not replay it into whatever store is at the path now (it would
            # hide that store's own rows)
            with self._lock, contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raise StoreReplaced(f"the run store {self.path} was {what} while this process had it "
                            "open; nothing more is written to the file it opened")

    def require_writable(self) -> None:
        """Raise StoreReadOnly now (before asking the user anything) when writes will fail."""
        if self.read_only:
            raise self._read_only_error()

    def _read_only_error(self, detail: str | None = None) -> StoreReadOnly:
        why = self.read_only_reason or detail or "the file refuses writes"
        return StoreReadOnly(f"the run store {self.path} is read-only ({why}); nothing was "
                             "written")

    @contextmanager
    def _tx(self, patience_s: float | None = _DEFAULT) -> Iterator[sqlite3.Connection]:
        """One committed write; nested uses join the outer transaction (all or nothing).

        BEGIN and COMMIT wait for another process's lock (see :meth:`_retry`)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._db
                finally:
                    self._depth -= 1
                return
            if self.read_only:
                raise self._read_only_error()
            self.check_same_file()
            try:
                self._retry(lambda: self._db.execute("BEGIN IMMEDIATE"), "write", patience_s)
            except sqlite3.Error as exc:
                if _is_read_only(exc):
                    raise self._read_only_error(str(exc)) from None
                raise StoreError(f"run store {self.path}: {exc}") from None
            try:
                self._depth = 1
                yield self._db
                self._retry(lambda: self._db.execute("COMMIT"), "commit", patience_s)
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if _is_read_only(exc):
                    raise self._read_only_error(str(exc)) from None
                raise StoreError(f"run store {self.path}: {exc}") from None
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        values = tuple(args)
        with self._lock:
            try:
                return self._retry(lambda: self._db.execute(sql, values).fetchall(), "read")
            except sqlite3.Error as exc:
                raise StoreError(f"run store {self.path}: {exc}") from None

    def query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Read rows (for modules that keep their own tables in the store, e.g. profiles)."""
        return self._query(sql, args)

    def transaction(self, patience_s: float | None = _DEFAULT
                    ) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """``with store.transaction() as db: db.execute(...)``: one committed write. Store
        methods called inside join it, so several writes commit together or not at all.
        It waits for another process's lock like every write (``patience_s``: this once)."""
        return self._tx(patience_s)

    @property
    def schema_version(self) -> int:
        with self._lock:
            return schema.version(self._db)

    def info(self) -> dict[str, Any]:
        """Where the store is and what it holds (``dsv4tui store info``)."""
        wal = self.path.with_name(self.path.name + "-wal")
        runs = self._query("SELECT count(*) AS n, max(id) AS last FROM runs")[0]
        return {"path": str(self.path), "bytes": _size(self.path), "wal_bytes": _size(wal),
                "schema_version": self.schema_version, "schema_latest": schema.LATEST,
                "runs": runs["n"], "last_run_id": runs["last"], "read_only": self.read_only,
                "read_only_reason": self.read_only_reason}

    def backup(self, path: Path | str, *, force: bool = False) -> dict[str, Any]:
        """Write a consistent copy of the whole store to ``path``, one self-contained file.

        SQLite's online backup API, from this connection: what the -wal holds is in the copy,
        writers elsewhere may go on meanwhile (it copies one snapshot). The copy is written
        next to ``path`` and renamed onto it when complete, so ``path`` is never half a store;
        an existing ``path`` is refused unless ``force``. Returns what was written: path, runs,
        bytes, schema_version.
        """
        dest = Path(path).expanduser()
        if dest.exists() and dest.resolve() == self.path.resolve():
            raise StoreError(f"{dest} is the run store itself; back it up to another file")
        if dest.is_dir():
            raise StoreError(f"{dest} is a directory; give the backup a file name")
        if dest.exists() and not force:
            raise StoreError(f"{dest} exists; pass --force to overwrite it")
        if not dest.parent.is_dir():
            raise StoreError(f"cannot write the backup {dest}: no directory {dest.parent}")
        tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
        try:
            out = sqlite3.connect(tmp, isolation_level=None)
            try:
                with self._lock:
                    self._retry(lambda: self._db.backup(out), "read")
                out.execute("PRAGMA journal_mode = DELETE")  # one file: no -wal to carry
                check = out.execute("PRAGMA quick_check").fetchone()[0]
                if check != "ok":
                    raise StoreError(f"the backup {dest} did not check out ({check}); not kept")
                runs = int(out.execute("SELECT count(*) FROM runs").fetchone()[0])
                version = schema.version(out)
            finally:
                out.close()
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            if force:  # a stale -wal beside the old file must not be read into the new one
                for sfx in ("-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        dest.with_name(dest.name + sfx).unlink()
            os.replace(tmp, dest)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot write the backup {dest}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        return {"path": str(dest), "runs": runs, "bytes": dest.stat().st_size,
                "schema_version": version, "source": str(self.path)}

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
                (label, host, url, model, profile_name, sql.dumps(profile), backend, checkpoint,
                 launch_id, server_version, sql.dumps(gpu_names or []), sql.dumps(plan), time.time(),
                 "running", owner_token(), int(simulated)))
            return int(cur.lastrowid or 0)

    def update_run(self, run_id: int, **fields: Any) -> None:
        bad = set(fields) - _RUN_FIELDS - {"gpu_names"}
        if bad:
            raise ValueError(f"unknown run fields: {', '.join(sorted(bad))}")
        cols = {("gpu_names_json" if k == "gpu_names" else k):
                (sql.dumps(v) if k == "gpu_names" else v) for k, v in fields.items()}
        if not cols:
            return
        with self._tx() as db:
            db.execute(*sql.update("runs", run_id, cols))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET status = ?, error = coalesce(?, error), finished_at = ? "
                       "WHERE id = ?", (status, error, time.time(), run_id))

    def mark_orphans_interrupted(self, patience_s: float | None = _DEFAULT) -> list[int]:
        """Runs left ``running`` by a process that is gone become ``interrupted``, each with
        the level it was measuring rebuilt from its stored requests (partial, rebuilt)."""
        if self.read_only:
            return []
        # a campaign's runs belong to its runner on the host: the journal says how they end
        rows = self._query("SELECT id, owner FROM runs WHERE status = 'running'" +
                           (" AND campaign_id IS NULL" if self.has("runs", "campaign_id")
                            else ""))
        dead = [r["id"] for r in rows if not owner_alive(r["owner"])]
        for run_id in dead:
            with self._tx(patience_s) as db:
                for level in self._missing_levels(run_id):
                    self.add_level(run_id, level.stats)
                last = db.execute("SELECT max(finished_at) FROM levels WHERE run_id = ?",
                                  (run_id,)).fetchone()[0]
                db.execute("UPDATE runs SET status = 'interrupted', finished_at = coalesce(?, "
                           "started_at), error = coalesce(error, 'the console stopped before "
                           "the run finished') WHERE id = ? AND status = 'running'",
                           (last, run_id))
        return dead

    def delete_run(self, run_id: int) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0

    def runs(self, host: str | None = None, label: str | None = None,
             limit: int | None = None) -> list[Run]:
        """Newest first, each with ``best_tok_s`` (the highest level output tok/s)."""
        return [Run.from_row(r) for r in self._query(*sql.select(
            "SELECT runs.*, (SELECT max(output_tok_s) FROM levels WHERE run_id = runs.id "
            "AND typeof(output_tok_s) IN ('real', 'integer')) AS best_tok_s FROM runs",
            {"host": host, "label": label}, order="started_at DESC, id DESC", limit=limit))]

    def run(self, run_id: int) -> Run | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        return Run.from_row(rows[0]) if rows else None

    def find_run(self, ref: str | int) -> Run:
        """A run by id, or the newest with that label; StoreError if none."""
        text = str(ref).strip()
        if text.isdigit():
            run = self.run(int(text))
            if run is None:
                raise NotInStore(f"no run with id {text} (see `dsv4tui runs list`)")
            return run
        found = self.runs(label=text, limit=1)
        if not found:
            raise NotInStore(f"no run with id or label {text!r} (see `dsv4tui runs list`)")
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
                 sql.dumps(event.get("chunk_gaps_ms")), *values))

    def requests(self, run_id: int, level_idx: int | None = None) -> list[dict[str, Any]]:
        """Request rows as dicts in the ``request`` event's shape (stats.level_metrics input)."""
        out = []
        for r in self._query(*sql.select("SELECT * FROM requests",
                                         {"run_id": run_id, "level_idx": level_idx},
                                         order="level_idx, start_s, idx")):
            d = {c: r[c] for c in _REQUEST_COLS}
            gaps = _loads_list(r["chunk_gaps_json"])
            d.update(level=r["level_idx"], index=r["idx"], ok=bool(r["ok"]), chunk_gaps_ms=gaps)
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
                 sql.dumps(dict(level))))

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
        """The run's levels by index, each normalised (models.normalise_level). A level whose
        requests are stored but whose level event never came (a killed console, or the level
        still running) is rebuilt from them, marked ``partial`` and ``rebuilt``."""
        by_idx = {lv.idx: lv for lv in (Level.from_row(r) for r in self._query(
            "SELECT * FROM levels WHERE run_id = ? ORDER BY idx", (run_id,)))}
        for lv in self._missing_levels(run_id):
            by_idx.setdefault(lv.idx, lv)
        levels = [by_idx[i] for i in sorted(by_idx)]
        gpus: dict[int, list[dict[str, Any]]] = {}
        if self.has("level_gpus"):
            for r in self._query("SELECT * FROM level_gpus WHERE run_id = ? "
                                 "ORDER BY level_idx, gpu", (run_id,)):
                gpus.setdefault(r["level_idx"], []).append(
                    {"gpu": r["gpu"], **{c: r[c] for c in _GPU_COLS}})
        for lv in levels:
            lv.gpus = gpus.get(lv.idx, [])
        return levels

    def _missing_levels(self, run_id: int) -> list[Level]:
        """Levels with stored requests and no level row, from the requests and the run's plan
        (C and n of ``plan.levels[idx]``); a level the plan does not name is left out (its
        requests stay in ``requests``/export)."""
        missing = [r[0] for r in self._query(
            "SELECT DISTINCT level_idx FROM requests WHERE run_id = ? AND level_idx NOT IN "
            "(SELECT idx FROM levels WHERE run_id = ?) ORDER BY level_idx", (run_id, run_id))]
        if not missing:
            return []
        run = self.run(run_id)
        planned = (run.plan or {}).get("levels") if run is not None else None
        out = []
        for idx in missing:
            try:
                c, n = (int(x) for x in planned[idx])  # type: ignore[index]
            except (TypeError, ValueError, IndexError, KeyError):
                continue
            level = stats.level_metrics(self.requests(run_id, idx), c, n)
            level.update(level=idx, partial=True, rebuilt=True)
            out.append(Level.from_stats(run_id, level))
        return out

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
        rows = self._query(*sql.select("SELECT * FROM sanity_results",
                                       {"run_id": run_id, "host": host},
                                       order="created_at DESC, id", limit=limit))
        return [{**dict(r), "passed": bool(r["passed"])} for r in rows]

    # --- launches ------------------------------------------------------------------------

    def record_launch(self, host: str, profile_name: str | None, profile: Mapping[str, Any] | None,
                      backend: str | None, checkpoint: str | None, changes: Mapping[str, Any],
                      startup_s: float | None, ok: bool, error: str | None) -> int:
        """One server launch (the server-control side calls this); returns its id."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO launches (host, profile_name, profile_json, backend, checkpoint, "
                "changes_json, startup_s, ok, error, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (host, profile_name, sql.dumps(profile), backend, checkpoint,
                 sql.dumps(dict(changes or {})), startup_s, int(bool(ok)), error, time.time()))
            return int(cur.lastrowid or 0)

    def launch(self, launch_id: int) -> Launch | None:
        """One recorded server launch by id (None: not there, or an older file without them)."""
        if not self.has("launches"):
            return None
        rows = self._query("SELECT * FROM launches WHERE id = ?", (launch_id,))
        return Launch.from_row(rows[0]) if rows else None

    def launches(self, host: str | None = None, limit: int | None = None) -> list[Launch]:
        """Newest first."""
        if not self.has("launches"):  # an older file, read-only
            return []
        return [Launch.from_row(r) for r in self._query(*sql.select(
            "SELECT * FROM launches", {"host": host}, order="created_at DESC, id DESC",
            limit=limit))]
