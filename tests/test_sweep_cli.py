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

from dsv4tui import paths
from dsv4tui.agent.stats import LEVEL_JSON_KEYS
from dsv4tui.cli import main
from dsv4tui.store import RunStore


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
    assert list(out) == ["run_id", "label", "sanity", "levels"]
    assert out["label"] == "first" and out["sanity"]["passed"] is True
    assert out["sanity"]["cases"][0]["answer"].strip() == "391"
    assert [lv["concurrency"] for lv in out["levels"]] == [1, 2]
    for lv in out["levels"]:
        assert tuple(lv) == LEVEL_JSON_KEYS
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


def test_sanity_cli_server_down(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sanity", "--url", f"http://127.0.0.1:{free_port()}"]) == 1
    assert "cannot connect" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "needle"), [
    (["sweep", "--label", "x"], "give a HOST or --url"),
    (["sweep", "h", "--url", "http://x", "--label", "x"], "give a HOST or --url"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "8x32"], "--levels: '8x32'"),
    (["sweep", "--url", "http://x", "--label", "x", "--levels", "0:4"], "C and n must be"),
    (["sweep", "--url", "http://x", "--label", "x", "--output-len", "0"], "output_len"),
    (["sanity", "--url", "http://x", "--profile", "p"], "--profile goes with a HOST"),
    (["sweep", "--url", "http://x"], "--label"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_sweep_on_a_host_profile_records_the_snapshot(
        known_server: Callable[..., KnownServer], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    srv = known_server(answer="391")
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        f'[hosts.local.profiles.nvfp4]\nmodel_path = "/m/dsv4"\nserved_model_name = '
        f'"known-timing"\nport = {srv.port}\nmoe_runner_backend = "marlin"\n'
        f'quantization = "modelopt_fp4"\ncheckpoint = "NVFP4"\n')
    with RunStore() as store:
        launch = store.record_launch("local", "nvfp4", {"port": srv.port}, "marlin", "NVFP4", {},
                                     42.0, True, None)
    code = main(["sweep", "local", "--label", "on-host", "--levels", "1:1", "--output-len", "4",
                 "--json"])
    out = _json(capsys)
    assert code == 0, out
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None and run.host == "local" and run.profile_name == "nvfp4"
        assert (run.backend, run.checkpoint, run.launch_id) == ("marlin", "NVFP4", launch)
        assert run.profile is not None and run.profile["port"] == srv.port


def test_killing_the_console_mid_sweep_loses_no_finished_request(
        known_server: Callable[..., KnownServer]) -> None:
    srv = known_server(ttft_ms=20, itl_ms=5, tokens=20)
    console = subprocess.Popen(
        [sys.executable, "-m", "dsv4tui", "sweep", "--url", srv.url, "--label", "killed",
         "--levels", "2:400", "--output-len", "20", "--no-sanity"], cwd=REPO,
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
        assert run.status == "interrupted"
        assert len(store.requests(run.id)) >= seen
