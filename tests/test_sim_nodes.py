"""The simulator on several nodes: a real TCP rendezvous at --dist-init-addr, NCCL-style
failure when a rank dies, a timeout when one never comes, HTTP on node rank 0 only."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
from plugins.sim import SimProcess, free_port, start_sim, subprocess_env


def _ranks(tmp: Path, sims: list[SimProcess], nnodes: int = 2, *extra: str,
           skip: tuple[int, ...] = ()) -> tuple[int, list[SimProcess | None]]:
    port, init = free_port(), free_port()
    started: list[SimProcess | None] = []
    for rank in range(nnodes):
        if rank in skip:
            started.append(None)
            continue
        env = subprocess_env(DSV4TUI_SIM_STATE=str(tmp / f"state-{rank}.json"))
        node = tmp / f"node{rank}"
        sim = start_sim(node, "--tp-size", str(8 * nnodes), "--sim-gpu", "H200", "--nnodes",
                        str(nnodes), "--node-rank", str(rank), "--dist-init-addr",
                        f"127.0.0.1:{init}", *extra, port=port, env=env)
        sims.append(sim)
        started.append(sim)
    return port, started


def _wait_log(sim: SimProcess, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in sim.log_text():
        assert time.monotonic() < deadline, f"{text!r} not in log:\n{sim.log_text()[-2000:]}"
        time.sleep(0.05)


def test_two_ranks_rendezvous_and_only_rank_0_serves(tmp_path: Path,
                                                     sims: list[SimProcess]) -> None:
    _, (r0, r1) = _ranks(tmp_path, sims)
    assert r0 is not None and r1 is not None
    r0.wait_ready()
    _wait_log(r1, "is up")
    log0, log1 = r0.log_text(), r1.log_text()
    assert "Node rank 1 joined the rendezvous" in log0
    # each node logs its own TP ranks: 0-7 on node 0, 8-15 on node 1
    assert "TP7] Init torch distributed begin." in log0 and "TP8]" not in log0
    assert "TP8] Init torch distributed begin." in log1 and "TP15]" in log1
    assert "TP0]" not in log1 and "Uvicorn running" not in log1
    # each node publishes its own 8 GPUs
    for rank in (0, 1):
        st = json.loads((tmp_path / f"state-{rank}.json").read_text())
        assert st["gpu_ids"] == list(range(8)) and st["node_rank"] == rank
        assert st["phase"] == "ready" and st["mem_used_frac"] > 0.5
    assert httpx.get(r0.url + "/health", timeout=2).status_code == 200
    # SIGTERM on node rank 0: it says goodbye; node 1 follows a few seconds later (unless
    # it is told to stop itself first), exit 0 both (a coordinated stop, no NCCL error)
    os.kill(r0.proc.pid, signal.SIGTERM)
    assert r0.wait_exit() == 0
    time.sleep(2)
    assert r1.proc.poll() is None
    assert r1.wait_exit(10) == 0
    assert "NCCL" not in r1.log_text()


def test_a_rank_that_dies_makes_the_others_fail_like_nccl(tmp_path: Path,
                                                         sims: list[SimProcess]) -> None:
    _, (r0, r1) = _ranks(tmp_path, sims)
    assert r0 is not None and r1 is not None
    r0.wait_ready()
    t0 = time.monotonic()
    os.kill(r1.proc.pid, signal.SIGKILL)
    assert r0.wait_exit(10) == 1
    assert time.monotonic() - t0 < 5
    text = r0.log_text()
    assert "ncclRemoteError: A call failed possibly due to a network error or a remote " \
        "process exiting prematurely." in text
    assert "torch.distributed.DistBackendError: NCCL error" in text
    st = json.loads((tmp_path / "state-0.json").read_text())
    assert st["phase"] == "crashed" and st["mem_used_frac"] == 0.0


def test_a_missing_rank_makes_rank_0_time_out(tmp_path: Path, sims: list[SimProcess]) -> None:
    _, (r0, _missing) = _ranks(tmp_path, sims, 2, "--dist-timeout", "1", skip=(1,))
    assert r0 is not None
    assert r0.wait_exit(20) == 1
    text = r0.log_text()
    assert "Waiting for 1 more node(s)" in text
    assert "torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. " \
        "1/2 clients joined." in text
    assert "Scheduler hit an exception" in text and "Uvicorn" not in text


def test_a_rank_without_rank_0_times_out_connecting(tmp_path: Path,
                                                    sims: list[SimProcess]) -> None:
    _, (_missing, r1) = _ranks(tmp_path, sims, 2, "--dist-timeout", "1", skip=(0,))
    assert r1 is not None
    assert r1.wait_exit(20) == 1
    assert "DistNetworkError: The client socket has timed out" in r1.log_text()
    assert "TP8] Scheduler hit an exception" in r1.log_text()


def test_bad_node_flags_are_one_line_errors(tmp_path: Path, sims: list[SimProcess]) -> None:
    sim = start_sim(tmp_path, "--tp-size", "12", "--nnodes", "5", "--dist-init-addr",
                    "127.0.0.1:1")
    sims.append(sim)
    assert sim.wait_exit() == 2
    assert sim.log_text().strip() == "error: --tp-size 12 does not divide over --nnodes 5"
