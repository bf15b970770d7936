"""Tolerant readers (#13): stored rows with missing, null, older or broken fields read in the
full shape, and every `runs` command on them exits 0 without a traceback."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore, normalise_level, schema

ROOT = Path(__file__).resolve().parents[1]

ODD_STATS = [
    '{"concurrency": 1}',  # nothing measured
    '{"ttft_ms": null, "tpot_ms": 5, "itl_ms": "fast", "output_tok_s": "12", '
    '"errors_by_kind": [1], "completed": "x", "e2e_ms": {"mean": "slow", "p99": 3}}',
    "not json at all",
    "[1, 2, 3]",
    '{"concurrency": 16, "requests": 8, "completed": 8, "output_tok_s": 99.5, '
    '"ttft_ms": {"mean": 120.0}}',  # an older level: fewer fields, no percentiles
    '{"ttft_ms": {"mean": NaN, "p50": Infinity}, "duration_s": true}',
]


def _hand_made(path: Path) -> tuple[int, int]:
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, str(path))
    db.execute("INSERT INTO runs (id, label, host, started_at, status, gpu_names_json, "
               "plan_json, profile_json) VALUES (1, 'odd', 'ct200', 1.0, 'done', 'oops', "
               "'\"a string\"', '[1]')")
    for idx, blob in enumerate(ODD_STATS):
        db.execute("INSERT INTO levels (run_id, idx, concurrency, requests, ttft_mean_ms, "
                   "completed, stats_json) VALUES (1, ?, ?, 8, ?, ?, ?)",
                   (idx, idx + 1, 77.0 if idx == 0 else None, 5 if idx == 0 else None, blob))
    db.execute("INSERT INTO level_gpus (run_id, level_idx, gpu, frames) VALUES (1, 0, 0, 1)")
    db.execute("INSERT INTO requests (run_id, level_idx, idx, ok, chunk_gaps_json) "
               "VALUES (1, 0, 0, 1, 'garbage')")
    db.execute("INSERT INTO requests (run_id, level_idx, idx, ok, chunk_gaps_json, e2e_s) "
               "VALUES (1, 1, 0, 0, '{\"a\": 1}', 'slow')")
    db.execute("INSERT INTO runs (id, label, host, started_at, status) "
               "VALUES (2, 'plain', 'ct200', 2.0, 'done')")
    db.execute("INSERT INTO levels (run_id, idx, concurrency, requests, stats_json) VALUES "
               "(2, 0, 1, 8, '{\"output_tok_s\": 50.0, \"ttft_ms\": {\"mean\": 100.0}}')")
    db.close()
    return 1, 2


def test_normalise_level_gives_the_full_shape() -> None:
    full = stats.level_metrics([], 4)
    for raw in (None, {}, [1], {"ttft_ms": None}, {"ttft_ms": 3}, {"itl_ms": {"max": "x"}}):
        out = normalise_level(raw)
        assert set(full) <= set(out)
        for key in ("ttft_ms", "ttfat_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            assert set(out[key]) >= {"mean", "p50", "p90", "p99"}
            assert all(v is None for v in out[key].values())
        assert out["errors_by_kind"] == {} and out["output_tok_s"] is None
        assert out["partial"] is False and out["rebuilt"] is False
    real = stats.level_metrics([{"ok": True, "start_s": 0.0, "e2e_s": 1.0, "ttft_s": 0.1,
                                 "output_tokens": 10, "token_source": "usage"}], 1)
    assert {k: normalise_level(real)[k] for k in real} == real  # a full level is kept as it is
    assert normalise_level({}, ttft_mean_ms=12.0, completed=3)["ttft_ms"]["mean"] == 12.0


def test_levels_read_whatever_was_stored(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    odd, _ = _hand_made(path)
    with RunStore(path) as store:
        levels = store.levels(odd)
        assert [lv.concurrency for lv in levels] == [1, 2, 3, 4, 5, 6]
        for lv in levels:
            assert isinstance(lv.stats["ttft_ms"], dict) and "p99" in lv.stats["ttft_ms"]
            lv.to_dict()
        assert levels[0].ttft_mean_ms == 77.0 and levels[0].stats["completed"] == 5  # columns
        assert levels[1].output_tok_s is None and levels[1].stats["completed"] is None
        assert levels[1].stats["e2e_ms"]["p99"] == 3 and levels[1].stats["e2e_ms"]["mean"] is None
        assert levels[4].output_tok_s == 99.5 and levels[4].ttft_mean_ms == 120.0
        assert levels[5].ttft_mean_ms is None and levels[5].stats["duration_s"] is None
        [run] = [r for r in store.runs() if r.id == odd]
        assert run.gpu_names == [] and run.plan is None and run.profile is None
        reqs = store.requests(odd)
        assert [r["chunk_gaps_ms"] for r in reqs] == [[], []]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dsv4tui", *argv], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.e2e
def test_every_runs_command_reads_a_hand_made_store(tmp_path: Path) -> None:
    odd, plain = _hand_made(paths.store_file())
    for argv in (["runs", "list"], ["runs", "list", "--json"], ["runs", "show", str(odd)],
                 ["runs", "show", str(odd), "--json", "--requests"],
                 ["runs", "export", str(odd), "--format", "md"],
                 ["runs", "export", str(odd), "--format", "csv"],
                 ["runs", "export", str(odd), "--format", "json"],
                 ["runs", "compare", str(odd), str(plain)],
                 ["runs", "compare", str(plain), str(odd), "--json"]):
        proc = _cli(*argv)
        assert proc.returncode == 0, f"{argv}: {proc.stderr}"
        assert "Traceback" not in proc.stderr and proc.stdout, argv
        if "--json" in argv or argv[-1] == "json":
            json.loads(proc.stdout)
        if argv[-1] == "csv":
            assert len(list(csv.DictReader(io.StringIO(proc.stdout)))) == 2
    shown = json.loads(_cli("runs", "show", str(odd), "--json").stdout)
    assert [lv["ttft_ms"]["mean"] for lv in shown["levels"]] == [77.0, None, None, None, 120.0,
                                                                  None]
    assert "| 5 | 8 |" in _cli("runs", "export", str(odd), "--format", "md").stdout


@pytest.mark.parametrize("target", [1, 2])
def test_an_older_hand_made_store_migrates_and_reads(tmp_path: Path, target: int) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, str(path), target=target)
    db.execute("INSERT INTO runs (label, host, started_at, status, owner) "
               "VALUES ('old', 'h', 1.0, 'done', 'not a token')")
    db.execute("INSERT INTO levels (run_id, idx, concurrency, requests, output_tok_s, "
               "stats_json) VALUES (1, 0, 8, 4, 10.0, '{\"output_tok_s\": 10.0}')")
    db.close()
    with RunStore(path) as store:
        [run] = store.runs()
        assert run.best_tok_s == 10.0 and run.owner_host is None and run.status_text == "done"
        [lv] = store.levels(run.id)
        assert lv.stats["tpot_ms"]["p50"] is None
