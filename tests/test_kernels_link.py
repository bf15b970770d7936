"""A kernel capture is stored with the launch and load it measured, and linked to a run only
when it was taken during or right after that run on the same launch (issue 12, point 2)."""

from __future__ import annotations

import time
from pathlib import Path

from dsv4tui.core.campaign import kernels as kp
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import kernels as kernel_store

SUMMARY = {"type": "kernels", "basis": "decode", "families": [], "kernels": [],
           "load": {"concurrency": 16, "output_len": 1024},
           "server": {"backend": "triton", "checkpoint": "MXFP4"}}


def launch(store: RunStore, pid: int, backend: str) -> int:
    return store.record_launch("ct200", "nvfp4", {"model_path": "/m", "pid": pid}, backend,
                               "NVFP4", {}, 60.0, True, None)


def status(pid: int, backend: str) -> dict[str, object]:
    return {"type": "status", "state": "ready", "pid": pid,
            "profile": {"name": "nvfp4", "moe_runner_backend": backend, "checkpoint": "NVFP4"}}


def test_context_is_what_the_server_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        launch(store, 111, "triton")
        marlin = launch(store, 222, "marlin")
        ctx = kp.context_from_status(store, "ct200", status(222, "marlin"))
        assert (ctx.launch_id, ctx.server_pid, ctx.backend) == (marlin, 222, "marlin")
        # a server we did not launch (or that is down): no launch, no pid
        assert kp.context_from_status(store, "ct200", status(999, "marlin")).launch_id is None
        down = kp.context_from_status(store, "ct200", {"state": "stopped", "pid": 222})
        assert down.server_pid is None and down.launch_id is None


def test_linked_only_to_a_run_on_the_same_launch_during_or_right_after(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        old = launch(store, 111, "triton")
        new = launch(store, 222, "marlin")
        # the host's latest run is on the old launch (another backend) and was cancelled
        other = store.start_run(label="MXFP4_triton", host="ct200", backend="triton",
                                launch_id=old)
        store.finish_run(other, "cancelled")
        ctx = kp.context_from_status(store, "ct200", status(222, "marlin"))
        pid, run_id = kp.store_capture(store, SUMMARY, ctx, taken_at=time.time())
        assert run_id is None  # it was "the host's latest run" before
        stored = kernel_store.get_capture(store, pid)
        assert stored is not None and stored.run_id is None
        assert (stored.launch_id, stored.server_pid, stored.backend) == (new, 222, "marlin")
        assert stored.load == {"concurrency": 16, "output_len": 1024}
        assert stored.concurrency == 16 and stored.launch_text == f"launch {new}, pid 222, C=16"

        # a run on this launch that is running: linked
        run = store.start_run(label="NVFP4_marlin", host="ct200", backend="marlin",
                              launch_id=new)
        _, run_id = kp.store_capture(store, SUMMARY, ctx, taken_at=time.time())
        assert run_id == run
        # ended a minute ago: still its capture; ended an hour ago: not any more
        store.finish_run(run, "done")
        assert kp.run_for_capture(store, ctx, time.time() + 60) == run
        assert kp.run_for_capture(store, ctx, time.time() + 3600) is None
        # an explicit run (the CLI's --run) is kept, with what really ran
        _, run_id = kp.store_capture(store, SUMMARY, ctx, run_id=other, taken_at=time.time())
        assert run_id == other


def test_a_store_with_the_old_kernel_profiles_table_migrates(tmp_path: Path) -> None:
    """A store made before the rename (schema 5, ``kernel_profiles`` without the columns it
    gained later) opens as schema 6: the rows are in ``kernels`` with their ids, the new
    columns are there, the old table and its indexes are gone."""
    import sqlite3

    from dsv4tui.core.store import schema

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, str(path), target=5)
    db.execute("DROP TABLE kernel_profiles")  # as a store whose table predates launch_id ...
    db.execute("CREATE TABLE kernel_profiles (id INTEGER PRIMARY KEY, run_id INTEGER, "
               "host TEXT NOT NULL, url TEXT, model TEXT, backend TEXT, checkpoint TEXT, "
               "label TEXT, steps INTEGER, concurrency INTEGER, basis TEXT, "
               "decode_step_ms REAL, tensor_active_pct REAL, simulated INTEGER NOT NULL "
               "DEFAULT 0, created_at REAL NOT NULL, summary_json TEXT NOT NULL)")
    db.execute("INSERT INTO kernel_profiles (id, host, backend, created_at, summary_json) "
               "VALUES (7, 'ct200', 'triton', 1.0, '{\"basis\": \"decode\"}')")
    db.close()
    with RunStore(path) as store:
        assert store.schema_version == 8  # 8: kernels gained campaign_id, journal_seq
        old = kernel_store.get_capture(store, 7)
        assert old is not None and old.backend == "triton" and old.summary == {"basis": "decode"}
        new = kernel_store.save_capture(store, SUMMARY, host="ct200", server_pid=9)
        assert kernel_store.get_capture(store, new).server_pid == 9  # type: ignore[union-attr]
        names = {r[0] for r in store.query("SELECT name FROM sqlite_master")}
    assert "kernel_profiles" not in names and {"kernels", "kernels_by_run",
                                               "kernels_by_host", "kernels_by_journal"} <= names


def test_without_a_recorded_launch_the_server_start_decides(tmp_path: Path) -> None:
    """The dashboard's restarts may not record launches: then a run that started after the
    server process did (same host, same profile) is on this server; one before is not."""
    with RunStore(tmp_path / "s.db") as store:
        before = store.start_run(label="old", host="ct200", profile_name="nvfp4")
        store.finish_run(before, "done")
        started = time.time() + 0.01
        st = {**status(333, "marlin"), "started_at": started}
        ctx = kp.context_from_status(store, "ct200", st)
        assert ctx.launch_id is None and ctx.server_started_at == started
        assert kp.run_for_capture(store, ctx, time.time()) is None  # before this server
        time.sleep(0.02)
        run = store.start_run(label="new", host="ct200", profile_name="nvfp4")
        assert kp.run_for_capture(store, ctx, time.time()) == run
        other = kp.context_from_status(store, "ct200", {**st, "profile": {"name": "mxfp4"}})
        assert kp.run_for_capture(store, other, time.time()) is None  # another profile
