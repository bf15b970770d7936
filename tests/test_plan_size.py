"""Sizes that cannot be meant are caught before minutes of silence (issue 23, point 10): a
plan's duration and memory are estimated before it starts (the CLI needs --yes, the Bench
dialog asks), lengths are checked against the server's context, a big level says what it
prepares within seconds, and a failed warm-up is reported. Real servers on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from plugins.bench_server import (
    REPO,
    ScriptServer,
    agent_run,
    http_json,
    normal_stream,
    of_type,
)

from dsv4tui.agent.bench import plan_size
from dsv4tui.agent.protocol import parse_event
from dsv4tui.core.config import SweepPlan
from dsv4tui.core.store import RunStore
from dsv4tui.main import main

CONTEXT = 1_048_576


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _serve(srv: ScriptServer, *posts: list[Any]) -> None:
    """An SGLang-like server: its context in /v1/models and /server_info."""
    srv.get_routes["/v1/models"] = http_json(200, {"data": [{"id": "m",
                                                              "max_model_len": CONTEXT}]})
    srv.get_routes["/server_info"] = http_json(200, {"version": "0.5.0-test",
                                                     "context_length": CONTEXT})
    srv.responses = list(posts) or [normal_stream(2)]


def test_the_estimate_of_a_plan() -> None:
    default = plan_size.estimate(SweepPlan().model_dump())
    assert default["requests"] == 8 + 32 + 48 + 3 and not default["confirm"]
    assert 20 < default["seconds"] < 600
    huge = plan_size.estimate(SweepPlan(levels=[(1, 999999)]).model_dump())
    assert huge["requests"] == 1_000_000 and huge["seconds"] > 86400
    assert huge["peak_bytes"] > 2e9 and huge["biggest"] == "C=1"
    assert huge["confirm"] == ["longer than 1 h", "over 2.0 GB of host memory"]
    assert "1,000,000 requests" in huge["text"]
    long_out = plan_size.estimate(SweepPlan(levels=[(1, 2)], output_len=100_000_000)
                                  .model_dump())
    assert long_out["confirm"] and "longer than 1 h" in long_out["confirm"]
    rates = plan_size.estimate(SweepPlan(levels=[], rates=[(2.0, 100)]).model_dump())
    assert 50 <= rates["seconds"] < 600  # 100 requests at 2/s: at least 50 s
    assert plan_size.context_problem({"output_len": 10, "input_len": 10}, CONTEXT) is None
    assert plan_size.context_problem({"output_len": 10, "input_len": 10}, None) is None
    why = plan_size.context_problem({"output_len": CONTEXT - 5, "input_len": 128}, CONTEXT)
    assert why is not None and "128 prompt" in why


def test_an_absurd_sweep_is_refused_without_yes(script_server: ScriptServer,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``--levels 1:999999`` was accepted: 66 s of silence, then 100 % CPU and
    ~870 MB before the first request. Now: one line, exit 2, nothing started or stored."""
    _serve(script_server)
    code = main(["sweep", "--url", script_server.url, "--model", "m", "--label", "huge",
                 "--levels", "1:999999", "--no-sanity"])
    err = capsys.readouterr().err
    assert code == 2
    [line] = err.strip().splitlines()
    assert "pass --yes" in line and "1,000,000 requests" in line and "longer than 1 h" in line
    assert not script_server.requests
    with RunStore() as store:
        assert store.runs() == []


def test_an_output_over_the_servers_context_sends_nothing(script_server: ScriptServer
                                                          ) -> None:
    """Before: ``--output-len 100000000`` against a 1,048,576-token server: its warm-up
    decoded until the 600 s timeout, never mentioned. Now the sweep ends at once, exit 2,
    no request sent."""
    _serve(script_server)
    t0 = time.monotonic()
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "1:2", "--output-len", "100000000")
    assert code == 2, err
    assert time.monotonic() - t0 < 60
    [error] = of_type(events, "error")
    assert error["kind"] == "too_long"
    assert "100,000,000" in error["message"] and "1,048,576" in error["message"]
    assert "/v1/models max_model_len" in error["message"]
    assert not script_server.requests and not of_type(events, "request")


def test_the_cli_sweep_with_yes_still_checks_the_context(
        script_server: ScriptServer, capsys: pytest.CaptureFixture[str]) -> None:
    _serve(script_server)
    code = main(["sweep", "--url", script_server.url, "--model", "m", "--label", "long",
                 "--levels", "1:2", "--output-len", "100000000", "--no-sanity", "--yes"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "failed: output_len 100,000,000 is over the server's context of 1,048,576" in out
    assert not script_server.requests


def test_a_big_level_says_what_it_prepares_within_seconds(script_server: ScriptServer) -> None:
    """The first ``level_prep`` event comes seconds after the start, before the prompts are
    built, then the prompts' progress; a cancel during the preparation ends it quickly."""
    _serve(script_server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", script_server.url,
         "--model", "m", "--levels", "1:400000", "--output-len", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    t0 = time.monotonic()
    seen: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            ev = parse_event(line)
            if ev is None:
                continue
            seen.append(ev)
            if ev["type"] == "level_prep":
                break
        first = time.monotonic() - t0
        prep = seen[-1]
        assert prep["type"] == "level_prep" and prep["phase"] == "preparing"
        assert prep["announce"] and "preparing 400,001 prompts" in prep["message"]
        assert first < 30  # the agent's start-up and the idle check: seconds, not minutes
        proc.send_signal(2)  # Ctrl-C while the prompts are built
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    events = seen + [e for line in out.splitlines() if (e := parse_event(line))]
    assert proc.returncode == 130
    assert of_type(events, "sweep")[0]["status"] == "cancelled"
    # the level's requests were never sent (only the idle probe was)
    assert len(script_server.requests) <= 1


def test_a_failed_warm_up_is_reported(script_server: ScriptServer) -> None:
    """POSTs in order: the idle probe, the warm-up (HTTP 500), then the level's requests."""
    _serve(script_server, normal_stream(2), http_json(500, {"error": {"message": "boom"}}),
           normal_stream(2))
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "1:2", "--output-len", "2", "--warmup", "1")
    assert code == 0, err
    [notice] = [n for n in of_type(events, "notice") if n.get("kind") == "warmup_failed"]
    assert "1 of 1 warm-up requests failed" in notice["message"]
    assert "http_500" in notice["message"] and "boom" in notice["message"]
    warm = [p for p in of_type(events, "level_prep") if p["phase"] == "warmup"]
    assert warm and "warm-up, 1 request of 2 tokens" in warm[0]["message"]


def test_the_cli_prints_the_warm_up_failure(script_server: ScriptServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _serve(script_server, normal_stream(2), http_json(500, {"error": {"message": "boom"}}),
           normal_stream(2))
    code = main(["sweep", "--url", script_server.url, "--model", "m", "--label", "warm",
                 "--levels", "1:2", "--output-len", "2", "--no-sanity", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "note: level C=1: 1 of 1 warm-up requests failed (http_500: boom)" in captured.err
    assert any("warm-up requests failed" in n for n in json.loads(captured.out)["notices"])
