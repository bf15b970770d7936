"""``python -m dsv4tui.sim.sglang ARGS``: a simulated ``python -m sglang.launch_server ARGS``.

Startup phases and log lines on a scaled timeline (``--sim-speed``), then the OpenAI API on a
real uvicorn server; SIGTERM drains running requests and exits. Faults (``--sim-fault``):
wrong-answer, crash-after:N, stall, http-500, ignore-sigterm, fail-startup.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator

import uvicorn

from dsv4tui.sim.api import build_app
from dsv4tui.sim.args import build_parser
from dsv4tui.sim.engine import Engine
from dsv4tui.sim.runtime import SimServer
from dsv4tui.sim.startup import run_startup, run_warmup

_SITE = "/opt/sglang/python/sglang/srt"
FOLLOW_PEER_STOP_S = 5.0  # a node whose peer stopped on purpose drains too, after this


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: SIGTERM belongs to the simulated SGLang."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _spec_draft_tokens(args: argparse.Namespace) -> int | None:
    """Tokens proposed per step with --speculative-algorithm (SGLang's default: steps + 1)."""
    if not args.speculative_algorithm:
        return None
    if args.speculative_num_draft_tokens:
        return max(int(args.speculative_num_draft_tokens), 1)
    return max(int(args.speculative_num_steps or 3) + 1, 2)


def _bind(sim: SimServer) -> socket.socket:
    host, port = sim.args.host, sim.args.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # the accepted ones inherit it. Without it Nagle held the role chunk behind the unacked
    # headers until the client's delayed ACK (~40 ms) on a reused keep-alive connection, so
    # every TTFT but a fresh connection's came ~30 ms late (SGLang's uvicorn binds with
    # getaddrinfo's proto, and has TCP_NODELAY)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        sim.log.info(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                     f"({host!r}, {port}): {exc.strerror.lower() if exc.strerror else exc}", None)
        sim.exit(1, "crashed")
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


async def _drain(sim: SimServer, signum: int) -> None:
    """SGLang's SIGTERM path: health goes 503, running requests finish, then exit."""
    if sim.draining:
        return
    sim.draining = True
    if sim.rendezvous is not None:  # the other nodes stop with us, not with an NCCL error
        await sim.rendezvous.leave()
    engine = sim.engine
    if engine is not None:
        engine.closed = True
    sim.set_phase("draining")
    sim.log.info(f"SIGTERM received. signum={signum} frame=None. Draining requests and "
                 "shutting down...", None)
    await asyncio.sleep(sim.scaled(1.0))
    last_log = time.monotonic()
    while engine is not None and engine.num_requests > 0:
        if time.monotonic() - last_log >= sim.scaled(5.0):
            sim.log.info(f"Gracefully exiting... Remaining number of requests "
                         f"{engine.num_requests}", None)
            last_log = time.monotonic()
        await asyncio.sleep(0.05)
    sim.log.info("Gracefully exiting... Remaining number of requests 0", None)
    sim.exit(0, "stopped")


def _crash_check(sim: SimServer, admitted: int) -> None:
    limit = sim.faults.crash_after
    if limit is not None and admitted > limit:
        sim.crash([f'  File "{_SITE}/managers/scheduler.py", line 1187, in event_loop_overlap',
                   "    batch_result = self.run_batch(batch)",
                   f'  File "{_SITE}/model_executor/model_runner.py", line 2241, in forward_decode',
                   "    return self.cuda_graph_runner.replay(forward_batch)",
                   "RuntimeError: CUDA error: an illegal memory access was encountered"])


async def _serve(sim: SimServer) -> None:
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def on_signal(signum: int) -> None:
        task = loop.create_task(_drain(sim, signum))
        tasks.add(task)

    if sim.faults.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        loop.add_signal_handler(signal.SIGTERM, on_signal, int(signal.SIGTERM))
    loop.add_signal_handler(signal.SIGINT, on_signal, int(signal.SIGINT))
    sim.engine = Engine(sim.speed, sim.log, hybrid_swa=sim.is_dsv4, max_running=sim.max_running,
                        max_total_tokens=1, decode_log_interval=sim.args.decode_log_interval,
                        on_admit=lambda n: _crash_check(sim, n),
                        spec_draft_tokens=_spec_draft_tokens(sim.args))
    sim.publisher.start()
    engine_task = loop.create_task(sim.engine.run())
    await run_startup(sim)
    sim.engine.max_total_tokens = max(sim.max_total_tokens, 1)
    if sim.rendezvous is not None:  # a peer stopped on purpose: follow it, unless told first
        sim.rendezvous.on_bye = lambda rank: loop.call_later(
            FOLLOW_PEER_STOP_S, on_signal, int(signal.SIGTERM))
    if sim.node_rank > 0:  # only node rank 0 serves HTTP; the others run their schedulers
        sim.ready = True
        sim.set_phase("ready")
        sim.log.info(f"Node rank {sim.node_rank} is up: its schedulers serve node rank 0's "
                     "requests (no HTTP server on this node).", sim.first_tp_rank)
        await engine_task
        return
    sock = _bind(sim)
    config = uvicorn.Config(build_app(sim), log_config=None, access_log=False, lifespan="off",
                            ws="none", timeout_keep_alive=5)
    server = _Server(config)
    serve_task = loop.create_task(server.serve(sockets=[sock]))
    sim.log.http(f"Started server process [{os.getpid()}]")
    sim.log.http("Waiting for application startup.")
    sim.log.http("Application startup complete.")
    host = f"[{sim.args.host}]" if ":" in sim.args.host else sim.args.host
    sim.log.http(f"Uvicorn running on http://{host}:{sim.args.port} (Press CTRL+C to quit)")
    await run_warmup(sim)
    await asyncio.gather(engine_task, serve_task)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)  # bad flags exit 2, as in SGLang
    try:
        sim = SimServer(args, argv)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.sim_nice > 0:
        with contextlib.suppress(OSError):
            os.nice(args.sim_nice)
    sim.fork_children()
    try:
        asyncio.run(_serve(sim))
    except KeyboardInterrupt:
        sim.exit(0, "stopped")
    sim.exit(0, "stopped")


if __name__ == "__main__":
    sys.exit(main())
