"""RunStore on real SQLite files: schema, migrations, orphans, launches, GPU summaries."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core import paths
from dsv4tui.core.campaign.compare import compare_runs
from dsv4tui.core.store import SCHEMA_VERSION, GpuWindow, RunStore, StoreError, schema


def _request(level: int, index: int, ok: bool = True, **kw: object) -> dict:
    ev = {"type": "request", "level": level, "concurrency": 2, "index": index, "ok": ok,
          "start_s": 0.1 * index, "ttft_s": 0.05 if ok else None, "ttfat_s": 0.06 if ok else None,
          "e2e_s": 0.5, "tpot_s": 0.01, "output_tokens": 46 if ok else 0, "prompt_tokens": 10,
          "token_source": "usage", "chunks": 46 if ok else 0,
          "chunk_gaps_ms": [10.0] * 45 if ok else [], "finish_reason": "length",
          "status": 200 if ok else 500, "error_kind": None if ok else "http_500",
          "error": None if ok else "boom"}
    ev.update(kw)
    return ev


def test_fresh_store_is_wal_and_latest(tmp_path: Path) -> None:
    with RunStore() as store:
        assert store.path == paths.store_file()
        assert store.schema_version == SCHEMA_VERSION
        run_id = store.start_run(label="a", host="local", url="http://x", plan={"levels": [[1, 2]]})
        assert store.run(run_id).status == "running"  # type: ignore[union-attr]
    db = sqlite3.connect(paths.store_file())
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_requests_round_trip_and_level_recompute(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.start_run(label="r", host="h1")
        events = [_request(0, i) for i in range(3)] + [_request(0, 3, ok=False)]
        for ev in events:
            store.add_request(run_id, ev)
        rows = store.requests(run_id, 0)
        assert [r["index"] for r in rows] == [0, 1, 2, 3]
        assert rows[0]["chunk_gaps_ms"] == [10.0] * 45 and rows[3]["ok"] is False
        assert stats.level_metrics(rows, 2, 4) == stats.level_metrics(events, 2, 4)
        level = {**stats.level_metrics(events, 2, 4), "level": 0, "started_at": 100.0,
                 "finished_at": 101.0}
        store.add_level(run_id, level)
        [lv] = store.levels(run_id)
        assert lv.concurrency == 2 and lv.output_tok_s == level["output_tok_s"]
        assert lv.stats["errors_by_kind"] == {"http_500": 1}


def test_gpu_window_and_level_gpus(tmp_path: Path) -> None:
    win = GpuWindow()
    for t, util, power in ((99.0, 0, 100), (100.0, 50, 300), (100.5, 100, 500), (102.0, 7, 1)):
        win.add({"type": "frame", "time": t, "gpus": [
            {"index": 0, "util_gpu": util, "tensor_active": 0.8, "sm_active": None,
             "dram_active": 30, "power_w": power},
            {"index": 1, "util_gpu": util, "tensor_active": None, "sm_active": 90,
             "dram_active": 40, "power_w": power}]})
    assert not win.add({"type": "hello"}) and not win.add({"type": "frame", "time": "x"})
    gpus = win.summary(100.0, 101.0)
    assert [g["gpu"] for g in gpus] == [0, 1] and gpus[0]["frames"] == 2
    assert gpus[0]["util_mean"] == 75 and gpus[0]["util_max"] == 100
    assert gpus[0]["power_mean_w"] == 400 and gpus[0]["power_max_w"] == 500
    assert gpus[0]["sm_mean"] is None and gpus[1]["tensor_mean"] is None  # N/A, never 0
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.start_run(label="g", host="h")
        store.add_level(run_id, {**stats.level_metrics([_request(0, 0)], 1), "level": 0})
        store.set_level_gpus(run_id, 0, gpus)
        [lv] = store.levels(run_id)
        assert lv.power_w == 800 and lv.tensor_mean == pytest.approx(0.8)
        assert lv.tok_s_per_kw == pytest.approx(lv.output_tok_s / 0.8)  # type: ignore[operator]


def test_migration_from_v1_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, str(path), target=1)
    db.execute("INSERT INTO runs (label, host, started_at, status) VALUES ('old', 'h', 1.0, 'done')")
    db.close()
    with RunStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION >= 3
        [run] = store.runs()
        assert run.label == "old" and run.backend is None and run.launch_id is None
        launch = store.record_launch("h", "p", {"port": 1}, "marlin", "NVFP4", {"x": 1}, 12.5,
                                     True, None)
        store.update_run(run.id, launch_id=launch, backend="marlin")
        assert store.run(run.id).launch_id == launch  # type: ignore[union-attr]


def test_newer_or_corrupt_file_is_one_clear_error_and_untouched(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    db.commit()
    db.close()
    before = newer.read_bytes()
    with pytest.raises(StoreError, match="newer than this dsv4tui"):
        RunStore(newer)
    assert newer.read_bytes() == before
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot use the run store"):
        RunStore(junk)
    assert junk.read_bytes() == b"this is not sqlite" * 100


@pytest.mark.e2e
def test_orphaned_running_runs_become_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with RunStore(path) as store:
        mine = store.start_run(label="mine", host="h")
        orphan = store.start_run(label="orphan", host="h")
        store.add_request(orphan, _request(0, 0))
    db = sqlite3.connect(path)
    token = db.execute("SELECT owner FROM runs WHERE id = ?", (orphan,)).fetchone()[0]
    host, _, _ = token.rsplit(":", 2)
    db.execute("UPDATE runs SET owner = ? WHERE id = ?", (f"{host}:{dead.pid}:", orphan))
    db.commit()
    db.close()
    with RunStore(path) as store:
        assert store.run(mine).status == "running"  # type: ignore[union-attr]  # we are alive
        gone = store.run(orphan)
        assert gone is not None and gone.status == "interrupted" and gone.error
        assert len(store.requests(orphan)) == 1


def test_launches_sanity_find_delete(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        a = store.record_launch("h", "p", {"port": 1}, "triton", "MXFP4", {}, 80.0, True, None)
        b = store.record_launch("h", "p", {"port": 1}, "marlin", "NVFP4", {"moe": "marlin"},
                                None, False, "OOM")
        store.record_launch("other", None, None, None, None, {}, 1.0, True, None)
        assert [x.id for x in store.launches("h")] == [b, a]
        assert store.launches("h")[0].error == "OOM" and store.launches("h")[0].changes
        run_id = store.start_run(label="lbl", host="h", launch_id=a)
        store.add_sanity([{"name": "c", "prompt": "p", "expect": "e", "answer": "391",
                           "passed": True, "latency_s": 0.1}], host="h", run_id=run_id)
        store.add_request(run_id, _request(0, 0))
        assert store.find_run("lbl").id == run_id == store.find_run(str(run_id)).id
        with pytest.raises(StoreError, match="no run with id 999"):
            store.find_run("999")
        assert store.sanity_results(run_id=run_id)[0]["passed"] is True
        assert store.delete_run(run_id) and not store.delete_run(run_id)
        assert store.requests(run_id) == [] and store.sanity_results(run_id=run_id) == []
        assert len(store.launches()) == 3  # launches outlive runs


def test_compare_runs_changes_against_the_first(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        ids = []
        for label, tok_s, ttft in (("base", 100.0, 200.0), ("new", 125.0, 150.0)):
            run_id = store.start_run(label=label, host="h")
            lv = {**stats.level_metrics([_request(0, 0)], 16), "level": 0}
            lv["output_tok_s"], lv["ttft_ms"] = tok_s, {"mean": ttft, "p50": ttft}
            store.add_level(run_id, lv)
            ids.append(run_id)
        base, new = compare_runs(store, [str(i) for i in ids]).rows()
        assert base.concurrency == new.concurrency == 16 and base.is_baseline
        assert base.changes["output_tok_s"] == 0.0 and new.changes["output_tok_s"] == 25.0
        assert new.changes["ttft_p50_ms"] == -25.0 and new.changes["tok_s_per_kw"] is None


@pytest.mark.e2e
def test_a_killed_writer_loses_no_committed_request(tmp_path: Path) -> None:
    """Commit per request: a process SIGKILLed right after add_request returns keeps it."""
    path = tmp_path / "s.db"
    code = (f"import os, signal\nfrom dsv4tui.core.store import RunStore\n"
            f"s = RunStore({str(path)!r})\nr = s.start_run(label='k', host='h')\n"
            "for i in range(50):\n"
            "    s.add_request(r, {'level': 0, 'index': i, 'ok': True, 'start_s': 0.0})\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.returncode == -9
    with RunStore(path) as store:
        [run] = store.runs()
        assert run.status == "interrupted"
        assert len(store.requests(run.id)) == 50
