"""What the dashboard's pickers list (dsv4tui.core.view.choices), without Textual: which MoE
backends fit a checkpoint, the attention flags a model takes, the profile and campaign
pickers' notes."""

from __future__ import annotations

from plugins.sim import sim_profile

from dsv4tui.core.config import CampaignConfig
from dsv4tui.core.server import attention
from dsv4tui.core.view import choices
from dsv4tui.core.view.model import ProfileChoice


def test_picker_lists_only_backends_that_fit() -> None:
    names = [c.value for c in choices.backend_choices("NVFP4", "marlin")]
    assert "marlin" in names and "flashinfer_cutlass" in names
    assert "flashinfer_mxfp4" not in names and "triton_kernel" not in names


def test_the_running_backend_stays_listed_when_it_does_not_fit_and_says_why() -> None:
    odd = {c.value: c for c in choices.backend_choices("NVFP4", "flashinfer_mxfp4")}
    assert odd["flashinfer_mxfp4"].current and "not NVFP4" in odd["flashinfer_mxfp4"].note


def test_a_quantization_names_the_format_when_the_checkpoint_does_not() -> None:
    names = [c.value for c in choices.backend_choices("my-ckpt", "auto", "mxfp4")]
    assert "flashinfer_mxfp4" in names and "flashinfer_cutlass" not in names


def test_choices_follow_the_version_and_the_gpus() -> None:
    prof = sim_profile(30000)  # a DeepSeek-V4 model: its two kernels come first
    listed = choices.attention_choices(prof, {"dsv4_attn_backend": None}, "12.0", "0.5.23")
    values = [c.value for c in listed]
    assert values[0] == "#dsv4_attn_backend" and not listed[0].enabled
    assert "dsv4_attn_backend=flashmla_mega" in values and "attention_backend=fa3" in values
    by = {c.value: c for c in listed}
    assert by["dsv4_attn_backend=trtllm"].note.startswith("✗ does not run on sm_120")
    assert by["dsv4_attn_backend=auto"].current
    assert by["attention_backend=trtllm_mla"].note.startswith("✓ runs on sm_120")
    assert by["attention_backend=aiter"].note.startswith("✗ not for NVIDIA GPUs")
    old = [c.value for c in choices.attention_choices(prof, {}, "9.0", "0.5.21")]
    assert "dsv4_attn_backend=flashmla_mega" not in old  # 0.5.21 lacks it
    plain = choices.attention_choices(sim_profile(1, model_path="/models/Llama-3-8B"), {},
                                      None, None)
    assert {c.value.partition("=")[0] for c in plain} == {"#attention_backend",
                                                          "attention_backend"}


def test_a_deepseek_v4_model_says_sglang_uses_dsv4_for_its_attention() -> None:
    dsv4 = sim_profile(1)
    assert attention.fields_for(dsv4) == attention.FIELDS
    assert "SGLang uses dsv4" in attention.title("attention_backend", dsv4)
    llama = sim_profile(1, model_path="/models/Llama-3-8B")
    assert attention.title("attention_backend", llama) == "--attention-backend"


def test_the_next_restarts_flags_are_the_profiles_then_what_was_picked() -> None:
    prof = sim_profile(1, "--sim-speed", "1")
    flags = attention.current(prof, {"dsv4_prefill_backend": "flashmla_sparse_q8"})
    assert set(flags) == set(attention.FIELDS)
    assert flags["dsv4_prefill_backend"] == "flashmla_sparse_q8"
    assert flags["attention_backend"] == prof.attention_backend


def test_an_attention_answer_is_a_flag_and_its_value() -> None:
    assert choices.picked_attention("dsv4_attn_backend=flashmla") == ("dsv4_attn_backend",
                                                                      "flashmla")
    assert choices.picked_attention("attention_backend=") == ("attention_backend", None)
    assert choices.picked_attention("#attention_backend") is None  # a heading
    assert choices.picked_attention(None) is None


def test_the_profile_picker_shows_the_backend_each_next_restart_runs() -> None:
    profiles = [ProfileChoice("mxfp4", "MXFP4", None, "triton", "/m/a"),
                ProfileChoice("nvfp4", "NVFP4", None, "marlin", "/m/b")]
    listed = choices.profile_choices(profiles, "nvfp4", {"mxfp4": "flashinfer_mxfp4",
                                                         "nvfp4": "marlin"}.__getitem__)
    assert [c.note for c in listed] == ["MXFP4 · flashinfer_mxfp4 · /m/a", "NVFP4 · marlin · /m/b"]
    assert [c.current for c in listed] == [False, True]


def test_the_campaign_picker_names_each_campaigns_variants() -> None:
    camp = CampaignConfig.model_validate({"host": "demo", "variants": [
        {"name": "a", "profile": "mxfp4"}, {"name": "b", "profile": "nvfp4"}]})
    (only,) = choices.campaign_choices({"two": camp})
    assert (only.value, only.note) == ("two", "2 variants: a, b")
