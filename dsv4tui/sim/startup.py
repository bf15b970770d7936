"""The simulated startup: SGLang's phases and log lines on a realistic, scaled timeline.

At ``--sim-speed 1`` a DeepSeek-V4 TP8 start takes ~95 s (marlin ~20 s more: weight
repacking). Failures happen where they happen in SGLang: too many ranks at init, KV cache
OOM, SM100-only MoE kernels at the first CUDA-graph capture, OOM in capture when
``--mem-fraction-static`` leaves no room, warmup failure after the HTTP server is up; and the
``--sim-fault`` failures a next move fixes: graph-oom:BS (capture OOM above that batch size),
prefill-oom:TOKENS (warm-up prefill OOM above that chunk), slow-rank:S (a rank S s late at init).
"""

from __future__ import annotations

import asyncio
import time

from dsv4tui.sim.runtime import SimServer
from dsv4tui.sim.speed import runs_on

# Seconds at --sim-speed 1.
T_BOOT = 2.0
T_DIST = 5.0
T_LOAD = 54.0
T_KV = 2.0
T_GRAPH = 24.0
T_DRAFT_GRAPH = 8.0
T_HTTP = 2.0
T_WARMUP = 5.0
_SITE = "/opt/sglang/python/sglang/srt"


def _server_args_line(sim: SimServer) -> str:
    a = sim.args
    fields = {
        "model_path": a.model_path, "served_model_name": sim.served_name, "host": a.host,
        "port": a.port, "tp_size": a.tp_size, "dp_size": a.dp_size, "ep_size": a.ep_size,
        "quantization": a.quantization, "moe_runner_backend": a.moe_runner_backend,
        "attention_backend": a.attention_backend or ("dsv4" if sim.is_dsv4 else None),
        "dsv4_attn_backend": a.dsv4_attn_backend, "dsv4_prefill_backend": a.dsv4_prefill_backend,
        "kv_cache_dtype": a.kv_cache_dtype, "mem_fraction_static": sim.mem_fraction,
        "speculative_algorithm": a.speculative_algorithm,
        "chunked_prefill_size": a.chunked_prefill_size,
        "cuda_graph_max_bs_decode": a.cuda_graph_max_bs_decode, "dist_timeout": a.dist_timeout,
        "decode_log_interval": a.decode_log_interval, "api_key": a.api_key,  # SGLang logs it
    }
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


async def _progress(sim: SimServer, label: str, total: int, seconds: float, unit: str) -> None:
    """A tqdm bar written like tqdm does to a file: '\\r'-separated repaints, one newline."""
    steps = 10
    start = time.monotonic()
    for i in range(steps + 1):
        done = total * i // steps
        sim.load_progress = done / total if label.startswith("Loading") else sim.load_progress
        elapsed = time.monotonic() - start
        rate = done / elapsed if elapsed > 0 else 0.0
        sep = "\r" if i else ""
        sim.log.write_raw(f"{sep}{label}: {100 * done // total:3d}% Completed | {done}/{total} "
                          f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<00:00, "
                          f"{rate:.2f}{unit}]")
        if label.startswith("Loading"):
            sim.used_gb = 0.72 + sim.weights_gb * done / total
        if i < steps:
            await asyncio.sleep(sim.scaled(seconds / steps))
    sim.log.write_raw("\n")


async def run_startup(sim: SimServer) -> None:
    """Everything before the HTTP server binds; exits the process on a startup failure."""
    a = sim.args
    log = sim.log
    log.info(_server_args_line(sim), None)
    if sim.is_dsv4 and a.dsv4_attn_backend in ("trtllm", "flashmla_mega") and \
            sim.gpu.sm not in (100, 103):  # SGLang asserts it while resolving the server args
        need = ("requires an SM100/SM103 (Blackwell) GPU." if a.dsv4_attn_backend == "trtllm"
                else "requires DeepSeek-V4.1 on SM100/SM103.")
        for line in ("Traceback (most recent call last):",
                     f'  File "{_SITE}/arg_groups/deepseek_v4_hook.py", line 104, in '
                     "apply_deepseek_v4_defaults",
                     "    assert cfg.device == \"cuda\" and is_sm100_supported(), (",
                     f"AssertionError: --dsv4-attn-backend {a.dsv4_attn_backend} {need}"):
            log.plain(line)
        sim.exit(1, "crashed")
    await asyncio.sleep(sim.scaled(T_BOOT))
    gpus = a.sim_gpus * max(a.nnodes, 1)
    if a.tp_size * max(a.pp_size, 1) > gpus:
        sim.crash([f'  File "{_SITE}/model_executor/model_runner.py", line 612, in init_torch_distributed',
                   "    torch.get_device_module(self.device).set_device(self.gpu_id)",
                   "RuntimeError: CUDA error: invalid device ordinal"], rank=min(gpus, a.tp_size - 1))
    log.all_ranks("Init torch distributed begin.")
    if sim.faults.slow_rank is not None:
        await _slow_rank(sim, sim.faults.slow_rank)
    if sim.nnodes > 1:
        await _rendezvous(sim)
    await asyncio.sleep(sim.scaled(T_DIST))
    sim.used_gb = 0.72
    log.all_ranks("Init torch distributed ends. mem usage=0.72 GB")
    sim.set_phase("load_weights")
    log.all_ranks(f"Load weight begin. avail mem={sim.avail_gb:.2f} GB")
    tic = time.monotonic()
    load_s = T_LOAD + sim.speed.model.load_extra_s
    await _progress(sim, "Loading safetensors checkpoint shards", 76, load_s, "it/s")
    sim.load_progress = 1.0
    log.all_ranks(f"Load weight end. elapsed={time.monotonic() - tic:.2f} s, "
                  f"type={sim.architecture}, avail mem={sim.avail_gb:.2f} GB, "
                  f"mem usage={sim.weights_gb:.2f} GB.")
    sim.set_phase("kv_cache")
    await asyncio.sleep(sim.scaled(T_KV))
    sim.kv_gb = sim.total_gb * sim.mem_fraction - (sim.total_gb - sim.avail_gb)
    if sim.kv_gb <= 0.5:
        sim.crash([f'  File "{_SITE}/model_executor/model_runner.py", line 1642, in init_memory_pool',
                   '    raise RuntimeError(',
                   "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                   f"Current value: mem_fraction_static={sim.mem_fraction}"])
    sim.used_gb += sim.kv_gb
    sim.max_total_tokens = sim.kv_tokens()
    kv_dtype = "torch.bfloat16" if a.kv_cache_dtype in ("bf16", "bfloat16") else "torch.float8_e4m3fn"
    log.all_ranks(f"KV Cache is allocated. dtype: {kv_dtype}, #tokens: {sim.max_total_tokens}, "
                  f"KV size: {sim.kv_gb:.2f} GB")
    log.all_ranks(f"Memory pool end. avail mem={sim.avail_gb:.2f} GB")
    await _capture(sim, "target decode", T_GRAPH)
    if a.speculative_algorithm:
        await _capture(sim, "draft decode", T_DRAFT_GRAPH)
    log.info(f"max_total_num_tokens={sim.max_total_tokens}, chunked_prefill_size="
             f"{a.chunked_prefill_size}, max_prefill_tokens={a.max_prefill_tokens}, "
             f"max_running_requests={sim.max_running}, context_len={sim.context_len}, "
             f"available_gpu_mem={sim.avail_gb:.2f} GB")
    sim.set_phase("http_up")
    await asyncio.sleep(sim.scaled(T_HTTP))


async def _rendezvous(sim: SimServer) -> None:
    """Several nodes: the TCP rendezvous at --dist-init-addr (sim/rendezvous.py)."""
    from dsv4tui.sim.rendezvous import DEFAULT_TIMEOUT_S, Rendezvous

    a = sim.args
    timeout = float(a.dist_timeout) if a.dist_timeout else sim.scaled(DEFAULT_TIMEOUT_S)
    rdv = Rendezvous(sim, a.dist_init_addr, sim.nnodes, sim.node_rank, timeout)
    sim.rendezvous = rdv
    if sim.node_rank == 0:
        sim.log.info(f"Waiting for {sim.nnodes - 1} more node(s) at {a.dist_init_addr} "
                     f"(nnodes={sim.nnodes}).", sim.first_tp_rank)
    else:
        sim.log.info(f"Connecting to node rank 0 at {a.dist_init_addr} (node_rank="
                     f"{sim.node_rank}, nnodes={sim.nnodes}).", sim.first_tp_rank)
    await rdv.join()
    sim.log.info(f"All {sim.nnodes} nodes joined; world size {a.tp_size}.", sim.first_tp_rank)


async def _slow_rank(sim: SimServer, late_s: int) -> None:
    """--sim-fault slow-rank:S: the last rank comes S seconds late (both scaled by
    --sim-speed); past --dist-timeout (default 300 s) the others give up waiting."""
    from dsv4tui.sim.rendezvous import DEFAULT_TIMEOUT_S

    a = sim.args
    timeout = float(a.dist_timeout or DEFAULT_TIMEOUT_S)
    if late_s < timeout:
        await asyncio.sleep(sim.scaled(late_s))
        return
    await asyncio.sleep(sim.scaled(timeout))
    world = max(a.tp_size, 1) * max(a.pp_size, 1)
    sim.crash([f'  File "{_SITE}/model_executor/model_runner.py", line 598, in '
               "init_torch_distributed",
               "    init_distributed_environment(",
               f'  File "{_SITE}/distributed/parallel_state.py", line 1432, in '
               "init_distributed_environment",
               "    torch.distributed.init_process_group(",
               f"torch.distributed.DistStoreError: Timed out after {timeout:.0f} seconds waiting "
               f"for clients. {world - 1}/{world} clients joined."])


def _oom(sim: SimServer, gib: float) -> str:
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gib:.2f} GiB. GPU 0 "
            f"has a total capacity of {sim.total_gb:.2f} GiB of which "
            f"{max(sim.avail_gb, 0.1):.2f} GiB is free.")


async def _capture(sim: SimServer, stage: str, seconds: float) -> None:
    a = sim.args
    bs = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64]
    if a.cuda_graph_max_bs_decode:
        bs = [b for b in bs if b <= a.cuda_graph_max_bs_decode] or [1]
    sim.set_phase("cuda_graph")
    sim.log.info(f"Capture {stage} CUDA graph begin. backend=full, num_tokens_per_req=1, "
                 f"bs={bs}, avail mem={sim.avail_gb:.2f} GB")
    await asyncio.sleep(sim.scaled(1.0))
    if not runs_on(sim.backend, sim.gpu):
        sim.crash([
            f'  File "{_SITE}/layers/moe/moe_runner/flashinfer_trtllm.py", line 214, in run',
            "    return trtllm_fp4_block_scale_routed_moe(",
            '  File "/opt/venv/lib/python3.12/site-packages/flashinfer/fused_moe/core.py", '
            "line 1890, in trtllm_fp4_block_scale_routed_moe",
            "    return get_trtllm_moe_sm100_module().trtllm_fp4_block_scale_moe(",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect."])
    limit = sim.faults.graph_oom
    if limit is not None and max(bs) > limit:  # SGLang captures the largest batch first
        sim.log.write_raw(f"Capturing batches (bs={max(bs)} avail_mem={sim.avail_gb:.2f} GB):   "
                          f"0% Completed | 0/{len(bs)} [00:00<?, ?it/s]\n")
        sim.crash([
            f'  File "{_SITE}/model_executor/cuda_graph_runner.py", line 731, in capture_one_batch_size',
            "    run_once()", _oom(sim, 0.04 * max(bs))])
    if sim.mem_fraction > 0.95:
        sim.crash([
            f'  File "{_SITE}/model_executor/cuda_graph_runner.py", line 731, in capture_one_batch_size',
            "    run_once()",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            f"total capacity of {sim.total_gb:.2f} GiB of which {max(sim.avail_gb, 0.1):.2f} GiB "
            "is free."])
    tic = time.monotonic()
    await _progress(sim, "Capturing batches (bs=1 avail_mem="
                    f"{sim.avail_gb:.2f} GB)", len(bs), max(seconds - 1.0, 0.1), "it/s")
    sim.used_gb += 0.66
    sim.log.info(f"Capture {stage} CUDA graph end. elapsed={time.monotonic() - tic:.2f} s, "
                 f"mem usage=0.66 GB, avail mem={sim.avail_gb:.2f} GB.")


async def run_warmup(sim: SimServer) -> None:
    """After uvicorn is up: one warmup generate, then the ready line (or the warmup failure)."""
    from dsv4tui.sim.engine import Request

    await asyncio.sleep(sim.scaled(T_WARMUP / 2))
    sim.log.http(f'127.0.0.1:{40000 + sim.args.port % 20000} - "GET /model_info HTTP/1.1" 200 OK')
    if sim.faults.fail_startup:
        await asyncio.sleep(sim.scaled(T_WARMUP / 2))
        sim.log.info("Initialization failed. warmup error: Traceback (most recent call last):",
                     None)
        for line in [
                f'  File "{_SITE}/entrypoints/http_server.py", line 1502, in _execute_server_warmup',
                "    res = requests.post(url + request_name, json=json_data, headers=headers, "
                "timeout=600)",
                "requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: "
                f"http://{sim.args.host}:{sim.args.port}/generate"]:
            sim.log.plain(line)
        sim.exit(1, "crashed")
    limit = sim.faults.prefill_oom
    chunk = sim.args.chunked_prefill_size
    if limit is not None and chunk > limit:  # the warm-up's prefill of a whole chunk
        sim.log.info(f"Prefill batch, #new-seq: 1, #new-token: {chunk}, #cached-token: 0, "
                     "token usage: 0.00, #running-req: 0, #queue-req: 0", sim.first_tp_rank)
        sim.crash([f'  File "{_SITE}/managers/scheduler.py", line 1187, in event_loop_overlap',
                   "    result = self.run_batch(batch)",
                   f'  File "{_SITE}/model_executor/model_runner.py", line 2012, in forward_extend',
                   "    return self.model.forward(", _oom(sim, chunk / 2048)])
    assert sim.engine is not None
    req = Request(prompt="The capital city of France is", prompt_tokens=7, max_tokens=8)
    sim.engine.submit(req, external=False)
    while await req.out.get() is not None:
        pass
    await asyncio.sleep(sim.scaled(T_WARMUP / 2))
    sim.log.http(f'127.0.0.1:{40001 + sim.args.port % 20000} - "POST /generate HTTP/1.1" 200 OK')
    sim.ready = True
    sim.set_phase("ready")
    sim.log.info("The server is fired up and ready to roll!", None)
