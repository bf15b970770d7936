"""``dsv4tui store backup`` (#13): one consistent file, with what the -wal holds."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.core import paths
from dsv4tui.core.store import SCHEMA_VERSION, RunStore, StoreError
from dsv4tui.main import main

ROOT = Path(__file__).resolve().parents[1]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsv4tui", *argv], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)


def _runs_in(path: Path) -> int:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.OperationalError:  # not even the table made it
        return 0
    finally:
        db.close()


@pytest.mark.e2e
def test_a_backup_holds_what_the_wal_holds(tmp_path: Path) -> None:
    src = paths.store_file()
    store = RunStore(src)
    store.query("PRAGMA wal_autocheckpoint = 0")  # everything stays in the -wal
    for i in range(9):
        run = store.start_run(label=f"r{i}", host="h")
        store.add_request(run, {"level": 0, "index": 0, "ok": True, "start_s": 0.0})
    wal = src.with_name(src.name + "-wal")
    assert wal.stat().st_size > 0
    copy = tmp_path / "copied.sqlite3"  # what the report did: the main file alone, by `cp`
    # (another process: closing a descriptor of the live file here would drop SQLite's locks)
    subprocess.run(["cp", str(src), str(copy)], check=True)
    assert _runs_in(copy) < 9

    out = tmp_path / "backup.sqlite3"
    proc = _cli("store", "backup", str(out))  # another process, the store still open here
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: 9 runs, ") and "schema" in proc.stdout
    assert not out.with_name(out.name + "-wal").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    db = sqlite3.connect(out)  # plain sqlite3, the file alone
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 9
    assert db.execute("SELECT count(*) FROM requests").fetchone()[0] == 9
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()

    before = out.read_bytes()  # an existing file is not overwritten without --force
    proc = _cli("store", "backup", str(out))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"dsv4tui: error: {out} exists; pass --force to overwrite it"]
    assert out.read_bytes() == before
    store.start_run(label="tenth", host="h")
    proc = _cli("store", "backup", str(out), "--force", "--json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["runs"] == 10 and done["bytes"] == out.stat().st_size
    assert done["path"] == str(out) and done["schema_version"] == SCHEMA_VERSION
    assert _runs_in(out) == 10
    store.close()


def test_backup_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    assert main(["store", "backup", str(tmp_path / "b.db")]) == 1  # no store yet
    assert "no run store at" in capsys.readouterr().err
    with RunStore() as store:
        store.start_run(label="a", host="h")
    for target, says in ((tmp_path / "no" / "such" / "dir.db", "no directory"),
                         (tmp_path, "is a directory"),
                         (paths.store_file(), "is the run store itself")):
        assert main(["store", "backup", str(target), "--force"]) == 1
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, err
    assert main(["store", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["runs"] == 1 and info["read_only"] is False and info["last_run_id"] == 1


def test_backup_api_from_a_read_only_store(tmp_path: Path) -> None:
    src = tmp_path / "s.db"
    with RunStore(src) as store:
        for i in range(3):
            store.start_run(label=f"r{i}", host="h")
    with RunStore(src, read_only=True) as store:
        done = store.backup(tmp_path / "b.db")
        assert done["runs"] == 3
        with pytest.raises(StoreError, match="exists"):
            store.backup(tmp_path / "b.db")
    with RunStore(tmp_path / "b.db") as restored:  # a backup is a store like any other
        assert [r.label for r in restored.runs()] == ["r2", "r1", "r0"]
        assert restored.start_run(label="next", host="h") == 4
