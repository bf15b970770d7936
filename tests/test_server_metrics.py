"""A server's /metrics, parsed with prometheus_client's parser and reduced deliberately."""

from __future__ import annotations

import pytest
from plugins.bench_server import ScriptServer
from plugins.sim import free_port

from dsv4tui.agent.host import server_metrics as sm

# SGLang 0.5.2x, plain TP 8: one series per gauge, from TP0.
SGLANG_TP = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="dsv4",pp_rank="0",tp_rank="0"} 7.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="dsv4",pp_rank="0",tp_rank="0"} 2.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="dsv4",pp_rank="0",tp_rank="0"} 0.31
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="dsv4"} 12345.0
"""


def _gauge(name: str, rows: list[tuple[str, float]]) -> str:
    lines = [f"# HELP {name} x", f"# TYPE {name} gauge"]
    lines += [f"{name}{{{labels}}} {value}" for labels, value in rows]
    return "\n".join(lines) + "\n"


def test_plain_sglang_series() -> None:
    out = sm.summarize(sm.parse(SGLANG_TP))
    assert out["engine"] == "sglang"
    assert (out["running"], out["queued"], out["token_usage"]) == (7.0, 2.0, 0.31)
    assert out["generation_tokens_total"] == 12345.0  # counters keep their _total name
    assert out["gen_throughput"] is None  # absent, not 0


def test_every_tp_rank_reporting_the_same_batch_is_not_counted_eight_times() -> None:
    """--enable-metrics-for-all-schedulers: TP0..TP7 each report the batch they all run."""
    text = _gauge("sglang:num_running_reqs",
                  [(f'model_name="m",pp_rank="0",tp_rank="{r}"', 5.0) for r in range(8)])
    assert sm.summarize(sm.parse(text))["running"] == 5.0


def test_dp_groups_and_priorities_are_summed() -> None:
    """DP attention: each DP group holds its own requests; so does each priority class."""
    rows = [(f'dp_rank="{d}",model_name="m",tp_rank="{2 * d + t}"', float(d + 1))
            for d in range(4) for t in range(2)]
    text = _gauge("sglang:num_running_reqs", rows)
    text += _gauge("sglang:num_queue_reqs", [('model_name="m",priority="0"', 3.0),
                                             ('model_name="m",priority="1"', 4.0)])
    out = sm.summarize(sm.parse(text))
    assert out["running"] == 1 + 2 + 3 + 4 and out["queued"] == 7.0
    assert out["series"] == {"running": 8, "queued": 2}


def test_vllm_names() -> None:
    text = _gauge("vllm:num_requests_running", [('model_name="m"', 2.0)])
    text += _gauge("vllm:num_requests_waiting", [('model_name="m"', 0.0)])
    out = sm.summarize(sm.parse(text))
    assert (out["engine"], out["running"], out["queued"]) == ("vllm", 2.0, 0.0)


def test_not_the_exposition_format_is_a_clear_error() -> None:
    with pytest.raises(sm.MetricsError, match="not the Prometheus text format"):
        sm.parse("sglang:num_running_reqs{tp_rank=0 oops\n")


def test_scrape_a_real_endpoint(script_server: ScriptServer) -> None:
    script_server.get_routes["/metrics"] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d"
        b"\r\n\r\n%s" % (len(SGLANG_TP), SGLANG_TP.encode())]
    out = sm.scrape(script_server.url)
    assert out["ok"] and out["status"] == 200 and out["error"] is None
    assert (out["running"], out["queued"]) == (7.0, 2.0) and out["time"] > 0


def test_scrape_failures_say_why(script_server: ScriptServer) -> None:
    out = sm.scrape(script_server.url)  # no /metrics route: 404
    assert not out["ok"] and out["status"] == 404 and "--enable-metrics" in out["error"]
    assert out["running"] is None
    out = sm.scrape(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    assert not out["ok"] and out["status"] == 0 and "cannot reach" in out["error"]


def test_a_levels_server_side_rate_is_over_its_measured_window(
        sims: list, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """The campaign runner scrapes /metrics at level_start (after the warm-up) and after the
    level; between the two its load workers start and stop, and nothing of the level is
    measured. The server's output tok/s is its own token count over the level's measured
    window (first send -> last finish), so it agrees with the client's (166 against 267 tok/s
    over the scrapes' span before)."""
    import json

    from plugins.sim import start_sim

    from dsv4tui.core.store import RunStore
    from dsv4tui.main import main

    sim = start_sim(tmp_path)
    sims.append(sim)
    sim.wait_ready()
    assert main(["sweep", "--url", sim.url, "--label", "srv", "--levels", "4:8",
                 "--output-len", "32", "--workers", "2", "--no-sanity", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    with RunStore() as store:
        [level] = [lv.stats for lv in store.levels(run_id)]
    srv = level["server"]
    assert level["workers"] == 2 and srv["requests"] == 8  # the warm-up is not in it
    assert srv["output_tokens"] == level["output_tokens"] == 256
    assert srv["window_s"] == pytest.approx(level["duration_s"], abs=1e-3)
    assert srv["scrape_window_s"] >= srv["window_s"]
    assert srv["output_tok_s"] == pytest.approx(level["output_tok_s"], rel=0.01)
