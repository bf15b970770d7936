"""Choice lists of SGLang 0.5.2x launch flags (read from sglang 0.5.23 `--help`).

See shared/reference/sglang.md. Used to refuse an invalid profile before anything launches.
"""

from __future__ import annotations

MOE_RUNNER_BACKENDS: tuple[str, ...] = (
    "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm",
    "experimental_sgl_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutlass",
    "flashinfer_mxfp4", "flashinfer_cutedsl", "flashinfer_megamoe", "cutlass", "aiter",
    "marlin", "humming", "experimental_sgl_marlin", "lora_cutedsl", "lora_triton",
    "lora_marlin", "hpc_ops", "megamoe", "intel_xpu",
)

ATTENTION_BACKENDS: tuple[str, ...] = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed",
    "fa3", "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla",
    "cutedsl_mla", "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn",
    "minicpm_flashinfer", "aiter", "wave", "intel_amx", "ascend", "intel_xpu",
)

QUANTIZATIONS: tuple[str, ...] = (
    "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
    "modelopt", "modelopt_fp8", "modelopt_fp4", "nvfp4_online", "modelopt_mixed",
    "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "w4afp8", "mxfp4", "auto-round",
    "auto-round-int8", "compressed-tensors", "modelslim", "mxfp_w4a8", "quark",
    "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant", "humming",
)

KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
)

SPECULATIVE_ALGORITHMS: tuple[str, ...] = (
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
)

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
