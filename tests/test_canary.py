"""The accuracy canary end to end (host ``local``, the simulator): the built-in 100 items per
variant at temperature 0, stored with the run, compared with the baseline's with a verdict, and
a subtly wrong backend (--sim-wrong-rate 0.1: a tenth of the answers off by one, while the 17x23
gate still passes) failing the gate; a user's JSONL replaces the built-in set."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, free_port, sim_profile
from test_campaign import campaign_table, profile_toml

from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.main import main


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def _config(port: int, campaign: str) -> None:
    text = (profile_toml("good", sim_profile(port, backend="marlin", checkpoint="NVFP4"))
            + profile_toml("wrong", sim_profile(port, "--sim-wrong-rate", "0.1",
                                                backend="triton", checkpoint="NVFP4"))
            + "[hosts.local]\ndefault_profile = \"good\"\n" + campaign)
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(text)


def test_a_wrong_rate_of_10_percent_is_caught_and_skips_the_sweep(
        capsys: pytest.CaptureFixture[str]) -> None:
    _config(free_port(), campaign_table(
        'name = "marlin"\nprofile = "good"', 'name = "triton_wrong"\nprofile = "wrong"',
        more='canary = { on_drop = "skip", concurrency = 16 }').replace(
        'profile = "mxfp4"', 'profile = "good"'))
    code = main(["campaign", "start", "story", "--json"])
    out = _json(capsys)
    assert code == 1, out  # a variant failed its gate
    states = {v["name"]: (v["state"], v.get("reason") or "") for v in out["variants"]}
    assert states["marlin"] == ("done", "")
    assert states["triton_wrong"][0] == "failed"
    assert "canary 90/100 correct against the baseline's 100/100" in states["triton_wrong"][1]
    assert "sweep is skipped" in states["triton_wrong"][1]
    (good,) = [c for c in out["canary"] if c["label"] == "marlin"]
    (bad,) = [c for c in out["canary"] if c["label"] == "triton_wrong"]
    assert good["correct"] == 100 and good["total"] == 100 and good["verdict"] is None
    assert bad["correct"] == 90 and bad["verdict"] == "worse" and bad["gate_passed"] is False
    assert bad["ci_high"] < 0 and bad["change_points"] == -10.0
    with RunStore() as store:
        runs = {r.label: r for r in store.runs()}
        stored = cstore.canaries(store, [r.id for r in runs.values()])
        assert stored[runs["triton_wrong"].id]["correct"] == 90
        assert len(stored[runs["triton_wrong"].id]["wrong"]) == 10
        assert store.levels(runs["triton_wrong"].id) == []  # its sweep was skipped
        assert runs["triton_wrong"].sanity_passed  # the 17x23 gate did not see it
        ids = [str(runs["marlin"].id), str(runs["triton_wrong"].id)]
    assert main(["runs", "compare", *ids]) == 0
    text = capsys.readouterr().out
    assert "accuracy canary" in text and "triton_wrong: 90/100 correct" in text
    assert "worse; gate FAILED (drop 10.0 > margin 5.0 points, sweep skipped)" in text


def test_a_users_jsonl_replaces_the_builtin_set_and_mark_runs_the_sweep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"prompt": "What is 6*7? Number only.", "answer": 42}\n'
                    '{"prompt": "What is 2+3? Number only.", "answer_regex": "^\\\\s*5\\\\s*$"}\n'
                    '{"prompt": "What is 9*9? Number only.", "answer": "81"}\n')
    _config(free_port(), campaign_table(
        'name = "marlin"\nprofile = "good"', 'name = "triton_wrong"\nprofile = "wrong"',
        more=f'canary = {{ file = "{mine}", margin = 0 }}').replace(
        'profile = "mxfp4"', 'profile = "good"'))
    code = main(["campaign", "start", "story", "--json"])
    out = _json(capsys)
    assert code == 0, out  # on_drop = "mark": the sweep runs, the gate is marked
    by = {c["label"]: c for c in out["canary"]}
    assert by["marlin"]["total"] == 3 and by["marlin"]["correct"] == 3
    assert by["marlin"]["gate"] is None
    with RunStore() as store:
        runs = {r.label: r for r in store.runs()}
        c = cstore.canaries(store, [runs["marlin"].id])[runs["marlin"].id]
        assert c["source"] == str(mine)
        assert store.levels(runs["triton_wrong"].id)  # marked, not skipped
    wrong = by["triton_wrong"]
    if wrong["correct"] < 3:  # which of three prompts the 10 % hits is fixed by the prompts
        assert wrong["gate_passed"] is False and wrong["gate"]["action"] == "mark"
    else:
        assert wrong["gate_passed"] is True


def test_a_bad_canary_file_fails_the_variant_with_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    _config(free_port(), campaign_table(
        'name = "marlin"\nprofile = "good"', more=f'canary = {{ file = "{bad}" }}').replace(
        'profile = "mxfp4"', 'profile = "good"'))
    assert main(["campaign", "start", "story", "--json"]) == 1
    out = _json(capsys)
    reason = out["variants"][0]["reason"]
    assert "line 1" in reason and "answer" in reason
