"""Campaigns end to end on this machine (host ``local``): the CLI -> the agent -> a detached
runner -> the simulated SGLang server (real subprocesses) -> the journal -> the run store.

Trouble with real parts: the runner killed with SIGKILL, a torn journal, a second campaign or
a manual restart refused by the host's lock, and variants that fail to start, crash mid-sweep
or answer wrongly. Link drops over SSH are in test_campaign_ssh.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from plugins.campaigns import campaign_dirs, runner_alive, wait_ended
from plugins.sim import REPO, free_port, sim_profile

from dsv4tui.core import paths
from dsv4tui.core.config import ServerProfile
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.main import main

SWEEP = '{ levels = [[1, 2], [2, 4]], output_len = 8, input_len = 8, warmup = 0 }'


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _toml_value(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def profile_toml(name: str, prof: ServerProfile) -> str:
    fields = prof.model_dump(exclude_defaults=True)
    fields["model_path"] = prof.model_path
    body = "\n".join(f"{k} = {_toml_value(v)}" for k, v in fields.items())
    return f"[hosts.local.profiles.{name}]\n{body}\n"


def write_config(port: int, campaign: str, *, extra_profiles: str = "") -> None:
    text = (profile_toml("mxfp4", sim_profile(port, backend="triton"))
            + profile_toml("nvfp4", sim_profile(port, backend="marlin", checkpoint="NVFP4"))
            + extra_profiles + "[hosts.local]\ndefault_profile = \"mxfp4\"\n" + campaign)
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(text)


def campaign_table(*variants: str, name: str = "story", more: str = "") -> str:
    out = f'[campaigns.{name}]\nhost = "local"\nprofile = "mxfp4"\nsweep = {SWEEP}\n{more}\n'
    for v in variants:
        out += f"[[campaigns.{name}.variants]]\n{v}\n"
    return out


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def agent_home() -> Path:
    return paths.data_dir() / "local-agent"


def test_the_story_campaign_runs_every_variant_and_records_what_each_ran(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_config(port, campaign_table(
        'name = "MXFP4_triton"', 'name = "NVFP4_marlin"\nprofile = "nvfp4"',
        'name = "NVFP4_triton"\nprofile = "nvfp4"\nmoe_runner_backend = "triton"',
        'name = "NVFP4_trtllm_routed"\nprofile = "nvfp4"\n'
        'moe_runner_backend = "flashinfer_trtllm_routed"'))
    assert main(["campaign", "start", "story", "--dry-run", "--json"]) == 0
    plan = _json(capsys)
    assert [v["backend"] for v in plan["variants"]] == [
        "triton", "marlin", "triton", "flashinfer_trtllm_routed"]
    assert "--moe-runner-backend flashinfer_trtllm_routed" in plan["variants"][3]["command_line"]
    code = main(["campaign", "start", "story", "--json"])
    out = _json(capsys)
    assert code == 1, out  # a variant failed (as it does on sm_120): the exit code says so
    assert out["state"] == "done"
    states = [(v["name"], v["state"]) for v in out["variants"]]
    assert states == [("MXFP4_triton", "done"), ("NVFP4_marlin", "done"),
                      ("NVFP4_triton", "done"), ("NVFP4_trtllm_routed", "failed")]
    failed = out["variants"][3]
    assert "no kernel image" in failed["reason"] and failed["run_id"] is None
    assert any("no kernel image" in line for line in failed["error_lines"])
    with RunStore() as store:
        runs = {r.label: r for r in store.runs()}
        assert set(runs) == {"MXFP4_triton", "NVFP4_marlin", "NVFP4_triton"}
        assert [(runs[k].backend, runs[k].checkpoint) for k in sorted(runs)] == [
            ("triton", "MXFP4"), ("marlin", "NVFP4"), ("triton", "NVFP4")]
        for run in runs.values():
            assert run.status == "done" and run.sanity_passed and run.launch_id is not None
            assert [lv.concurrency for lv in store.levels(run.id)] == [1, 2]
            assert len(store.requests(run.id)) == 6
        launches = store.launches()
        assert [(la.backend, la.ok) for la in reversed(launches)] == [
            ("triton", True), ("marlin", True), ("triton", True),
            ("flashinfer_trtllm_routed", False)]
    # its report was written when it ended, into the data dir's reports folder
    written = Path(out["report"])
    assert written.parent == paths.data_dir() / "reports" and out["id"] in written.name
    html = written.read_text()
    for name in ("MXFP4_triton", "NVFP4_marlin", "NVFP4_triton", "NVFP4_trtllm_routed",
                 "no kernel image", "--moe-runner-backend", 'id="compare-table"'):
        assert name in html, name
    assert html.count("<figure") >= 3  # tok/s, TTFT, TPOT (+ tensor, tok/s/kW with GPUs)
    md = Path(os.environ["DSV4TUI_DATA_DIR"]) / "again.md"
    assert main(["campaign", "report", "local", out["id"], "--out", str(md)]) == 0
    assert f"wrote the report to {md}" in capsys.readouterr().out
    assert r"| NVFP4\_trtllm\_routed | failed |" in md.read_text()


def test_runner_killed_is_interrupted_then_resumed_to_the_end(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_config(port, campaign_table(
        'name = "first"', 'name = "second"\nprofile = "nvfp4"',
        more='sweep = { levels = [[1, 2], [2, 40]], output_len = 48, input_len = 8, warmup = 0 }'
    ).replace(f"sweep = {SWEEP}\n", "", 1))
    assert main(["campaign", "start", "story", "--detach", "--json"]) == 0
    cid = _json(capsys)["id"]
    [cdir] = campaign_dirs(paths.data_dir())
    journal = cdir / "journal.jsonl"
    deadline = time.monotonic() + 60
    while '"level":1' not in journal.read_text() or '"type":"request","v":1,"variant":0,' \
            '"run":"v0.r0.a0","level":1' not in journal.read_text():
        assert time.monotonic() < deadline, "the second level never started"
        time.sleep(0.05)
    pid = json.loads((cdir / "runner.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_ended(cdir)
    assert main(["campaign", "status", "local", cid, "--json"]) == 0
    status = _json(capsys)
    assert status["state"] == "interrupted" and "during variant first" in status["reason"]
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "interrupted" and 0 < len(store.requests(run.id)) < 42
    assert main(["campaign", "resume", "local", cid, "--json"]) == 0
    out = _json(capsys)
    assert out["state"] == "done" and [v["state"] for v in out["variants"]] == ["done", "done"]
    with RunStore() as store:
        runs = store.runs()
        assert sorted((r.label, r.status) for r in runs) == [
            ("first", "done"), ("first", "interrupted"), ("second", "done")]
        done = [r for r in runs if r.status == "done"]
        assert all(len(store.requests(r.id)) == 42 for r in done)


def test_a_torn_last_line_is_reported_and_everything_before_it_stored(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Power loss: the journal's last line is half written and the runner is gone."""
    port = free_port()
    write_config(port, campaign_table('name = "only"'))
    assert main(["campaign", "start", "story", "--json"]) == 0
    first = _json(capsys)
    [cdir] = campaign_dirs(paths.data_dir())
    lines = (cdir / "journal.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b'"type":"level"' in ln)
    # a new campaign directory with the journal up to a level, then half a line
    torn_dir = cdir.parent / "20261201-000000-0000"
    torn_dir.mkdir()
    (torn_dir / "journal.jsonl").write_bytes(b"".join(lines[:cut]) + lines[cut][:40])
    for name in ("spec.json", "status.json"):
        (torn_dir / name).write_bytes((cdir / name).read_bytes())
    (torn_dir / "status.json").write_text(json.dumps(
        {**json.loads((cdir / "status.json").read_text()), "state": "running"}))
    (torn_dir / "runner.json").write_text(json.dumps({"pid": 2 ** 22 + 7, "state": "running"}))
    assert main(["campaign", "attach", "local", torn_dir.name, "--json"]) == 1
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["state"] == "interrupted" and len(out["torn"]) == 1
    assert "torn journal line" in captured.err
    with RunStore() as store:
        run = store.run(out["variants"][0]["run_id"])
        assert run is not None and run.status == "interrupted"
        want = sum(1 for ln in lines[:cut] if b'"type":"request"' in ln)
        assert len(store.requests(run.id)) == want > 0
        assert first["variants"][0]["run_id"] != run.id


def test_a_second_campaign_or_a_restart_is_refused_naming_the_holder(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_config(port, campaign_table(
        'name = "long"', more="") .replace(
        f"sweep = {SWEEP}", 'sweep = { levels = [[1, 400]], output_len = 64, warmup = 0 }'))
    assert main(["campaign", "start", "story", "--detach", "--json"]) == 0
    cid = _json(capsys)["id"]
    [cdir] = campaign_dirs(paths.data_dir())
    deadline = time.monotonic() + 60
    while '"type":"level_start"' not in (cdir / "journal.jsonl").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for argv in (["campaign", "start", "story"], ["server", "restart", "local"],
                 ["server", "stop", "local"], ["sweep", "local", "--label", "beside"]):
        assert main(argv) == 8, argv
        err = capsys.readouterr().err
        assert f"id {cid}" in err and "campaign 'story'" in err and "runner pid" in err, err
        assert len(err.strip().splitlines()) == 1
    assert main(["campaign", "cancel", "local", cid]) == 0
    assert "cancelled; finished requests are stored" in capsys.readouterr().out
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "cancelled" and len(store.requests(run.id)) > 0


def test_failed_startup_crash_and_wrong_answer_fail_their_variant_and_the_next_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    faulty = (
        'name = "no_start"\nextra_args = ["--sim-speed", "200", "--sim-fault", "fail-startup"]',
        'name = "wrong"\nextra_args = ["--sim-speed", "200", "--sim-fault", "wrong-answer"]',
        'name = "crash"\nextra_args = ["--sim-speed", "200", "--sim-decode-speed", "20", '
        '"--sim-fault", "crash-after:3"]',
        'name = "fine"')
    write_config(port, campaign_table(*faulty))
    assert main(["campaign", "start", "story", "--json"]) == 1
    out = _json(capsys)
    by = {v["name"]: v for v in out["variants"]}
    assert [by[n]["state"] for n in ("no_start", "wrong", "crash", "fine")] == [
        "failed", "failed", "failed", "done"]
    assert "startup failed" in by["no_start"]["reason"]
    assert "sanity failed" in by["wrong"]["reason"]
    assert "the server died during the sweep" in by["crash"]["reason"], by["crash"]
    with RunStore() as store:
        wrong = store.run(by["wrong"]["run_id"])
        assert wrong is not None and wrong.status == "failed" and wrong.sanity_passed is False
        crash = store.run(by["crash"]["run_id"])
        assert crash is not None and crash.status == "failed"
        assert store.run(by["fine"]["run_id"]).status == "done"  # type: ignore[union-attr]


def test_campaign_config_errors_are_one_line_with_the_key_path(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    cases = [
        (campaign_table('name = "x"\nmoe_runner_backend = "nope"'),
         "campaigns.story.variants[0] (x).moe_runner_backend"),
        (campaign_table('name = "x"\nprofile = "missing"'), "unknown profile 'missing'"),
        (campaign_table('name = "x"\nbogus = 1'), "'bogus' is not a launch profile field"),
        (campaign_table('name = "x"', 'name = "x"'), "variant names must be unique"),
        (campaign_table('name = "x"').replace(SWEEP, "{ levels = [[0, 1]] }"),
         "campaigns.story.sweep.levels"),
    ]
    for text, needle in cases:
        write_config(port, text)
        assert main(["campaign", "start", "story", "--dry-run"]) == 2, needle
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    write_config(port, campaign_table('name = "x"'))
    assert main(["campaign", "start", "nothere", "--dry-run"]) == 2
    assert "no campaign 'nothere'" in capsys.readouterr().err


def test_a_campaign_that_is_not_there_is_exit_2_as_a_run_that_is_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in ((["campaign", "status", "local"], "local: no campaigns on this host"),
                         (["campaign", "status", "local", "20260101-000000-abcd"],
                          "no campaign 20260101-000000-abcd on this host"),
                         (["campaign", "report", "local", "nosuch"], "not a campaign id"),
                         (["runs", "show", "9999"], "no run with id 9999")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err


def test_a_campaign_file_runs_like_a_config_campaign(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    port = free_port()
    write_config(port, "")
    f = tmp_path / "night.toml"
    f.write_text(f'host = "local"\nprofile = "nvfp4"\nsweep = {SWEEP}\n'
                 '[[variants]]\nname = "NVFP4_marlin"\n')
    assert main(["campaign", "start", "--file", str(f), "--json"]) == 0
    out = _json(capsys)
    assert out["name"] == "night" and out["variants"][0]["state"] == "done"
    assert main(["campaign", "list", "local", "--json"]) == 0
    [listed] = _json(capsys)
    assert listed["id"] == out["id"] and listed["state"] == "done"
    # the server the campaign started is left running, and reported so
    assert listed["server"]["running"] is True
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200


def test_the_store_knows_the_campaign_and_runs_point_back(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_config(port, campaign_table('name = "a"', more="repeats = 2"))
    assert main(["campaign", "start", "story", "--json"]) == 0
    out = _json(capsys)
    assert len(out["variants"][0]["run_ids"]) == 2  # repeats: run-to-run spread
    with RunStore() as store:
        camp = cstore.get(store, out["id"])
        assert camp is not None and camp.state == "done" and camp.host == "local"
        assert camp.journal_offset == (campaign_dirs(paths.data_dir())[0] / "journal.jsonl"
                                       ).stat().st_size
        rows = store.query("SELECT campaign_id, variant, repeat_idx FROM runs ORDER BY id")
        assert [tuple(r) for r in rows] == [(out["id"], "a", 0), (out["id"], "a", 1)]
    assert not any(runner_alive(d) for d in campaign_dirs(paths.data_dir()))


def test_restart_with_a_backend_then_sweep_records_the_backend_that_ran(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The README's daily sequence: ``server restart HOST --backend X`` then ``sweep HOST``
    stores X (and the launch it ran on), not the profile's configured backend."""
    port = free_port()
    write_config(port, "")
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        Path(os.environ["DSV4TUI_CONFIG"]).read_text().replace(
            'default_profile = "mxfp4"', 'default_profile = "nvfp4"'))
    assert main(["server", "restart", "local", "--backend", "flashinfer_cutlass", "--json"]) == 0
    started = _json(capsys)
    assert started["backend"] == "flashinfer_cutlass" and started["launch_id"]
    assert main(["sweep", "local", "--label", "after-restart", "--levels", "1:2",
                 "--output-len", "8", "--json"]) == 0
    out = _json(capsys)
    assert out["ran"]["backend"] == "flashinfer_cutlass" and out["ran"]["source"] == "launch"
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None
        assert (run.backend, run.checkpoint, run.profile_name) == (
            "flashinfer_cutlass", "NVFP4", "nvfp4")
        assert run.launch_id == started["launch_id"]
    # a misfit is refused before anything restarts, with the same reason as the dashboard's
    assert main(["server", "restart", "local", "--backend", "flashinfer_mxfp4"]) == 2
    assert "not NVFP4" in capsys.readouterr().err


def test_a_store_locked_by_another_process_loses_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Another process holds the store's write lock for seconds in the middle of a sweep:
    the sweep goes on on the host, the console waits, and every request lands once."""
    import sqlite3
    import subprocess
    import sys

    port = free_port()
    write_config(port, campaign_table('name = "locked"').replace(
        f"sweep = {SWEEP}", 'sweep = { levels = [[2, 24]], output_len = 32, warmup = 0 }'))
    console = subprocess.Popen(
        [sys.executable, "-m", "dsv4tui", "campaign", "start", "story", "--json"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = paths.store_file()
    deadline = time.monotonic() + 60
    while True:  # the first requests are stored: then lock the store for 6 s
        assert time.monotonic() < deadline and console.poll() is None
        time.sleep(0.05)
        if db.exists():
            with sqlite3.connect(db, timeout=10) as probe:
                try:
                    if probe.execute("SELECT count(*) FROM requests").fetchone()[0] >= 2:
                        break
                except sqlite3.OperationalError:
                    pass
    holder = sqlite3.connect(db, timeout=10, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    time.sleep(6)
    holder.execute("ROLLBACK")
    holder.close()
    _out, err = console.communicate(timeout=120)
    assert console.returncode == 0, err
    assert "the run store is busy" in err and "writable again" in err  # it waited, and said so
    with RunStore() as store:
        [run] = store.runs()
        assert run.status == "done"
        reqs = store.requests(run.id)
        assert sorted(r["index"] for r in reqs) == list(range(24))


def test_a_url_sweep_of_the_simulator_records_what_it_reports_and_says_simulated(
        sims: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from plugins.sim import start_sim

    sim = start_sim(tmp_path, backend="flashinfer_cutlass",
                    model="/models/DeepSeek-V4-Flash-NVFP4")
    sims.append(sim)
    sim.wait_ready()
    assert main(["sweep", "--url", sim.url, "--label", "by-url", "--levels", "1:2",
                 "--output-len", "8", "--no-sanity", "--json"]) == 0
    out = _json(capsys)
    assert out["ran"]["source"] == "server_info" and out["ran"]["simulated"] is True
    with RunStore() as store:
        run = store.run(out["run_id"])
        assert run is not None and run.simulated and run.backend == "flashinfer_cutlass"
        [level] = [lv.stats for lv in store.levels(run.id)]
    # the server's own view of the level, next to the client's: its /metrics over the window
    srv = level["server"]
    assert srv["source"] == "metrics" and srv["requests"] == 2
    assert srv["output_tokens"] == level["output_tokens"] == 16
    lo, hi = srv["ttft_ms"]["p50_bucket"]
    assert lo <= level["ttft_ms"]["p50"] <= hi  # the client's TTFT is in the server's bucket
    assert srv["ttft_ms"]["mean"] <= level["ttft_ms"]["mean"] + 5  # server <= client (+clock)
    assert main(["runs", "list"]) == 0
    assert "done SIM" in capsys.readouterr().out
    assert main(["runs", "show", str(run.id)]) == 0
    shown = capsys.readouterr().out
    assert "srv TTFT p50 ms" in shown and f"{lo:,.0f}-{hi:,.0f}" in shown
