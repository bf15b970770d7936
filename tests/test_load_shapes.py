"""Load shapes (issue 17): open-loop arrivals, range-ratio lengths, dataset files, goodput,
warm-ups, seeds and saturation. The agent runs as a real subprocess against the known-timing
server, the scripted server and the SGLang simulator."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import KnownServer, ScriptServer, agent_run, normal_stream, of_type
from plugins.sim import SimProcess, free_port, sim_argv, start_sim, subprocess_env

from dsv4tui.agent.bench import arrivals, datasets, stats
from dsv4tui.agent.bench import plan as sweep_plan
from dsv4tui.agent.bench import sweep as bench
from dsv4tui.core.campaign.load_text import parse_goodput, parse_levels, parse_rates
from dsv4tui.core.config import SweepPlan
from dsv4tui.main import main

# --- arrivals --------------------------------------------------------------------------------


def test_poisson_timeline_statistics() -> None:
    rate, n = 8.0, 4000
    t = arrivals.timeline(n, rate, seed=11)
    gaps = [b - a for a, b in itertools.pairwise(t)]
    assert t[0] == 0.0 and t == sorted(t)
    mean = statistics.fmean(gaps)
    assert abs(mean - 1 / rate) / (1 / rate) < 0.05  # exponential gaps of mean 1/r
    assert 0.93 < statistics.pstdev(gaps) / mean < 1.07  # coefficient of variation 1
    disp = arrivals.dispersion(t, 1.0)
    assert disp is not None and 0.8 < disp < 1.25  # counts per second: var/mean ~ 1
    assert 0.95 < arrivals.offered_rate(t) / rate < 1.05  # type: ignore[operator]
    assert arrivals.timeline(n, rate, seed=11) == t  # seeded: the same run again
    assert arrivals.timeline(n, rate, seed=12) != t
    const = arrivals.timeline(50, 4.0, seed=1, kind="constant")
    assert const[1] == pytest.approx(0.25) and const[-1] == pytest.approx(49 / 4)
    assert arrivals.dispersion(const, 1.0) == 0.0
    with pytest.raises(ValueError):
        arrivals.timeline(5, 0.0, seed=1)


def test_rate_level_sends_on_the_seeded_timeline(known_server: Callable[..., KnownServer]
                                                 ) -> None:
    srv = known_server(ttft_ms=20, itl_ms=2)
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--rates", "25:40",
                                  "--output-len", "6", "--seed", "5", "--max-concurrency", "8",
                                  "--goodput", "ttft:400")
    assert code == 0, err
    [start] = of_type(events, "level_start")
    assert start["rate"] == 25.0 and start["max_concurrency"] == 8 and start["level"] == 0
    reqs = sorted(of_type(events, "request"), key=lambda r: r["index"])
    assert [r["index"] for r in reqs] == list(range(40))
    due = arrivals.timeline(40, 25.0, 5 * 1000 + 0)
    assert [r["sched_s"] for r in reqs] == [round(x, 6) for x in due]
    # sent on time: what the client added to the schedule (minus the slot wait) is small
    for r in reqs:
        assert r["start_s"] >= r["sched_s"] - 0.002
    [level] = of_type(events, "level")
    assert level["kind"] == "rate" and level["seed"] == 5 and level["concurrency"] == 8
    assert level["send_lag_ms"]["p99"] is not None and level["send_lag_ms"]["p99"] < 100
    assert level["saturation"]["source"] == "rate" and level["saturation"]["saturated"] is False
    assert level["goodput"]["good"] == 40 and level["goodput"]["share"] == 1.0
    assert of_type(events, "bench_target")[0]["seed"] == 5


# --- lengths ---------------------------------------------------------------------------------


def _sent(srv: ScriptServer) -> list[dict]:
    """The level's requests as the server got them (not the idle or ignore_eos probes)."""
    def prompt(r: dict) -> str:
        return r["messages"][0]["content"]
    return [r for r in srv.requests if prompt(r) not in ("Say OK.",)]


def test_range_ratio_lengths_as_sent(script_server: ScriptServer) -> None:
    script_server.responses = [normal_stream(3)]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "2:60", "--input-len", "40", "--output-len", "20",
                                  "--random-range-ratio", "0.5", "--seed", "9", "--warmup", "0")
    assert code == 0, err
    sent = _sent(script_server)
    assert len(sent) == 60
    outs = [r["max_tokens"] for r in sent]
    words = [len(r["messages"][0]["content"].split()) for r in sent]
    assert all(10 <= o <= 20 for o in outs) and all(20 <= w <= 40 for w in words)
    assert min(outs) <= 12 and max(outs) >= 18 and len(set(outs)) >= 6  # spread, not fixed
    plan = {**sweep_plan.defaults(), "input_len": 40, "output_len": 20, "random_range_ratio": 0.5}
    expect = bench.level_requests(plan, 9, 0, 60)  # the seed makes them again
    assert sorted(outs) == sorted(t for _, t in expect)
    assert sorted(words) == sorted(len(p.split()) for p, _ in expect)
    level = of_type(events, "level")[0]
    assert level["random_range_ratio"] == 0.5 and level["short_outputs"] == 60  # 3 < asked


# --- dataset files ----------------------------------------------------------------------------


def test_dataset_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    share = tmp_path / "sharegpt.json"
    share.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "What is 2+2?"},
                                      {"from": "gpt", "value": "4"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
        {"id": "c", "conversation": [{"from": "human", "value": "Name a colour."},
                                     {"from": "gpt", "value": "blue"}]}]))
    # the output length is the reference answer's (UTF-8 bytes / 4, rounded up: no tokenizer)
    assert datasets.load(str(share)) == ("sharegpt", [("What is 2+2?", 1),
                                                      ("Name a colour.", 1)])
    lines = tmp_path / "prompts.jsonl"
    lines.write_text('{"prompt": "one", "output_len": 7}\n\n{"prompt": "two"}\n')
    assert datasets.load(str(lines)) == ("jsonl", [("one", 7), ("two", None)])

    def error(text: str, name: str = "bad.jsonl") -> str:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(datasets.DatasetError) as exc:
            datasets.load(str(path))
        assert "\n" not in str(exc.value)
        return str(exc.value)

    assert error("") == "bad.jsonl: the file is empty (no prompts)"
    assert error('{"prompt": "a"}\n{"prompt": "b"}\n{prompt: c}\n').startswith(
        "bad.jsonl line 3: not JSON")
    assert error('{"prompt": "a", "output_len": 0}\n') == (
        'bad.jsonl line 1: "output_len" must be an integer >= 1')
    assert error('{"prompt": "a"}\n["x"]\n') == "bad.jsonl line 2: not a JSON object"
    assert error('[{"conversations": []}, 3]', "s.json") == "s.json entry 2: not a JSON object"
    assert error('[{"conversations": [{"from": "human"}, {"value": "x"}]}]', "s.json") == (
        's.json entry 1: conversations[0] has no text "value"')
    assert "not valid JSON" in error('[{"conversations": ', "s.json")
    # the console reads it once and ships the prompts with the plan
    plan = SweepPlan(dataset=str(lines))
    assert plan.dataset_prompts == [("one", 7), ("two", None)]
    assert plan.dataset_info == {"path": str(lines), "name": "prompts.jsonl", "format": "jsonl",
                                 "entries": 2, "shipped": 2}
    with pytest.raises(ValueError, match=r"dataset: bad\.jsonl line 2: not a JSON object"):
        SweepPlan(dataset=str(tmp_path / "bad.jsonl"))
    # the CLI says it in one line, before anything starts
    assert main(["sweep", "--url", "http://127.0.0.1:9", "--label", "x", "--no-sanity",
                 "--dataset", str(tmp_path / "bad.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("dataset: bad.jsonl line 2: not a JSON object") and "\n" not in err
    # a big file travels as a seeded sample within the caps
    many = [(f"p{i} " + "x" * 100, None) for i in range(500)]
    shipped = datasets.ship(many, seed=1, max_prompts=50, max_bytes=10**6)
    assert len(shipped) == 50 and shipped == datasets.ship(many, seed=1, max_prompts=50)
    assert len(datasets.ship(many, seed=1, max_bytes=2000)) == 19


def test_dataset_prompts_as_sent(script_server: ScriptServer, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}", "output_len": 3 + i}) + "\n"
                            for i in range(5)))
    script_server.responses = [normal_stream(3)]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "2:10", "--dataset", str(path), "--warmup", "0")
    assert code == 0, err
    sent = _sent(script_server)
    got = sorted((r["messages"][0]["content"], r["max_tokens"]) for r in sent)
    # 10 requests from 5 prompts: each twice (a seeded order, cycled), its own output_len
    assert got == sorted([(f"question {i}", 3 + i) for i in range(5)] * 2)
    target = of_type(events, "bench_target")[0]
    assert target["plan"]["dataset_prompts"] == 5  # counted, not the text, in events
    assert of_type(events, "level")[0]["dataset"] == "p.jsonl"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n')
    code, events, _ = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                "--levels", "1:1", "--dataset", str(bad))
    assert code == 2
    assert of_type(events, "error")[0]["message"] == "--dataset: bad.jsonl line 2: not JSON " \
        "(Expecting value)"


def test_sharegpt_lengths_come_from_the_answers_and_levels_say_what_was_asked(
        script_server: ScriptServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """bench_serving takes a ShareGPT entry's output length from its reference answer: so do
    we (unless --output-len is given), and a level whose requests asked different lengths
    records no single planned_output_len, but what they asked (mean, min, max)."""
    from dsv4tui.core.store import RunStore

    answers = ["x" * 40, "y" * 81, "word " * 30]  # 10, 21 and 38 "tokens" (bytes / 4 up)
    share = tmp_path / "share.json"
    share.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": f"question {i}"},
                           {"from": "gpt", "value": a}]} for i, a in enumerate(answers)]))
    script_server.responses = [normal_stream(3)]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "1:6", "--dataset", str(share), "--warmup", "0")
    assert code == 0, err
    got = sorted({(r["messages"][0]["content"], r["max_tokens"]) for r in _sent(script_server)})
    assert got == [("question 0", 10), ("question 1", 21), ("question 2", 38)]
    [level] = of_type(events, "level")
    assert level["planned_output_len"] is None  # not one number: each asked its own
    assert level["planned_output_lens"] == {"mean": 23.0, "min": 10, "max": 38}
    # --output-len given: it wins over the answers' lengths, and the level has one length
    script_server.requests.clear()
    assert main(["sweep", "--url", script_server.url, "--model", "m", "--label", "fixed",
                 "--levels", "1:3", "--dataset", str(share), "--output-len", "5",
                 "--warmup", "0", "--no-sanity", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["max_tokens"] for r in _sent(script_server)} == {5}
    with RunStore() as store:
        [stored] = store.levels(out["run_id"])
    assert stored.stats["planned_output_len"] == 5
    assert stored.stats["planned_output_lens"] == {"mean": 5.0, "min": 5, "max": 5}


# --- goodput ---------------------------------------------------------------------------------


def _r(ttft: float, e2e: float, tokens: int, ok: bool = True) -> dict:
    return {"ok": ok, "start_s": 0.0, "ttft_s": ttft, "e2e_s": e2e, "output_tokens": tokens}


def test_goodput_arithmetic() -> None:
    reqs = [_r(0.100, 1.090, 100),  # TPOT 10 ms, E2E 1090 ms
            _r(0.300, 1.290, 100),  # TTFT 300 ms: misses a 250 ms TTFT target
            _r(0.100, 2.080, 100),  # TPOT 20 ms
            _r(0.050, 0.050, 1),  # one token: TPOT counts as 0 (vLLM's rule)
            _r(0.0, 0.5, 0, ok=False)]  # failed: meets nothing
    g = stats.goodput(reqs, {"ttft_ms": 250}, 4.0)
    assert g == {"targets": {"ttft_ms": 250}, "good": 3, "requests": 5, "share": 0.6,
                 "rate": 0.75}
    assert stats.goodput(reqs, {"ttft_ms": 250, "tpot_ms": 15}, 4.0)["good"] == 2  # type: ignore[index]
    assert stats.goodput(reqs, {"e2el_ms": 1100}, 2.0)["good"] == 2  # type: ignore[index]
    assert stats.goodput(reqs, {"tpot_ms": 10}, 2.0)["good"] == 3  # type: ignore[index]  # <=
    assert stats.goodput(reqs, None, 1.0) is None
    lv = stats.level_metrics([{**r, "prompt_tokens": 10} for r in reqs[:4]], 2, 4)
    assert lv["request_throughput"] == pytest.approx(4 / 2.08, rel=1e-3)
    assert lv["concurrency_mean"] == pytest.approx((1.09 + 1.29 + 2.08 + 0.05) / 2.08, rel=1e-3)
    assert lv["input_tokens"] == 40 and lv["total_tok_s"] == pytest.approx(341 / 2.08, rel=1e-3)


def test_goodput_against_known_timings(known_server: Callable[..., KnownServer]) -> None:
    """TTFT 40 ms, ITL 20 ms, 10 tokens: TPOT ~20 ms, E2E ~220 ms. Each target that must
    fail is missed by 2-4x (a client on a loaded machine that reads a late burst of tokens
    sees a smaller TPOT for that request: a 2x margin was not enough)."""
    srv = known_server(ttft_ms=40, itl_ms=20)
    for targets, share in (("ttft:300,tpot:80,e2el:2000", 1.0), ("ttft:20", 0.0),
                           ("tpot:5", 0.0), ("e2el:110", 0.0)):
        code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--levels", "2:6",
                                      "--output-len", "10", "--goodput", targets, "--seed", "1")
        assert code == 0, err
        level = of_type(events, "level")[0]
        good = level["goodput"]
        assert good["share"] == share, (targets, good)
        assert good["rate"] == pytest.approx(good["good"] / level["duration_s"], rel=1e-3)
        # warm-ups are kept with the level, marked, and not in its numbers
        assert [w["warmup"] for w in level["warmup_requests"]] == [True]
        assert level["completed"] == 6 and len(of_type(events, "request")) == 6


@pytest.mark.e2e
def test_plan_inputs_say_what_is_wrong() -> None:
    assert parse_rates("2:100, 4.5:200") == [(2.0, 100), (4.5, 200)]
    assert parse_goodput("ttft:500,e2el:9000") == {"ttft_ms": 500.0, "e2el_ms": 9000.0}
    assert parse_levels("", required=False) == []
    assert parse_levels(" 1:8, 8:32 ") == [(1, 8), (8, 32)]
    for bad, why in (("1:4,,", "empty level"), ("1:4,", "empty level"), (",1:4", "empty level"),
                     ("1 8:32", "is not C:n"), ("1:8:2", "is not C:n"), ("-1:4", "is not C:n"),
                     ("8:4", "n must be at least C"), ("0:4", "C and n must be >= 1")):
        with pytest.raises(ValueError, match=why):
            parse_levels(bad)
    for bad, fn in (("2-100", parse_rates), ("ttft=5", parse_goodput), ("tbt:5", parse_goodput)):
        with pytest.raises(ValueError):
            fn(bad)
    with pytest.raises(ValueError, match="at least one level"):
        SweepPlan(levels=[], rates=[])
    assert SweepPlan(levels=[], rates=[(2.0, 10)]).level_shapes() == [(0, 10)]
    assert SweepPlan(rates=[(2.0, 10)], max_concurrency=4).level_shapes()[-1] == (4, 10)
    for args in (["--rates", "0:5"], ["--goodput", "ttft:-1"], ["--random-range-ratio", "2"],
                 ["--arrival", "bursty"], ["--workers", "0"], ["--levels", "1:4,,"],
                 ["--levels", "8:4"], ["--seed", "-1"]):
        code, events, _ = agent_run("bench", "sweep", "--url", "http://127.0.0.1:9", *args)
        assert code == 2, args
        assert "\n" not in of_type(events, "error")[0]["message"]


# --- saturation ------------------------------------------------------------------------------


def test_saturation_and_stop_when_saturated(sims: list, tmp_path: Path) -> None:
    """The simulator runs at most 2 requests at once: C=4 and C=6 queue the rest (its
    /metrics says so), the sweep stops there; a rate level it cannot keep up with, without
    /metrics, is told by achieved against offered rate."""
    sim = start_sim(tmp_path / "sim", "--max-running-requests", "2")
    sims.append(sim)
    sim.wait_ready()
    code, events, err = agent_run("bench", "sweep", "--url", sim.url, "--levels",
                                  "4:20,6:20,8:16", "--output-len", "32", "--input-len", "8",
                                  "--stop-when-saturated", "--seed", "2")
    assert code == 0, err
    levels = of_type(events, "level")
    assert [lv["concurrency"] for lv in levels] == [4, 6]  # the third never ran
    for lv in levels:
        sat = lv["saturation"]
        assert sat["saturated"] is True and sat["source"] == "metrics", sat
        assert sat["queued_median"] >= 1
    [sweep] = of_type(events, "sweep")
    assert sweep["status"] == "done" and sweep["stopped_saturated"] is True
    assert "two saturated levels in a row" in sweep["reason"] and sweep["not_run"] == 16
    assert [n["kind"] for n in of_type(events, "notice")] == ["saturated_stop"]


def _sim_without_metrics(tmp: Path, *extra: str) -> SimProcess:
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    argv = [a for a in sim_argv(port, *extra) if a != "--enable-metrics"]
    log = tmp / "sim.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, env=subprocess_env(),
                                start_new_session=True, cwd=tmp)
    return SimProcess(port, proc, log, argv)


def test_saturation_from_rates_without_metrics(sims: list, tmp_path: Path) -> None:
    sim = _sim_without_metrics(tmp_path / "nometrics", "--max-running-requests", "2")
    sims.append(sim)
    sim.wait_ready()
    code, events, err = agent_run("bench", "sweep", "--url", sim.url, "--rates", "1:6,30:60",
                                  "--output-len", "24", "--input-len", "8", "--seed", "3")
    assert code == 0, err
    slow, fast = of_type(events, "level")
    assert slow["saturation"]["saturated"] is False
    assert fast["saturation"]["saturated"] is True
    assert fast["saturation"]["achieved_rate"] < 0.9 * fast["saturation"]["offered_rate"]


def test_an_open_loop_overload_is_saturated_and_stops_the_sweep(
        sims: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The simulator admits every request (256 may run) and slows them all down: offered far
    more than it serves, its queue stays short while requests pile up in its batch. The level
    is saturated by what completed (achieved = request_throughput, well under offered), the
    sweep stops after two such levels, and the stored run says why."""
    from dsv4tui.core.store import RunStore

    sim = start_sim(tmp_path / "sim")
    sims.append(sim)
    sim.wait_ready()
    assert main(["sweep", "--url", sim.url, "--label", "overload", "--rates",
                 "40:80,80:80,2:10", "--output-len", "32", "--input-len", "8", "--seed", "1",
                 "--stop-when-saturated", "--no-sanity", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    levels = out["levels"]
    assert [lv["rate"] for lv in levels] == [40.0, 80.0]  # the 2/s level never ran
    for lv in levels:
        sat = lv["saturation"]
        assert sat["saturated"] is True and sat["source"] == "rate", sat
        assert sat["achieved_rate"] == pytest.approx(lv["request_throughput"], abs=1e-3)
        assert sat["achieved_rate"] < 0.5 * sat["offered_rate"]
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None and run.status == "done"
        assert "two saturated levels in a row" in (run.error or "")
        assert "1 level not run" in (run.error or "")
        assert len(store.levels(run.id)) == 2


def test_a_server_that_keeps_up_is_not_saturated_by_its_drain(
        known_server: Callable[..., KnownServer]) -> None:
    """A short level against a server with a long answer (1 s): the last requests' E2E after
    the last arrival puts request_throughput well under the offered rate, yet the server kept
    pace all along (every request answered at once, each in 1 s): not saturated."""
    srv = known_server(ttft_ms=20, itl_ms=25)
    code, events, err = agent_run("bench", "sweep", "--url", srv.url, "--rates", "10:40",
                                  "--arrival", "constant", "--output-len", "40", "--seed", "1")
    assert code == 0, err
    [level] = of_type(events, "level")
    sat = level["saturation"]
    assert sat["achieved_rate"] == level["request_throughput"]
    assert sat["achieved_rate"] < 0.9 * sat["offered_rate"]  # the drain
    assert sat["saturated"] is False and "drain" in sat["detail"], sat
    assert sat["pace"]["finished"] >= 0.9 * sat["pace"]["arrived"]


# --- the Bench plan dialog --------------------------------------------------------------------


async def test_plan_dialog_sets_rates_goodput_lengths_and_seed() -> None:
    from textual.app import App
    from textual.widgets import Input

    from dsv4tui.tui.screens.modals import PlanInput, SweepPlanScreen

    results: list[PlanInput | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            init = PlanInput("x", [(1, 8)], 128, 256, [(2.0, 10)], {"ttft_ms": 500.0}, 1.0, None)
            self.push_screen(SweepPlanScreen(init, "gate"), results.append)

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#plan-rates", Input).value == "2:10"
        assert screen.query_one("#plan-goodput", Input).value == "ttft:500"
        screen.query_one("#plan-levels", Input).value = ""
        screen.query_one("#plan-rates", Input).value = "2:10, 4:20"
        screen.query_one("#plan-goodput", Input).value = "ttft:400,e2el:9000"
        screen.query_one("#plan-ratio", Input).value = "0.5"
        screen.query_one("#plan-seed", Input).value = "7"
        await pilot.click("#start")
        await pilot.pause()
    [got] = results
    assert got is not None
    plan = SweepPlan.model_validate({**SweepPlan().model_dump(), **got.plan_fields()})
    assert plan.levels == [] and plan.rates == [(2.0, 10), (4.0, 20)]
    assert plan.goodput == {"ttft_ms": 400.0, "e2el_ms": 9000.0}
    assert plan.random_range_ratio == 0.5 and plan.seed == 7


@pytest.mark.e2e
def test_the_queue_sampler_ends_when_its_agent_dies(tmp_path: Path) -> None:
    """A sweep's /metrics sampler (a forked child) must not outlive its agent: with the server
    gone too it never writes a sample, so only the parent's death can tell it (one was found
    still polling a dead port 16 minutes after a test's runner was killed)."""
    import os
    import subprocess
    import sys
    import time

    from plugins.sim import REPO, free_port

    code = ("import os, sys\n"
            "from dsv4tui.agent.bench.saturation import MetricsSampler\n"
            f"s = MetricsSampler('http://127.0.0.1:{free_port()}', interval_s=0.2).start()\n"
            "print(s.pid, flush=True)\n"
            "os._exit(0)  # killed: no stop()\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    pid = int(out.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # it may be a zombie of init's until reaped: gone for our purpose
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(") ")[-1].startswith("Z"):
                    return
        except OSError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError(f"the sampler {pid} outlived its agent by 10 s")
