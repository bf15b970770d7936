"""Where does the client's extra TTFT go? One level of the agent's real sweep code, in this
process, against known_timing_server.py in another; both clocks are CLOCK_MONOTONIC
(perf_counter on Linux), so each request splits into:

    send -> server read      the server had not read the request yet (its queue; its own
                             clock cannot see this part)
    server TTFT              what the server's clock says
    server write -> client read   the client was late to read the first token

    python benchmarks/bench_ttft_breakdown.py [--c 16] [--n 64]
"""

from __future__ import annotations

import argparse
import bisect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsv4tui.agent.bench import loadgen  # noqa: E402
from dsv4tui.agent.bench import sweep as bench  # noqa: E402


class Collect:
    broken = False

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append((type_, fields))

    def close(self) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--c", type=int, default=16)
    p.add_argument("--n", type=int, default=64)
    a = p.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "known_timing_server.py"),
                               "--port", "0"], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    url = f"http://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
    absolute: list[tuple[float, float]] = []  # (t_send, first token read), client
    original = loadgen.request_event  # what the load generator calls for each request

    def spy(res: Any, *rest: Any) -> dict[str, Any]:
        if res.token_times:
            absolute.append((res.t_send, res.token_times[0]))
        return original(res, *rest)

    loadgen.request_event = spy  # type: ignore[assignment]
    try:
        plan = bench.checked_plan({"levels": [[a.c, a.n]], "input_len": 32, "output_len": 64,
                                   "warmup": 0, "seed": 1})
        target = bench.TargetSpec(url, model="known-timing")
        bench.run_loop(bench.Sweep(target, plan, Collect()).run())  # type: ignore[arg-type]
        records = httpx.get(url + "/stats/records").json()
    finally:
        server.terminate()
        server.wait()
    recvs = sorted(records)
    starts = [r[0] for r in recvs]
    rows = []
    for t_send, t_first in sorted(absolute):
        i = bisect.bisect_left(starts, t_send)
        if i >= len(recvs):
            continue
        t_recv, t_write, _, _ = recvs[i]
        rows.append((t_recv - t_send, t_write - t_recv, t_first - t_write, t_first - t_send))
    n = len(rows)
    names = ("send -> server read", "server TTFT", "server write -> client read", "client TTFT")
    print(f"C={a.c} n={a.n}: {n} requests matched; mean (max) in ms")
    for k, name in enumerate(names):
        vals = [r[k] * 1000 for r in rows]
        print(f"  {name:28s} {sum(vals) / n:8.2f}  ({max(vals):.2f})")


if __name__ == "__main__":
    main()
