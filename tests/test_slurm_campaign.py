"""Campaigns on a Slurm host, against the real two-node Slurm of tests/plugins/slurm: the
runner is the payload of one batch job (on node 0), every variant's simulator ranks a job step
of that allocation (one job id for the whole campaign, no re-queue), each step scancelled
before the next; the console drops off mid-campaign and ``campaign attach`` collects all of it.
Plus the server start as an object: an old campaign spec with ``launch.agent_args`` resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, free_port
from plugins.slurm import SlurmCluster
from test_slurm import run_cli, write_config

from dsv4tui.agent.campaign.journal import events
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore

SWEEP = '{ levels = [[1, 3], [2, 4]], input_len = 16, output_len = 8, warmup = 0 }'


def add_campaign(name: str = "two") -> None:
    with paths.config_file().open("a") as f:
        f.write(f'[campaigns.{name}]\nhost = "cluster"\nprofile = "sim"\nsweep = {SWEEP}\n'
                f'sanity = []\n'
                f'[[campaigns.{name}.variants]]\nname = "triton"\n'
                f'[[campaigns.{name}.variants]]\nname = "mem80"\n'
                f'mem_fraction_static = 0.8\n')


def _campaign_dir(cid: str) -> Path:
    found = list(paths.data_dir().rglob(f"campaigns/{cid}/spec.json"))
    assert found, f"no campaign dir for {cid}"
    return found[0].parent


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def _journal(cdir: Path) -> list[dict[str, Any]]:
    return list(events(str(cdir / "journal.jsonl")))


def test_a_dry_run_says_one_job_for_every_variant_and_each_ranks_argv(
        capsys: pytest.CaptureFixture[str]) -> None:
    write_config(free_port(), free_port())
    add_campaign()
    code, out, err = run_cli(capsys, "campaign", "start", "two", "--dry-run")
    assert code == 0, out + err
    assert "one Slurm job of 2 nodes for every variant" in out
    assert out.count("rank 0: ") == 2 and out.count("rank 1: ") == 2
    assert "--node-rank 1" in out and "--mem-fraction-static 0.8" in out


def test_a_campaign_on_an_ssh_node_group_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file().write_text('[campaigns.c]\nhost = "demo-pair"\n'
                                   'variants = [{name = "a"}]\n')
    code, _, err = run_cli(capsys, "campaign", "start", "c", "--dry-run")
    assert code == 2
    assert "demo-pair is a host made of nodes (SSH fan-out)" in err and "Slurm host" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_two_variants_in_one_allocation_through_a_link_drop_nothing_lost(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    port, init = free_port(), free_port()
    write_config(port, init)
    add_campaign()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    console = subprocess.Popen([sys.executable, "-m", "dsv4tui", "campaign", "start", "two"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        def started() -> Path | None:
            if console.poll() is not None:
                raise AssertionError("the console ended: " + "".join(console.communicate()))
            return next(iter(paths.data_dir().rglob("campaigns/*/spec.json")), None)

        cdir = _wait(started, 60, "no campaign directory").parent
        runner = _wait(lambda: (r := json.loads((cdir / "runner.json").read_text())
                                if (cdir / "runner.json").exists() else None) and r,
                       60, "no runner.json")
        job = str(runner["slurm_job_id"])
        # the console drops off once the first variant's sweep is under way
        _wait(lambda: any(e.get("type") == "level" for e in _journal(cdir)), 240,
              "no level of the first variant: " + (cdir / "runner.log").read_text()
              if (cdir / "runner.log").exists() else "no runner.log")
        console.send_signal(signal.SIGKILL)
        console.communicate(timeout=30)
        assert slurm.queue() == [job]  # the campaign goes on in its job
    finally:
        if console.poll() is None:
            console.kill()
    # the second variant: a step of the same job, after the first one's step was scancelled
    _wait(lambda: not (cdir / "runner.json").exists() or json.loads(
        (cdir / "runner.json").read_text()).get("state") not in ("queued", "running")
        or not slurm.queue(), 300, "the campaign did not end")
    _wait(lambda: not slurm.queue(), 60, "the campaign's job outlived its runner")
    code, out, err = run_cli(capsys, "campaign", "attach", "cluster", cdir.name, "--json")
    assert code == 0, out + err
    info = json.loads(out)
    assert info["state"] == "done", info
    assert [v["state"] for v in info["variants"]] == ["done", "done"]

    journal = _journal(cdir)
    launches = [e for e in journal if e.get("type") == "launch_end"]
    assert [e["ok"] for e in launches] == [True, True]
    assert {e["slurm_job_id"] for e in launches} == {job}  # one allocation, no re-queue
    steps = [e["slurm_step"] for e in launches]
    assert len(set(steps)) == 2 and all(s.startswith(job + ".") for s in steps)
    stops = [e for e in journal if e.get("type") == "stopped"]
    assert [e["slurm_step"] for e in stops] == steps and all(e["confirmed"] for e in stops)
    # the first step was gone before the second started
    order = [(e["type"], e.get("slurm_step")) for e in journal
             if e.get("type") in ("launch_end", "stopped")]
    assert order == [("launch_end", steps[0]), ("stopped", steps[0]),
                     ("launch_end", steps[1]), ("stopped", steps[1])]
    with RunStore() as store:
        row = cstore.get(store, cdir.name)
        assert row is not None
        run_ids = cstore.run_ids(store, cdir.name)
        assert len(run_ids) == 2
        launch_rows = {la.id: la for la in store.launches("cluster")}
        for run_id in run_ids.values():
            run = store.run(run_id)
            assert run is not None and run.launch_id is not None
            assert run.profile is not None and run.profile["slurm_job_id"] == job
            launch = launch_rows[run.launch_id]
            assert launch.profile is not None and launch.profile["slurm_job_id"] == job
            levels = store.levels(run_id)
            assert [lv.concurrency for lv in levels] == [1, 2]  # every level of both sweeps
            assert sum(len(store.requests(run_id, lv.idx)) for lv in levels) == 3 + 4
    # attaching again adds nothing
    code, out2, err = run_cli(capsys, "campaign", "attach", "cluster", cdir.name, "--json")
    assert code == 0 and json.loads(out2)["variants"] == info["variants"]


def test_a_rank_killed_fails_its_variant_names_the_node_and_the_next_runs_in_the_same_job(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """--kill-on-bad-exit: rank 1 SIGKILLed mid-sweep ends the first variant's step; the
    variant fails naming node1, its status and the failure class; the allocation stays, and
    the second variant runs as the next step of the same job."""
    from test_slurm import rank_pids

    port, init = free_port(), free_port()
    write_config(port, init)
    add_campaign()
    text = paths.config_file().read_text().replace(
        SWEEP, '{ levels = [[1, 3], [2, 40]], input_len = 16, output_len = 48, warmup = 0 }')
    paths.config_file().write_text(text)
    code, out, err = run_cli(capsys, "campaign", "start", "two", "--detach", "--json")
    assert code == 0, out + err
    cdir = _campaign_dir(json.loads(out)["id"])
    _wait(lambda: any(e.get("type") == "level" for e in _journal(cdir)), 240,
          "no level of the first variant")
    (pid,) = rank_pids(port, 1)
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: any(e.get("type") == "campaign_end" for e in _journal(cdir)), 300,
          "the campaign did not end")
    journal = _journal(cdir)
    ends = {e["variant"]: e for e in journal if e.get("type") == "variant_end"}
    assert ends[0]["state"] == "failed" and ends[1]["state"] == "done"
    why = ends[0]["reason"]
    assert "node node1 (rank 1) status 137" in why and "killed by SIGKILL" in why, why
    launches = [e for e in journal if e.get("type") == "launch_end"]
    assert [e["ok"] for e in launches] == [True, True]
    assert len({e["slurm_job_id"] for e in launches}) == 1  # the same allocation
    code, out, err = run_cli(capsys, "campaign", "attach", "cluster", cdir.name, "--json")
    assert code == 1 and [v["state"] for v in json.loads(out)["variants"]] == ["failed", "done"]
