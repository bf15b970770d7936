"""How honest is the agent's clock? Measure against a server whose timing is known.

Starts benchmarks/known_timing_server.py (TTFT 100 ms, 10 ms per token, 64 tokens) in its own
process, then for each client and C in 1, 16, 64 runs one level and compares the client's
mean TTFT, mean ITL and output tok/s with what the server's own clock says:

- ``raw``   : ``python -m dsv4tui.agent bench sweep --transport raw`` (the default client)
- ``plain`` : a plain httpx client (one shared AsyncClient, ``aiter_lines`` + ``json.loads``
  per line, no pre-opened connections), the baseline the issue describes

Then the capacity of the raw client (C raised until the timing error passes 2 %), and one
peer (guidellm, pip-installed into a separate venv under /tmp) against the same server.
Prints tables; exits 0. ``--quick`` for a short run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "benchmarks" / "known_timing_server.py"
OUTPUT_LEN = 64
INPUT_LEN = 32


def start_server(ttft_ms: float, itl_ms: float, tokens: int = OUTPUT_LEN) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft-ms", str(ttft_ms),
                             "--itl-ms", str(itl_ms), "--tokens", str(tokens)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = json.loads(proc.stdout.readline())["port"]
    return proc, f"http://127.0.0.1:{port}"


def server_call(url: str, path: str) -> dict:
    resp = httpx.request("POST" if path.endswith("reset") else "GET", url + path, timeout=30)
    return resp.json()


def agent_level(url: str, transport: str, c: int, n: int) -> dict:
    cmd = [sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", url,
           "--model", "known-timing", "--transport", transport, "--levels", f"{c}:{n}",
           "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN), "--warmup", "0",
           # the known server always sends OUTPUT_LEN tokens; without this the sweep would
           # first probe whether it accepts ignore_eos, and the server's clock would count it
           "--no-ignore-eos"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    for line in out.stdout.splitlines():
        ev = json.loads(line)
        if ev["type"] == "level":
            return {"ttft_ms": ev["ttft_ms"]["mean"], "itl_ms": ev["itl_ms"]["mean"],
                    "tok_s": ev["output_tok_s"], "errors": ev["errors"],
                    "cpu_us_tok": ev["client_cpu_us_per_token"]}
    raise RuntimeError(f"agent gave no level: {out.stdout[-500:]} {out.stderr[-500:]}")


# --- the plain httpx baseline (runs in its own process: --plain-client URL C N) -----------


async def plain_client(url: str, c: int, n: int) -> dict:
    body = {"model": "known-timing", "messages": [{"role": "user", "content": "hi " * INPUT_LEN}],
            "max_tokens": OUTPUT_LEN, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    results: list[tuple[float, list[float], float]] = []
    todo = iter(range(n))
    async with httpx.AsyncClient(timeout=600) as client:

        async def worker() -> None:
            for _ in todo:
                t0 = time.perf_counter()
                times: list[float] = []
                async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                    async for line in r.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        obj = json.loads(line[6:])
                        if obj.get("choices") and obj["choices"][0]["delta"].get("content"):
                            times.append(time.perf_counter())
                results.append((t0, times, time.perf_counter()))

        cpu0 = time.process_time()
        await asyncio.gather(*(worker() for _ in range(c)))
        cpu = time.process_time() - cpu0
    tokens = sum(len(t) for _, t, _ in results)
    gaps = [b - a for _, t, _ in results for a, b in itertools.pairwise(t)]
    span = max(e for _, _, e in results) - min(s for s, _, _ in results)
    return {"ttft_ms": 1000 * sum(t[0] - s for s, t, _ in results) / len(results),
            "itl_ms": 1000 * sum(gaps) / len(gaps), "tok_s": tokens / span, "errors": 0,
            "cpu_us_tok": cpu * 1e6 / tokens}


def plain_level(url: str, c: int, n: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--plain-client", url, str(c), str(n)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# --- tables ------------------------------------------------------------------------------


def err(measured: float | None, truth: float | None) -> str:
    if measured is None or not truth:
        return "n/a"
    return f"{100.0 * (measured - truth) / truth:+.1f}%"


def measure(url: str, client: str, c: int, n: int) -> dict:
    server_call(url, "/stats/reset")
    got = plain_level(url, c, n) if client == "plain" else agent_level(url, client, c, n)
    # the sweep's 1-token idle probe before the level is not one of its requests
    truth = server_call(url, f"/stats?min_tokens={OUTPUT_LEN}")
    return {"client": client, "c": c, "n": n, "got": got, "truth": truth}


def row(m: dict) -> list[str]:
    g, t = m["got"], m["truth"]
    return [m["client"], str(m["c"]), str(m["n"]),
            f"{t['ttft_ms_mean']:.1f}", f"{g['ttft_ms']:.1f}", err(g["ttft_ms"], t["ttft_ms_mean"]),
            f"{t['itl_ms_mean']:.2f}", f"{g['itl_ms']:.2f}", err(g["itl_ms"], t["itl_ms_mean"]),
            f"{t['tok_s']:.0f}", f"{g['tok_s']:.0f}", err(g["tok_s"], t["tok_s"]),
            f"{g['cpu_us_tok']:.1f}", str(g["errors"])]


HEAD = ["client", "C", "n", "TTFT srv ms", "TTFT ms", "err", "ITL srv ms", "ITL ms", "err",
        "tok/s srv", "tok/s", "err", "CPU us/tok", "errors"]


def print_table(rows: list[list[str]], head: list[str] = HEAD) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
    sys.stdout.flush()


def errors(m: dict) -> dict[str, float]:
    g, t = m["got"], m["truth"]
    return {"ttft": abs(g["ttft_ms"] - t["ttft_ms_mean"]) / t["ttft_ms_mean"],
            "itl": abs(g["itl_ms"] - t["itl_ms_mean"]) / t["itl_ms_mean"],
            "tok_s": abs(g["tok_s"] - t["tok_s"]) / t["tok_s"]}


def accuracy(url: str, clients: list[str], levels: list[int], rounds: int) -> None:
    print(f"\n## Accuracy: known server TTFT 100 ms, ITL 10 ms, {OUTPUT_LEN} tokens, "
          f"{os.cpu_count()} CPUs, client and server share them")
    rows = []
    for client in clients:
        for c in levels:
            n = max(8, c * rounds)
            rows.append(row(measure(url, client, c, n)))
    print_table(rows)


def capacity(url: str, levels: list[int], rounds: int) -> None:
    """Raise C until ITL or tok/s err by more than 2 % (the client no longer keeps up)."""
    print("\n## Capacity of the raw client (ITL 10 ms => C x 100 tok/s offered)")
    rows, all3, keeps_up = [], None, None
    for c in levels:
        m = measure(url, "raw", c, c * rounds)
        rows.append(row(m))
        e = errors(m)
        if max(e.values()) <= 0.02:
            all3 = m
        if e["itl"] > 0.02 or e["tok_s"] > 0.02 or m["got"]["errors"]:
            break
        keeps_up = m
    print_table(rows)
    for what, m in (("TTFT, ITL and tok/s", all3), ("ITL and tok/s", keeps_up)):
        if m:
            print(f"highest with {what} within 2 %: C={m['c']}, {m['got']['tok_s']:.0f} tok/s, "
                  f"{m['got']['cpu_us_tok']:.1f} CPU us/token")
        else:
            print(f"no level had {what} within 2 %")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plain-client", nargs=3, metavar=("URL", "C", "N"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--clients", default="raw,plain")
    p.add_argument("--levels", default="1,16,64")
    p.add_argument("--capacity", default="64,128,256,384,512", help="'' to skip")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="run the accuracy table N times")
    args = p.parse_args()
    if args.plain_client:
        url, c, n = args.plain_client
        print(json.dumps(asyncio.run(plain_client(url, int(c), int(n)))))
        return
    rounds = 2 if args.quick else 4
    proc, url = start_server(100.0, 10.0)
    try:
        print(f"load average before: {os.getloadavg()[0]:.1f} (others' processes share the box)")
        for _ in range(args.repeat):
            accuracy(url, args.clients.split(","), [int(x) for x in args.levels.split(",")],
                     rounds)
        if args.capacity:
            capacity(url, [int(x) for x in args.capacity.split(",")], rounds)
        if not args.no_peer:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_peer_guidellm import peer_run

            print("\n## Peer: guidellm (its own venv), same server, same shapes")
            print("(its CPU us/tok includes its start-up: torch, tokenizer, data generation)")
            results = peer_run(url, [int(x) for x in args.levels.split(",")], rounds,
                               server_call, INPUT_LEN, OUTPUT_LEN)
            if results:
                print_table([row(m) for m in results])
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
