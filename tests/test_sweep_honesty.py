"""A sweep never reports what did not happen (issue #13): truncated streams, short outputs,
level and sweep status, a server that crashed, was busy before a level, or stalled.

Real parts only: the agent as a subprocess against the scripted HTTP server, the known-timing
server, and the simulated SGLang server (a subprocess; its /metrics counts what it serves).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from plugins.bench_server import (
    KnownServer,
    ScriptServer,
    agent_run,
    http_json,
    normal_stream,
    of_type,
)
from plugins.sim import AgentEnv, SimProcess, event, free_port, sim_argv, start_sim

from dsv4tui.agent.host.server_metrics import scrape


def sweep_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    [final] = of_type(events, "sweep")
    return final


@contextmanager
def load(url: str, c: int, max_tokens: int = 80, metrics: bool = True) -> Iterator[None]:
    """Another client keeping ``c`` requests running until the block ends (of different
    lengths, so that they do not all end, and leave the server idle, at the same moment)."""
    stop = threading.Event()

    def one(tokens: int) -> None:
        while not stop.is_set():
            try:
                httpx.post(url + "/v1/completions", timeout=60, json={
                    "prompt": "another client", "max_tokens": tokens, "ignore_eos": True})
            except httpx.HTTPError:
                time.sleep(0.05)

    threads = [threading.Thread(target=one, args=(max_tokens + 17 * i,), daemon=True)
               for i in range(c)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 20
        while metrics and (scrape(url)["running"] or 0) < c and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.0 if metrics else 0.5)
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(60)


def requests_total(url: str) -> float:
    total = scrape(url)["requests_total"]
    assert total is not None
    return total


def requests_seen(url: str, expect: float, before: float) -> float:
    """Requests the server took since ``before``: those that finished and those aborted when
    their client gave up (SGLang counts a request when it ends; the aborts land a moment after
    the client closed), waiting up to 5 s for ``expect``."""
    deadline = time.monotonic() + 5.0
    while True:
        got = scrape(url)
        seen = (got["requests_total"] or 0.0) + (got.get("aborted_total") or 0.0) - before
        if seen == expect or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


# --- 1. truncated streams and short outputs ------------------------------------------------

def test_truncated_streams_fail_the_sweep(known_server: Callable[..., KnownServer]) -> None:
    """Every stream ends cleanly after 4 of 16 tokens without finish_reason, usage or [DONE]:
    before, "16/16 done, 0 errors, 580 tok/s"; now each request is `truncated`."""
    srv = known_server("--truncate-after", "4")
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--model", "known-timing",
                                  "--levels", "4:16", "--output-len", "16")
    assert code == 1, err
    reqs = of_type(events, "request")
    assert reqs and all(r["error_kind"] == "truncated" and not r["ok"] for r in reqs)
    [level] = of_type(events, "level")
    assert (level["status"], level["failure"], level["completed"]) == ("failed", "error_rate", 0)
    assert level["output_tok_s"] == 0.0
    final = sweep_of(events)
    assert final["status"] == "failed" and final["errors_by_kind"] == {"truncated": len(reqs)}
    assert of_type(events, "error")[0]["kind"] == "sweep_failed"


def test_short_outputs_under_ignore_eos_are_counted(script_server: ScriptServer) -> None:
    """The server ends each answer after 4 tokens (finish_reason length, usage 4) although
    16 were asked for with ignore_eos: the requests are fine, the level says they were short."""
    script_server.responses = [normal_stream(4)]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "2:4", "--output-len", "16", "--warmup", "0")
    assert code == 0, err
    assert [r["short_output"] for r in of_type(events, "request")] == [True] * 4
    [level] = of_type(events, "level")
    assert level["status"] == "done" and level["ignore_eos"] is True
    assert (level["short_outputs"], level["short_min_tokens"], level["planned_output_len"]) == \
        (4, 4, 16)
    assert sweep_of(events)["short_outputs"] == 4

    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "2:4", "--output-len", "16", "--warmup", "0",
                                "--no-ignore-eos")
    [level] = of_type(events, "level")  # without ignore_eos an early EOS is an answer
    assert code == 0 and level["short_outputs"] == 0 and level["ignore_eos"] is False
    assert not any(r["short_output"] for r in of_type(events, "request"))


# --- 2. level and sweep status -----------------------------------------------------------

def test_one_failed_request_makes_level_and_sweep_partial(script_server: ScriptServer) -> None:
    ok = normal_stream(3)
    # POSTs in order: the ignore_eos probe, level 0's idle probe, its 4 requests (C=1), then
    # level 1's idle probe and 2 requests (the last script repeats)
    script_server.responses = [ok, ok, ok, http_json(500, {"error": {"message": "boom"}}), ok]
    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "1:4,1:2", "--warmup", "0")
    assert code == 1
    first, second = of_type(events, "level")
    assert (first["status"], first["completed"], first["errors"]) == ("partial", 3, 1)
    assert first["reason"] == "level C=1: 1 of 4 requests failed (http_500 1)"
    assert second["status"] == "done" and second["reason"] is None
    final = sweep_of(events)
    assert final["status"] == "partial" and final["level_status"] == ["partial", "done"]
    assert (final["errors"], final["errors_by_kind"], final["completed"]) == (1, {"http_500": 1},
                                                                              5)
    assert final["reason"].startswith("1 of 2 levels partial: level C=1")
    assert of_type(events, "error")[0]["kind"] == "sweep_partial"


def test_server_crash_late_in_the_last_level_fails_the_sweep(sims: list[SimProcess],
                                                             tmp_path: Path) -> None:
    """The simulated SGLang crashes on admitting the last request of the last level (each
    level: an idle probe, a warm-up, its requests). The errors are exactly at the 50 % limit,
    which passed as `done`, exit 0 before; now the server is gone and the sweep failed."""
    sim = start_sim(tmp_path, "--sim-fault", "crash-after:13")
    sims.append(sim)
    sim.wait_ready()
    code, events, _ = agent_run("bench", "sweep", "--url", sim.url, "--levels", "1:2,4:8",
                                "--output-len", "16", "--input-len", "16")
    assert code == 1
    first, last = of_type(events, "level")
    assert first["status"] == "done"
    assert 0 < last["errors"] <= 4  # not over max_error_rate 0.5 of 8
    assert (last["status"], last["failure"]) == ("failed", "server_gone")
    assert "the server went away" in last["reason"] and "Connection refused" in last["reason"]
    final = sweep_of(events)
    assert final["status"] == "failed" and final["level_status"] == ["done", "failed"]
    assert sum(final["errors_by_kind"].values()) == last["errors"] == final["errors"]
    assert sim.wait_exit(10) == 1


def test_every_level_and_the_sweep_carry_a_status(known_server: Callable[..., KnownServer]
                                                  ) -> None:
    srv = known_server()
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--levels", "1:2,2:4",
                                  "--output-len", "8")
    assert code == 0, err
    levels = of_type(events, "level")
    assert [lv["status"] for lv in levels] == ["done", "done"]
    assert all(lv["reason"] is None and lv["failure"] is None and lv["not_run"] == 0
               for lv in levels)
    final = sweep_of(events)
    assert (final["status"], final["levels"], final["levels_planned"]) == ("done", 2, 2)
    assert (final["requests"], final["completed"], final["errors"], final["not_run"]) == \
        (6, 6, 0, 0)


# --- 3. a busy server ----------------------------------------------------------------------

def test_busy_server_refuses_the_level_unless_allowed(sims: list[SimProcess],
                                                      tmp_path: Path) -> None:
    sim = start_sim(tmp_path)
    sims.append(sim)
    sim.wait_ready()
    args = ("bench", "sweep", "--url", sim.url, "--levels", "1:3", "--output-len", "8",
            "--input-len", "16")
    with load(sim.url, 4):
        code, events, _ = agent_run(*args)
        assert code == 1
        [level] = of_type(events, "level")
        assert (level["status"], level["failure"], level["completed"]) == ("failed", "busy", 0)
        idle = level["idle"]
        assert (idle["verdict"], idle["source"], idle["checks"]) == ("busy", "metrics", 2)
        assert idle["running"] >= 1
        reason = sweep_of(events)["reason"]
        assert reason.startswith("server busy before level C=1: ") and "(from /metrics)" in reason
        assert not of_type(events, "request") and not of_type(events, "level_start")

        code, events, err = agent_run(*args, "--allow-busy")
        assert code == 0, err
        [level] = of_type(events, "level")
        assert level["status"] == "done" and level["busy"] is True
        assert level["idle"]["verdict"] == "busy"
        assert of_type(events, "notice")[0]["kind"] == "busy"
        assert sweep_of(events)["busy_levels"] == 1
    time.sleep(0.3)
    code, events, _ = agent_run(*args)
    [level] = of_type(events, "level")
    assert code == 0 and level["busy"] is False
    assert (level["idle"]["verdict"], level["idle"]["running"], level["idle"]["queued"]) == \
        ("idle", 0, 0)


def test_idle_check_reads_our_server_log_without_metrics(agent_env: AgentEnv) -> None:
    """No /metrics (no --enable-metrics): the server this agent started logs #running-req."""
    port = free_port()
    argv = [a for a in sim_argv(port) if a != "--enable-metrics"]
    code, events = agent_env.run(*agent_env.start_args(argv, port, "--wait-ready"))
    assert code == 0, events
    url = f"http://127.0.0.1:{port}"
    args = ("bench", "sweep", "--url", url, "--levels", "1:2", "--output-len", "8")
    code, events = agent_env.run(*args)
    level = event(events, "level")
    assert code == 0 and level["status"] == "done"
    assert (level["idle"]["source"], level["idle"]["verdict"], level["idle"]["running"]) == \
        ("log", "idle", 0)
    with load(url, 3, metrics=False):
        code, events = agent_env.run(*args)
    level = event(events, "level")
    assert code == 1 and level["failure"] == "busy"
    assert (level["idle"]["source"], level["idle"]["verdict"]) == ("log", "busy")
    assert level["idle"]["running"] >= 1 and "(from the server log)" in level["reason"]
    agent_env.run("server", "stop")


def test_idle_check_by_probe_latency(script_server: ScriptServer) -> None:
    """No /metrics, not our server: the probe's latency against the last idle one (kept in
    the agent's cache dir per server). The first probe is only the reference."""
    ok = normal_stream(2)
    script_server.responses = [ok]
    args = ("bench", "sweep", "--url", script_server.url, "--model", "m", "--levels", "1:2",
            "--warmup", "0")
    code, events, _ = agent_run(*args)
    [level] = of_type(events, "level")
    assert code == 0 and level["status"] == "done"
    assert (level["idle"]["source"], level["idle"]["verdict"]) == ("latency", "unknown")
    assert "first probe" in level["idle"]["detail"]

    code, events, _ = agent_run(*args)  # the reference now exists: idle
    [level] = of_type(events, "level")
    assert code == 0 and level["idle"]["verdict"] == "idle"

    slow = [0.6, *ok]  # the server now takes 0.6 s to start answering
    script_server._posts = 0
    script_server.responses = [ok, slow]  # the ignore_eos probe, then every idle probe slow
    code, events, _ = agent_run(*args)
    [level] = of_type(events, "level")
    assert code == 1 and level["failure"] == "busy"
    idle = level["idle"]
    assert idle["source"] == "latency" and idle["probe_latency_s"] > 0.5
    assert idle["baseline_latency_s"] < 0.2 and "(from probe latency)" in level["reason"]


# --- 4. a stalled server -------------------------------------------------------------------

def test_a_stalled_server_fails_the_level_at_once(sims: list[SimProcess], tmp_path: Path
                                                  ) -> None:
    """Before, each stuck request waited its stall timeout and the next one was sent: ~3
    timeouts in a row for a C=2 level of 8 (3 min at the default 60 s). Now the level fails
    when every request in flight has stalled, and nothing more is sent."""
    sim = start_sim(tmp_path, "--sim-fault", "stall")
    sims.append(sim)
    sim.wait_ready()
    start = scrape(sim.url)
    before = (start["requests_total"] or 0.0) + (start.get("aborted_total") or 0.0)
    code, events, _ = agent_run("bench", "sweep", "--url", sim.url, "--levels", "2:8,4:8",
                                "--warmup", "0", "--stall-timeout", "1", "--output-len", "16")
    assert code == 1
    assert requests_seen(sim.url, 3, before) == 3  # the idle probe and the two stuck requests
    reqs = of_type(events, "request")
    assert [r["error_kind"] for r in reqs] == ["stall", "stall"]
    [level] = of_type(events, "level")  # the sweep stops: level C=4 never ran
    assert (level["status"], level["failure"], level["not_run"]) == ("failed", "stalled", 6)
    assert "every request in flight got no bytes for 1.0 s" in level["reason"]
    assert sweep_of(events)["not_run"] == 14

    start = scrape(sim.url)
    before = (start["requests_total"] or 0.0) + (start.get("aborted_total") or 0.0)
    code, events, _ = agent_run("bench", "sweep", "--url", sim.url, "--levels", "2:8",
                                "--stall-timeout", "1", "--output-len", "16")
    assert code == 1 and requests_seen(sim.url, 2, before) == 2  # the probe and the warm-up
    [level] = of_type(events, "level")
    assert level["failure"] == "stalled" and "during the warm-up" in level["reason"]
    assert not of_type(events, "request") and level["not_run"] == 8


def test_one_stuck_request_does_not_stop_a_level_that_progresses(
        script_server: ScriptServer) -> None:
    ok = normal_stream(3)
    hang = [*normal_stream(1)[:2], "hang"]
    # the ignore_eos probe, the idle probe, then the first request to arrive hangs
    script_server.responses = [ok, ok, hang, ok]
    t0 = time.monotonic()
    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "2:6", "--warmup", "0", "--stall-timeout", "0.5")
    assert time.monotonic() - t0 < 30  # generous: nothing waits on the hung stream's socket
    assert code == 1
    [level] = of_type(events, "level")
    assert (level["status"], level["completed"], level["errors_by_kind"]) == \
        ("partial", 5, {"stall": 1})
    assert level["failure"] is None and level["not_run"] == 0
