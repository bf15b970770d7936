"""A read-only store (#13): reading works, nothing is migrated or marked, a write is one line."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.core import paths
from dsv4tui.core.store import SCHEMA_VERSION, RunStore, StoreError, StoreReadOnly, schema
from dsv4tui.core.store.runstore import READ_ONLY_ENV

ROOT = Path(__file__).resolve().parents[1]
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _req(level: int, index: int) -> dict:
    return {"level": level, "index": index, "ok": True, "start_s": 0.1 * index, "ttft_s": 0.05,
            "e2e_s": 0.5, "output_tokens": 10, "token_source": "usage", "chunks": 10,
            "chunk_gaps_ms": [5.0] * 9}


def _seed(path: Path, orphan: bool = True) -> int:
    """A finished run with a level, plus (``orphan``) a run whose console is gone."""
    with RunStore(path) as store:
        done = store.start_run(label="done", host="h", plan={"levels": [[1, 2]]})
        store.add_request(done, _req(0, 0))
        store.add_level(done, {"level": 0, "concurrency": 1, "requests": 2, "output_tok_s": 5.0})
        store.add_sanity([{"name": "c", "passed": True}], host="h", run_id=done)
        store.record_launch("h", "p", None, "marlin", None, {}, 1.0, True, None)
        store.finish_run(done, "done")
        if not orphan:
            return done
        lost = store.start_run(label="lost", host="h", plan={"levels": [[2, 4]]})
        store.add_request(lost, _req(0, 0))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = sqlite3.connect(path)
    host = db.execute("SELECT owner FROM runs WHERE id = ?", (lost,)).fetchone()[0].rsplit(":", 2)[0]
    db.execute("UPDATE runs SET owner = ? WHERE id = ?", (f"{host}:{dead.pid}:", lost))
    db.commit()
    db.close()
    return lost


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.e2e
def test_an_explicit_read_only_open_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    lost = _seed(path)
    before = _digest(path)
    with RunStore(path, read_only=True) as store:
        assert store.read_only and store.read_only_reason
        runs = {r.label: r for r in store.runs()}
        assert runs["lost"].status == "running"  # not marked: that is a write
        assert runs["lost"].status_text.startswith("interrupted (console pid")
        [lv] = store.levels(lost)  # its unfinished level, rebuilt in memory
        assert lv.partial and lv.rebuilt and lv.concurrency == 2
        assert store.levels(runs["done"].id)[0].output_tok_s == 5.0
        assert store.sanity_results(run_id=runs["done"].id)[0]["passed"] is True
        assert store.launches()[0].backend == "marlin"
        for write in (lambda: store.start_run(label="x", host="h"),
                      lambda: store.add_request(lost, _req(0, 1)),
                      lambda: store.delete_run(lost)):
            with pytest.raises(StoreReadOnly, match="is read-only") as err:
                write()
            assert "\n" not in str(err.value)
    assert _digest(path) == before
    with pytest.raises(StoreError, match="no run store at"):
        RunStore(tmp_path / "missing.db", read_only=True)


def test_an_older_schema_reads_read_only_and_says_upgrading_needs_write_access(
        tmp_path: Path) -> None:
    for target in (1, 2):
        path = tmp_path / f"v{target}.db"
        db = sqlite3.connect(path, isolation_level=None)
        schema.migrate(db, str(path), target=target)
        db.execute("INSERT INTO runs (label, host, started_at, status) "
                   "VALUES ('old', 'h', 1.0, 'done')")
        db.execute("INSERT INTO levels (run_id, idx, concurrency, requests, output_tok_s, "
                   "stats_json) VALUES (1, 0, 4, 8, 20.0, '{\"output_tok_s\": 20.0}')")
        db.close()
        with RunStore(path, read_only=True) as store:
            [run] = store.runs()
            assert run.best_tok_s == 20.0 and run.backend is None and run.campaign_id is None
            [lv] = store.levels(run.id)
            assert lv.output_tok_s == 20.0 and lv.gpus == []
            assert store.launches() == [] or target >= 2
            assert store.schema_version == target
            with pytest.raises(StoreReadOnly, match="upgrading it needs write access"):
                store.finish_run(run.id, "done")
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA user_version").fetchone()[0] == target  # untouched
        db.close()
    with RunStore(tmp_path / "v1.db") as store:  # with write access it upgrades as ever
        assert store.schema_version == SCHEMA_VERSION


def _cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsv4tui", *argv], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          timeout=60)


@pytest.mark.e2e
def test_the_cli_reads_a_read_only_store(tmp_path: Path) -> None:
    lost = _seed(paths.store_file())
    before = _digest(paths.store_file())
    env = {READ_ONLY_ENV: "1"}
    for argv in (["runs", "list"], ["runs", "show", str(lost)], ["runs", "show", "1", "--json"],
                 ["runs", "export", "1", "--format", "csv"], ["store", "info"]):
        proc = _cli(*argv, **env)
        assert proc.returncode == 0 and proc.stdout and not proc.stderr, (argv, proc.stderr)
    proc = _cli("runs", "delete", "1", **env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "is read-only" in proc.stderr
    assert _digest(paths.store_file()) == before


@pytest.mark.skipif(AS_ROOT, reason="root ignores permission bits")
def test_a_store_nobody_may_write_opens_read_only_by_itself(tmp_path: Path) -> None:
    data = tmp_path / "ro"
    data.mkdir()
    path = data / "runs.sqlite3"
    _seed(path, orphan=False)  # closed cleanly: no -wal, no -shm
    path.chmod(0o444)
    data.chmod(0o555)  # not even a -shm can be made: read as an immutable file
    try:
        with RunStore(path) as store:
            assert store.read_only and "not writable" in (store.read_only_reason or "")
            assert [r.label for r in store.runs()] == ["done"]
            with pytest.raises(StoreReadOnly):
                store.start_run(label="x", host="h")
        proc = _cli("runs", "list", DSV4TUI_DATA_DIR=str(data))
        assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    finally:
        data.chmod(0o755)
        path.chmod(0o644)
