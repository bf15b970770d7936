"""A busy store never kills a sweep (#12): writes wait out another process's write lock.

A real second process holds ``BEGIN EXCLUSIVE`` longer than the store's busy timeout (the
timeouts are lowered here so that this takes seconds, not the 15 s of the report).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsv4tui.core.errors import EXIT_BUSY
from dsv4tui.core.store import RunStore, StoreBusy, StoreError, StoreWait

HOLDER = ("import sqlite3, sys, time\n"
          "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
          "db.execute('BEGIN EXCLUSIVE')\n"
          "db.execute('UPDATE runs SET label = label')\n"
          "print('locked', flush=True)\n"
          "time.sleep(float(sys.argv[2]))\n"
          "db.execute('COMMIT')\n")


def _req(index: int) -> dict:
    return {"level": 0, "index": index, "ok": True, "start_s": index * 0.1, "ttft_s": 0.05,
            "e2e_s": 0.5, "output_tokens": 10, "token_source": "usage", "chunks": 10,
            "chunk_gaps_ms": [5.0] * 9}


class Holder:
    """A process holding the store's write lock for ``seconds``."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == "locked\n", f"the lock holder did not start: {line!r}"
        self.t0 = time.monotonic()

    def wait(self) -> None:
        assert self.proc.wait(timeout=30) == 0


@pytest.mark.e2e
def test_writes_wait_out_a_lock_longer_than_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    heard: list[StoreWait | None] = []
    store = RunStore(path, busy_timeout_s=0.2, on_wait=heard.append)
    run = store.start_run(label="busy", host="h", plan={"levels": [[2, 24]]})
    for i in range(8):
        store.add_request(run, _req(i))
    holder = Holder(path, 1.5)  # 7x the busy timeout
    for i in range(8, 24):  # the first of these waits for the lock; nothing raises
        store.add_request(run, _req(i))
    waited = time.monotonic() - holder.t0
    store.finish_run(run, "done")
    holder.wait()
    assert waited >= 1.3
    assert len(store.requests(run)) == 24 and store.run(run).status == "done"  # type: ignore[union-attr]
    waits = [w for w in heard if w is not None]
    assert len(waits) >= 3 and heard[-1] is None and store.waiting is None
    assert waits[0].what == "write" and waits[-1].attempts == len(waits)
    assert waits[-1].message.startswith("waiting ") and "another process" in waits[-1].message
    store.close()
    db = sqlite3.connect(path)  # on disk, seen by another connection
    assert db.execute("SELECT count(*) FROM requests").fetchone()[0] == 24
    db.close()


@pytest.mark.e2e
def test_other_threads_read_while_a_write_waits(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = RunStore(path, busy_timeout_s=0.2)
    run = store.start_run(label="busy", host="h")
    holder = Holder(path, 1.5)
    writer = threading.Thread(target=store.add_request, args=(run, _req(0)))
    writer.start()
    deadline = time.monotonic() + 5
    while store.waiting is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.waiting is not None and store.waiting.waited_s > 0
    assert [r.id for r in store.runs()] == [run]
    # not stuck behind the waiting write: read while the write still waits for the lock
    assert writer.is_alive() and store.waiting is not None
    writer.join(10)
    holder.wait()
    assert not writer.is_alive() and len(store.requests(run)) == 1
    store.close()


@pytest.mark.e2e
def test_patience_bounds_the_wait_and_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = RunStore(path, busy_timeout_s=0.1, patience_s=0.5)
    run = store.start_run(label="busy", host="h")
    store.add_request(run, _req(0))
    holder = Holder(path, 2.5)
    t0 = time.monotonic()
    with pytest.raises(StoreBusy) as err:
        store.add_request(run, _req(1))
    assert time.monotonic() - t0 >= 0.4
    assert holder.proc.poll() is None  # gave up while the lock was still held (2.5 s)
    assert isinstance(err.value, StoreError) and err.value.exit_code == EXIT_BUSY
    assert "stayed locked by another process" in str(err.value) and "\n" not in str(err.value)
    assert store.waiting is None
    with store.transaction(patience_s=None):  # this once: wait as long as it takes
        store.add_request(run, _req(1))
    holder.wait()
    assert [r["index"] for r in store.requests(run)] == [0, 1]
    store.close()


@pytest.mark.e2e
def test_a_store_opens_and_reads_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        run = store.start_run(label="a", host="h")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = sqlite3.connect(path)
    host = db.execute("SELECT owner FROM runs").fetchone()[0].rsplit(":", 2)[0]
    db.execute("UPDATE runs SET owner = ?", (f"{host}:{dead.pid}:",))  # an orphan to mark
    db.commit()
    db.close()
    holder = Holder(path, 1.5)
    with RunStore(path, busy_timeout_s=0.2) as store:  # orphan marking waits for nobody
        [found] = store.runs()
        assert found.status == "running" and found.status_text.startswith("interrupted (console")
    assert holder.proc.poll() is None  # opened and read while the lock was held (1.5 s)
    holder.wait()
    with RunStore(path) as store:  # marked at the next open
        assert store.run(run).status == "interrupted"  # type: ignore[union-attr]


def test_nested_transactions_join_the_outer_one(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        run = store.start_run(label="tx", host="h")
        with store.transaction():
            store.add_request(run, _req(0))
            with store.transaction() as db:
                store.add_request(run, _req(1))
                assert db.in_transaction
        assert len(store.requests(run)) == 2
        with pytest.raises(RuntimeError), store.transaction():
            store.add_request(run, _req(2))
            store.finish_run(run, "done")
            raise RuntimeError("boom")
        assert len(store.requests(run)) == 2  # all or nothing
        assert store.run(run).status == "running"  # type: ignore[union-attr]
