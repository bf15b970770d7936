"""Run ids are never reused (#13): across deletes, reopening, and the 4 -> 5 migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dsv4tui.core.store import SCHEMA_VERSION, RunStore, schema


def test_ids_are_monotonic_across_deletes_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        ids = [store.start_run(label=f"r{i}", host="h") for i in range(4)]
        assert ids == [1, 2, 3, 4]
        assert store.delete_run(4)
        assert store.start_run(label="next", host="h") == 5  # not 4 again
        for run in store.runs():
            store.delete_run(run.id)
        assert store.runs() == []
    with RunStore(path) as store:
        assert store.start_run(label="after", host="h") == 6  # the highest ever was 5
    db = sqlite3.connect(path)  # another writer's plain INSERT follows the same rule
    db.execute("DELETE FROM runs")
    db.execute("INSERT INTO runs (label, host, started_at, status) VALUES ('x', 'h', 0, 'done')")
    assert db.execute("SELECT max(id) FROM runs").fetchone()[0] == 7
    db.close()


def _table_shape(db: sqlite3.Connection, table: str) -> list[tuple]:
    return [tuple(r) for r in db.execute(f"PRAGMA table_info({table})")]


def test_migration_to_autoincrement_keeps_every_column_row_and_reference(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, str(path), target=4)
    shape_before = _table_shape(db, "runs")
    fks_before = [tuple(r) for r in db.execute("PRAGMA foreign_key_list(runs)")]
    db.execute("INSERT INTO campaigns (id, host, name, state, created_at) "
               "VALUES ('c1', 'ct200', 'moe', 'running', 1.0)")
    db.execute("INSERT INTO launches (host, ok, created_at) VALUES ('ct200', 1, 1.0)")
    for i in (1, 2, 3):
        db.execute("INSERT INTO runs (id, label, host, started_at, status, launch_id, backend, "
                   "campaign_id, campaign_key, variant, argv_json, plan_json) "
                   "VALUES (?, ?, 'ct200', ?, 'done', 1, 'marlin', 'c1', ?, 'v', '[\"-m\"]', "
                   "'{\"levels\": [[1, 2]]}')", (i, f"r{i}", float(i), f"k{i}"))
        db.execute("INSERT INTO levels (run_id, idx, concurrency, requests, stats_json) "
                   "VALUES (?, 0, 1, 2, '{}')", (i,))
        db.execute("INSERT INTO requests (run_id, level_idx, idx, ok) VALUES (?, 0, 0, 1)", (i,))
        db.execute("INSERT INTO level_gpus (run_id, level_idx, gpu, frames) VALUES (?, 0, 0, 3)",
                   (i,))
        db.execute("INSERT INTO sanity_results (run_id, host, passed, created_at) "
                   "VALUES (?, 'ct200', 1, 1.0)", (i,))
        db.execute("INSERT INTO kernel_profiles (run_id, host, created_at, summary_json) "
                   "VALUES (?, 'ct200', 1.0, '{}')", (i,))
    rows_before = [tuple(r) for r in db.execute("SELECT * FROM runs ORDER BY id")]
    db.close()

    with RunStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 8
        assert [r.id for r in store.runs()] == [3, 2, 1]
        assert store.run(2).campaign_id == "c1"  # type: ignore[union-attr]
        assert store.start_run(label="new", host="ct200") == 4
        assert store.delete_run(4) and store.delete_run(3)
        assert store.start_run(label="newer", host="ct200") == 5
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys = ON")
    assert "AUTOINCREMENT" in db.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    # same columns, types, defaults, key -- plus what later migrations add (7: canary_json)
    assert [c for c in _table_shape(db, "runs") if c[1] != "canary_json"] == shape_before
    assert [tuple(r) for r in db.execute("PRAGMA foreign_key_list(runs)")] == fks_before
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'runs' "
                                     "AND type = 'index' AND sql IS NOT NULL")} == {
        "runs_by_host", "runs_by_campaign_key"}
    assert [tuple(r)[:len(rows_before[0])]  # (7 added canary_json at the end)
            for r in db.execute("SELECT * FROM runs WHERE id < 3 ORDER BY id")] == rows_before[:2]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    for table in ("levels", "requests", "level_gpus", "sanity_results"):  # 3's went with it
        assert db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 2, table
    assert db.execute("SELECT count(*) FROM kernels WHERE run_id IS NULL"
                      ).fetchone()[0] == 1  # ON DELETE SET NULL still holds
    db.execute("DELETE FROM runs WHERE id = 1")  # and ON DELETE CASCADE
    assert db.execute("SELECT count(*) FROM levels").fetchone()[0] == 1
    db.close()
