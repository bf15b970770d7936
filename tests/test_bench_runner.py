"""The console's half of a sweep: journal events into a real SQLite store (Collector), and
where a benchmark aims (bench_target). The host half runs in test_campaign_*.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core.bench_runner import BenchTarget
from dsv4tui.core.campaign.ingest import Collector
from dsv4tui.core.campaign.plan import bench_target
from dsv4tui.core.config import HostConfig, ServerProfile
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore

CID = "20261201-120000-abcd"
META = {"source": "launch", "backend": "flashinfer_cutlass", "checkpoint": "NVFP4",
        "quantization": "modelopt_fp4", "attention_backend": "dsv4", "argv": ["python", "-m"],
        "server_args": {"tp_size": 8}, "sglang_version": "0.5.23", "simulated": False,
        "pid": 4242, "profile_name": "nvfp4"}


def _req(level: int, index: int, seq: int, ok: bool = True) -> dict[str, Any]:
    return {"type": "request", "run": "v0.r0.a0", "seq": seq, "level": level, "concurrency": 2,
            "index": index, "ok": ok, "start_s": 0.01 * index, "ttft_s": 0.1, "e2e_s": 0.5,
            "output_tokens": 5, "token_source": "usage", "chunks": 5,
            "chunk_gaps_ms": [100.0] * 4, "error_kind": None if ok else "stall"}


def _journal() -> list[dict[str, Any]]:
    reqs = [_req(0, i, 10 + i) for i in range(3)]
    level = {"type": "level", "run": "v0.r0.a0", "seq": 13,
             **stats.level_metrics(reqs, 2, 3), "level": 0, "started_at": 100.0,
             "finished_at": 102.0, "partial": False, "status": "done"}
    return [
        {"type": "campaign_start", "seq": 0, "t": 90.0, "name": "lbl", "kind": "sweep",
         "variants": [{"name": "lbl", "label": "lbl", "restart": False}], "repeats": 1,
         "plan": {"levels": [[2, 3]]}},
        {"type": "variant_start", "seq": 1, "variant": 0, "name": "lbl", "restart": False},
        {"type": "run_start", "seq": 2, "t": 91.0, "run": "v0.r0.a0", "variant": 0, "repeat": 0,
         "label": "lbl", "plan": {"levels": [[2, 3]]}, "meta": META, "url": "http://h:1",
         "model": "m"},
        {"type": "sanity_case", "seq": 3, "run": "v0.r0.a0", "name": "arith", "answer": "391",
         "passed": True, "latency_s": 0.1},
        {"type": "sanity", "seq": 4, "run": "v0.r0.a0", "passed": True},
        {"type": "bench_target", "seq": 5, "run": "v0.r0.a0", "model": "served",
         "url": "http://h:1", "server_version": "0.5.23"},
        *reqs, level,
        {"type": "level_gpus", "seq": 14, "run": "v0.r0.a0", "level": 0, "gpus": [
            {"gpu": 0, "frames": 2, "util_mean": 90.0, "tensor_mean": 40.0, "sm_mean": 80.0,
             "dram_mean": 30.0, "power_mean_w": 500.0}]},
        {"type": "run_end", "seq": 15, "t": 103.0, "run": "v0.r0.a0", "status": "done",
         "reason": None},
        {"type": "variant_end", "seq": 16, "variant": 0, "name": "lbl", "state": "done"},
        {"type": "campaign_end", "seq": 17, "t": 104.0, "state": "done",
         "server": {"text": "the server (pid 4242) is left running"}},
        {"type": "journal_pos", "offset": 9999},
    ]


def _store_counts(store: RunStore) -> tuple[int, int, int, int, int]:
    q = store.query
    return (q("SELECT count(*) FROM runs")[0][0], q("SELECT count(*) FROM requests")[0][0],
            q("SELECT count(*) FROM levels")[0][0], q("SELECT count(*) FROM sanity_results")[0][0],
            q("SELECT count(*) FROM level_gpus")[0][0])


def test_a_run_records_what_the_host_said_ran_and_every_event_once(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        col = Collector(store, "ct200", CID, gpu_names=["NVIDIA RTX PRO 6000"])
        told = col.apply_batch(_journal())
        assert [t["type"] for t in told] == ["run_stored", "run_finished"]
        [run] = store.runs()
        assert (run.backend, run.checkpoint, run.label, run.status) == (
            "flashinfer_cutlass", "NVFP4", "lbl", "done")
        assert run.model == "served" and run.server_version == "0.5.23" and run.sanity_passed
        assert (run.started_at, run.finished_at) == (91.0, 103.0)  # the host's clock
        row = store.query("SELECT * FROM runs WHERE id = ?", (run.id,))[0]
        assert (row["meta_source"], row["attention_backend"], row["quantization"]) == (
            "launch", "dsv4", "modelopt_fp4")
        [lv] = store.levels(run.id)
        assert lv.power_w == 500.0 and lv.stats["completed"] == 3
        assert _store_counts(store) == (1, 3, 1, 1, 1)
        camp = cstore.get(store, CID)
        assert camp is not None and camp.state == "done" and camp.journal_offset == 9999
        assert camp.detail["variants"][0]["state"] == "done"
        # the same events again (a reconnect that re-read a stretch): nothing added
        Collector(store, "ct200", CID).apply_batch(_journal())
        assert _store_counts(store) == (1, 3, 1, 1, 1)
        # nor run by run: campaign runs are never marked interrupted by a console's death
        assert store.mark_orphans_interrupted() == []


def test_a_runner_that_vanished_interrupts_its_open_runs(tmp_path: Path) -> None:
    events = [*_journal()[:8], {"type": "journal_end", "state": "interrupted",
                                "reason": "the campaign runner stopped without finishing"}]
    with RunStore(tmp_path / "s.db") as store:
        Collector(store, "ct200", CID).apply_batch(events)
        [run] = store.runs()
        assert run.status == "interrupted" and len(store.requests(run.id)) == 2
        camp = cstore.get(store, CID)
        assert camp is not None and camp.state == "interrupted"


def test_a_torn_line_is_kept_in_the_campaign_detail_once(tmp_path: Path) -> None:
    torn = {"type": "journal_torn", "offset": 120, "end": 140, "text": '{"type":"requ'}
    with RunStore(tmp_path / "s.db") as store:
        Collector(store, "h", CID).apply_batch([torn, torn])
        camp = cstore.get(store, CID)
        assert camp is not None and camp.detail["torn"] == [
            {"offset": 120, "end": 140, "text": '{"type":"requ'}]


def test_bench_target_aims_at_our_server_then_the_default_port() -> None:
    cfg = HostConfig(profiles={"a": ServerProfile(model_path="/m/a", port=8001),
                               "b": ServerProfile(model_path="/m/b", port=8002,
                                                  served_model_name="bee", api_key_env="KEY")},
                     default_profile="b")
    # what the server answering must be (agent.target.identity_problem): the profile's model
    expect_b = {"host": "127.0.0.1", "port": 8002, "model": "bee", "model_path": "/m/b",
                "api_key_env": "KEY", "ours_only": False}
    assert bench_target(cfg) == {"mode": "ours", "fallback": expect_b}
    assert bench_target(cfg, "a") == {
        "mode": "url", "url": "http://127.0.0.1:8001", "model": "/m/a", "api_key_env": None,
        "expect": {"host": "127.0.0.1", "port": 8001, "model": "/m/a", "model_path": "/m/a",
                   "api_key_env": None, "ours_only": False}}
    assert bench_target(HostConfig()) == {"mode": "ours"}
    v6 = HostConfig(profiles={"p": ServerProfile(model_path="/m", host="::")})
    assert bench_target(v6, "p")["url"] == "http://[::1]:30000"


def test_bench_target_agent_args() -> None:
    t = BenchTarget("http://127.0.0.1:8000", "dsv4", "KEY")
    assert t.agent_args() == ["--url", "http://127.0.0.1:8000", "--transport", "raw",
                              "--model", "dsv4", "--api-key-env", "KEY"]
    assert t.spec()["mode"] == "url"


@pytest.mark.parametrize("ended", ["done", "cancelled"])
def test_follow_end_states_are_kept(tmp_path: Path, ended: str) -> None:
    with RunStore(tmp_path / "s.db") as store:
        Collector(store, "h", CID).apply_batch([{"type": "journal_end", "state": ended}])
        camp = cstore.get(store, CID)
        assert camp is not None and camp.state == ended


def test_compare_says_when_the_workloads_differ() -> None:
    from dsv4tui.core.campaign.compare import Comparison, Point, RunInfo

    a = RunInfo(1, "a", plan={"input_len": 64, "output_len": 256, "ignore_eos": True})
    b = RunInfo(8, "b", plan={"input_len": 128, "output_len": 256, "ignore_eos": True})
    cmp = Comparison.build([a, b], {
        1: [Point(4, 10.0, requests=4, input_tokens_mean=70.0)],
        8: [Point(4, 12.0, requests=8, input_tokens_mean=134.0)]})
    diffs = cmp.differences()
    assert "prompt length (input_len) differs: #1 64, #8 128" in diffs
    assert "C=4: requests per level differ: #1 n=4, #8 n=8" in diffs
    assert any(d.startswith("C=4: prompt tokens per request differ") for d in diffs)
    assert cmp.to_json()["differences"] == diffs
    same = Comparison.build([a, RunInfo(2, "c", plan=dict(a.plan or {}))], {
        1: [Point(4, 10.0, requests=4)], 2: [Point(4, 11.0, requests=4)]})
    assert same.differences() == []
