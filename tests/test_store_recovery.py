"""After a killed console: the unfinished level is rebuilt from its requests (#13), and a run
owned by another machine or a campaign runner says so instead of "running" forever."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core.store import RunStore
from dsv4tui.main import main

ROOT = Path(__file__).resolve().parents[1]
PLAN = {"levels": [[1, 3], [4, 6]]}


def _req(level: int, index: int, ok: bool = True) -> dict:
    return {"level": level, "index": index, "ok": ok, "start_s": 0.2 * index, "ttft_s": 0.05,
            "ttfat_s": 0.05, "e2e_s": 0.5 + 0.1 * index, "tpot_s": 0.01,
            "output_tokens": 40 if ok else 0, "prompt_tokens": 8, "token_source": "usage",
            "chunks": 40 if ok else 0, "chunk_gaps_ms": [11.0] * 39 if ok else [],
            "error_kind": None if ok else "http_500", "status": 200 if ok else 500}


KILLED = f"""
import os, signal, sys
sys.path.insert(0, {str(ROOT)!r})
from dsv4tui.agent.bench import stats
from dsv4tui.core.store import RunStore
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_store_recovery import PLAN, _req
s = RunStore(sys.argv[1])
r = s.start_run(label='killed', host='h', plan=PLAN)
first = [_req(0, i) for i in range(3)]
for ev in first:
    s.add_request(r, ev)
s.add_level(r, {{**stats.level_metrics(first, 1, 3), 'level': 0, 'finished_at': 50.0}})
for i in range(4):  # level 1 (C=4, n=6): 4 of 6 finished, one of them failed
    s.add_request(r, _req(1, i, ok=i != 2))
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.e2e
def test_a_killed_consoles_unfinished_level_is_rebuilt_from_its_requests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dsv4tui.core import paths

    path = paths.store_file()
    proc = subprocess.run([sys.executable, "-c", KILLED, str(path)])
    assert proc.returncode == -9
    with RunStore(path) as store:
        [run] = store.runs()
        assert run.status == "interrupted" and run.status_text == "interrupted"
        first, second = store.levels(run.id)
        assert not first.partial and not first.rebuilt and first.concurrency == 1
        assert second.partial and second.rebuilt
        assert (second.idx, second.concurrency, second.requests) == (1, 4, 6)
        expect = stats.level_metrics([_req(1, i, ok=i != 2) for i in range(4)], 4, 6)
        for key in ("completed", "errors", "output_tokens", "output_tok_s", "ttft_ms", "itl_ms",
                    "errors_by_kind", "duration_s"):
            assert second.stats[key] == expect[key], key
        assert second.stats["completed"] == 3 and second.stats["errors"] == 1
    db = sqlite3.connect(path)  # stored when the run was marked interrupted
    assert [tuple(r) for r in db.execute("SELECT idx, partial FROM levels ORDER BY idx")] == [
        (0, 0), (1, 1)]
    db.close()
    assert main(["runs", "show", str(run.id), "--json"]) == 0
    levels = json.loads(capsys.readouterr().out)["levels"]
    assert [(lv["concurrency"], lv["partial"], lv["rebuilt"]) for lv in levels] == [
        (1, False, False), (4, True, True)]
    assert levels[1]["output_tok_s"] == expect["output_tok_s"]
    assert main(["runs", "show", str(run.id)]) == 0
    text = capsys.readouterr().out
    assert text.rstrip().endswith("partial")  # the partial level's row, with its numbers


def test_the_level_a_live_run_is_measuring_reads_as_partial_and_is_not_stored(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        run = store.start_run(label="live", host="h", plan=PLAN)
        store.add_request(run, _req(0, 0))
        [lv] = store.levels(run)
        assert lv.partial and lv.rebuilt and lv.stats["completed"] == 1 and lv.requests == 3
        store.add_level(run, {**stats.level_metrics([_req(0, 0)], 1, 3), "level": 0})
        [lv] = store.levels(run)  # the real one, once it came
        assert not lv.partial and not lv.rebuilt
        store.add_request(run, _req(5, 0))  # a level the plan does not name: not made up
        assert [x.idx for x in store.levels(run)] == [0]
        assert len(store.requests(run)) == 2


def _set_owner(path: Path, run_id: int, owner: str, campaign: str | None = None) -> None:
    db = sqlite3.connect(path)
    if campaign:
        db.execute("INSERT INTO campaigns (id, host, name, state, created_at) "
                   "VALUES (?, 'ct200', 'moe', 'running', 1.0)", (campaign,))
    db.execute("UPDATE runs SET owner = ?, campaign_id = ? WHERE id = ?",
               (owner, campaign, run_id))
    db.commit()
    db.close()


@pytest.mark.e2e
def test_runs_owned_elsewhere_say_whose_they_are(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with RunStore(path) as store:
        mine = store.start_run(label="mine", host="local")
        laptop = store.start_run(label="laptop", host="ct200")
        campaign = store.start_run(label="campaign", host="ct200")
        done = store.start_run(label="done", host="ct200")
        store.finish_run(done, "done")
        host = store.run(mine).owner_host  # type: ignore[union-attr]
    _set_owner(path, laptop, "laptop-2:123:999")
    _set_owner(path, campaign, f"{host}:{dead.pid}:", campaign="c-20261201-1")
    with RunStore(path) as store:  # neither is marked interrupted: nobody here can tell
        runs = {r.label: r for r in store.runs()}
    assert runs["mine"].status_text == f"running (console pid {os.getpid()})"
    assert runs["mine"].owner_state == "alive"
    assert runs["laptop"].status == "running" and runs["laptop"].owner_state == "elsewhere"
    assert runs["laptop"].status_text == "running (console pid 123 on laptop-2)"
    assert (runs["laptop"].owner_host, runs["laptop"].owner_pid) == ("laptop-2", 123)
    assert runs["campaign"].status == "running" and runs["campaign"].owner_state == "campaign"
    assert runs["campaign"].status_text == "running on ct200 (campaign c-20261201-1)"
    assert runs["done"].status_text == "done" and runs["done"].owner_state is None
    d = runs["laptop"].to_dict()
    assert d["status_text"] == runs["laptop"].status_text and d["owner_host"] == "laptop-2"
    json.dumps(d)
