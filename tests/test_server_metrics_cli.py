"""``dsv4tui server metrics``: from a URL (this machine scrapes) and from a host (the agent
scrapes next to the server, here the local agent in a subprocess), once and ``--watch``;
failures are one line and exit 1. Real simulator processes on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from plugins.bench_server import REPO
from plugins.sim import SimProcess, free_port, sim_argv, start_sim, subprocess_env

from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[SimProcess]:
    sim = start_sim(tmp_path)
    try:
        sim.wait_ready()
        for n in (4, 8):
            httpx.post(sim.url + "/v1/completions", timeout=30,
                       json={"prompt": "x", "max_tokens": n, "ignore_eos": True})
        yield sim
    finally:
        sim.stop()


def test_once_from_a_url(served: SimProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["server", "metrics", "--url", served.url, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "sglang" and out["over"] == "since_start"
    finished = out["requests_total"]
    assert finished >= 2 and out["latency_ms"]["e2e"]["observations"] == finished
    # ITL counts token intervals, not requests: 3 + 7 from the two requests (4 and 8 tokens)
    itl = out["latency_ms"]["itl"]
    assert "requests" not in itl and itl["observed"] == "token intervals"
    assert itl["observations"] >= 10 > finished
    assert out["latency_ms"]["e2e"]["observed"] == "requests"
    assert out["latency_ms"]["ttft"]["p50"] > 0 and out["running"] == 0
    assert out["latency_ms"]["ttft"]["p50_bucket"][0] <= out["latency_ms"]["ttft"]["p50"]
    assert main(["server", "metrics", "--url", served.url]) == 0
    text = capsys.readouterr().out
    assert "since the server started" in text and "TTFT" in text and "bucket in brackets" in text
    [itl_line] = [ln for ln in text.splitlines() if ln.strip().startswith("ITL")]
    assert f"({itl['observations']:,.0f} token intervals)" in itl_line
    [e2e_line] = [ln for ln in text.splitlines() if ln.strip().startswith("E2E")]
    assert f"({finished:,.0f} requests)" in e2e_line
    assert "gen idle" in text  # nothing running: the gauge is only the last one seen


def test_watch_from_a_host_through_the_agent(served: SimProcess,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """No server of ours on this host: the agent reads the profile's port."""
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        f'[hosts.local.profiles.p]\nmodel_path = "/m"\nport = {served.port}\n')
    code = main(["server", "metrics", "local", "--watch", "--count", "3", "--interval", "0.3",
                 "--window", "30", "--json"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 0 and len(lines) == 3
    assert {ln["over"] for ln in lines} == {"last_30s"}
    assert lines[-1]["url"] == served.url and lines[-1]["simulated"] is False
    assert lines[-1]["generation_tok_s"] == 0.0  # nothing finished between the samples


def test_no_metrics_and_no_server_are_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    argv = [a for a in sim_argv(port) if a != "--enable-metrics"]
    log = tmp_path / "sim.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path,
                                start_new_session=True, env=subprocess_env())
    sim = SimProcess(port, proc, log, argv)
    try:
        sim.wait_ready()
        assert main(["server", "metrics", "--url", sim.url]) == 1
        err = capsys.readouterr().err.strip()
        assert "--enable-metrics" in err and len(err.splitlines()) == 1
    finally:
        sim.stop()
    # connection refused: exit 4, a connection problem (README's exit codes); an HTTP answer
    # that is not metrics (above) is 1, a --url that is no URL 2
    assert main(["server", "metrics", "--url", f"http://127.0.0.1:{free_port()}"]) == 4
    err = capsys.readouterr().err.strip()
    assert "cannot reach" in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert main(["server", "metrics", "--url", "127.0.0.1:30000"]) == 2
    assert "give http://HOST:PORT" in capsys.readouterr().err
    assert main(["server", "metrics"]) == 2
    assert "give a HOST or --url" in capsys.readouterr().err
    assert main(["server", "metrics", "--url", "http://x", "--interval", "0"]) == 2
