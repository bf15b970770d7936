"""The load generator spread over worker processes (issue 17): every request stored exactly
once, a worker that dies reported and its level marked (never a hang), a cancel that ends
the workers. Real parts: the known-timing server, agent subprocesses, the CLI and its store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import REPO, KnownServer
from plugins.sim import subprocess_env

from dsv4tui.agent.bench import workers
from dsv4tui.agent.protocol import parse_event
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def test_workers_chosen_from_the_level_and_the_cores() -> None:
    assert workers.choose(None, 512, cores=16) == 8
    assert workers.choose(None, 256, cores=16) == 4
    assert workers.choose(None, 64, cores=16) == 1
    assert workers.choose(None, 512, cores=2) == 1  # leave the server its cores
    assert workers.choose(4, 2) == 2 and workers.choose(3, 100) == 3
    assert workers.split(10, 3) == [4, 3, 3]


def test_multi_worker_sweep_stores_every_request_once(known_server: Callable[..., KnownServer],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    srv = known_server(ttft_ms=20, itl_ms=2)
    code = main(["sweep", "--url", srv.url, "--label", "spread", "--levels", "6:60,12:96",
                 "--rates", "60:90", "--max-concurrency", "12", "--workers", "3",
                 "--output-len", "8", "--input-len", "8", "--no-sanity", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    with RunStore() as store:
        levels = store.levels(out["run_id"])
        assert [lv.requests for lv in levels] == [60, 96, 90]
        for lv in levels:
            reqs = store.requests(out["run_id"], lv.idx)
            assert sorted(r["index"] for r in reqs) == list(range(lv.requests))  # none lost
            assert all(r["ok"] and r["output_tokens"] == 8 for r in reqs)  # or doubled
            assert lv.stats["workers"] == 3 and lv.stats["completed"] == lv.requests
            assert lv.stats["client_cpu_s"] > 0
    # the server's own count: the levels' requests and one warm-up per level, nothing more
    assert srv.served(min_tokens=8) == 60 + 96 + 90 + 3


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def _start_agent(url: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", url,
           "--levels", "4:4000", "--output-len", "32", "--warmup", "0", "--workers", "2", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(), cwd=REPO, start_new_session=True)


def _until_requests(proc: subprocess.Popen[str], n: int) -> list[dict]:
    assert proc.stdout is not None
    events: list[dict] = []
    while sum(1 for e in events if e["type"] == "request") < n:
        line = proc.stdout.readline()
        assert line, "the agent ended before its level ran"
        ev = parse_event(line)
        if ev:
            events.append(ev)
    return events


def _finish(proc: subprocess.Popen[str], events: list[dict], timeout: float) -> int:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the agent hung for {timeout} s")
    events.extend(e for e in (parse_event(x) for x in out.splitlines()) if e)
    return proc.returncode


def test_a_worker_that_dies_is_reported_and_its_level_marked(
        known_server: Callable[..., KnownServer]) -> None:
    srv = known_server(ttft_ms=20, itl_ms=3)
    proc = _start_agent(srv.url)
    try:
        events = _until_requests(proc, 8)
        kids = _children(proc.pid)
        assert len(kids) == 2, kids
        os.kill(kids[0], signal.SIGKILL)
        t0 = time.monotonic()
        code = _finish(proc, events, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 1 and time.monotonic() - t0 < 20  # stopped, not hung
    [notice] = [e for e in events if e["type"] == "notice"]
    assert notice["kind"] == "worker_died" and notice["pid"] == kids[0]
    assert notice["exit"] == "killed by SIGKILL" and notice["workers"] == 2
    [level] = [e for e in events if e["type"] == "level"]
    assert level["status"] == "failed" and level["failure"] == "worker_died"
    assert f"pid {kids[0]}" in level["reason"] and "died (killed by SIGKILL)" in level["reason"]
    reqs = [e for e in events if e["type"] == "request"]
    assert len({r["index"] for r in reqs}) == len(reqs) == level["completed"] < 4000
    assert level["not_run"] == 4000 - len(reqs)
    assert [e["status"] for e in events if e["type"] == "sweep"] == ["failed"]
    assert _children(proc.pid) == []  # the other worker was ended too


def test_cancel_ends_the_workers_and_keeps_what_finished(
        known_server: Callable[..., KnownServer]) -> None:
    srv = known_server(ttft_ms=20, itl_ms=3)
    proc = _start_agent(srv.url)
    try:
        events = _until_requests(proc, 8)
        kids = _children(proc.pid)
        assert len(kids) == 2
        proc.send_signal(signal.SIGTERM)
        code = _finish(proc, events, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130
    [level] = [e for e in events if e["type"] == "level"]
    assert level["status"] == "partial" and "cancelled after" in level["reason"]
    reqs = [e for e in events if e["type"] == "request"]
    assert len({r["index"] for r in reqs}) == len(reqs) == level["completed"] + level["errors"]
    assert all(not Path(f"/proc/{k}").exists() for k in kids)
    # the sweep says what it measured (it said "cancelled after 0 of 1 levels")
    [sweep] = [e for e in events if e["type"] == "sweep"]
    assert sweep["status"] == "cancelled" and len(reqs) >= 8
    assert sweep["reason"] == (f"cancelled during level C=4: {len(reqs):,} requests measured, "
                               "0 of 1 levels complete")


def test_a_spread_level_says_how_many_requests_are_in_flight(
        known_server: Callable[..., KnownServer]) -> None:
    """level_progress of a level run by worker processes carries the real in-flight count
    (claimed in the workers' shared flow, less what reached the agent), not null."""
    srv = known_server(ttft_ms=20, itl_ms=20)  # ~0.7 s a request: always some in flight
    cmd = [sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", srv.url,
           "--levels", "6:36", "--output-len", "32", "--warmup", "0", "--workers", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(), cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    events = [e for e in (parse_event(x) for x in proc.stdout.splitlines()) if e]
    [level] = [e for e in events if e["type"] == "level"]
    assert level["workers"] == 2
    progress = [e for e in events if e["type"] == "level_progress"]
    assert progress, "no level_progress during a ~5 s level"
    flights = [e["in_flight"] for e in progress]
    assert all(isinstance(n, int) and 0 <= n <= 6 for n in flights), flights
    assert max(flights) > 0
    for e in progress:  # what finished and what is in flight never exceed the level's n
        assert e["completed"] + e["errors"] + e["in_flight"] <= 36


def test_in_flight_is_what_was_sent_and_not_ended_in_any_process() -> None:
    """The level's shared Flow across a real fork: a worker sends 3 requests and 1 ends;
    the agent's process sees 2 in flight, whatever it has received through the pipes."""
    from dsv4tui.agent.bench.loadgen import Flow

    flow = Flow(10, active=2, shared=True)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for _ in range(3):
                flow.claim()
            flow.note_ended()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert flow.claimed == 3 and flow.in_flight == 2
