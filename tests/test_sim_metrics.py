"""The simulator's /metrics say what it did: SGLang's names, types and bucket bounds, counters
that move by exactly the requests and tokens it served, a speculative accept length that is
what its steps accepted. Real simulator processes on loopback, read with the agent's scraper
(prometheus_client's parser)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
from plugins.sim import start_sim

from dsv4tui.agent.host.server_metrics import histogram_delta, parse, scrape


def _complete(url: str, max_tokens: int) -> dict:
    r = httpx.post(url + "/v1/completions", timeout=30,
                   json={"prompt": "Tell me about GPUs", "max_tokens": max_tokens,
                         "ignore_eos": True})
    r.raise_for_status()
    return r.json()["usage"]


def test_counters_match_what_was_served(tmp_path: Path) -> None:
    sim = start_sim(tmp_path)
    try:
        sim.wait_ready()
        before = scrape(sim.url, full=True)
        assert before["ok"], before
        usages = [_complete(sim.url, n) for n in (5, 9, 17)]

        # one more: the client hangs up after the first tokens (an abort, not a request served)
        def cut_short() -> None:
            with httpx.stream("POST", sim.url + "/v1/completions", timeout=30, json={
                    "prompt": "x", "max_tokens": 400, "ignore_eos": True, "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        return
        t = threading.Thread(target=cut_short)
        t.start()
        t.join(30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            after = scrape(sim.url, full=True)
            if after["running"] == 0:
                break
            time.sleep(0.05)
        served = sum(u["completion_tokens"] for u in usages)
        assert after["requests_total"] - before["requests_total"] == 3
        assert after["generation_tokens_total"] - before["generation_tokens_total"] == served
        assert after["prompt_tokens_total"] - before["prompt_tokens_total"] == \
            sum(u["prompt_tokens"] for u in usages)
        e2e = histogram_delta(after["histograms"]["e2e"], before["histograms"]["e2e"])
        ttft = histogram_delta(after["histograms"]["ttft"], before["histograms"]["ttft"])
        assert e2e is not None and e2e["count"] == 3  # the aborted one never finished
        assert ttft is not None and ttft["count"] == 4  # ... but it had its first token
        samples = parse(httpx.get(sim.url + "/metrics", timeout=5).text)
        assert samples["sglang:num_aborted_requests_total"][0][1] >= 1
        # SGLang's bucket bounds, so a quantile is as coarse as the real server's
        les = [lab["le"] for lab, _ in samples["sglang:time_to_first_token_seconds_bucket"]]
        assert les[:4] == ["0.1", "0.2", "0.4", "0.6"] and les[-1] == "+Inf"
        itl = [lab["le"] for lab, _ in samples["sglang:inter_token_latency_seconds_bucket"]]
        assert itl[0] == "0.002"
        phases = after["startup"]
        assert set(phases) >= {"load_weight", "kv_cache_allocation", "cuda_graph_capture"}
    finally:
        sim.stop()


def test_speculative_accept_length_is_what_the_steps_accepted(tmp_path: Path) -> None:
    sim = start_sim(tmp_path, "--speculative-algorithm", "EAGLE",
                    "--speculative-num-draft-tokens", "4", "--decode-log-interval", "5")
    try:
        sim.wait_ready()
        before = scrape(sim.url, full=True)
        usage = _complete(sim.url, 120)
        assert usage["completion_tokens"] == 120  # speculation never changes the output
        m = scrape(sim.url, full=True)
        logged = [float(x) for x in re.findall(r"accept len: ([0-9.]+)", sim.log_text())]
        assert logged, "the decode lines carry the accept length"
        assert m["spec_accept_length"] == round(logged[-1], 3) or \
            abs(m["spec_accept_length"] - logged[-1]) < 0.01
        assert 1.0 < m["spec_accept_length"] <= 4.0
        # like SGLang, each step's interval is split over the tokens it produced: one
        # inter-token observation per token after the first
        itl = histogram_delta(m["histograms"]["itl"], before["histograms"]["itl"])
        assert itl is not None and itl["count"] == 119
    finally:
        sim.stop()
    plain = start_sim(tmp_path / "plain")
    try:
        plain.wait_ready()
        assert scrape(plain.url, full=True)["spec_accept_length"] is None  # not speculating
    finally:
        plain.stop()
