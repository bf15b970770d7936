"""SGLang versions: per-version choice lists, a launch validated against the host's SGLang (read
by the agent from the profile's python, never importing sglang), the DeepSeek-V4 attention
fields, and what ``check`` says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui import main as cli
from dsv4tui.core.config import CampaignVariant, ServerProfile
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.server import sglang_choices
from dsv4tui.core.server.launch import build_launch

DSV4 = "/models/DeepSeek-V4-Flash-NVFP4"


def profile(**kw: object) -> ServerProfile:
    base: dict[str, object] = dict(python="/opt/venv/bin/python", model_path=DSV4, tp_size=8,
                                   quantization="modelopt_fp4", checkpoint="NVFP4")
    base.update(kw)
    return ServerProfile(**base)  # type: ignore[arg-type]


def test_the_lists_differ_where_the_wheels_differ() -> None:
    v20, v22, v23 = (sglang_choices.VERSIONS[v] for v in ("0.5.20", "0.5.22", "0.5.23"))
    lora = {"lora_cutedsl", "lora_triton", "lora_marlin"}
    assert lora <= set(v23.moe_runner_backend) and not lora & set(v22.moe_runner_backend)
    assert len(v23.moe_runner_backend) == len(v20.moe_runner_backend) + 3 == 22
    assert "flashmla_mega" in v23.dsv4_attn_backend and "flashmla_mega" not in v22.dsv4_attn_backend
    assert "llada2_cfg_flashinfer" in v22.attention_backend
    assert "llada2_cfg_flashinfer" not in v20.attention_backend
    assert "fp4_e2m1" in v20.kv_cache_dtype and "fp4_e2m1" not in v23.kv_cache_dtype
    assert v23.moe_runner_backend == sglang_choices.MOE_RUNNER_BACKENDS  # the newest, for the sim


@pytest.mark.parametrize(("version", "lists", "note"), [
    ("0.5.23", "0.5.23", None), ("0.5.23.post1", "0.5.23", None), ("0.5.20", "0.5.20", None),
    ("0.5.30", "0.5.23", "newer than the choice lists dsv4tui knows"),
    ("0.6.0rc1", "0.5.23", "newer"), ("0.4.10", "0.5.20", "older"), (None, "0.5.23", None),
    ("main", "0.5.23", "not a version number"),
])
def test_lists_for_a_version(version: str | None, lists: str, note: str | None) -> None:
    got, why = sglang_choices.lists_for(version)
    assert got.version == lists
    assert (why is None) if note is None else (why is not None and note in why)


def test_a_launch_is_validated_against_the_hosts_sglang() -> None:
    p = profile(moe_runner_backend="lora_marlin")
    assert build_launch(p, sglang_version="0.5.23").choices_version == "0.5.23"
    with pytest.raises(ConfigError, match=r"--moe-runner-backend 'lora_marlin' is not a choice "
                       r"of SGLang 0.5.20 \(it is one in SGLang 0.5.23\); valid: auto,"):
        build_launch(p, sglang_version="0.5.20")
    with pytest.raises(ConfigError, match=r"unknown MoE backend .lora_triton. in SGLang 0\.5\.21"):
        build_launch(profile(), "lora_triton", sglang_version="0.5.21")
    # a value only an older SGLang has: the config takes it, a newer host refuses it
    old = profile(kv_cache_dtype="fp4_e2m1")
    assert "--kv-cache-dtype" in build_launch(old, sglang_version="0.5.20").argv
    with pytest.raises(ConfigError, match=r"fp4_e2m1. is not a choice of SGLang 0\.5\.23"):
        build_launch(old, sglang_version="0.5.23")


def test_a_newer_sglang_is_checked_against_the_newest_lists_and_says_so_once() -> None:
    launch = build_launch(profile(moe_runner_backend="lora_marlin", attention_backend="dsv4",
                                  dsv4_attn_backend="flashmla_mega"), sglang_version="0.5.31")
    notes = [w for w in launch.warnings if "0.5.31" in w]
    assert len(notes) == 1 and "validated against 0.5.23's" in notes[0]
    assert launch.choices_version == "0.5.23" and launch.sglang_version == "0.5.31"
    assert not [w for w in build_launch(profile(), sglang_version="0.5.22").warnings
                if "choice lists" in w]


def test_deepseek_v4_attention_fields_become_flags_and_changes() -> None:
    p = profile(attention_backend="dsv4", dsv4_attn_backend="flashmla",
                dsv4_prefill_backend="flashmla_sparse_q8")
    argv = build_launch(p).argv
    assert argv[argv.index("--dsv4-attn-backend") + 1] == "flashmla"
    assert argv[argv.index("--dsv4-prefill-backend") + 1] == "flashmla_sparse_q8"
    launch = build_launch(p, overrides={"dsv4_attn_backend": "trtllm"}, profile_name="nv")
    assert launch.argv[launch.argv.index("--dsv4-attn-backend") + 1] == "trtllm"
    assert launch.changes == {"dsv4_attn_backend": {"from": "flashmla", "to": "trtllm"}}
    unset = build_launch(profile(), overrides={"attention_backend": "triton"})
    assert unset.changes == {"attention_backend": {"from": "default", "to": "triton"}}
    with pytest.raises(ConfigError, match=r".flashmla_mega. is not a choice of SGLang 0\.5\.21"):
        build_launch(p, overrides={"dsv4_attn_backend": "flashmla_mega"}, sglang_version="0.5.21")
    with pytest.raises(ConfigError, match="dsv4_attn_backend: unknown dsv4_attn_backend 'fast'"):
        build_launch(p, overrides={"dsv4_attn_backend": "fast"})
    with pytest.raises(ConfigError, match="sets --dsv4-attn-backend; use the profile field"):
        build_launch(profile(extra_args=["--dsv4-attn-backend", "trtllm"]))


def test_campaign_variants_override_the_attention_fields() -> None:
    v = CampaignVariant.model_validate({"name": "trtllm", "dsv4_attn_backend": "trtllm",
                                        "dsv4_prefill_backend": "flashmla_sparse_q8",
                                        "attention_backend": "dsv4"})
    assert v.overrides["dsv4_attn_backend"] == "trtllm"
    merged = ServerProfile.model_validate({**profile().model_dump(), **v.overrides})
    assert "--dsv4-prefill-backend" in build_launch(merged).argv


def test_arch_notes_mark_sm100_only_backends() -> None:
    mega = "flashmla_mega"
    assert sglang_choices.arch_misfit("dsv4_attn_backend", mega, "12.0") == \
        "does not run on sm_120 (its kernels are for sm_10x)"
    assert sglang_choices.arch_misfit("dsv4_attn_backend", "trtllm", "9.0") is not None
    assert sglang_choices.arch_misfit("dsv4_attn_backend", "trtllm", "10.0") is None
    assert sglang_choices.arch_misfit("attention_backend", "fa3", "12.0") is not None
    assert sglang_choices.arch_misfit("attention_backend", "trtllm_mla", "12.0") is None
    assert sglang_choices.arch_misfit("attention_backend", "aiter", "9.0") == \
        "not for NVIDIA GPUs (rocm)"
    assert sglang_choices.arch_misfit("attention_backend", "triton", None) is None


# -- the host side: the agent reads the profile python's sglang metadata ----------------------

def fake_sglang(root: Path, version: str) -> Path:
    """A site dir with an ``sglang`` package that must never be imported, and its metadata."""
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("raise SystemExit('sglang was imported')\n")
    info = root / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return root


def agent(*args: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.mark.e2e
def test_agent_reads_the_version_with_the_profiles_environment(tmp_path: Path) -> None:
    site = fake_sglang(tmp_path / "site", "0.5.20")
    ev = agent("sglang-version", "--python", sys.executable, "--env-json",
               json.dumps({"PYTHONPATH": str(site)}))[-1]
    assert ev["type"] == "sglang_version" and ev["version"] == "0.5.20" and ev["present"]
    bare = agent("sglang-version", "--python", sys.executable)[-1]
    assert bare["version"] is None and not bare["present"]
    missing = agent("sglang-version", "--python", str(tmp_path / "nope"))[-1]
    assert missing["error"] == "interpreter not found"


def write_config(tmp_path: Path, site: Path, backend: str) -> Path:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"""
[hosts.local]
default_profile = "old"
[hosts.local.profiles.old]
python = "{sys.executable}"
model_path = "/models/DeepSeek-V4-Flash"
port = 31891
moe_runner_backend = "{backend}"
env = {{ PYTHONPATH = "{site}" }}
""")
    return cfg


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.e2e
def test_start_refuses_a_backend_the_hosts_sglang_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The local host's profile python has SGLang 0.5.20 (its metadata): lora_marlin, a
    0.5.23 backend, is refused before anything launches; check says which lists apply."""
    monkeypatch.setenv("DSV4TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DSV4TUI_AGENT_HOME", str(tmp_path / "agent"))
    site = fake_sglang(tmp_path / "site", "0.5.20")
    cfg = write_config(tmp_path, site, "lora_marlin")
    code, out, err = run_cli(capsys, "--config", str(cfg), "server", "start", "local")
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1, err
    assert "--moe-runner-backend 'lora_marlin' is not a choice of SGLang 0.5.20 (it is one in " \
           "SGLang 0.5.23); valid: " + ", ".join(
               sglang_choices.VERSIONS["0.5.20"].moe_runner_backend) in err
    assert "Traceback" not in err and not (tmp_path / "agent" / "server.json").exists()
    code, out, err = run_cli(capsys, "--config", str(cfg), "check", "local", "--json")
    report = json.loads(out)
    step = next(s for s in report["steps"] if s["step"] == "sglang")
    assert step["ok"] and "sglang 0.5.20 in" in step["detail"]
    assert "checked against 0.5.20's choices" in step["detail"]
    assert report["sglang"][0]["profiles"] == ["old"]


@pytest.mark.e2e
def test_check_names_the_simulators_sglang(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("DSV4TUI_DATA_DIR", str(tmp_path / "data"))
    code, out, _ = run_cli(capsys, "check", "demo")
    assert code == 0
    assert "sglang 0.5.23 (the simulator) (profiles mxfp4, nvfp4); launches checked against " \
           "0.5.23's choices" in out
    assert "SIMULATED: 8 GPU(s): NVIDIA RTX PRO 6000 Blackwell Server Edition (sm_120)" in out
