"""The run store's schema, versioned with ``PRAGMA user_version``.

MIGRATIONS[i] takes a database from version i to i + 1, inside one transaction together with
the new user_version, so a crash mid-migration leaves the old version intact. Never edit a
released migration: append a new one. A step is an SQL statement, or a function of the
connection for what SQL alone cannot say safely (rebuilding a table from its own definition).
Migrations run with foreign keys off (a rebuilt parent table must not cascade-delete its
children); one with a function step must not add a single broken reference, or it is undone.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from dsv4tui.core.errors import NotFoundError, UserError

Step = str | Callable[[sqlite3.Connection], None]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# What migration 2 -> 3 made (released: never edit; 5 -> 6 renames it and adds columns).
_KERNEL_PROFILES_V3: tuple[str, ...] = (
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

# Columns the kernel table gained after 2 -> 3 shipped (added on first use until 5 -> 6).
_KERNELS_LATER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("launch_id", "INTEGER"), ("server_pid", "INTEGER"), ("load_json", "TEXT"))


def _kernels_table(conn: sqlite3.Connection) -> None:
    """``kernel_profiles`` -> ``kernels`` (the word "profile" means a launch profile only),
    with every column it gained later, and its indexes renamed. Rows and ids are kept."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "kernel_profiles" not in have:
        for statement in _KERNEL_PROFILES_V3:
            conn.execute(statement)
    conn.execute("DROP INDEX IF EXISTS kernel_profiles_by_run")
    conn.execute("DROP INDEX IF EXISTS kernel_profiles_by_host")
    conn.execute("ALTER TABLE kernel_profiles RENAME TO kernels")
    cols = {row[1] for row in conn.execute("PRAGMA table_info(kernels)")}
    for name, kind in _KERNELS_LATER_COLUMNS:
        if name not in cols:
            conn.execute(f"ALTER TABLE kernels ADD COLUMN {name} {kind}")
    conn.execute("CREATE INDEX kernels_by_run ON kernels(run_id, created_at)")
    conn.execute("CREATE INDEX kernels_by_host ON kernels(host, created_at)")


def _runs_autoincrement(conn: sqlite3.Connection) -> None:
    """Rebuild ``runs`` with ``id INTEGER PRIMARY KEY AUTOINCREMENT``: run ids never reused.

    Why a rebuild and not a counter table: with a plain INTEGER PRIMARY KEY SQLite gives a
    new row max(id) + 1, so deleting the newest run hands its id to the next one; a counter
    only helps the inserts that read it, while AUTOINCREMENT (sqlite_sequence, which keeps the
    highest id ever, across deletes, reopening and VACUUM) covers every INSERT, the lead's
    campaign ingestion included, and no writer has to know. The new table is made from the
    table's own stored definition (SQLite keeps every ALTER TABLE ADD COLUMN in it), so every
    column, default and reference of any earlier migration is carried over as it is; the
    indexes are made again from theirs. Foreign keys are off (migrate), so dropping the old
    table does not cascade into levels / requests / sanity_results / level_gpus, and
    references to ``runs`` by name resolve to the new table once it is renamed.
    """
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
                       ).fetchone()
    if row is None or "AUTOINCREMENT" in str(row[0]).upper():
        return
    new_sql, n = re.subn(r'^\s*CREATE\s+TABLE\s+(?:"runs"|runs)\s*\(\s*id\s+INTEGER\s+PRIMARY'
                         r"\s+KEY\b", "CREATE TABLE runs_rebuilt (id INTEGER PRIMARY KEY "
                         "AUTOINCREMENT", str(row[0]), flags=re.IGNORECASE)
    if n != 1:
        raise StoreError("cannot upgrade the run store: its runs table is not the one this "
                         "dsv4tui made (the file was left as it is)")
    extras = [r[0] for r in conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'runs' AND type IN ('index', 'trigger') "
        "AND sql IS NOT NULL ORDER BY type, name")]
    cols = ", ".join(_quote(r[1]) for r in conn.execute("PRAGMA table_info(runs)"))
    conn.execute(new_sql)
    conn.execute(f"INSERT INTO runs_rebuilt ({cols}) SELECT {cols} FROM runs ORDER BY id")
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_rebuilt RENAME TO runs")
    for sql in extras:
        conn.execute(sql)


MIGRATIONS: list[tuple[Step, ...]] = [
    # 0 -> 1: runs, levels, requests, sanity results
    (
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            label TEXT NOT NULL,
            host TEXT NOT NULL,
            url TEXT,
            model TEXT,
            profile_name TEXT,
            profile_json TEXT,
            server_version TEXT,
            gpu_names_json TEXT,
            plan_json TEXT,
            started_at REAL NOT NULL,
            finished_at REAL,
            status TEXT NOT NULL,
            error TEXT,
            owner TEXT,
            sanity_passed INTEGER,
            simulated INTEGER NOT NULL DEFAULT 0)""",
        """CREATE TABLE levels (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            concurrency INTEGER NOT NULL,
            requests INTEGER NOT NULL,
            completed INTEGER,
            errors INTEGER,
            duration_s REAL,
            output_tokens INTEGER,
            output_tok_s REAL,
            ttft_mean_ms REAL,
            tpot_mean_ms REAL,
            token_count_source TEXT,
            started_at REAL,
            finished_at REAL,
            partial INTEGER NOT NULL DEFAULT 0,
            stats_json TEXT NOT NULL,
            PRIMARY KEY (run_id, idx))""",
        """CREATE TABLE requests (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            level_idx INTEGER NOT NULL,
            idx INTEGER NOT NULL,
            ok INTEGER NOT NULL,
            start_s REAL,
            ttft_s REAL,
            ttfat_s REAL,
            e2e_s REAL,
            tpot_s REAL,
            output_tokens INTEGER,
            prompt_tokens INTEGER,
            token_source TEXT,
            chunks INTEGER,
            chunk_gaps_json TEXT,
            finish_reason TEXT,
            status INTEGER,
            error_kind TEXT,
            error TEXT,
            PRIMARY KEY (run_id, level_idx, idx))""",
        """CREATE TABLE sanity_results (
            id INTEGER PRIMARY KEY,
            run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
            host TEXT NOT NULL,
            url TEXT,
            model TEXT,
            name TEXT,
            prompt TEXT,
            expect TEXT,
            answer TEXT,
            passed INTEGER NOT NULL,
            latency_s REAL,
            error_kind TEXT,
            error TEXT,
            created_at REAL NOT NULL)""",
    ),
    # 1 -> 2: launches, the launch/backend/checkpoint of a run, GPU summaries per level
    (
        """CREATE TABLE launches (
            id INTEGER PRIMARY KEY,
            host TEXT NOT NULL,
            profile_name TEXT,
            profile_json TEXT,
            backend TEXT,
            checkpoint TEXT,
            changes_json TEXT,
            startup_s REAL,
            ok INTEGER NOT NULL,
            error TEXT,
            created_at REAL NOT NULL)""",
        "ALTER TABLE runs ADD COLUMN launch_id INTEGER REFERENCES launches(id) ON DELETE SET NULL",
        "ALTER TABLE runs ADD COLUMN backend TEXT",
        "ALTER TABLE runs ADD COLUMN checkpoint TEXT",
        """CREATE TABLE level_gpus (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            level_idx INTEGER NOT NULL,
            gpu INTEGER NOT NULL,
            frames INTEGER NOT NULL,
            util_mean REAL, util_max REAL,
            tensor_mean REAL, tensor_max REAL,
            sm_mean REAL, sm_max REAL,
            dram_mean REAL, dram_max REAL,
            power_mean_w REAL, power_max_w REAL,
            PRIMARY KEY (run_id, level_idx, gpu))""",
        "CREATE INDEX runs_by_host ON runs(host, started_at)",
        "CREATE INDEX launches_by_host ON launches(host, created_at)",
        "CREATE INDEX sanity_by_run ON sanity_results(run_id)",
    ),
    # 2 -> 3: kernel captures, then called kernel captures (IF NOT EXISTS: a store whose table
    # the kernels module made before this migration existed migrates cleanly); 5 -> 6 renames it
    _KERNEL_PROFILES_V3,
    # 3 -> 4: campaigns (host-side runners and their journals), what a run really ran
    (
        """CREATE TABLE campaigns (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'campaign',
            spec_json TEXT,
            state TEXT NOT NULL,
            journal_offset INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL,
            ended_at REAL,
            error TEXT,
            detail_json TEXT)""",
        "CREATE INDEX campaigns_by_host ON campaigns(host, created_at)",
        "ALTER TABLE runs ADD COLUMN campaign_id TEXT REFERENCES campaigns(id) ON DELETE SET NULL",
        "ALTER TABLE runs ADD COLUMN campaign_key TEXT",
        "ALTER TABLE runs ADD COLUMN variant TEXT",
        "ALTER TABLE runs ADD COLUMN repeat_idx INTEGER",
        "ALTER TABLE runs ADD COLUMN quantization TEXT",
        "ALTER TABLE runs ADD COLUMN attention_backend TEXT",
        "ALTER TABLE runs ADD COLUMN argv_json TEXT",
        "ALTER TABLE runs ADD COLUMN server_args_json TEXT",
        "ALTER TABLE runs ADD COLUMN meta_source TEXT",
        "CREATE UNIQUE INDEX runs_by_campaign_key ON runs(campaign_id, campaign_key)",
        "ALTER TABLE launches ADD COLUMN campaign_id TEXT REFERENCES campaigns(id) "
        "ON DELETE SET NULL",
        "ALTER TABLE launches ADD COLUMN campaign_key TEXT",
        "ALTER TABLE launches ADD COLUMN pid INTEGER",
        "ALTER TABLE launches ADD COLUMN argv_json TEXT",
        "CREATE UNIQUE INDEX launches_by_campaign_key ON launches(campaign_id, campaign_key)",
        "ALTER TABLE sanity_results ADD COLUMN campaign_id TEXT",
        "ALTER TABLE sanity_results ADD COLUMN journal_seq INTEGER",
        "CREATE UNIQUE INDEX sanity_by_journal ON sanity_results(campaign_id, journal_seq)",
    ),
    # 4 -> 5: run ids are never reused (runs rebuilt with AUTOINCREMENT; see the function)
    (_runs_autoincrement,),
    # 5 -> 6: the kernel_profiles table becomes kernels, with the columns added after it shipped
    (_kernels_table,),
    # 6 -> 7: a run's accuracy canary (share correct, Wilson interval, its items' answers)
    ("ALTER TABLE runs ADD COLUMN canary_json TEXT",),
    # 7 -> 8: a campaign's kernel capture per variant, stored once per journal event
    ("ALTER TABLE kernels ADD COLUMN campaign_id TEXT",
     "ALTER TABLE kernels ADD COLUMN journal_seq INTEGER",
     "CREATE UNIQUE INDEX kernels_by_journal ON kernels(campaign_id, journal_seq)"),
]

LATEST = len(MIGRATIONS)


class StoreError(UserError):
    """The run store cannot be opened or used (one line, never a traceback)."""


class NotInStore(StoreError, NotFoundError):
    """No run (or kernel capture) with the id or label given (exit 2)."""


def version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The tables the file has and their columns (an older file, read-only, lacks some)."""
    out: dict[str, set[str]] = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        out[name] = {r[1] for r in conn.execute(f"PRAGMA table_info({_quote(name)})")}
    return out


def check_version(conn: sqlite3.Connection, where: str) -> int:
    """The file's schema version; StoreError when it is newer than this code knows."""
    found = version(conn)
    if found > LATEST:
        raise StoreError(f"the run store {where} has schema version {found}, newer than this "
                         f"dsv4tui knows ({LATEST}); upgrade dsv4tui (the file was not touched)")
    return found


def migrate(conn: sqlite3.Connection, where: str, target: int = LATEST) -> int:
    """Bring the database up to ``target``; returns the version it had. ``conn`` must be in
    autocommit mode (isolation_level=None)."""
    start = check_version(conn, where)
    if start >= target:
        return start
    fk = int(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    conn.execute("PRAGMA foreign_keys = OFF")  # only outside a transaction; see the docstring
    try:
        for v in range(start, target):
            conn.execute("BEGIN IMMEDIATE")
            try:
                if version(conn) != v:  # another process migrated it meanwhile
                    conn.execute("ROLLBACK")
                    continue
                rebuild = any(callable(step) for step in MIGRATIONS[v])
                broken = len(conn.execute("PRAGMA foreign_key_check").fetchall()) if rebuild else 0
                for step in MIGRATIONS[v]:
                    if callable(step):
                        step(conn)
                    else:
                        conn.execute(step)
                if rebuild and len(conn.execute("PRAGMA foreign_key_check").fetchall()) > broken:
                    raise StoreError(f"upgrading the run store {where} to schema {v + 1} would "
                                     "break references between its tables; it was not upgraded")
                conn.execute(f"PRAGMA user_version = {v + 1}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
    finally:
        conn.execute(f"PRAGMA foreign_keys = {fk}")
    return start
