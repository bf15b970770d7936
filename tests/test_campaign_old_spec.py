"""The runner starts a variant's server in-process with a LaunchSpec (``launch.spec`` of the
campaign spec); a campaign started by an older console, whose spec carries the server start as
``launch.agent_args`` (argv), still resumes to the end: real runner, real simulator, real store."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest
from plugins.campaigns import campaign_dirs, wait_ended
from plugins.sim import REPO, free_port
from test_campaign import campaign_table, write_config

from dsv4tui.agent.campaign.journal import events
from dsv4tui.core import paths
from dsv4tui.core.campaign import plan as cplan
from dsv4tui.core.entry import load_settings
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_the_spec_carries_the_server_start_as_an_object(
        capsys: pytest.CaptureFixture[str]) -> None:
    write_config(free_port(), campaign_table('name = "first"'))
    settings, _ = load_settings(None)
    spec = cplan.resolve(settings, "story").agent_spec()
    launch = spec["variants"][0]["launch"]
    assert "agent_args" not in launch
    assert launch["spec"]["argv"] == launch["argv"]
    assert launch["spec"]["replace"] and launch["spec"]["wait_ready"]


@pytest.mark.e2e
def test_an_old_spec_with_agent_args_resumes_to_the_end(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_config(port, campaign_table(
        'name = "first"', 'name = "second"\nprofile = "nvfp4"',
        more='sweep = { levels = [[1, 2], [2, 40]], output_len = 48, input_len = 8, warmup = 0 }'
    ).replace("sweep = { levels = [[1, 2], [2, 4]], output_len = 8, input_len = 8, "
              "warmup = 0 }\n", "", 1))
    assert main(["campaign", "start", "story", "--detach", "--json"]) == 0
    cid = _json(capsys)["id"]
    [cdir] = campaign_dirs(paths.data_dir())
    journal = cdir / "journal.jsonl"
    deadline = time.monotonic() + 60
    while '"type":"level"' not in journal.read_text():
        assert time.monotonic() < deadline, "the first level never ended"
        time.sleep(0.05)
    os.kill(json.loads((cdir / "runner.json").read_text())["pid"], signal.SIGKILL)
    wait_ended(cdir)
    # the spec as an older console wrote it: each variant's server start as agent argv
    settings, _ = load_settings(None)
    plan = cplan.resolve(settings, "story")
    spec = json.loads((cdir / "spec.json").read_text())
    for v, vp in zip(spec["variants"], plan.variants, strict=True):
        del v["launch"]["spec"]
        v["launch"]["agent_args"] = vp.launch.agent_args(
            replace=True, wait_ready=True, grace=cplan.GRACE_S, timeout=cplan.STARTUP_TIMEOUT_S)
    (cdir / "spec.json").write_text(json.dumps(spec))

    assert main(["campaign", "resume", "local", cid, "--json"]) == 0
    out = _json(capsys)
    assert out["state"] == "done" and [v["state"] for v in out["variants"]] == ["done", "done"]
    with RunStore() as store:
        runs = store.runs()
        assert sorted((r.label, r.status) for r in runs) == [
            ("first", "done"), ("first", "interrupted"), ("second", "done")]
        done = {r.label: r for r in runs if r.status == "done"}
        assert all(len(store.requests(r.id)) == 42 for r in done.values())
    # each resumed variant's server ran the argv its old spec named
    ended = [e for e in events(str(journal)) if e.get("type") == "launch_end"
             and str(e.get("launch")).endswith(".a1")]
    assert [(e["ok"], e["argv"]) for e in ended] == [(True, vp.launch.argv)
                                                     for vp in plan.variants]
