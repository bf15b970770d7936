"""Frames recorded by benchmarks/gpu_validation.py, and that script's evaluation.

``tests/data/telemetry/h200/*.json`` holds real H200 captures once the lead has run the
validation (none yet: that test is skipped until then). Each is parsed by the console's
frame model and its expectations are re-checked from its own frames. The evaluation code is
also exercised here on frames from the NVML code path over the FAKE libnvidia-ml (no GPU
here), and the script's record mode is run end to end with the simulated source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dsv4tui.agent.host.nvml_source import NvmlSource
from dsv4tui.agent.host.telemetry import stream
from dsv4tui.core.telemetry import CLI_GPU_KEYS, Frame

sys.path.insert(0, str(Path(__file__).parent / "data" / "telemetry"))
import loaders

REPO = Path(__file__).resolve().parent.parent
CAPTURES = sorted((loaders.HERE / "h200").glob("*.json"))


def validation() -> ModuleType:
    name = "gpu_validation"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.mark.skipif(not CAPTURES, reason="no real H200 captures yet (benchmarks/gpu_validation.py "
                    "writes them; copy to tests/data/telemetry/h200/)")
@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_recorded_h200_frames(path: Path) -> None:
    doc = json.loads(path.read_text())
    gv = validation()
    assert doc["kind"] == gv.FORMAT
    frames = [Frame.from_event(ev) for ev in doc["frames"]]
    assert frames and all(f.source in ("nvml", "nvidia-smi") for f in frames)
    for f in frames:
        for g in f.to_cli_json("h200")["gpus"]:
            assert list(g) == list(CLI_GPU_KEYS)
    if doc.get("mode") == "workload":
        t0, t1 = doc["steady"]
        summary = gv.summarize(doc["frames"], doc["gpu_index"], t0, t1)
        verdicts = gv.check(summary, doc["expect"])
        assert all(v["ok"] for v in verdicts), verdicts
        assert summary["util_gpu"] is not None


def fake_validation_frames(workload: str, seconds: int = 8) -> list[dict[str, Any]]:
    """Frames as the agent would send them for one workload on GPU 0 -- NVML FAKE, not data."""
    fk = loaders.fake_nvml()
    clock = fk.FakeClock()
    lib = fk.FakeNvmlLib(gpus=fk.h200_gpus(2), clock=clock)
    lib.set_workload(0, workload)
    events: list[dict[str, Any]] = []
    with fk.installed(lib) as nv:
        source = NvmlSource(nv)
        source.open(0.5)
        try:
            stream(source, 0.5, count=seconds * 2, processes_every=0, clock=clock,
                   sleep=clock.advance,
                   emit=lambda t, **f: events.append({"type": t, **f, "time": clock()}))
        finally:
            source.close()
    return events


@pytest.mark.parametrize(("workload", "expect_pass"), [
    ("bf16_matmul", True), ("fp32_elementwise", True), ("fp32_matmul_no_tf32", True),
])
def test_evaluation_of_the_reference_workloads(workload: str, expect_pass: bool) -> None:
    gv = validation()
    frames = fake_validation_frames(workload)
    summary = gv.summarize(frames, 0, frames[0]["time"] + 1.5, frames[-1]["time"])
    verdicts = gv.check(summary, gv.WORKLOADS[workload]["expect"])
    assert all(v["ok"] for v in verdicts) is expect_pass, (summary, verdicts)


def test_evaluation_fails_when_the_pipe_is_wrong_or_unknown() -> None:
    gv = validation()
    frames = fake_validation_frames("fp32_matmul_no_tf32")  # no tensor pipe
    summary = gv.summarize(frames, 0)
    assert not gv.check(summary, gv.WORKLOADS["bf16_matmul"]["expect"])[0]["ok"]
    # GPM unsupported -> the metric is n/a and the expectation FAILS (never passes on 0)
    blank = [{"type": "frame", "time": 1.0, "gpus": [{"index": 0, "util_gpu": 99,
                                                      "tensor_active": None}]}]
    summary = gv.summarize(blank, 0)
    assert summary["tensor_active"] is None
    assert [v["ok"] for v in gv.check(summary, gv.WORKLOADS["fp32_matmul_no_tf32"]["expect"])] == [
        False]
    text = gv.table([("x", summary, "FAIL")])
    assert "n/a" in text and "any-tensor" in text
    md = gv.table([("x", summary, "FAIL")], markdown=True)
    assert md.startswith("| workload | util.gpu | any-tensor | HMMA |")


@pytest.mark.e2e
def test_record_mode_end_to_end_with_the_simulated_source(tmp_path: Path) -> None:
    env = dict(os.environ, DSV4TUI_SIM_GPUS="2")
    env.pop("PYTHONPATH", None)  # the script finds the repository by itself
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_validation.py"),
                          "--out", str(tmp_path), "--record", "1", "--agent-source", "simulated",
                          "--interval", "0.2", "--name", "smoke"], capture_output=True, text=True,
                         timeout=60, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "smoke.json").read_text())
    assert doc["mode"] == "record" and doc["source"] == "simulated"
    assert len(doc["frames"]) >= 3 and set(doc["summary"]) == {"gpu 0", "gpu 1"}
    assert doc["meta"]["versions"]["nvidia_ml_py"]
    assert "any-tensor" in out.stdout
    for ev in doc["frames"]:
        Frame.from_event(ev)


def test_real_inference_server_frames_parse() -> None:
    """Frames the agent recorded on the H200 while a real server (transformers serve, a 0.6 B
    random-weight Llama) took the sweep: GPM present, tensor pipe nearly idle (launch-bound)."""
    from dsv4tui.core.telemetry import Frame

    lines = (loaders.HERE / "h200_real_server_frames.jsonl").read_text().splitlines()
    frames = [Frame.from_event(json.loads(line)) for line in lines]
    assert len(frames) > 50
    busy = [f.to_cli_json("h200")["gpus"][0] for f in frames]
    busy = [g for g in busy if (g["util_gpu"] or 0) > 10]
    assert busy, "the sweep kept the GPU busy in some frames"
    assert all(g["tensor_active"] is not None for g in busy)  # GPM on H200: never n/a
    assert max(g["tensor_active"] for g in busy) < 5  # a tiny model: util >> tensor pipe
