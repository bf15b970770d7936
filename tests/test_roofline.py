"""The decode roofline on hand-computed examples, the GPU table, and ``dsv4tui roofline``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsv4tui.core import gpu_specs, roofline
from dsv4tui.core.store import RunStore
from dsv4tui.main import main


def test_campaign_numbers_by_hand() -> None:
    """13 B active x 0.5 byte = 6.5 GB per step. At 1.9 TB/s one GPU reading all of it needs
    6.5e9 / 1.9e12 = 3.421 ms; spread over 8 GPUs (each reads 0.8125 GB) 0.4276 ms, i.e.
    2338.46 steps/s and, at C=16, 37415.4 tok/s. The campaign's 23.2 tok/s is 0.062 % of it.
    (The campaign note's "0.86 ms per GPU" matches neither: it is 4 GPUs' share.)"""
    one = roofline.compute(roofline.make_inputs(gpu=None, gpus=1, active_params="13B",
                                                bytes_per_param=0.5, bandwidth_tb_s=1.9), [1])
    assert one["decode_step_bytes"] == 6_500_000_000
    assert one["decode_step_ms"] == pytest.approx(3.42105, abs=1e-5)
    eight = roofline.compute(roofline.make_inputs(gpu=None, gpus=8, active_params=13e9,
                                                  bytes_per_param=0.5, bandwidth_tb_s=1.9),
                             [1, 8, 16], {16: 23.2})
    assert eight["bytes_per_gpu_per_step"] == 812_500_000
    assert eight["decode_step_ms"] == pytest.approx(0.42763, abs=1e-5)
    assert eight["decode_steps_per_s"] == pytest.approx(15.2e12 / 6.5e9, abs=1e-3)
    levels = {lv["concurrency"]: lv for lv in eight["levels"]}
    assert levels[1]["ceiling_tok_s"] == pytest.approx(2338.46, abs=0.01)
    assert levels[16]["ceiling_tok_s"] == pytest.approx(37415.38, abs=0.01)
    assert levels[16]["measured_tok_s"] == 23.2
    assert levels[16]["percent_of_ceiling"] == pytest.approx(100 * 23.2 / 37415.38, abs=1e-4)
    assert levels[8]["measured_tok_s"] is None and levels[8]["percent_of_ceiling"] is None
    four = roofline.compute(roofline.make_inputs(gpu=None, gpus=4, active_params="13B",
                                                 bytes_per_param=0.5, bandwidth_tb_s=1.9), [1])
    assert four["decode_step_ms"] == pytest.approx(0.855, abs=1e-3)


def test_json_shape_of_the_issue() -> None:
    res = roofline.compute(roofline.make_inputs(gpu="NVIDIA H200", gpus=8, active_params="37.5B",
                                                bytes_per_param=1.0), [1, 16], {1: 40.0})
    for key in ("gpu", "gpus", "bandwidth_bytes_s", "decode_step_bytes", "decode_steps_per_s",
                "levels"):
        assert key in res
    assert res["gpu"] == "NVIDIA H200" and res["gpus"] == 8
    assert res["bandwidth_bytes_s"] == 4.8e12
    for lv in res["levels"]:
        assert set(lv) >= {"concurrency", "ceiling_tok_s", "measured_tok_s",
                           "percent_of_ceiling"}
    # 37.5 GB over 8 x 4.8 TB/s: 1024 steps/s; FP8 dense 1979 TFLOP/s x 8 / (2 x 37.5e9)
    assert res["decode_steps_per_s"] == pytest.approx(1024.0)
    assert res["compute_precision"] == "fp8"
    assert res["compute_ceiling_tok_s"] == pytest.approx(8 * 1979e12 / 75e9, rel=1e-6)
    assert all(lv["bound"] == "memory" for lv in res["levels"])
    assert any("KV-cache" in x for x in res["leaves_out"])
    assert any("communication" in x for x in res["leaves_out"])
    assert "spread over the GPUs" in res["assumes"]
    json.dumps(res, allow_nan=False)


def test_routed_experts_refinement() -> None:
    """DeepSeek-V3-like: 256 experts, 8 per token; C=16 tokens touch 256 (1 - (248/256)^16)
    = 101.96 experts per layer on average, not 8."""
    moe = roofline.MoeLayout(experts=256, experts_per_token=8, moe_layers=58,
                             expert_params=3 * 7168 * 2048, dense_params_per_step=16.19e9)
    assert moe.experts_touched(1) == pytest.approx(8.0)
    assert moe.experts_touched(16) == pytest.approx(256 * (1 - (248 / 256) ** 16))
    assert moe.experts_touched(16) == pytest.approx(101.96, abs=0.01)
    inputs = roofline.make_inputs(gpu="h200", gpus=8, active_params=36.63e9, bytes_per_param=1,
                                  moe=moe)
    res = roofline.compute(inputs, [1, 16], {16: 500.0})
    lv1, lv16 = res["levels"]
    # at C=1 the routed model reads about the active weights; at C=16 far more
    assert lv1["routed"]["step_bytes"] == pytest.approx(16.19e9 + 58 * 8 * 3 * 7168 * 2048,
                                                        rel=1e-9)
    expected16 = 16.19e9 + 58 * moe.experts_touched(16) * 3 * 7168 * 2048
    assert lv16["routed"]["step_bytes"] == pytest.approx(expected16, rel=1e-9)
    assert lv16["routed"]["ceiling_tok_s"] == pytest.approx(16 * 8 * 4.8e12 / expected16,
                                                            rel=1e-4)
    assert lv16["routed"]["percent_of_ceiling"] > lv16["percent_of_ceiling"]


@pytest.mark.parametrize("text, value", [
    ("13B", 13e9), ("13b", 13e9), ("13e9", 13e9), ("13000000000", 13e9), ("13", 13e9),
    ("37.5B", 37.5e9), ("700M", 7e8), (13e9, 13e9), ("1.2T", 1.2e12),
])
def test_parse_params(text: Any, value: float) -> None:
    assert roofline.parse_params(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "x", "13x", "-3B", "0", "nan"])
def test_parse_params_rejects(bad: str) -> None:
    with pytest.raises(roofline.RooflineError):
        roofline.parse_params(bad)


@pytest.mark.parametrize("name, key", [
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-server"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None),
    ("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200"), ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", None), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", None),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA L40S", "l40s"), ("h200", "h200"), ("rtx pro 6000", "rtx-pro-6000"),
    ("Tesla T4", None),
])
def test_gpu_lookup(name: str, key: str | None) -> None:
    spec = gpu_specs.lookup(name)
    assert (spec.key if spec else None) == key


def test_gpu_table_is_complete_and_sane() -> None:
    keys = {g.key for g in gpu_specs.GPUS}
    assert {"rtx-pro-6000-server", "rtx-pro-6000", "b200", "gb200", "h200", "h100", "a100",
            "l40s"} <= keys
    for g in gpu_specs.GPUS:
        assert g.memory_gb > 0 and g.bandwidth_tb_s > 0 and g.bf16_tflops and g.source
        if g.fp8_tflops:
            assert g.fp8_tflops >= g.bf16_tflops
        if g.fp4_tflops:
            assert g.fp8_tflops and g.fp4_tflops >= g.fp8_tflops
    h200, h100 = gpu_specs.lookup("h200"), gpu_specs.lookup("h100")
    assert h200 and h200.bandwidth_tb_s == 4.8 and h200.memory_gb == 141
    assert h100 and h100.bandwidth_tb_s == 3.35 and h100.memory_gb == 80
    pro = gpu_specs.lookup("rtx-pro-6000-server")
    assert pro and pro.bandwidth_bytes_s == 1.792e12 and pro.memory_gb == 96
    assert gpu_specs.lookup("a100").bandwidth_tb_s == 2.039  # type: ignore[union-attr]
    assert gpu_specs.lookup("l40s").bandwidth_tb_s == 0.864  # type: ignore[union-attr]


# --- runs (the Runs compare view) ----------------------------------------------------------


@dataclass
class FakeRun:
    id: int = 7
    gpu_names: list[str] = field(default_factory=lambda: ["NVIDIA H200"] * 8)
    profile: dict[str, Any] = field(default_factory=lambda: {"tp_size": 8})


def test_for_run_uses_profile_then_facts() -> None:
    facts = {"decode_read_params": 13e9, "bytes_per_param": 0.5, "weight_format": "MXFP4",
             "bytes_source": "config.json quantization_config", "config_path": "/m/config.json"}
    levels = [{"concurrency": 1, "output_tok_s": 3.0}, {"concurrency": 16, "output_tok_s": 23.2}]
    res = roofline.for_run(FakeRun(), levels, facts=facts)
    assert res["run_id"] == 7 and res["gpus"] == 8 and res["gpu"] == "NVIDIA H200"
    assert [lv["concurrency"] for lv in res["levels"]] == [1, 16]
    pct = roofline.percent_by_concurrency(res)
    assert pct[16] == pytest.approx(100 * 23.2 / (16 * 8 * 4.8e12 / 6.5e9), abs=1e-4)
    assert res["sources"]["gpus"] == "profile tp_size"
    assert res["sources"]["active_params"].startswith("config.json")
    # overrides in the server profile win over config.json
    run = FakeRun(profile={"tp_size": 4, "active_params_b": 20, "bytes_per_param": 1})
    res = roofline.for_run(run, levels, facts=facts)
    assert res["decode_step_bytes"] == 20_000_000_000 and res["gpus"] == 4
    with pytest.raises(roofline.RooflineError, match="no active parameter count"):
        roofline.for_run(FakeRun(), levels)


def test_roofline_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["roofline", "--gpu", "rtx-pro-6000-server", "--gpus", "8", "--active-params",
                 "13B", "--bytes-per-param", "0.5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["gpu"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert res["decode_step_bytes"] == 6.5e9
    assert [lv["concurrency"] for lv in res["levels"]] == [1, 8, 16]
    assert res["decode_steps_per_s"] == pytest.approx(8 * 1.792e12 / 6.5e9, abs=1e-3)
    assert all(lv["measured_tok_s"] is None for lv in res["levels"])


def test_roofline_cli_with_a_stored_run(capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as store:
        run_id = store.start_run(label="mxfp4", host="demo",
                                 gpu_names=["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8,
                                 profile={"tp_size": 8})
        for i, (c, tok) in enumerate(((1, 2.9), (8, 15.1), (16, 23.2))):
            store.add_level(run_id, {"level": i, "concurrency": c, "requests": 8,
                                     "output_tok_s": tok})
    assert main(["roofline", "--run", "mxfp4", "--active-params", "13B",
                 "--bytes-per-param", "0.5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["run_id"] == run_id and res["gpus"] == 8
    lv = {x["concurrency"]: x for x in res["levels"]}
    ceiling16 = 16 * 8 * 1.792e12 / 6.5e9
    assert lv[16]["percent_of_ceiling"] == pytest.approx(100 * 23.2 / ceiling16, abs=1e-4)
    assert main(["roofline", "--run", str(run_id), "--active-params", "13B",
                 "--bytes-per-param", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "% of ceiling" in text and "leaves out" in text and "0.066 %" in text


@pytest.mark.parametrize("argv, msg", [
    (["roofline"], "no GPU"),
    (["roofline", "--gpu", "h200", "--gpus", "8", "--bytes-per-param", "1"],
     "no active parameter count"),
    (["roofline", "--gpu", "h200", "--gpus", "8", "--active-params", "13B"], "no bytes per"),
    (["roofline", "--gpu", "t4", "--gpus", "1", "--active-params", "1B",
      "--bytes-per-param", "2"], "unknown GPU 't4'"),
    (["roofline", "--gpu", "h200", "--gpus", "0", "--active-params", "1B",
      "--bytes-per-param", "2"], "--gpus must be >= 1"),
    (["roofline", "--gpu", "h200", "--gpus", "1", "--active-params", "1B",
      "--bytes-per-param", "9"], "(0, 8]"),
    (["roofline", "--bandwidth", "-1", "--gpus", "1", "--active-params", "1B",
      "--bytes-per-param", "2"], "--bandwidth must be > 0"),
    (["roofline", "--gpu", "h200", "--gpus", "1", "--active-params", "1B",
      "--bytes-per-param", "2", "--concurrency", "0"], "each C must be >= 1"),
    (["roofline", "--profile", "x"], "--profile goes with a HOST"),
    (["roofline", "nosuchhost", "--gpu", "h200"], "unknown host"),
])
def test_roofline_cli_errors(argv: list[str], msg: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_custom_bandwidth_without_a_known_gpu() -> None:
    res = roofline.compute(roofline.make_inputs(gpu="Tesla T4", gpus=1, active_params="7B",
                                                bytes_per_param=2, bandwidth_tb_s=0.32), [1])
    assert res["gpu"] == "Tesla T4" and res["gpu_key"] is None
    assert res["compute_ceiling_tok_s"] is None
    assert res["decode_step_ms"] == pytest.approx(14e9 / 0.32e12 * 1000)
    assert math.isclose(res["levels"][0]["ceiling_tok_s"], 0.32e12 / 14e9, rel_tol=1e-3)


@pytest.mark.e2e
def test_roofline_on_the_demo_host(capsys: pytest.CaptureFixture[str]) -> None:
    """GPU from the host's (simulated) telemetry, GPUs from the profile's tp_size; no
    config.json for the demo's model path: the flags give the parameters, a note says so."""
    assert main(["roofline", "demo", "--active-params", "13B", "--bytes-per-param", "0.5",
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["gpus"] == 8 and res["simulated"] is True
    assert res["sources"]["gpu"] == "demo telemetry" and res["gpu_key"] is not None
    assert res["sources"]["gpus"] == "profile tp_size"
    assert any("no model facts" in n for n in res["notes"])
    assert any("SIMULATED" in n for n in res["notes"])


def test_a_sweeps_run_gets_its_roofline_from_its_servers_launch() -> None:
    """A dashboard or CLI sweep stores no profile with the run, only its launch: the compare
    view's roofline column read n/a for every row while `dsv4tui roofline HOST --run ID`
    computed 0.38 % from the launch profile's active_params_b / bytes_per_param."""
    from dsv4tui.core.campaign.compare import compare_runs
    from dsv4tui.core.store import RunStore

    gpu = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    with RunStore() as store:
        launch = store.record_launch("demo", "mxfp4", {"tp_size": 8, "active_params_b": 13.0,
                                                       "bytes_per_param": 0.5},
                                     "triton", "MXFP4", {}, 13.0, True, None)
        ids = []
        for tok_s in (8.48, 9.1):
            rid = store.start_run(label="MXFP4_triton", host="demo", launch_id=launch,
                                  gpu_names=[gpu] * 8)
            store.add_level(rid, {"level": 0, "concurrency": 1, "requests": 4, "completed": 4,
                                  "errors": 0, "output_tok_s": tok_s})
            ids.append(rid)
        cmp = compare_runs(store, ids)
    pcts = [p.roofline_pct for r in cmp.runs for p in cmp.points[r.id].values()]
    assert pcts[0] == pytest.approx(8.48 / 2205.5 * 100, rel=0.01)  # 0.38 %, as the CLI says
    assert all(p is not None for p in pcts)
