"""A campaign's kernel capture per variant (``kernels = { level = C }``, issue 27), end to end on
this machine: the CLI -> the agent -> a detached runner -> the simulated SGLang server (real
subprocesses; its /start_profile writes traces whose kernel mix follows the backend) -> the
journal -> the run store. Each variant's run gets its capture; one that fails leaves the sweep
stored and says why; attaching again stores nothing twice. The ingest half runs on a real
SQLite store in the fast tier.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, free_port, sim_profile

from dsv4tui.agent.campaign import variant_kernels
from dsv4tui.core.campaign.ingest import Collector
from dsv4tui.core.config import ServerProfile
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import campaigns as cstore
from dsv4tui.core.store import kernels as kernel_store
from dsv4tui.main import main

SWEEP = "{ levels = [[1, 2], [2, 4]], output_len = 8, input_len = 8, warmup = 0 }"
KERNELS = "kernels = { level = 2, steps = 3, warmup = 0.5 }"


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _toml(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def _profile(name: str, prof: ServerProfile) -> str:
    fields = prof.model_dump(exclude_defaults=True)
    fields["model_path"] = prof.model_path
    return f"[hosts.local.profiles.{name}]\n" + "\n".join(
        f"{k} = {_toml(v)}" for k, v in fields.items()) + "\n"


def write_config(variants: list[str], more: str = KERNELS) -> None:
    port = free_port()
    text = (_profile("mxfp4", sim_profile(port, backend="triton"))
            + _profile("nvfp4", sim_profile(port, backend="marlin", checkpoint="NVFP4"))
            + '[hosts.local]\ndefault_profile = "mxfp4"\n'
            + f'[campaigns.story]\nhost = "local"\nprofile = "mxfp4"\nsweep = {SWEEP}\n{more}\n')
    for v in variants:
        text += f"[[campaigns.story.variants]]\n{v}\n"
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(text)


def _json(capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _families(cap: kernel_store.KernelCapture) -> dict[str, dict[str, Any]]:
    return {f["family"]: f for f in cap.summary["families"]}


@pytest.mark.e2e
def test_each_variant_gets_its_capture_at_the_level_and_attaching_again_adds_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    write_config(['name = "MXFP4_triton"', 'name = "NVFP4_marlin"\nprofile = "nvfp4"'])
    assert main(["campaign", "start", "story", "--dry-run"]) == 0
    assert "kernels: a capture per variant after its first sweep, steady load C=2" in \
        capsys.readouterr().out
    assert main(["campaign", "start", "story", "--json"]) == 0
    out, err = _json(capsys)
    assert [v["state"] for v in out["variants"]] == ["done", "done"]
    assert err.count("kernels (SIMULATED) at C=2, bs 2 measured: share of decode GPU time") == 2
    cid = out["id"]
    with RunStore() as store:
        caps = kernel_store.campaign_captures(store, cid)
        for i, v in enumerate(out["variants"]):  # each variant's own run (its sweep ran C=2)
            run = store.run(v["run_id"])
            assert run is not None and run.status == "done"
            assert [lv.concurrency for lv in store.levels(run.id)] == [1, 2]  # sweep kept
            cap = caps[run.id]
            want = {"run": f"v{i}.r0.a0", "run_id": run.id, "level": 1, "concurrency": 2,
                    "capture_id": cap.id, "error": None, "kind": None}
            assert {k: v["kernels"][k] for k in want} == want  # the journal's link
            assert "moe_gemm" in {f["family"] for f in v["kernels"]["families"]}  # the store's
            assert cap.campaign_id == cid and cap.launch_id == run.launch_id is not None
            assert cap.backend == run.backend and cap.label == run.label and cap.simulated
            assert cap.concurrency == 2 and cap.load is not None
            assert cap.load["measured_bs"] == 2 and not cap.load["batch_far"]
            assert cap.server_pid is not None and cap.steps == 3
            # the traces stayed on the host; only their summary came
            assert Path(cap.summary["output_dir"]).name == v["kernels"]["run"]
        triton = _families(caps[out["variants"][0]["run_id"]])
        marlin = _families(caps[out["variants"][1]["run_id"]])
        # where the time moved: the MoE GEMM runs on CUDA cores on triton/MXFP4 and on tensor
        # cores on marlin/NVFP4 (the simulator's kernel mix per backend)
        assert triton["moe_gemm"]["tensor_cores"] is False
        assert marlin["moe_gemm"]["tensor_cores"] is True
        assert triton["moe_gemm"]["share"] == pytest.approx(0.39, abs=0.05)
        assert triton["attention"]["tensor_cores"] is not True
        rows = store.query("SELECT count(*) AS n FROM kernels")[0]["n"]
        reqs = store.query("SELECT count(*) AS n FROM requests")[0]["n"]
        # the link dropped before the offset was stored: the whole journal comes again
        cstore.update(store, cid, offset=0)
    assert main(["campaign", "attach", "local", cid, "--json"]) == 0
    again, _ = _json(capsys)
    assert [v["kernels"]["capture_id"] for v in again["variants"]] == \
        [v["kernels"]["capture_id"] for v in out["variants"]]
    with RunStore() as store:
        assert store.query("SELECT count(*) AS n FROM kernels")[0]["n"] == rows == 2
        assert store.query("SELECT count(*) AS n FROM requests")[0]["n"] == reqs
    assert main(["kernels", "--show", f"run:{out['variants'][1]['run_id']}"]) == 0
    assert "marlin" in capsys.readouterr().out


@pytest.mark.e2e
def test_a_capture_that_fails_keeps_the_sweep_and_says_why(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the trace folder should go")
    write_config(['name = "crash"\nextra_args = ["--sim-speed", "200", "--sim-decode-speed", '
                  '"20", "--sim-fault", "crash-after:3"]', 'name = "only"'],
                 f'kernels = {{ level = 2, warmup = 0.5, output_dir = "{blocker}" }}')
    assert main(["campaign", "start", "story", "--json"]) == 1  # "crash" failed
    out, err = _json(capsys)
    crash, v = out["variants"]
    assert crash["state"] == "failed" and "the server died" in crash["reason"]
    assert crash["kernels"]["kind"] == "not_taken" and crash["kernels"]["capture_id"] is None
    assert crash["kernels"]["error"] == "no kernel capture at C=2: the run failed"
    assert v["state"] == "done"  # the failed capture did not fail it
    assert v["kernels"]["capture_id"] is None and v["kernels"]["kind"] == "output_dir"
    assert "kernel capture at C=2 failed: cannot create" in v["kernels"]["error"]
    assert str(blocker) in v["kernels"]["error"]
    assert "(the run and its sweep are kept)" in err
    with RunStore() as store:
        run = store.run(v["run_id"])
        assert run is not None and run.status == "done"
        assert [lv.concurrency for lv in store.levels(run.id)] == [1, 2]
        assert len(store.requests(run.id)) == 6
        assert kernel_store.captures(store) == []


def test_a_level_outside_the_sweep_is_one_line_naming_the_key(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_config(['name = "x"'], "kernels = { level = 3 }")
    assert main(["campaign", "start", "story", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert ("campaigns.story.kernels.level: 3 is not one of the sweep's levels (C = 1, 2; did "
            "you mean 2?)") in err
    for table, needle in (("kernels = { level = 2, steps = 0 }", "campaigns.story.kernels.steps"),
                          ("kernels = { level = 2, step = 5 }",
                           "kernels.step: unknown key (did you mean steps?)"),
                          ("kernels = { steps = 5 }", "kernels.level: missing")):
        write_config(['name = "x"'], table)
        assert main(["campaign", "start", "story", "--dry-run"]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
    f = tmp_path / "night.toml"  # a campaign file says its own path
    f.write_text(f'host = "local"\nsweep = {SWEEP}\nkernels = {{ level = 16 }}\n'
                 '[[variants]]\nname = "a"\n')
    write_config(['name = "x"'], "")
    assert main(["campaign", "start", "--file", str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"campaign night in {f}: kernels.level: 16 is not one of the sweep's levels" in err


def test_the_agent_checks_the_spec_again() -> None:
    plan = {"levels": [[1, 2], [8, 16]], "input_len": 64}
    variant_kernels.check({"level": 8, "steps": 2}, plan)
    for conf, needle in (({"level": 6}, "did you mean 8?"), ({"level": 8, "steps": 0},
                                                             "kernels.steps must be"),
                         ({"level": 8, "nope": 1}, "unknown keys nope"), (16, "a table")):
        with pytest.raises(ValueError, match="kernels") as got:
            variant_kernels.check(conf, plan)
        assert needle in str(got.value)
    conf = variant_kernels.settings_of({"level": 8, "output_dir": "/data/tr"}, plan,
                                       "/cache/c1/kernels/v0.r0.a0")
    assert (conf.concurrency, conf.input_len, conf.output_dir) == (8, 64, "/data/tr/v0.r0.a0")


# -- the console's half, on a real store (fast tier) ------------------------------------------

def _journal(cid: str) -> list[dict[str, Any]]:
    summary = {"families": [{"family": "moe_gemm", "share": 0.39, "tensor_cores": False}],
               "basis": "decode", "profiled_steps": 5, "time": 1000.0, "url": "http://x",
               "load": {"concurrency": 16, "measured_bs": 15.9, "batch_far": False},
               "server": {"backend": "triton", "simulated": True}}
    return [
        {"type": "campaign_start", "seq": 1, "variants": [{"name": "a"}, {"name": "b"}]},
        {"type": "run_start", "seq": 2, "run": "v0.r0.a0", "variant": 0, "label": "a",
         "t": 990.0},
        {"type": "run_end", "seq": 3, "run": "v0.r0.a0", "variant": 0, "status": "done"},
        {"type": "kernels", "seq": 4, "run": "v0.r0.a0", "variant": 0, "level": 2,
         "concurrency": 16, "server_pid": 4242, **summary},
        {"type": "run_start", "seq": 5, "run": "v1.r0.a0", "variant": 1, "label": "b"},
        {"type": "run_end", "seq": 6, "run": "v1.r0.a0", "variant": 1, "status": "done"},
        {"type": "kernels_failed", "seq": 7, "run": "v1.r0.a0", "variant": 1, "level": 2,
         "concurrency": 16, "kind": "start_profile",
         "message": "kernel capture at C=16 failed: /start_profile answered HTTP 404"},
    ]


def test_ingest_stores_a_capture_once_with_its_run_and_records_a_failure(
        tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite3") as store:
        col = Collector(store, "box", "c1")
        col.apply_batch(_journal("c1"))
        col.apply_batch(_journal("c1"))  # read twice (a re-attach): nothing doubles
        Collector(store, "box", "c1").apply_batch(_journal("c1"))  # and by a new console
        rows = kernel_store.captures(store)
        assert len(rows) == 1
        [cap] = rows
        run_a = cstore.run_ids(store, "c1")["v0.r0.a0"]
        assert cap.run_id == run_a and cap.campaign_id == "c1" and cap.journal_seq == 4
        assert cap.server_pid == 4242 and cap.concurrency == 16 and cap.label == "a"
        assert kernel_store.campaign_captures(store, "c1") == {run_a: cap}
        assert cap.summary["families"][0]["tensor_cores"] is False
        detail = cstore.get(store, "c1").detail  # type: ignore[union-attr]
        a, b = detail["variants"]
        assert a["kernels"]["capture_id"] == cap.id and a["kernels"]["error"] is None
        assert b["kernels"]["capture_id"] is None and b["kernels"]["kind"] == "start_profile"
        assert "HTTP 404" in b["kernels"]["error"]
