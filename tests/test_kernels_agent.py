"""``agent kernels run|parse|model-facts`` as subprocesses: end to end against the simulator,
the failures a user meets, and model facts from config.json."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import AgentEnv, SimProcess, event, free_port, start_sim, subprocess_env

from dsv4tui.agent.kernels import capture as agent_kernels

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "data" / "traces" / "torch_standin.py"
H200 = REPO / "tests" / "data" / "traces" / "h200_torch_profiler-TP-0.trace.json.gz"

DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_nextn_predict_layers": 1,
        "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
        "n_routed_experts": 256, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
        "num_experts_per_tok": 8, "moe_layer_freq": 1, "first_k_dense_replace": 3,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


# --- model facts ---------------------------------------------------------------------------


def test_param_counts_match_published_sizes() -> None:
    """DeepSeek-V3: 671 B total, 37 B activated; Llama 3 8B: 8.03 B; Mixtral 8x7B: 46.7 B
    total, 12.9 B active (the model cards' numbers)."""
    f = agent_kernels.count_params(DSV3)
    assert f["total_params"] / 1e9 == pytest.approx(671.0, abs=0.1)
    assert f["active_params"] / 1e9 == pytest.approx(37.55, abs=0.05)
    assert (f["moe_layers"], f["experts"], f["experts_per_token"]) == (58, 256, 8)
    assert f["attention"] == "MLA" and f["expert_params"] == 3 * 7168 * 2048
    # read per decode step: no input embedding table (129280 x 7168), LM head included
    assert f["decode_read_params"] == f["active_params"] - 129280 * 7168
    assert "MTP (next-n) layers not counted" in f["notes"]
    assert agent_kernels.count_params(LLAMA3_8B)["total_params"] / 1e9 == \
        pytest.approx(8.03, abs=0.01)
    m = agent_kernels.count_params(MIXTRAL)
    assert m["total_params"] / 1e9 == pytest.approx(46.7, abs=0.05)
    assert m["active_params"] / 1e9 == pytest.approx(12.88, abs=0.05)


@pytest.mark.parametrize("config, quant_file, server_quant, bpp, fmt", [
    ({"quantization_config": {"quant_method": "fp8"}}, None, None, 1.0, "FP8"),
    ({"quantization_config": {"quant_method": "mxfp4"}}, None, None, 0.5, "MXFP4"),
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}, None, None,
     0.5, "NVFP4"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4}}}}}, None, None, 0.5, "compressed-tensors 4-bit"),
    ({"torch_dtype": "bfloat16"}, {"quantization": {"quant_algo": "NVFP4"}}, None, 0.5, "NVFP4"),
    ({"torch_dtype": "bfloat16"}, None, "mxfp4", 0.5, "MXFP4"),
    ({"torch_dtype": "bfloat16"}, None, None, 2.0, "bfloat16"),
    ({}, None, None, None, "unknown"),
])
def test_bytes_per_weight(config: dict[str, Any], quant_file: Any, server_quant: str | None,
                          bpp: float | None, fmt: str) -> None:
    got, name, _source = agent_kernels.bytes_per_weight(config, quant_file, server_quant)
    assert (got, name) == (bpp, fmt)


def test_model_facts_command(agent_env: AgentEnv, tmp_path: Path) -> None:
    model = tmp_path / "DeepSeek-V3"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(DSV3))
    code, events = agent_env.run("kernels", "model-facts", "--model-path", str(model))
    assert code == 0
    facts = event(events, "model_facts")
    assert facts["bytes_per_param"] == 1.0 and facts["weight_format"] == "FP8"
    assert facts["config_path"] == str(model / "config.json")
    # a Hugging Face id found in the local cache
    snap = tmp_path / "hf" / "hub" / "models--org--Mixtral" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(MIXTRAL))
    env = AgentEnv(dict(agent_env.env, HF_HOME=str(tmp_path / "hf")), agent_env.home,
                   agent_env.sim_state)
    code, events = env.run("kernels", "model-facts", "--model-path", "org/Mixtral")
    assert code == 0 and event(events, "model_facts")["experts"] == 8
    code, events = env.run("kernels", "model-facts", "--model-path", "org/Nothing")
    assert code == 1
    assert "not a directory here and not in the Hugging Face cache" in \
        event(events, "error")["message"]
    code, events = env.run("kernels", "model-facts")
    assert code == 2 and event(events, "error")["kind"] == "usage"


def test_parse_command_on_the_real_trace(agent_env: AgentEnv) -> None:
    code, events = agent_env.run("kernels", "parse", str(H200), "--tensor-active", "0.1",
                                 "--top", "5")
    assert code == 0
    prof = event(events, "kernels")
    assert len(prof["kernels"]) == 5 and prof["kernels_rest"]["count"] > 0
    assert prof["tensor_decision"]["method"] == "name+telemetry"
    code, events = agent_env.run("kernels", "parse", str(H200.parent / "nope.trace.json.gz"))
    assert code == 1 and "cannot read" in event(events, "error")["message"]


# --- end to end against the simulator -----------------------------------------------------


@pytest.fixture
def sim(tmp_path: Path, agent_env: AgentEnv) -> Iterator[SimProcess]:
    proc = start_sim(tmp_path / "sim", env=subprocess_env(
        DSV4TUI_SIM_STATE=str(agent_env.sim_state)), decode_speed=50.0)
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def test_agent_kernels_against_the_simulator(sim: SimProcess, agent_env: AgentEnv,
                                             tmp_path: Path) -> None:
    out = tmp_path / "traces"
    t0 = time.monotonic()
    code, events = agent_env.run("kernels", "run", "--url", sim.url, "--steps", "5", "-c", "8",
                                 "--warmup", "0.5", "--output-dir", str(out), "--top", "10",
                                 timeout=90)
    assert code == 0, events
    assert time.monotonic() - t0 < 30
    target = event(events, "kernels_target")
    assert target["simulated"] and target["backend"] == "triton" and target["tp_size"] == 8
    assert target["expected_files"] == 8 and target["output_dir"] == str(out)
    traces = event(events, "kernels_traces")
    assert len(traces["files"]) == 8 and traces["stopped_by"] == "num_steps"
    assert all(Path(f["path"]).parent == out and f["bytes"] > 0 for f in traces["files"])
    phases = [e["phase"] for e in events if e["type"] == "kernels_phase"]
    assert phases[:2] == ["load", "profiling"] and phases[-1] == "parsing"
    prof = event(events, "kernels")
    assert prof["ranks"] == 8 and prof["basis"] == "decode" and prof["profiled_steps"] == 5
    assert prof["steps"]["decode"]["mean_bs"] == 8
    fam = {f["family"]: f for f in prof["families"]}
    assert fam["moe_gemm"]["share"] == pytest.approx(0.39, abs=0.03)
    assert fam["attention"]["share"] == pytest.approx(0.40, abs=0.03)
    # the simulated tensor pipe (~0.5 % at C=8 on triton/MXFP4) rules tensor cores out
    assert (fam["moe_gemm"]["tensor_cores"], fam["moe_gemm"]["tensor_basis"]) == \
        (False, "telemetry")
    assert fam["dense_gemm"]["tensor_cores"] is True
    tele = prof["telemetry"]
    assert tele["source"] == "simulated" and tele["frames"] >= 1
    assert 0 < tele["tensor_active_pct"] < 2 and tele["busy_gpus"] == list(range(8))
    assert prof["load"]["concurrency"] == 8 and prof["load"]["errors"] == 0
    assert prof["server"]["checkpoint"] == "MXFP4"


# --- failures -------------------------------------------------------------------------------


def test_usage_and_connect_errors(agent_env: AgentEnv) -> None:
    code, events = agent_env.run("kernels", "run", "--url", "http://127.0.0.1:1", "--steps", "0")
    assert code == 2 and "--steps" in event(events, "error")["message"]
    port = free_port()
    code, events = agent_env.run("kernels", "run", "--url", f"http://127.0.0.1:{port}",
                                 "--warmup", "0")
    err = event(events, "error")
    assert code == 1 and err["kind"] == "connect" and str(port) in err["message"]


def test_server_without_start_profile(known_server: Callable[..., Any],
                                      agent_env: AgentEnv) -> None:
    srv = known_server(tokens=4000, itl_ms=1)
    code, events = agent_env.run("kernels", "run", "--url", srv.url, "-c", "2", "--warmup",
                                 "0.2", "--telemetry", "off", timeout=60)
    err = event(events, "error")
    assert code == 1 and err["kind"] == "start_profile"
    assert "/start_profile answered HTTP 404" in err["message"]


def test_no_trace_appears(agent_env: AgentEnv, tmp_path: Path) -> None:
    """Traces land where this agent cannot see them: /stop_profile is tried, then one line."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(STANDIN), "--port", str(port), "--fake"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                import httpx

                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        elsewhere = tmp_path / "not-here"
        elsewhere.mkdir()
        code, events = agent_env.run(
            "kernels", "run", "--url", f"http://127.0.0.1:{port}", "-c", "2", "--warmup", "0.2",
            "--steps", "3", "--telemetry", "off", "--output-dir", str(tmp_path / "srv"),
            "--trace-dir", str(elsewhere), "--stop-after", "0.5", "--timeout", "2", timeout=60)
    finally:
        proc.kill()
        proc.wait(5)
    err = event(events, "error")
    assert code == 1 and err["kind"] == "no_traces"
    assert str(elsewhere) in err["message"] and "--trace-dir" in err["message"]
    assert any(e.get("phase") == "stopping" for e in events)
    # the server did write its trace, where the agent was told not to look
    assert list((tmp_path / "srv").glob("*-TP-0.trace.json.gz"))


def test_frames_summary_picks_the_busy_gpus() -> None:
    def gpu(i: int, util: float, tensor: float) -> dict[str, Any]:
        return {"index": i, "name": "NVIDIA H200", "util_gpu": util, "tensor_active": tensor,
                "sm_active": util, "dram_active": 10.0, "fp32_active": 1.0}

    frames = [(float(t), [gpu(0, 98, 1.0), gpu(1, 96, 0.6), gpu(2, 0, 0.0)]) for t in range(4)]
    s = agent_kernels.summarize_frames(frames, "nvml")
    assert s["busy_gpus"] == [0, 1] and s["tensor_active_pct"] == pytest.approx(0.8)
    assert s["util_gpu_pct"] == 97.0
    none = agent_kernels.summarize_frames(
        [(0.0, [dict(gpu(0, 90, 0.0), tensor_active=None)])], "nvidia-smi")
    assert none["tensor_active_pct"] is None and "no tensor-pipe counter" in none["note"]


def test_telemetry_window_scope() -> None:
    """The steady load before /start_profile + the trace's window, unless GPUs idled there."""
    def frame(t: float, util: float, tensor: float) -> tuple[float, list[dict[str, Any]]]:
        return (t, [{"index": 0, "util_gpu": util, "tensor_active": tensor, "sm_active": util}])

    tw = agent_kernels.TelemetryWindow("off", interval=0.5)
    tw.trace_started_at = 100.0
    tw.frames = [frame(90.0, 5.0, 9.0),  # warm-up: out
                 frame(98.0, 90.0, 1.0), frame(99.5, 90.0, 1.0),  # steady load: in
                 frame(102.0, 0.0, 0.0),  # the profiler starting: out
                 frame(104.2, 80.0, 2.0),  # inside the trace window: in
                 frame(110.0, 0.0, 0.0)]  # trace export: out
    s = tw.summary([104.0, 104.1])
    assert s["scope"].startswith("steady load") and s["frames"] == 3
    assert s["tensor_active_pct"] == pytest.approx(4.0 / 3, abs=1e-3)
    assert s["util_gpu_pct"] == 86.67
    tw.frames = [frame(t, 0.0, 0.0) for t in (98.0, 99.0, 104.2)] + [frame(120.0, 90.0, 1.0)]
    s = tw.summary([104.0, 104.1])  # idle there: the whole run counts
    assert s["scope"] == "whole run" and s["frames"] == 4
    assert tw.summary(None)["scope"] == "whole run"


@pytest.mark.e2e
def test_a_capture_waits_for_the_decode_batch_not_for_requests_in_prefill(
        tmp_path: Path, agent_env: AgentEnv) -> None:
    """The demo's speed (a slow prefill of 16 chat requests): /metrics counts requests in
    prefill as running and each chat stream's first piece is its role alone, so neither says
    the decode batch has formed; the capture must wait until it has (it measured bs 1 at C=16
    before)."""
    proc = start_sim(tmp_path / "sim", env=subprocess_env(
        DSV4TUI_SIM_STATE=str(agent_env.sim_state)), speed=8.0, decode_speed=1.0)
    try:
        proc.wait_ready()
        code, events = agent_env.run("kernels", "run", "--url", proc.url, "--steps", "3",
                                     "-c", "16", "--warmup", "0.5", "--output-dir",
                                     str(tmp_path / "traces"), timeout=120)
    finally:
        proc.stop()
    assert code == 0, events
    load = event(events, "kernels")["load"]
    assert load["ramp"]["reached"] and load["measured_bs"] >= 15, load
    assert not load["batch_far"]
