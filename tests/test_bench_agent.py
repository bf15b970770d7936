"""``python -m dsv4tui.agent bench sanity|sweep`` as real subprocesses against real servers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import (
    REPO,
    KnownServer,
    ScriptServer,
    agent_run,
    http_json,
    normal_stream,
    of_type,
)
from plugins.sim import free_port, start_sim

from dsv4tui.agent.bench import plan as sweep_plan
from dsv4tui.agent.bench import sweep as bench
from dsv4tui.agent.protocol import parse_event
from dsv4tui.core.config import DEFAULT_SANITY, SweepPlan


def test_agent_defaults_mirror_the_config() -> None:
    plan = SweepPlan()
    for key, value in plan.model_dump(mode="json").items():
        assert sweep_plan.defaults()[key] == value, key
    assert [DEFAULT_SANITY.model_dump()] == bench.DEFAULT_CASES


def test_sanity_pass_and_fail(known_server: Callable[..., KnownServer]) -> None:
    good = known_server(answer="391")
    code, events, err = agent_run("bench", "sanity", "--url", good.url)
    assert code == 0, err
    [case] = of_type(events, "sanity_case")
    assert case["passed"] and case["answer"].strip() == "391" and case["latency_s"] > 0
    assert of_type(events, "sanity")[0]["passed"] is True
    assert of_type(events, "bench_target")[0]["model"] == "known-timing"

    bad = known_server(answer="392")
    cases = json.dumps([{"name": "arith", "prompt": "17*23?", "expect": r"^\s*391\s*$"},
                        {"prompt": "say 392", "expect": "392", "max_tokens": 4}])
    code, events, _ = agent_run("bench", "sanity", "--url", bad.url, "--cases-json", cases)
    assert code == 1
    assert [c["passed"] for c in of_type(events, "sanity_case")] == [False, True]
    assert of_type(events, "error")[0]["kind"] == "sanity_failed"


def test_sanity_timeout(script_server: ScriptServer) -> None:
    script_server.responses = [[normal_stream(1)[0], "hang"]]
    code, events, _ = agent_run("bench", "sanity", "--url", script_server.url, "--model", "m",
                                "--timeout", "0.5")
    assert code == 1
    [case] = of_type(events, "sanity_case")
    assert case["passed"] is False and case["error_kind"] in ("stall", "timeout")


def test_sweep_events_and_numbers(known_server: Callable[..., KnownServer]) -> None:
    srv = known_server(ttft_ms=30, itl_ms=3)
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--levels", "1:2,3:6",
                                  "--output-len", "8", "--input-len", "12", "--seed", "7")
    assert code == 0, err
    kinds = [e["type"] for e in events]
    assert kinds[0] == "bench_target" and kinds[-1] == "sweep"
    assert kinds.count("level_start") == 2 and kinds.count("level") == 2
    reqs = of_type(events, "request")
    assert len(reqs) == 8 and all(r["ok"] for r in reqs)  # warm-ups are not reported
    r = reqs[0]
    assert r["output_tokens"] == 8 and r["token_source"] == "usage" and r["chunks"] == 8
    assert 0.025 < r["ttft_s"] < 0.5 and len(r["chunk_gaps_ms"]) == 7
    first, second = of_type(events, "level")
    assert (first["concurrency"], first["requests"], first["completed"]) == (1, 2, 2)
    assert (second["concurrency"], second["completed"], second["errors"]) == (3, 6, 0)
    assert second["output_tokens"] == 48 and second["token_count_source"] == "usage"
    assert 25 < second["ttft_ms"]["mean"] < 200
    assert 2.0 < second["itl_ms"]["mean"] < 30.0  # the server's 3 ms, in ms (not s)
    assert second["client_cpu_us_per_token"] > 0 and second["partial"] is False
    assert second["started_at"] <= second["finished_at"]
    assert of_type(events, "sweep")[0]["status"] == "done"


def test_sweep_plain_server_models_500_no_done(known_server: Callable[..., KnownServer]) -> None:
    """A plain OpenAI server: /v1/models answers 500, streams end without [DONE]."""
    srv = known_server("--models-status", "500", "--no-done", "--no-usage")
    code, events, _ = agent_run("bench", "sweep", "--url", srv.url + "/v1", "--levels", "1:1")
    assert code == 2
    [err] = of_type(events, "error")
    assert err["kind"] == "model" and "--model" in err["message"]
    code, events, err_text = agent_run("bench", "sweep", "--url", srv.url + "/v1", "--model",
                                       "known-timing", "--levels", "2:2", "--output-len", "4")
    assert code == 0, err_text
    level = of_type(events, "level")[0]
    assert level["completed"] == 2 and level["token_count_source"] == "chunks"
    assert not any(r["done_marker"] for r in of_type(events, "request"))


def test_sweep_http_500_stops_on_error_rate(script_server: ScriptServer) -> None:
    script_server.responses = [http_json(500, {"error": {"message": "boom"}})]
    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "2:4,4:8", "--warmup", "0")
    assert code == 1
    levels = of_type(events, "level")
    assert len(levels) == 1 and levels[0]["errors_by_kind"].get("http_500", 0) >= 3
    assert levels[0]["completed"] == 0
    sweep = of_type(events, "sweep")[0]
    assert sweep["status"] == "failed" and "C=2" in sweep["reason"]
    assert of_type(events, "error")[0]["kind"] == "sweep_failed"


def test_sweep_connection_refused_is_classified() -> None:
    """Nothing listens: the idle check's probe cannot connect, so the level fails at once,
    sending nothing (even with max error rate 1), and says why."""
    url = f"http://127.0.0.1:{free_port()}"
    code, events, _ = agent_run("bench", "sweep", "--url", url, "--model", "m", "--levels", "1:2",
                                "--warmup", "0", "--max-error-rate", "1")
    assert code == 1
    [level] = of_type(events, "level")
    assert (level["status"], level["failure"], level["not_run"]) == ("failed", "unreachable", 2)
    assert level["idle"]["verdict"] == "unreachable" and not of_type(events, "request")
    sweep = of_type(events, "sweep")[0]
    assert sweep["status"] == "failed" and "cannot connect" in sweep["reason"]
    assert of_type(events, "error")[0]["kind"] == "sweep_failed"
    code, events, _ = agent_run("bench", "sanity", "--url", url)
    assert code == 1 and of_type(events, "error")[0]["kind"] == "connect"


@pytest.mark.parametrize("args", [
    ["--levels", "1x8"], ["--plan-json", "{bad"], ["--plan-json", '{"levels": []}'],
    ["--plan-json", '{"nope": 1}'], ["--input-len", "0"], ["--max-error-rate", "2"],
    ["--plan-json", '{"allow_busy": "yes"}'], ["--plan-json", '{"seed": 1.5}']])
def test_sweep_bad_input_is_a_usage_error(args: list[str]) -> None:
    code, events, err = agent_run("bench", "sweep", "--url", "http://127.0.0.1:9", *args)
    assert code == 2 and "Traceback" not in err
    assert of_type(events, "error")[0]["kind"] == "usage"


@pytest.mark.parametrize("how", ["sigterm", "stdin-eof"])
def test_cancel_mid_level_keeps_finished_requests(known_server: Callable[..., KnownServer],
                                                  how: str) -> None:
    srv = known_server(ttft_ms=20, itl_ms=5, tokens=20)  # ~0.12 s per request
    argv = [sys.executable, "-m", "dsv4tui.agent"]
    if how == "stdin-eof":
        argv.append("--cancel-on-eof")
    proc = subprocess.Popen([*argv, "bench", "sweep", "--url", srv.url, "--model", "known-timing",
                             "--levels", "2:200", "--output-len", "20"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdin is not None
    events = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ev = parse_event(proc.stdout.readline())
        if ev:
            events.append(ev)
            if len(of_type(events, "request")) >= 3:
                break
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:
        proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(30)
    events += [ev for line in out.splitlines() if (ev := parse_event(line))]
    assert proc.returncode == 130
    done = of_type(events, "request")
    [level] = of_type(events, "level")
    assert level["partial"] is True and 3 <= level["completed"] == len(done) < 200
    assert of_type(events, "sweep")[0]["status"] == "cancelled"


def test_every_agent_module_parses_as_python_3_9() -> None:
    """The agent runs with the host's python (3.9 and up): every module of it, not a list."""
    paths = sorted((REPO / "dsv4tui" / "agent").rglob("*.py"))
    assert len(paths) > 20
    # parsed in a fresh interpreter: CPython 3.11.7's parser can raise "AST constructor
    # recursion depth mismatch" in a process whose recursion state other tests disturbed
    check = ("import ast, sys\nfor p in sys.argv[1:]:\n"
             "    ast.parse(open(p).read(), p, feature_version=(3, 9))")
    proc = subprocess.run([sys.executable, "-c", check, *map(str, paths)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for path in paths:
        source = path.read_text()
        if source.strip() and path.name != "__init__.py":
            assert "from __future__ import annotations" in source, path.name


def test_against_the_sglang_simulator_and_its_faults(sims: list, tmp_path: Path) -> None:
    """The simulated SGLang (same HTTP API and stream shape): a clean sweep, then faults."""
    good = start_sim(tmp_path / "good")
    wrong = start_sim(tmp_path / "wrong", "--sim-fault", "wrong-answer")
    broken = start_sim(tmp_path / "broken", "--sim-fault", "http-500")
    stalled = start_sim(tmp_path / "stalled", "--sim-fault", "stall")
    sims.extend([good, wrong, broken, stalled])
    for sim in sims:
        sim.wait_ready()
    code, events, err = agent_run("bench", "sweep", "--url", good.url, "--levels", "2:4",
                                  "--output-len", "8", "--input-len", "16")
    assert code == 0, err
    target, level = of_type(events, "bench_target")[0], of_type(events, "level")[0]
    assert target["model"] == "dsv4-sim" and target["server_version"]
    assert level["completed"] == 4 and level["token_count_source"] == "usage"
    assert level["output_tokens"] == 32
    code, events, _ = agent_run("bench", "sanity", "--url", wrong.url)
    assert code == 1 and of_type(events, "sanity_case")[0]["passed"] is False
    code, events, _ = agent_run("bench", "sweep", "--url", broken.url, "--levels", "1:2",
                                "--warmup", "0")
    assert code == 1 and set(of_type(events, "level")[0]["errors_by_kind"]) == {"http_500"}
    code, events, _ = agent_run("bench", "sweep", "--url", stalled.url, "--levels", "1:1",
                                "--warmup", "0", "--stall-timeout", "0.5", "--output-len", "16")
    assert code == 1 and of_type(events, "level")[0]["errors_by_kind"] == {"stall": 1}


def test_sweep_drops_ignore_eos_when_the_server_rejects_it(script_server: ScriptServer) -> None:
    """transformers serve answers 422 'Unexpected fields: {ignore_eos}' (seen on the H200):
    the sweep says so once and runs without it instead of failing every request."""
    script_server.responses = [
        http_json(422, {"detail": "Unexpected fields in the request: {'ignore_eos'}"}),
        normal_stream(3)]
    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "1:2", "--warmup", "0")
    assert code == 0
    notice = of_type(events, "notice")
    assert len(notice) == 1 and notice[0]["kind"] == "ignore_eos_rejected"
    assert "ignore_eos" in script_server.requests[0]
    assert all("ignore_eos" not in r for r in script_server.requests[1:])
    level = of_type(events, "level")[0]
    assert level["completed"] == 2 and level["errors"] == 0


def test_a_running_level_says_its_aggregate_with_the_final_levels_formulas(
        known_server: Callable[..., KnownServer]) -> None:
    from dsv4tui.agent.bench import stats

    srv = known_server(ttft_ms=300, itl_ms=30)  # each request ~0.6 s: a level of 4 ~2.4 s
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--levels", "1:4",
                                  "--output-len", "10", "--input-len", "12", "--seed", "7",
                                  "--warmup", "0")
    assert code == 0, err
    marks = [i for i, e in enumerate(events) if e["type"] == "level_progress"]
    assert marks, "a level of over a second says where it stands"
    for i in marks:
        agg = events[i]
        before = [e for e in events[:i] if e["type"] == "request"]
        final = stats.level_metrics(before, 1, 4)
        assert (agg["completed"], agg["errors"], agg["output_tok_s"]) == (
            final["completed"], final["errors"], final["output_tok_s"])
        assert agg["ttft_ms"]["p50"] == final["ttft_ms"]["p50"]
        assert agg["tpot_ms"]["p50"] == final["tpot_ms"]["p50"]
        assert agg["in_flight"] in (0, 1) and agg["requests"] == 4
    assert len(of_type(events, "request")) == 4  # every request once, aggregates aside
