"""Profile -> argv: validation against SGLang 0.5.2x, traps, backend switching, dry-run CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dsv4tui import main as cli
from dsv4tui.core.config import ServerProfile
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.hosts.demo import demo_host_config
from dsv4tui.core.server.launch import build_launch


def full_profile(**kw: object) -> ServerProfile:
    base: dict[str, object] = dict(
        python="/opt/venv/bin/python", model_path="/models/DeepSeek-V4-Flash-NVFP4",
        served_model_name="dsv4", port=30001, tp_size=8, dp_size=1, ep_size=8,
        quantization="modelopt_fp4", moe_runner_backend="marlin", attention_backend="dsv4",
        kv_cache_dtype="fp8_e4m3", mem_fraction_static=0.88, speculative_algorithm="EAGLE",
        speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
        trust_remote_code=True, api_key_env="SGL_KEY", extra_args=["--cuda-graph-max-bs-decode",
                                                                   "64"],
        env={"NCCL_DEBUG": "WARN"}, checkpoint="NVFP4")
    base.update(kw)
    return ServerProfile(**base)  # type: ignore[arg-type]


def test_profile_becomes_argv_list() -> None:
    launch = build_launch(full_profile(), profile_name="nvfp4")
    assert launch.argv == [
        "/opt/venv/bin/python", "-m", "sglang.launch_server",
        "--model-path", "/models/DeepSeek-V4-Flash-NVFP4", "--served-model-name", "dsv4",
        "--host", "127.0.0.1", "--port", "30001", "--tp-size", "8", "--dp-size", "1",
        "--ep-size", "8", "--quantization", "modelopt_fp4", "--moe-runner-backend", "marlin",
        "--attention-backend", "dsv4", "--kv-cache-dtype", "fp8_e4m3",
        "--mem-fraction-static", "0.88", "--speculative-algorithm", "EAGLE",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--trust-remote-code", "--enable-metrics",
        "--cuda-graph-max-bs-decode", "64"]
    assert launch.env == {"NCCL_DEBUG": "WARN"}
    assert launch.log_file == "sglang-nvfp4.log" and launch.port == 30001
    assert launch.api_key_env == "SGL_KEY" and launch.changes == {}
    assert (launch.backend, launch.checkpoint) == ("marlin", "NVFP4")


def test_api_key_travels_by_name_only() -> None:
    launch = build_launch(full_profile(), profile_name="nvfp4")
    args = launch.agent_args(replace=True, wait_ready=True, grace=5, timeout=60)
    assert args[args.index("--api-key-env") + 1] == "SGL_KEY"
    assert "--api-key" not in args and "--api-key" not in launch.argv
    assert json.loads(args[args.index("--argv-json") + 1]) == launch.argv
    assert {"--replace", "--wait-ready"} <= set(args)
    profile = json.loads(args[args.index("--profile-json") + 1])
    assert profile["name"] == "nvfp4" and profile["env_keys"] == ["NCCL_DEBUG"]


def test_backend_switch_is_recorded() -> None:
    launch = build_launch(full_profile(), "triton", "nvfp4")
    i = launch.argv.index("--moe-runner-backend")
    assert launch.argv[i + 1] == "triton"
    assert launch.changes == {"moe_runner_backend": {"from": "marlin", "to": "triton"}}
    assert build_launch(full_profile(), "marlin").changes == {}


def test_unknown_backend_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown MoE backend 'trtllm'; valid: auto, .*marlin"):
        build_launch(full_profile(), "trtllm")


@pytest.mark.parametrize(("field", "value", "pattern"), [
    ("moe_runner_backend", "fast", "valid: auto, deep_gemm"),
    ("attention_backend", "flash", "valid: triton, torch_native"),
    ("quantization", "nvfp4", "valid: awq, fp8"),
    ("kv_cache_dtype", "fp8", "valid: auto, fp8_e5m2"),
    ("speculative_algorithm", "MTP", "not a speculative algorithm"),
    ("extra_args", ["--cuda-graph-max-bs", "64"], "--cuda-graph-max-bs-decode"),
    ("extra_args", ["--tp", "8"], "--tp-size"),
])
def test_invalid_values_refused_with_the_fix(field: str, value: object, pattern: str) -> None:
    with pytest.raises(ValidationError, match=pattern):
        full_profile(**{field: value})


@pytest.mark.parametrize(("kw", "pattern"), [
    ({"extra_args": ["--port", "1"]}, "use the profile field 'port'"),
    ({"extra_args": ["--moe-runner-backend=triton"]}, "'moe_runner_backend'"),
    ({"extra_args": ["--api-key", "sk-123"]}, "never put the API key"),
    ({"model_path": "--help"}, "starts with '-'"),
    ({"served_model_name": "-x"}, "starts with '-'"),
    ({"nnodes": 2}, "needs dist_init_addr"),
    ({"nnodes": 2, "dist_init_addr": "10.0.0.1:5000", "node_rank": 2}, "below nnodes"),
    ({"module": "sglang.launch_server; rm -rf /"}, "not a Python module name"),
    ({"env": {"BAD NAME": "x"}}, "not a valid environment variable name"),
])
def test_launch_level_refusals(kw: dict[str, object], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        build_launch(full_profile(**kw))


def test_injection_attempts_stay_literal_arguments() -> None:
    nasty = "/models/x; touch /tmp/pwned && $(reboot) `id`"
    launch = build_launch(full_profile(model_path=nasty, served_model_name="a|b>c",
                                       extra_args=["--chat-template", "$(id)"]))
    assert nasty in launch.argv and "a|b>c" in launch.argv and "$(id)" in launch.argv
    assert "'/models/x; touch /tmp/pwned" in launch.command_line()  # quoted for reading


def test_warnings_for_deprecated_flags_and_dsv4_speculation() -> None:
    launch = build_launch(full_profile(extra_args=["--disable-cuda-graph"],
                                       speculative_algorithm="NGRAM"))
    assert any("deprecated" in w for w in launch.warnings)
    assert any("DeepSeek-V4 supports only EAGLE" in w for w in launch.warnings)


def test_demo_profiles() -> None:
    host = demo_host_config(port=31234)
    assert set(host.profiles) == {"mxfp4", "nvfp4"} and host.default_profile == "mxfp4"
    mx = build_launch(host.profiles["mxfp4"], profile_name="mxfp4")
    nv = build_launch(host.profiles["nvfp4"], profile_name="nvfp4")
    assert mx.argv[1:3] == ["-m", "dsv4tui.sim.sglang"] and "31234" in mx.argv
    assert (mx.backend, mx.checkpoint, nv.backend, nv.checkpoint) == (
        "triton", "MXFP4", "marlin", "NVFP4")
    assert mx.argv[mx.argv.index("--tp-size") + 1] == "8"
    assert "--sim-speed" in mx.argv


CONFIG = """
[hosts.box]
ssh = "nobody@192.0.2.1"
[hosts.box.profiles.nvfp4]
python = "/opt/venv/bin/python"
model_path = "/models/DeepSeek-V4-Flash-NVFP4"
quantization = "modelopt_fp4"
moe_runner_backend = "marlin"
tp_size = 8
api_key_env = "SGL_KEY"
env = { NCCL_DEBUG = "WARN" }
"""


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dry_run_prints_the_launch_without_connecting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG)
    code, out, err = run_cli(capsys, "--config", str(cfg), "server", "restart", "box",
                             "--backend", "triton", "--dry-run", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["argv"][0] == "/opt/venv/bin/python"
    assert data["argv"][data["argv"].index("--moe-runner-backend") + 1] == "triton"
    assert data["env"] == {"NCCL_DEBUG": "WARN"} and data["log_file"] == "sglang-nvfp4.log"
    assert data["changes"] == {"moe_runner_backend": {"from": "marlin", "to": "triton"}}
    assert data["api_key_env"] == "SGL_KEY"
    code, out, _ = run_cli(capsys, "--config", str(cfg), "server", "start", "box", "--dry-run")
    assert code == 0 and "would run: NCCL_DEBUG=WARN /opt/venv/bin/python -m sglang.launch_server" in out


@pytest.mark.parametrize(("args", "pattern"), [
    (["--backend", "bogus"], "unknown MoE backend 'bogus'; valid:"),
    (["--profile", "nope"], "unknown profile 'nope'"),
])
def test_dry_run_bad_input_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    args: list[str], pattern: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG)
    code, out, err = run_cli(capsys, "--config", str(cfg), "server", "start", "box", "--dry-run",
                             *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and pattern in err
