"""Numbers a server sends are checked (issue 23, point 9): a real hostile HTTP server on
loopback reports usage and /metrics gauges that cannot be; none of them becomes a stored
number, and the CLI's JSON stays exact JSON."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from plugins.bench_server import (
    REPO,
    ScriptServer,
    agent_run,
    delta,
    http_json,
    of_type,
    sse,
)

from dsv4tui.agent.bench.openai_stream import MAX_USAGE_TOKENS
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _usage_raw(completion: str, prompt: str = "5") -> bytes:
    """The include_usage chunk with the numbers written as they are (NaN, 1e400 ...)."""
    return (b'data: {"choices": [], "usage": {"prompt_tokens": %s, "completion_tokens": %s}}'
            b"\n\n" % (prompt.encode(), completion.encode()))


def _stream(completion: str, prompt: str = "5") -> list[Any]:
    return sse(delta(role="assistant", content=""), *[delta(f"t{i} ") for i in range(4)],
               delta(finish="length"), _usage_raw(completion, prompt))


@pytest.mark.parametrize(("completion", "prompt", "why"), [
    ("-7", "5", "completion_tokens -7 is negative"),
    ("NaN", "5", "not a finite number"),
    ("1e400", "5", "not a finite number"),  # Infinity once parsed
    ("12.5", "5", "not a whole number"),
    (str(MAX_USAGE_TOKENS + 1), "5", "is over"),
    ("1000", "5", "completion_tokens 1000 for a request of max_tokens 8"),  # 8 asked
    ("4", "-3", "prompt_tokens -3 is negative"),
    ('"4"', "5", "is not a number"),
])
def test_impossible_usage_is_a_bad_usage_error_never_a_number(
        script_server: ScriptServer, completion: str, prompt: str, why: str) -> None:
    """Before: completion_tokens -7 became output_tokens -7, the level -4,004.6 tok/s,
    the sweep ``done``, exit 0."""
    script_server.responses = [_stream(completion, prompt)]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "1:4", "--warmup", "0", "--output-len", "8")
    assert code == 1, err
    reqs = of_type(events, "request")
    assert reqs and all(r["error_kind"] == "bad_usage" and not r["ok"] for r in reqs)
    assert all(why in r["error"] for r in reqs), reqs[0]["error"]
    # the chunks counted stand in: never the server's impossible number
    assert all(r["output_tokens"] == 4 and r["token_source"] == "chunks" for r in reqs)
    assert all(r["prompt_tokens"] is None for r in reqs)
    [level] = of_type(events, "level")
    assert level["status"] == "failed" and level["errors_by_kind"] == {"bad_usage": len(reqs)}
    assert level["output_tokens"] == 0 and not (level["output_tok_s"] or 0) < 0
    assert of_type(events, "sweep")[0]["status"] == "failed"


def test_a_sweep_against_a_lying_server_stores_no_negative_number(
        script_server: ScriptServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI sweep, the store: the run fails (exit 1) and no row holds -7."""
    script_server.responses = [_stream("-7")]
    code = main(["sweep", "--url", script_server.url, "--model", "m", "--label", "liar",
                 "--levels", "1:4", "--warmup", "0", "--output-len", "8", "--no-sanity"])
    err = capsys.readouterr().err
    assert code == 1, err
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "failed"
        levels = [lv.stats for lv in store.levels(run.id)]
        rows = store.requests(run.id)
    assert all((lv.get("output_tok_s") or 0) >= 0 for lv in levels)
    assert levels[0]["errors_by_kind"].get("bad_usage", 0) >= 3
    assert rows and all(r["output_tokens"] >= 0 and r["error_kind"] == "bad_usage"
                        for r in rows)


def test_a_usage_in_range_is_kept(script_server: ScriptServer) -> None:
    script_server.responses = [_stream("4")]
    code, events, err = agent_run("bench", "sweep", "--url", script_server.url, "--model", "m",
                                  "--levels", "1:2", "--warmup", "0", "--output-len", "8",
                                  "--no-ignore-eos")
    assert code == 0, err
    assert all(r["ok"] and r["output_tokens"] == 4 and r["token_source"] == "usage"
               for r in of_type(events, "request"))


HOSTILE_METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 2.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} -5.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} -0.5
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m"} +Inf
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} NaN
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 1200.0
"""


def _metrics_route(text: str) -> list[Any]:
    body = text.encode()
    return [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)]


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_impossible_gauges_are_null_with_the_reason(
        script_server: ScriptServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``"gen_throughput": Infinity`` (invalid JSON) and ``queued -5  kv -50%``."""
    script_server.get_routes["/metrics"] = _metrics_route(HOSTILE_METRICS)
    script_server.get_routes["/server_info"] = http_json(404, {})
    assert main(["server", "metrics", "--url", script_server.url, "--json"]) == 0
    out = _strict_json(capsys.readouterr().out)
    assert out["running"] == 2 and out["generation_tokens_total"] == 1200
    for key in ("queued", "token_usage", "gen_throughput", "cache_hit_rate"):
        assert out[key] is None, key
    assert "below 0" in out["invalid"]["queued"]
    assert "not a finite number" in out["invalid"]["gen_throughput"]
    assert "not a finite number" in out["invalid"]["cache_hit_rate"]
    assert main(["server", "metrics", "--url", script_server.url]) == 0
    text = capsys.readouterr().out
    [gauges] = [ln for ln in text.splitlines() if ln.startswith("running ")]
    assert "-5" not in gauges and "-50%" not in gauges and "inf" not in gauges
    assert "queued invalid" in gauges and "kv invalid" in gauges
    assert "queued -5 is below 0" in text  # the reason, said once
    # --watch --json: one strict JSON object per line
    assert main(["server", "metrics", "--url", script_server.url, "--watch", "--json",
                 "--count", "1", "--interval", "0.2"]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()
    assert _strict_json(line)["gen_throughput"] is None


def test_a_usage_ratio_over_one_is_invalid(script_server: ScriptServer,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = HOSTILE_METRICS.replace("} -0.5", "} 7.0")
    script_server.get_routes["/metrics"] = _metrics_route(text)
    assert main(["server", "metrics", "--url", script_server.url, "--json"]) == 0
    out = _strict_json(capsys.readouterr().out)
    assert out["token_usage"] is None and "above 1" in out["invalid"]["token_usage"]
