"""``dsv4tui sweep`` and ``dsv4tui sanity`` end to end: CLI -> LocalSession -> agent -> server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import REPO, KnownServer
from plugins.sim import free_port

from dsv4tui.agent.bench.stats import LEVEL_JSON_KEYS
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_sweep_url_json_shape_and_store(known_server: Callable[..., KnownServer],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    srv = known_server(answer="391")
    code = main(["sweep", "--url", srv.url, "--label", "first", "--levels", "1:2,2:4",
                 "--output-len", "6", "--input-len", "8", "--json"])
    out = _json(capsys)
    assert code == 0
    assert list(out) == ["run_id", "label", "status", "error", "campaign_id", "errors_by_kind",
                         "notices", "ran", "sanity", "levels"]
    assert out["status"] == "done" and out["error"] is None and out["errors_by_kind"] == {}
    assert out["label"] == "first" and out["sanity"]["passed"] is True
    # the known-timing server has no /server_info: what it runs is unknown, and says so
    assert out["ran"]["backend"] == "unknown" and out["ran"]["source"] == "unknown"
    assert out["sanity"]["cases"][0]["answer"].strip() == "391"
    assert [lv["concurrency"] for lv in out["levels"]] == [1, 2]
    for lv in out["levels"]:
        assert tuple(lv) == (*LEVEL_JSON_KEYS, "status", "partial", "errors_by_kind")
        assert lv["status"] == "done" and lv["partial"] is False
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            assert set(lv[key]) == {"mean", "p50", "p90", "p99"}
        assert lv["token_count_source"] == "usage" and lv["errors"] == 0
    assert out["levels"][1]["output_tokens"] == 24
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None and run.status == "done" and run.host == "local"
        assert run.url == srv.url and run.model == "known-timing" and run.sanity_passed
        assert len(store.requests(run.id)) == 6 and len(store.levels(run.id)) == 2


def test_sweep_sanity_gate(known_server: Callable[..., KnownServer],
                           capsys: pytest.CaptureFixture[str]) -> None:
    srv = known_server(answer="392")
    code = main(["sweep", "--url", srv.url, "--label", "gated", "--levels", "1:1", "--json"])
    out = _json(capsys)
    assert code == 1 and out["levels"] == [] and out["sanity"]["passed"] is False
    code = main(["sweep", "--url", srv.url, "--label", "forced", "--levels", "1:1",
                 "--output-len", "4", "--no-sanity"])
    text = capsys.readouterr().out
    assert code == 0 and "forced" in text and "tok/s" in text
    with RunStore() as store:
        gated, forced = store.find_run("gated"), store.find_run("forced")
        assert gated.status == "failed" and "sanity failed" in (gated.error or "")
        assert store.requests(gated.id) == [] and forced.status == "done"


def test_sanity_cli(known_server: Callable[..., KnownServer],
                    capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = known_server(answer="391"), known_server(answer="392")
    assert main(["sanity", "--url", good.url]) == 0
    assert "sanity passed (1/1)" in capsys.readouterr().out
    assert main(["sanity", "--url", bad.url, "--json"]) == 1
    out = _json(capsys)
    assert out["passed"] is False and out["cases"][0]["answer"].strip() == "392"
    with RunStore() as store:
        assert len(store.sanity_results()) == 2


@pytest.mark.e2e
def test_sanity_cli_server_down(capsys: pytest.CaptureFixture[str]) -> None:
    # connection refused: exit 4, a connection problem (README's exit codes), not a failed
    # sanity (1)
    assert main(["sanity", "--url", f"http://127.0.0.1:{free_port()}"]) == 4
    assert "cannot connect" in capsys.readouterr().out
    assert main(["sanity", "--url", f"http://127.0.0.1:{free_port()}", "--json"]) == 4


@pytest.mark.parametrize(("argv", "needle"), [
    (["sweep", "--label", "x"], "give a HOST or --url"),
    (["sweep", "h", "--url", "http://x", "--label", "x"], "give a HOST or --url"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "8x32"], "--levels: '8x32'"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "0:4"], "C and n must be"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "1:4,,"], "empty level"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "1:4,"], "empty level"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "8:4"], "n must be at least C"),
    (["sweep", "--url", "http://x", "--label", "x", "--seed", "-1"], "seed"),
    (["sweep", "--url", "http://x", "--label", "x", "--output-len", "0"], "output_len"),
    (["sanity", "--url", "http://x", "--profile", "p"], "--profile goes with a HOST"),
    (["sweep", "--url", "http://x"], "--label"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_sweep_on_a_host_records_what_runs_not_the_config(
        known_server: Callable[..., KnownServer], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """The profile says marlin/NVFP4, but dsv4tui did not start the server on its port and
    the server reports nothing: the run says unknown (and that the server is not ours)."""
    srv = known_server(answer="391")
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        f'[hosts.local.profiles.nvfp4]\nmodel_path = "/m/dsv4"\nserved_model_name = '
        f'"known-timing"\nport = {srv.port}\nmoe_runner_backend = "marlin"\n'
        f'quantization = "modelopt_fp4"\ncheckpoint = "NVFP4"\n')
    code = main(["sweep", "local", "--label", "on-host", "--levels", "1:1", "--output-len", "4",
                 "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0, out
    assert "which dsv4tui did not start" in captured.err
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None and run.host == "local"
        assert (run.backend, run.checkpoint, run.launch_id) == ("unknown", "unknown", None)
        assert run.url == srv.url


@pytest.mark.e2e
def test_sweep_without_a_server_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        f'[hosts.local.profiles.p]\nmodel_path = "/m"\nport = {free_port()}\n'
        'api_key_env = "SGLANG_API_KEY"\n')
    code = main(["sweep", "local", "--label", "none", "--levels", "1:1"])
    err = capsys.readouterr().err
    assert code == 1 and "no server is running" in err and "SGLANG_API_KEY" not in err
    assert len(err.strip().splitlines()) == 1
    with RunStore() as store:
        assert store.runs() == []


def test_killing_the_console_mid_sweep_loses_no_finished_request(
        known_server: Callable[..., KnownServer], capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep runs on the host (here: this machine's agent, detached): a console killed
    with SIGKILL stops nothing; ``campaign attach`` collects every request, none twice."""
    srv = known_server(ttft_ms=20, itl_ms=5, tokens=20)
    console = subprocess.Popen(
        [sys.executable, "-m", "dsv4tui", "sweep", "--url", srv.url, "--label", "killed",
         "--levels", "2:60", "--output-len", "20", "--no-sanity"], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db_path = paths.store_file()
    deadline = time.monotonic() + 60
    seen = 0
    while seen < 4:
        assert time.monotonic() < deadline and console.poll() is None, "no requests stored"
        time.sleep(0.05)
        if db_path.exists():
            db = sqlite3.connect(db_path, timeout=10)
            try:
                seen = db.execute("SELECT count(*) FROM requests").fetchone()[0]
            except sqlite3.OperationalError:
                seen = 0
            db.close()
    console.send_signal(signal.SIGKILL)
    console.wait(10)
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "running"  # its runner goes on: not "interrupted"
        cid = store.query("SELECT campaign_id FROM runs WHERE id = ?", (run.id,))[0][0]
    assert main(["campaign", "attach", "local", cid, "--json"]) == 0
    out = _json(capsys)
    assert out["state"] == "done" and out["variants"][0]["run_id"] == run.id
    with RunStore() as store:
        assert store.run(run.id).status == "done"  # type: ignore[union-attr]
        reqs = store.requests(run.id)
        assert sorted(r["index"] for r in reqs) == list(range(60))
    # the server streamed the 60 and the warm-up (the probes are shorter): none lost or twice
    assert srv.served(min_tokens=20) == 60 + 1
