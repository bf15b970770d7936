"""``dsv4tui kernels``: JSON shapes, the run store, side by side, errors; end to end over the
console's own agent path against the simulator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import SimProcess, start_sim, subprocess_env

from dsv4tui.agent.kernels import trace_parse
from dsv4tui.cli import kernels as cmd
from dsv4tui.core.errors import AgentFailed
from dsv4tui.core.store import RunStore
from dsv4tui.core.store import kernels as kernel_store
from dsv4tui.main import main
from dsv4tui.sim.trace import write_trace

H200 = Path(__file__).parent / "data" / "traces" / "h200_torch_profiler-TP-0.trace.json.gz"


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def sim_summary(tmp: Path, backend: str, checkpoint: str, tensor: float) -> dict[str, Any]:
    write_trace(str(tmp), backend, checkpoint, 5, tp_size=2, step_s=0.5, seed=1)
    s = trace_parse.parse_traces([str(tmp)])
    trace_parse.attribute_tensor_cores(s, tensor, "simulated", 97.0)
    s.update(url="http://127.0.0.1:30000", model="dsv4", profiled_steps=5,
             load={"concurrency": 16}, server={"backend": backend, "checkpoint": checkpoint,
                                               "simulated": True})
    return s


def test_trace_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "--trace", str(H200), "--json", "--top", "5"]) == 0
    out = _json(capsys)
    assert set(out) == {"capture_id", "run_id", "summary"}
    s = out["summary"]
    for key in ("files", "ranks", "basis", "basis_note", "gpu_time_ms", "window_ms", "steps",
                "kernels", "kernels_rest", "families", "tensor_decision"):
        assert key in s
    k = s["kernels"][0]
    assert set(k) >= {"name", "short_name", "family", "calls", "total_us", "mean_us", "share",
                      "tensor_core_by_name"}
    f = s["families"][0]
    assert set(f) >= {"family", "label", "share", "total_us", "calls", "tensor_cores",
                      "tensor_basis", "tensor_note"}
    assert s["tensor_decision"]["method"] == "name"


def test_trace_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "--trace", str(H200), "--tensor-active", "0.1"]) == 0
    text = capsys.readouterr().out
    assert "_fp32_slot_gemv_kernel" in text and "MoE GEMM" in text
    assert "tensor pipe 0.10 %" in text and "how the flags were decided" in text


@pytest.mark.parametrize("argv, code, msg", [
    (["kernels"], 2, "give a HOST or --url"),
    (["kernels", "--trace", "/nonexistent.trace.json.gz"], 1, "cannot read"),
    (["kernels", "--url", "http://x", "--profile", "p"], 2, "--profile goes with a HOST"),
    (["kernels", "demo", "--steps", "0"], 2, "must be >= 1"),
    (["kernels", "demo", "--tensor-active", "3"], 2, "--tensor-active goes with --trace"),
    (["kernels", "--show", "nope"], 2, "is not a capture id"),
    (["kernels", "--show", "7"], 2, "no kernel capture with id 7"),
    (["kernels", "--show", "latest"], 2, "no kernel captures yet"),
    (["kernels", "--show", "run:3"], 2, "run 3 has no kernel capture"),
    (["kernels", "--url", "http://127.0.0.1:1", "--run", "9"], 2, "no run with id 9"),
])
def test_errors_are_one_line(argv: list[str], code: int, msg: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_store_list_show_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as store:
        run_id = store.start_run(label="mxfp4-triton", host="demo", backend="triton",
                                 checkpoint="MXFP4", simulated=True)
        a = sim_summary(tmp_path / "a", "triton", "MXFP4", 0.8)
        b = sim_summary(tmp_path / "b", "marlin", "NVFP4", 38.0)
        pa, ra = cmd.store_capture(store, a, cmd.ServerContext(host="demo"), run_id=run_id)
        pb, rb = cmd.store_capture(store, b, cmd.ServerContext(host="demo"), label="nvfp4")
        assert (ra, rb) == (run_id, None)
        item = kernel_store.find_capture(store, f"run:{run_id}")
        assert item.id == pa and item.backend == "triton" and item.label == "mxfp4-triton"
        assert kernel_store.find_capture(store, "latest").id == pb
        assert item.summary["families"] == a["families"]
        assert item.decode_step_ms == pytest.approx(500, rel=0.01) and item.simulated
    assert main(["kernels", "--list", "--json"]) == 0
    listed = _json(capsys)
    assert [p["id"] for p in listed] == [pb, pa] and "summary" not in listed[0]
    assert main(["kernels", "--list", "demo"]) == 0
    assert "triton" in capsys.readouterr().out
    assert main(["kernels", "--show", str(pa), str(pb)]) == 0
    text = capsys.readouterr().out
    assert "vs first" in text and "MoE GEMM" in text and "decode step ms" in text
    assert main(["kernels", "--show", f"run:{run_id}", "--json"]) == 0
    shown = _json(capsys)["captures"]
    assert shown[0]["run_id"] == run_id and shown[0]["summary"]["basis"] == "decode"
    with RunStore() as store:  # deleting the run keeps the capture, unattached
        store.delete_run(run_id)
        assert kernel_store.get_capture(store, pa).run_id is None  # type: ignore[union-attr]
        assert kernel_store.delete_capture(store, pa)


def test_collect_kernels_with_an_agent_double() -> None:
    class Agent:
        def __init__(self, events: list[dict[str, Any]]) -> None:
            self.events_ = events
            self.args: tuple[str, ...] = ()

        async def events(self, *args: str) -> AsyncIterator[dict[str, Any]]:
            self.args = args
            for ev in self.events_:
                yield ev

    seen: list[str] = []
    agent = Agent([{"type": "kernels_phase", "phase": "load"}, {"type": "kernels", "basis": "x"}])
    argv = cmd.agent_args("http://h:1", steps=3, concurrency=4, output_dir="/tmp/t",
                          model="m", api_key_env="KEY")
    final = asyncio.run(cmd.collect_kernels(agent, argv, lambda ev: seen.append(ev["type"])))
    assert final["basis"] == "x" and seen == ["kernels_phase", "kernels"]
    assert agent.args[:2] == ("kernels", "run") and "--api-key-env" in agent.args
    with pytest.raises(AgentFailed, match="without a kernel capture"):
        asyncio.run(cmd.collect_kernels(Agent([]), argv))


# --- through the console: HOST/--url -> agent -> store ------------------------------------

@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimProcess]:
    state = tmp_path / "sim-state.json"
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(state))
    proc = start_sim(tmp_path / "sim", env=subprocess_env(DSV4TUI_SIM_STATE=str(state)),
                     decode_speed=50.0)
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


@pytest.mark.e2e
def test_kernels_url_end_to_end_and_attach(sim: SimProcess,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with RunStore() as store:
        run_id = store.start_run(label="before", host="local", url=sim.url)
    code = main(["kernels", "--url", sim.url, "--steps", "4", "-c", "8", "--warmup", "0.5",
                 "--run", str(run_id), "--json"])
    out = _json(capsys)
    assert code == 0
    assert out["run_id"] == run_id and out["host"] == "local"
    assert out["summary"]["families"][0]["family"] in ("moe_gemm", "attention")
    with RunStore() as store:
        stored = kernel_store.find_capture(store, f"run:{run_id}")
    assert stored.id == out["capture_id"] and stored.backend == "triton"
    # the launch fields went through the agent, the console and the store
    found = {f["short_name"]: f for f in stored.summary["launch"]["findings"]}
    assert found["_tiled_sparse_decode_kernel"]["blocks"] == 64
