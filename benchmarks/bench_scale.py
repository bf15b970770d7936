"""Does the load generator stay honest at the scale of a big server? (issue 17)

Starts benchmarks/known_timing_server.py spread over processes (``--procs``: one port,
SO_REUSEPORT; TTFT 100 ms, 10 ms per token, 64 tokens: C = 512 is 51,200 tokens/s), then for
each C runs one closed-loop level of the agent's sweep (``python -m dsv4tui.agent bench
sweep``) with 1 worker process and with N, and prints the error of mean TTFT, mean ITL and
output tok/s against the server's own clock (every server process's records, merged), and the
client's CPU per streamed token (the agent and its workers).

Goal: the error at C = 512 with N workers no worse than the single process's at C = 64 today
(<= 2 %), on a machine with enough cores for client and server (16).

    PYTHONPATH=. python benchmarks/bench_scale.py                 # C = 64, 256, 512
    PYTHONPATH=. python benchmarks/bench_scale.py --quick         # a small box: C = 16, 64

Needs only the project's own dependencies (httpx). Prints tables; exits 0, or 1 when the goal
was checked and missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "benchmarks" / "known_timing_server.py"
TTFT_MS, ITL_MS, OUTPUT_LEN, INPUT_LEN = 100.0, 10.0, 64, 32


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_server(procs: int) -> tuple[subprocess.Popen[str], str, list[str]]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft-ms",
                             str(TTFT_MS), "--itl-ms", str(ITL_MS), "--tokens", str(OUTPUT_LEN),
                             "--procs", str(procs)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    controls = info.get("control_ports") or [info["port"]]
    return proc, f"http://127.0.0.1:{info['port']}", [f"http://127.0.0.1:{p}" for p in controls]


def reset(controls: list[str]) -> None:
    for url in controls:
        httpx.post(url + "/stats/reset", timeout=30)


def truth(controls: list[str]) -> dict[str, float | None]:
    """The server's own numbers over every process: (recv, first write, last write, tokens)."""
    recs = [r for url in controls for r in httpx.get(url + "/stats/records", timeout=60).json()
            if r[3] >= OUTPUT_LEN]  # not the sweep's 1-token idle probe
    if not recs:
        return {"requests": 0, "ttft_ms": None, "itl_ms": None, "tok_s": None}
    tokens = sum(r[3] for r in recs)
    span = max(r[2] for r in recs) - min(r[0] for r in recs)
    gaps = sum(r[2] - r[1] for r in recs)
    ngaps = sum(r[3] - 1 for r in recs)
    return {"requests": len(recs), "ttft_ms": 1000 * sum(r[1] - r[0] for r in recs) / len(recs),
            "itl_ms": 1000 * gaps / ngaps if ngaps else None,
            "tok_s": tokens / span if span > 0 else None}


def agent_level(url: str, c: int, n: int, workers: int) -> dict:
    cmd = [sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", url,
           "--model", "known-timing", "--levels", f"{c}:{n}", "--input-len", str(INPUT_LEN),
           "--output-len", str(OUTPUT_LEN), "--warmup", "0", "--workers", str(workers),
           "--no-ignore-eos"]  # the known server always sends OUTPUT_LEN tokens
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    for line in out.stdout.splitlines():
        ev = json.loads(line)
        if ev["type"] == "level":
            return {"ttft_ms": ev["ttft_ms"]["mean"], "itl_ms": ev["itl_ms"]["mean"],
                    "tok_s": ev["output_tok_s"], "errors": ev["errors"], "status": ev["status"],
                    "workers": ev.get("workers", 1), "cpu_us_tok": ev["client_cpu_us_per_token"]}
    raise RuntimeError(f"agent gave no level: {out.stdout[-500:]} {out.stderr[-500:]}")


def err(measured: float | None, real: float | None) -> float | None:
    if measured is None or not real:
        return None
    return 100.0 * (measured - real) / real


def fmt(v: float | None, spec: str = "+.2f", suffix: str = "%") -> str:
    return "n/a" if v is None else f"{v:{spec}}{suffix}"


def print_table(rows: list[list[str]], head: list[str]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
    sys.stdout.flush()


def main() -> int:
    ncores = cores()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="64,256,512", help="the Cs (default 64,256,512)")
    p.add_argument("--workers", type=int, default=max(2, ncores // 2),
                   help="N, the spread run's workers (default: half the cores)")
    p.add_argument("--server-procs", type=int, default=max(1, ncores // 4),
                   help="the known-timing server's processes (default: a quarter of the cores)")
    p.add_argument("--rounds", type=int, default=4, help="n = C x rounds per level")
    p.add_argument("--quick", action="store_true", help="C = 16, 64; 2 rounds (a small box)")
    args = p.parse_args()
    levels = [16, 64] if args.quick else [int(x) for x in args.levels.split(",")]
    rounds = 2 if args.quick else args.rounds
    proc, url, controls = start_server(args.server_procs)
    print(f"# Scale: known server TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {OUTPUT_LEN} tokens, "
          f"{len(controls)} server process(es); {ncores} cores; load average "
          f"{os.getloadavg()[0]:.1f}")
    rows, results = [], {}
    try:
        for c in levels:
            for w in sorted({1, min(args.workers, c)}):
                reset(controls)
                t0 = time.monotonic()
                got = agent_level(url, c, c * rounds, w)
                real = truth(controls)
                e = {k: err(got[k], real[k]) for k in ("ttft_ms", "itl_ms", "tok_s")}
                results[(c, w)] = e
                rows.append([str(c), str(c * rounds), str(got["workers"]),
                             f"{real['ttft_ms']:.1f}", f"{got['ttft_ms']:.1f}",
                             fmt(e["ttft_ms"]), f"{real['itl_ms']:.2f}", f"{got['itl_ms']:.2f}",
                             fmt(e["itl_ms"]), f"{real['tok_s']:.0f}", f"{got['tok_s']:.0f}",
                             fmt(e["tok_s"]), fmt(got["cpu_us_tok"], ".1f", ""),
                             str(got["errors"]), got["status"], f"{time.monotonic() - t0:.0f}"])
    finally:
        proc.terminate()
        proc.wait()
    print_table(rows, ["C", "n", "workers", "TTFT srv ms", "TTFT ms", "err", "ITL srv ms",
                       "ITL ms", "err", "tok/s srv", "tok/s", "err", "CPU us/tok", "errors",
                       "status", "s"])

    def worst(key: tuple[int, int]) -> float | None:
        e = results.get(key)
        if not e or any(v is None for v in e.values()):
            return None
        return max(abs(v) for v in e.values() if v is not None)

    base = worst((64, 1))
    big = max(levels)
    spread = worst((big, min(args.workers, big)))
    if base is not None and spread is not None and big >= 256:
        goal = max(base, 2.0)
        ok = spread <= goal
        print(f"goal: C={big} with {min(args.workers, big)} workers worst error {spread:.2f} % "
              f"<= max(C=64 single process {base:.2f} %, 2 %): {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
