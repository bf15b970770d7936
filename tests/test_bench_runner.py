"""BenchRunner: store writes per event, GPU windows, the sanity gate, cancel, link drop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from plugins.bench_server import KnownServer
from plugins.ssh_server import SshHost

from dsv4tui.agent import stats
from dsv4tui.bench_runner import BenchRunner, BenchTarget, RunMeta
from dsv4tui.config import DEFAULT_SANITY, ServerProfile, Settings, SweepPlan
from dsv4tui.errors import AgentFailed, ConnectError
from dsv4tui.hosts.resolve import open_host
from dsv4tui.store import RunStore


def _req(level: int, index: int, ok: bool = True) -> dict[str, Any]:
    return {"type": "request", "level": level, "concurrency": 2, "index": index, "ok": ok,
            "start_s": 0.01 * index, "ttft_s": 0.1, "e2e_s": 0.5, "output_tokens": 5,
            "token_source": "usage", "chunks": 5, "chunk_gaps_ms": [100.0] * 4,
            "error_kind": None if ok else "stall"}


class FakeAgent:
    """Yields scripted events; ``fail`` is raised after them (like AgentRunner.events)."""

    def __init__(self, sweep: list[dict[str, Any]], fail: BaseException | None = None,
                 sanity_passed: bool = True, hang: bool = False) -> None:
        self.sweep, self.fail, self.hang = sweep, fail, hang
        self.sanity_passed = sanity_passed
        self.calls: list[tuple[str, ...]] = []

    async def events(self, *args: str) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(args)
        if args[1] == "sanity":
            yield {"type": "bench_target", "model": "m"}
            yield {"type": "sanity_case", "name": "c", "answer": "391" if self.sanity_passed
                   else "7", "passed": self.sanity_passed, "latency_s": 0.1}
            yield {"type": "sanity", "passed": self.sanity_passed}
            if not self.sanity_passed:
                raise AgentFailed("sanity_failed", "1 of 1 sanity cases failed")
            return
        for ev in self.sweep:
            await asyncio.sleep(0)
            yield ev
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail is not None:
            raise self.fail


def _level(idx: int, c: int, t0: float, t1: float, reqs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "level", **stats.level_metrics(reqs, c, len(reqs)), "level": idx,
            "started_at": t0, "finished_at": t1, "partial": False}


TARGET = BenchTarget("http://127.0.0.1:1", "m")
META = RunMeta(host="h1", profile_name="p", backend="marlin", checkpoint="NVFP4")


async def test_sweep_stores_every_event_and_gpu_summaries(tmp_path: Path) -> None:
    reqs = [_req(0, i) for i in range(3)]
    events = [{"type": "bench_target", "model": "served", "url": "http://x", "server_version": "9"},
              {"type": "level_start", "level": 0, "concurrency": 2, "requests": 3, "time": 100.0},
              *reqs, _level(0, 2, 100.0, 102.0, reqs),
              {"type": "sweep", "status": "done", "levels": 1}]
    seen: list[str] = []
    with RunStore(tmp_path / "s.db") as store:
        runner = BenchRunner(FakeAgent(events), store, on_event=lambda e: seen.append(e["type"]))
        for t in (99.0, 100.5, 101.5, 103.0):
            runner.feed_frame({"type": "frame", "time": t, "gpus": [
                {"index": 0, "util_gpu": 90, "tensor_active": 40.0, "sm_active": 80,
                 "dram_active": 30, "power_w": 500.0}]})
        out = await runner.sweep(TARGET, SweepPlan(levels=[(2, 3)]), "lbl", META,
                                 sanity_cases=[DEFAULT_SANITY])
        assert out.status == "done" and out.sanity is not None and out.sanity.passed
        assert list(out.to_json()) == ["run_id", "label", "sanity", "levels"]
        run = store.run(out.run_id)  # type: ignore[arg-type]
        assert run is not None and run.status == "done" and run.model == "served"
        assert run.server_version == "9" and run.sanity_passed and run.backend == "marlin"
        assert len(store.requests(run.id)) == 3
        [lv] = store.levels(run.id)
        assert lv.gpus[0]["frames"] == 2 and lv.power_w == 500.0
        assert lv.tok_s_per_kw == pytest.approx(lv.output_tok_s / 0.5)  # type: ignore[operator]
        assert store.sanity_results(run_id=run.id)[0]["answer"] == "391"
    assert seen[0] == "run_started" and seen[-1] == "run_finished" and "sanity_case" in seen


async def test_sanity_failure_stops_the_sweep(tmp_path: Path) -> None:
    agent = FakeAgent([], sanity_passed=False)
    with RunStore(tmp_path / "s.db") as store:
        out = await BenchRunner(agent, store).sweep(TARGET, SweepPlan(), "x", META,
                                                    sanity_cases=[DEFAULT_SANITY])
        assert out.status == "failed" and "sanity failed" in (out.error or "")
        assert [c[1] for c in agent.calls] == ["sanity"]  # the sweep never started
        run = store.run(out.run_id)  # type: ignore[arg-type]
        assert run is not None and run.status == "failed" and run.sanity_passed is False


async def test_agent_failure_keeps_its_reason(tmp_path: Path) -> None:
    reqs = [_req(0, i, ok=False) for i in range(2)]
    events = [{"type": "level_start", "level": 0, "concurrency": 2, "requests": 2, "time": 1.0},
              *reqs, _level(0, 2, 1.0, 2.0, reqs),
              {"type": "sweep", "status": "failed", "reason": "level C=2: 2 of 2 failed"}]
    with RunStore(tmp_path / "s.db") as store:
        out = await BenchRunner(FakeAgent(events, AgentFailed("sweep_failed", "x")), store).sweep(
            TARGET, SweepPlan(), "x", META)
        assert out.status == "failed" and out.error == "level C=2: 2 of 2 failed"
        assert len(out.levels) == 1


@pytest.mark.parametrize("how", ["cancel", "link"])
async def test_cancel_or_link_drop_rebuilds_the_partial_level(tmp_path: Path, how: str) -> None:
    reqs = [_req(0, i) for i in range(4)]
    events = [{"type": "level_start", "level": 0, "concurrency": 2, "requests": 10, "time": 5.0},
              *reqs]
    agent = FakeAgent(events, None if how == "cancel" else ConnectError("link lost"),
                      hang=how == "cancel")
    with RunStore(tmp_path / "s.db") as store:
        runner = BenchRunner(agent, store)
        task = asyncio.create_task(runner.sweep(TARGET, SweepPlan(), "x", META))
        if how == "cancel":
            while len(agent.calls) < 1 or not store.runs() or len(
                    store.requests(store.runs()[0].id)) < 4:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            with pytest.raises(ConnectError):
                await task
        [run] = store.runs()
        assert run.status == ("cancelled" if how == "cancel" else "interrupted")
        [lv] = store.levels(run.id)
        assert lv.partial and lv.stats["completed"] == 4 and lv.requests == 10


async def test_link_drop_mid_sweep_over_ssh_keeps_finished_requests(
        ssh_server: SshHost, known_server: Callable[..., KnownServer], tmp_path: Path) -> None:
    """A real agent over a real SSH link; the link is dropped mid-level."""
    srv = known_server(ttft_ms=20, itl_ms=5, tokens=20)
    seen: list[dict[str, Any]] = []
    with RunStore(tmp_path / "s.db") as store:
        async with open_host("testbox", Settings()) as host:
            runner = BenchRunner(host.agent, store, on_event=seen.append)
            plan = SweepPlan(levels=[(2, 300)], output_len=20, warmup=0)
            task = asyncio.create_task(runner.sweep(BenchTarget(srv.url, "known-timing"), plan,
                                                    "drop", RunMeta(host="testbox")))
            deadline = time.monotonic() + 60
            while sum(e["type"] == "request" for e in seen) < 3:
                assert time.monotonic() < deadline and not task.done(), "no requests came"
                await asyncio.sleep(0.02)
            ssh_server.drop_connections()
            with pytest.raises(ConnectError):
                await asyncio.wait_for(task, 30)
            for proc in ssh_server.processes:  # reap the killed remote side on this loop
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
                if proc.stdin is not None:
                    proc.stdin.close()
            await asyncio.sleep(0.05)
        got = [e for e in seen if e["type"] == "request"]
        [run] = store.runs()
        assert run.status == "interrupted" and run.host == "testbox"
        stored = store.requests(run.id)
        assert len(stored) == len(got) >= 3  # every request that arrived is on disk
        [lv] = store.levels(run.id)
        assert lv.partial and lv.stats["completed"] == len(got)


def test_target_for_profile() -> None:
    prof = ServerProfile(model_path="/m/DSV4", served_model_name="dsv4", host="0.0.0.0", port=8000,
                         api_key_env="KEY")
    t = BenchTarget.for_profile(prof)
    assert (t.url, t.model, t.api_key_env) == ("http://127.0.0.1:8000", "dsv4", "KEY")
    assert "--api-key-env" in t.agent_args()
    assert BenchTarget.for_profile(ServerProfile(model_path="/m", host="::1")).url == "http://[::1]:30000"
