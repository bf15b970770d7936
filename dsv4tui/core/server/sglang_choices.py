"""Choice lists of SGLang's launch flags, per SGLang version (read from the 0.5.20 - 0.5.23
wheels: ``sglang/srt/arg_groups/choices.py`` and the ``Arg(choices=...)`` of
``arg_groups/fields/``), and what the campaign knows about each backend.

A launch is validated against the lists of the SGLang version the host runs
(:func:`lists_for`); a version newer than the newest list shipped here validates against the
newest and says so; without a version, against the newest. The module-level tuples
(``MOE_RUNNER_BACKENDS`` ...) are the newest lists (the simulator's argparse uses them); the
config file accepts the union of every shipped version (:data:`ANY`), since it cannot know
which SGLang a host has. See shared/reference/sglang.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class ChoiceLists:
    """The valid values of the choice flags a launch profile sets, for one SGLang version."""

    version: str
    moe_runner_backend: tuple[str, ...]
    attention_backend: tuple[str, ...]
    quantization: tuple[str, ...]
    kv_cache_dtype: tuple[str, ...]
    speculative_algorithm: tuple[str, ...]
    dsv4_attn_backend: tuple[str, ...]
    dsv4_prefill_backend: tuple[str, ...]

    def of(self, field: str) -> tuple[str, ...]:
        return tuple(getattr(self, field))


# Profile fields whose values come from a choice list (their flag: --field-name).
CHOICE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ChoiceLists) if f.name != "version")

# -- SGLang 0.5.23 (the newest list shipped) ---------------------------------------------------
_V0523 = ChoiceLists(
    version="0.5.23",
    moe_runner_backend=(
        "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm",
        "experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass",
        "flashinfer_mxfp4", "flashinfer_cutedsl", "flashinfer_megamoe", "cutlass", "aiter",
        "marlin", "humming", "experimental_sgl_marlin", "lora_cutedsl", "lora_triton",
        "lora_marlin", "hpc_ops", "megamoe", "intel_xpu",
    ),
    attention_backend=(
        "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed",
        "fa3", "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla",
        "cutedsl_mla", "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn",
        "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
    ),
    quantization=(
        "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
        "modelopt", "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed",
        "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round",
        "auto-round-int8", "compressed-tensors", "modelslim", "mxfp_w4a8", "quark",
        "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant", "humming",
    ),
    kv_cache_dtype=(
        "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
    ),
    # not an argparse choice list: SGLang's help names its builtins (a plugin can add more)
    speculative_algorithm=(
        "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
    ),
    dsv4_attn_backend=("auto", "flashmla", "flashmla_mega", "trtllm"),
    dsv4_prefill_backend=("auto", "flashmla_sparse", "flashmla_sparse_q8"),
)


def _without(lists: tuple[str, ...], *names: str) -> tuple[str, ...]:
    return tuple(n for n in lists if n not in names)


# 0.5.22: no lora_* MoE runners, no flashmla_mega DeepSeek-V4 attention.
_V0522 = replace(_V0523, version="0.5.22",
                 moe_runner_backend=_without(_V0523.moe_runner_backend, "lora_cutedsl",
                                             "lora_triton", "lora_marlin"),
                 dsv4_attn_backend=_without(_V0523.dsv4_attn_backend, "flashmla_mega"))
# 0.5.21: and no llada2_cfg_flashinfer attention.
_V0521 = replace(_V0522, version="0.5.21",
                 attention_backend=_without(_V0522.attention_backend, "llada2_cfg_flashinfer"))
# 0.5.20: as 0.5.21, and its KV cache also takes fp4_e2m1.
_V0520 = replace(_V0521, version="0.5.20",
                 kv_cache_dtype=(*_V0521.kv_cache_dtype, "fp4_e2m1"))

VERSIONS: dict[str, ChoiceLists] = {v.version: v for v in (_V0520, _V0521, _V0522, _V0523)}
NEWEST = _V0523
OLDEST = _V0520


def _union(name: str) -> tuple[str, ...]:
    out: list[str] = []
    for lists in (NEWEST, *reversed(list(VERSIONS.values()))):
        out += [n for n in lists.of(name) if n not in out]
    return tuple(out)


# What a config file may say (any shipped version's value); a launch checks the host's version.
ANY = ChoiceLists("any", *(_union(name) for name in CHOICE_FIELDS))

# The newest lists, under the names the rest of dsv4tui (and the simulator) use.
MOE_RUNNER_BACKENDS = NEWEST.moe_runner_backend
ATTENTION_BACKENDS = NEWEST.attention_backend
QUANTIZATIONS = NEWEST.quantization
KV_CACHE_DTYPES = NEWEST.kv_cache_dtype
SPECULATIVE_ALGORITHMS = NEWEST.speculative_algorithm
DSV4_ATTN_BACKENDS = NEWEST.dsv4_attn_backend
DSV4_PREFILL_BACKENDS = NEWEST.dsv4_prefill_backend


def version_key(version: str) -> tuple[int, ...] | None:
    """``"0.5.23.post1"`` / ``"0.5.23rc0"`` -> (0, 5, 23); None when it is not a version."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    return tuple(int(x) for x in m.groups(default="0"))


def lists_for(version: str | None) -> tuple[ChoiceLists, str | None]:
    """The choice lists to validate a launch for SGLang ``version`` against, and a note when
    they are not that version's own (None when they are, or when the version is unknown)."""
    if not version:
        return NEWEST, None
    key = version_key(version)
    if key is None:
        return NEWEST, (f"SGLang version {version!r} is not a version number: validated "
                        f"against SGLang {NEWEST.version}'s choices")
    for name, lists in VERSIONS.items():
        if version_key(name) == key:
            return lists, None
    newest, oldest = version_key(NEWEST.version), version_key(OLDEST.version)
    assert newest is not None and oldest is not None
    if key > newest:
        return NEWEST, (f"SGLang {version} is newer than the choice lists dsv4tui knows "
                        f"({OLDEST.version} - {NEWEST.version}): validated against "
                        f"{NEWEST.version}'s")
    if key < oldest:
        return OLDEST, (f"SGLang {version} is older than the choice lists dsv4tui knows "
                        f"({OLDEST.version} - {NEWEST.version}): validated against "
                        f"{OLDEST.version}'s")
    below = max((v for v in VERSIONS if (version_key(v) or ()) < key),
                key=lambda v: version_key(v) or ())
    return VERSIONS[below], (f"SGLang {version} has no choice list in dsv4tui: validated "
                             f"against {below}'s")


def flag_of(field: str) -> str:
    return "--" + field.replace("_", "-")


def check_choice(field: str, value: str | None, lists: ChoiceLists) -> str | None:
    """Why ``value`` is not a choice of ``--field`` in ``lists``' SGLang, else None."""
    if value is None:
        return None
    valid = lists.of(field)
    if value in valid:
        return None
    where = f"SGLang {lists.version}" if lists.version != "any" else "any SGLang dsv4tui knows"
    also = [v for v, other in VERSIONS.items() if value in other.of(field)]
    hint = f" (it is one in SGLang {', '.join(also)})" if also and lists.version != "any" else ""
    return f"{flag_of(field)} {value!r} is not a choice of {where}{hint}; valid: {', '.join(valid)}"


# The campaign's notes on MoE backends: what each one runs on and which checkpoints fit.
MOE_BACKEND_NOTES: dict[str, str] = {
    "auto": "SGLang picks (DeepSeek-V4: flashinfer_trtllm_routed on NVFP4, else flashinfer_mxfp4)",
    "marlin": "W4A16: FP4 weights dequantised to BF16 tensor cores; fits MXFP4 and NVFP4",
    "triton": "NVFP4 → native FP4 x FP4 cutlass grouped GEMM; MXFP4 → slot GEMV on CUDA cores",
    "flashinfer_trtllm_routed": "SM100-only kernels (B200/GB200); fails on sm_120",
    "flashinfer_mxfp4": "MXFP4 checkpoints",
    "flashinfer_cutlass": "FP4/FP8 cutlass grouped GEMM",
    "cutlass": "cutlass grouped GEMM",
    "deep_gemm": "FP8 DeepGEMM (Hopper/Blackwell datacenter)",
}


@dataclass(frozen=True)
class BackendArch:
    """Where an attention backend's kernels run, as SGLang 0.5.23's source says it.

    ``majors``: the CUDA compute-capability majors it runs on (9: sm_90 Hopper, 10: sm_100 /
    sm_103 B200/GB200/B300, 12: sm_120 RTX PRO 6000 / RTX 50); None: not restricted.
    ``platform``: "cuda", or the other platform it is for ("rocm", "npu", "xpu", "cpu").
    """

    note: str
    majors: tuple[int, ...] | None = None
    platform: str = "cuda"
    source: str = ""


# --attention-backend (sglang/srt/layers/attention/attention_registry.py,
# srt/arg_groups/{attention_hook,overrides,serving_hook}.py, arg_groups/choices.py comments).
ATTENTION_ARCH: dict[str, BackendArch] = {
    "fa3": BackendArch("FlashAttention 3; SM80 (not MLA) and SM90 only", (8, 9),
                       source="attention_registry.py: 'requires SM>=80 and SM<=90'"),
    "fa4": BackendArch("FlashAttention 4 (prefill only); absorbed MLA only on SM100/SM110",
                       source="attention_hook.py, docs/advanced_features/attention_backend.md"),
    "trtllm_mla": BackendArch("TensorRT-LLM MLA decode (prefill falls back to FlashInfer); "
                              "Blackwell only (SM100/SM12x); KV fp8_e4m3/bf16/auto", (10, 12),
                              source="overrides.py _mla_kv_cache_dtype_checks"),
    "trtllm_mha": BackendArch("TensorRT-LLM MHA (not MLA); SM90, SM100, SM120", (9, 10, 12),
                              source="attention_hook.py"),
    "hpc_ops": BackendArch("HPC-Ops (not MLA); Hopper (SM90) only, page size 64", (9,),
                           source="choices.py comment"),
    "flashinfer": BackendArch("FlashInfer (SGLang's default on non-Hopper GPUs)"),
    "triton": BackendArch("Triton kernels (portable)"),
    "torch_native": BackendArch("PyTorch SDPA (slow, portable)"),
    "flex_attention": BackendArch("PyTorch FlexAttention"),
    "flashmla": BackendArch("FlashMLA (MLA models)"),
    "cutedsl_mla": BackendArch("CuTe DSL MLA (MLA models)"),
    "tokenspeed_mla": BackendArch("deprecated alias of cutedsl_mla"),
    "dsa": BackendArch("DeepSeek sparse attention (DeepSeek-V3.2 style)"),
    "nsa": BackendArch("deprecated alias of dsa"),
    "dsv4": BackendArch("DeepSeek-V4 sparse attention (SGLang forces it for DeepSeek-V4; the "
                        "kernel is --dsv4-attn-backend)"),
    "compressed": BackendArch("deprecated alias of dsv4"),
    "aiter": BackendArch("AMD AITER", platform="rocm"),
    "wave": BackendArch("AMD Wave", platform="rocm"),
    "ascend": BackendArch("Huawei Ascend NPU", platform="npu"),
    "intel_xpu": BackendArch("Intel GPU (XPU)", platform="xpu"),
    "intel_amx": BackendArch("Intel AMX on CPU", platform="cpu"),
}

# --dsv4-attn-backend / --dsv4-prefill-backend (srt/arg_groups/fields/exec_.py help,
# srt/arg_groups/deepseek_v4_hook.py asserts).
DSV4_ATTN_ARCH: dict[str, BackendArch] = {
    "auto": BackendArch("SGLang picks: flashmla, or flashmla_mega for DeepSeek-V4.1 on SM100 "
                        "with FP8 KV and no attention TP"),
    "flashmla": BackendArch("FlashMLA sparse attention (the default)"),
    "flashmla_mega": BackendArch("fused RoPE + sparse attention + MXFP8 FlashMLA; DeepSeek-V4.1 "
                                 "on SM100/SM103 only", (10,),
                                 source="deepseek_v4_hook.py assert"),
    "trtllm": BackendArch("flashinfer trtllm-gen sparse MLA, uniform FP8 KV; SM100/SM103 only, "
                          "needs kv_cache_dtype fp8_e4m3 and chunked prefill", (10,),
                          source="deepseek_v4_hook.py assert"),
}
DSV4_PREFILL_ARCH: dict[str, BackendArch] = {
    "auto": BackendArch("the BF16 sparse prefill path"),
    "flashmla_sparse": BackendArch("the BF16 sparse prefill path"),
    "flashmla_sparse_q8": BackendArch("the Q8KV8 sparse prefill path"),
}
# --moe-runner-backend: the kernels that exist only for some GPUs (flashinfer's trtllm-gen
# fused MoE is built for SM100/SM103 only: "no kernel image is available" elsewhere, e.g. on
# sm_120 RTX PRO 6000; shared/reference/sglang.md). The simulator fails the same way from
# this table. The others are not restricted here (nobody said otherwise).
MOE_ARCH: dict[str, BackendArch] = {
    "flashinfer_trtllm": BackendArch("flashinfer trtllm-gen fused MoE; SM100/SM103 only "
                                     "(B200/GB200/B300)", (10,),
                                     source="flashinfer get_trtllm_moe_sm100_module"),
    "flashinfer_trtllm_routed": BackendArch("flashinfer trtllm-gen routed MoE; SM100/SM103 "
                                            "only (B200/GB200/B300)", (10,),
                                            source="flashinfer get_trtllm_moe_sm100_module"),
}
ARCH_NOTES: dict[str, dict[str, BackendArch]] = {
    "attention_backend": ATTENTION_ARCH, "dsv4_attn_backend": DSV4_ATTN_ARCH,
    "dsv4_prefill_backend": DSV4_PREFILL_ARCH, "moe_runner_backend": MOE_ARCH,
}


def sm_name(capability: str | None) -> str | None:
    """``"12.0"`` -> ``"sm_120"``."""
    if not capability:
        return None
    major, _, minor = str(capability).partition(".")
    if not major.isdigit():
        return None
    return f"sm_{int(major)}{int(minor) if minor.isdigit() else 0}"


def arch_misfit(field: str, value: str, capability: str | None) -> str | None:
    """Why ``--field value`` cannot run on a GPU of compute ``capability`` ("12.0"), where
    SGLang says so; None when it can, or when the capability or the backend is not known."""
    arch = ARCH_NOTES.get(field, {}).get(value)
    if arch is None or not capability:
        return None
    sm = sm_name(capability) or capability
    if arch.platform != "cuda":
        return f"not for NVIDIA GPUs ({arch.platform})"
    major = str(capability).partition(".")[0]
    if arch.majors is not None and major.isdigit() and int(major) not in arch.majors:
        where = ", ".join(f"sm_{m}x" for m in arch.majors)
        return f"does not run on {sm} (its kernels are for {where})"
    return None


# Flags that no longer exist or values that are not what people think: flag -> the fix.
TRAP_FLAGS: dict[str, str] = {
    "--cuda-graph-max-bs": "use --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill "
                           "(SGLang 0.5.20+ exits 2 with 'ambiguous option')",
    "--tp": "write --tp-size (--tp only works by argparse prefix matching)",
}
DEPRECATED_FLAGS: dict[str, str] = {
    "--enable-dp-attention": "deprecated in SGLang 0.5.23",
    "--disable-cuda-graph": "deprecated in SGLang 0.5.23",
}
