"""``repeats = k`` in a campaign, end to end on the simulator (host ``local``): every repeat
restarts the server (a fresh process each), the work is interleaved A1 B1 A2 B2 (or blocked /
randomized blocks, seeded), each repeat is a run in the store tied to the campaign with its
repeat index, and the comparison gives each variant an interval against the baseline."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, TEST_DECODE_SPEED, free_port, sim_profile
from test_campaign import campaign_table, profile_toml

from dsv4tui.core.campaign.plan import schedule
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_orders():
    assert schedule(2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert schedule(2, 2, "blocked") == [(0, 0), (0, 1), (1, 0), (1, 1)]
    rnd = schedule(3, 4, "random", seed=7)
    assert rnd == schedule(3, 4, "random", seed=7)  # seeded
    assert sorted(rnd) == sorted(schedule(3, 4))
    for r in range(4):  # randomized blocks: each round runs every variant once
        assert sorted(v for v, rr in rnd[3 * r:3 * r + 3]) == [0, 1, 2]
        assert {rr for _, rr in rnd[3 * r:3 * r + 3]} == {r}
    assert rnd != schedule(3, 4)


def write_noisy_config(port: int, campaign: str, noise_pct: str = "5",
                       baseline_slowdown: float = 1.0) -> None:
    noise = ["--sim-run-noise", noise_pct]
    slow = ["--sim-decode-speed", f"{TEST_DECODE_SPEED / baseline_slowdown:g}"]
    text = (profile_toml("mxfp4", sim_profile(port, *noise, *slow, backend="triton"))
            + profile_toml("nvfp4", sim_profile(port, *noise, backend="marlin", checkpoint="NVFP4"))
            + "[hosts.local]\ndefault_profile = \"mxfp4\"\n" + campaign)
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(text)


def test_repeats_restart_the_server_interleaved_and_compare_with_an_interval(
        capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_noisy_config(port, campaign_table(
        'name = "MXFP4_triton"', 'name = "NVFP4_marlin"\nprofile = "nvfp4"',
        more="repeats = 3"), noise_pct="2", baseline_slowdown=2.0)
    assert main(["campaign", "start", "story", "--dry-run", "--json"]) == 0
    plan = _json(capsys)
    assert plan["repeats"] == 3 and plan["order"] == "interleaved"
    assert plan["schedule"] == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    code = main(["campaign", "start", "story", "--json"])
    out = _json(capsys)
    assert code == 0, out
    assert [(v["name"], v["state"]) for v in out["variants"]] == [
        ("MXFP4_triton", "done"), ("NVFP4_marlin", "done")]
    # campaign start/status --json: each variant against the first, per level
    (c2,) = [v for v in out["verdicts"] if v["concurrency"] == 2]
    assert c2["label"] == "NVFP4_marlin" and c2["baseline_label"] == "MXFP4_triton"
    assert c2["n_repeats"] == 3 and c2["ci_low"] < c2["change_pct"] < c2["ci_high"]
    # marlin's model is ~24 % faster than MXFP4/triton's and the baseline decodes at half the
    # speed here: ~2.5x. The spread between repeats on a busy 2-core runner is mostly its own
    # timing noise (a 24 % difference at 2 % modelled noise read [-5, +61] % under a full
    # parallel suite), so the difference the verdict must see is far above it.
    assert c2["verdict"] == "faster", c2
    # planning: the next dry run knows how long a repeat takes and the spread
    assert main(["campaign", "start", "story", "--dry-run", "--repeats", "3"]) == 0
    text = capsys.readouterr().out
    assert "repeats 3 (interleaved, a restart each)" in text
    assert "time: 6 restarts + sweeps, ~" in text
    assert "verdicts: the run-to-run spread of MXFP4_triton's 3 repeats" in text
    assert "with 3 repeats a side the 95 % interval is about ±" in text
    with RunStore() as store:
        runs = sorted(store.runs(), key=lambda r: r.id)
        rows = store.query("SELECT id, variant, repeat_idx, launch_id, campaign_id FROM runs "
                           "ORDER BY id")
        # interleaved: A1 B1 A2 B2 A3 B3, each on its own launch (a restart per repeat)
        assert [(r["variant"], r["repeat_idx"]) for r in rows] == [
            ("MXFP4_triton", 0), ("NVFP4_marlin", 0), ("MXFP4_triton", 1), ("NVFP4_marlin", 1),
            ("MXFP4_triton", 2), ("NVFP4_marlin", 2)]
        assert len({r["launch_id"] for r in rows}) == 6 and None not in {
            r["launch_id"] for r in rows}
        assert len({r["campaign_id"] for r in rows}) == 1
        pids = {r["pid"] for r in store.query("SELECT pid FROM launches")}
        assert len(pids) == 6  # six server processes
        assert all(r.status == "done" for r in runs)
    assert main(["runs", "compare", *[str(r.id) for r in runs], "--json"]) == 0
    cmp = _json(capsys)
    v = [x for x in cmp["verdicts"] if x["concurrency"] == 2]
    assert len(v) == 1 and v[0]["label"] == "NVFP4_marlin" and v[0]["n_repeats"] == 3
    assert v[0]["ci_low"] is not None and v[0]["ci_low"] < v[0]["ci_high"]
    assert v[0]["verdict"] in ("faster", "slower", "no detectable difference")


def test_one_run_each_says_there_is_no_interval(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    write_noisy_config(port, campaign_table(
        'name = "MXFP4_triton"', 'name = "NVFP4_marlin"\nprofile = "nvfp4"'))
    assert main(["campaign", "start", "story", "--json"]) == 0
    out = _json(capsys)
    assert all(v["ci_low"] is None and v["verdict"] is None and v["n_repeats"] == 1
               for v in out["verdicts"]) and out["verdicts"]
    assert main(["campaign", "start", "story", "--dry-run"]) == 0
    assert "one run per variant gives no interval" in capsys.readouterr().out
    with RunStore() as store:
        ids = [str(r.id) for r in sorted(store.runs(), key=lambda r: r.id)]
    assert main(["runs", "compare", *ids]) == 0
    text = capsys.readouterr().out
    assert "NVFP4_marlin C=2: tok/s +" in text
    assert "(one run each: no interval (repeats = 2 or more gives one))" in text


def test_sweep_repeats_are_runs_of_one_label_with_their_spread(
        known_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    srv = known_server(answer="391")
    code = main(["sweep", "--url", srv.url, "--label", "again", "--levels", "1:2,2:4",
                 "--output-len", "6", "--input-len", "8", "--repeats", "3"])
    text = capsys.readouterr().out
    assert code == 0, text
    with RunStore() as store:
        rows = store.query("SELECT id, label, repeat_idx, campaign_id FROM runs ORDER BY id")
    assert [(r["label"], r["repeat_idx"]) for r in rows] == [
        ("again", 0), ("again", 1), ("again", 2)]
    assert len({r["campaign_id"] for r in rows}) == 1
    assert "repeats: runs " + ", ".join(f"#{r['id']}" for r in rows) in text
    assert "  C=2: " in text and "spread (sd of log)" in text
    assert main(["sweep", "--url", srv.url, "--label", "x", "--repeats", "0"]) == 2
