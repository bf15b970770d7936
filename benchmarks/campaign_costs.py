"""What running sweeps through the host-side campaign runner costs, measured.

1. The journal's cost per request event: a realistic ``request`` event (256 chunk gaps) written
   through ``protocol.emit`` into a :class:`dsv4tui.agent.campaign.journal.Journal` (the runner's path:
   JSON encode + one write + flush), in µs per event, and the bytes it adds.
2. Measurement is not disturbed: against benchmarks/known_timing_server.py (TTFT 100 ms, 10 ms
   per token, 64 tokens), the mean TTFT, mean ITL and output tok/s error against the server's
   own clock, for the direct path (``agent bench sweep``) and through the detached runner
   (``agent campaign start``, the level read back from its journal), at C = 1, 16, 64.
3. Backfill: a journal of 10,000 finished requests collected into an empty store after a
   "reconnect" (``campaign follow`` through a real agent subprocess -> Collector -> SQLite),
   in seconds and events per second.

Prints tables; exits 0. ``--quick`` for a short run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "benchmarks" / "known_timing_server.py"
sys.path.insert(0, str(ROOT))

TTFT_MS, ITL_MS, TOKENS = 100.0, 10.0, 64


def request_event(i: int) -> dict:
    return {"level": 0, "concurrency": 16, "index": i, "ok": True, "start_s": 0.01 * i,
            "ttft_s": 0.1012, "ttfat_s": 0.1012, "e2e_s": 2.65, "tpot_s": 0.0101,
            "decode_tok_s": 99.0, "chunks": 256, "itl_ms": {"mean": 10.1, "p50": 10.0,
                                                             "p90": 10.4, "p99": 11.0,
                                                             "max": 14.2},
            "chunk_gaps_ms": [10.013 + (k % 7) * 0.011 for k in range(255)],
            "output_tokens": 256, "token_source": "usage", "prompt_tokens": 131,
            "finish_reason": "length", "done_marker": True, "status": 200,
            "error_kind": None, "error": None, "short_output": False}


def journal_cost(n: int) -> None:
    from dsv4tui.agent import protocol
    from dsv4tui.agent.campaign.journal import Journal

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "journal.jsonl")
        journal = Journal(path)
        protocol.set_writer(journal.write)
        protocol.context.update(variant=0, run="v0.r0.a0")
        events = [request_event(i) for i in range(n)]
        t0 = time.perf_counter()
        for ev in events:
            protocol.emit("request", **ev)
        dt = time.perf_counter() - t0
        protocol.set_writer(None)
        protocol.context.clear()
        journal.close()
        size = os.path.getsize(path)
    print(f"journal: {n} request events, {dt * 1e6 / n:.1f} µs per event "
          f"(encode + write + flush), {size / n / 1024:.2f} KiB per event")


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft-ms",
                             str(TTFT_MS), "--itl-ms", str(ITL_MS), "--tokens", str(TOKENS)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{json.loads(proc.stdout.readline())['port']}"


def plan(c: int, n: int) -> dict:
    return {"levels": [[c, n]], "input_len": 32, "output_len": TOKENS, "warmup": 0,
            "ignore_eos": False}


def direct_level(url: str, c: int, n: int, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", url,
                          "--model", "known-timing", "--plan-json", json.dumps(plan(c, n))],
                         capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    for line in out.stdout.splitlines():
        ev = json.loads(line)
        if ev["type"] == "level":
            return ev
    raise RuntimeError(out.stdout[-400:] + out.stderr[-400:])


def runner_level(url: str, c: int, n: int, env: dict, home: Path) -> dict:
    spec = {"v": 1, "name": f"acc-{c}", "kind": "sweep", "host": "local", "repeats": 1,
            "on_failure": "stop", "plan": plan(c, n), "cases": None,
            "variants": [{"name": "acc", "label": "acc", "target": {
                "mode": "url", "url": url, "model": "known-timing"}}]}
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "campaign", "start",
                          "--spec-json", json.dumps(spec)], capture_output=True, text=True,
                         cwd=ROOT, env=env, check=True)
    cid = json.loads(out.stdout.splitlines()[-1])["id"]
    cdir = home / "campaigns" / cid
    deadline = time.monotonic() + 600
    while json.loads((cdir / "runner.json").read_text()).get("state") == "running":
        if time.monotonic() > deadline:
            raise RuntimeError("the runner did not finish")
        time.sleep(0.1)
    for line in (cdir / "journal.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev["type"] == "level":
            return ev
    raise RuntimeError("no level in the journal")


def accuracy(levels: list[tuple[int, int]]) -> None:
    proc, url = start_server()
    home = Path(tempfile.mkdtemp(prefix="dsv4tui-bench-"))
    env = dict(os.environ, DSV4TUI_AGENT_HOME=str(home), PYTHONPATH=str(ROOT))
    rows = []
    try:
        for c, n in levels:
            for path in ("direct", "runner"):
                httpx.post(url + "/stats/reset", timeout=10)
                ev = (direct_level(url, c, n, env) if path == "direct"
                      else runner_level(url, c, n, env, home))
                truth = httpx.get(url + f"/stats?min_tokens={TOKENS}", timeout=10).json()

                def err(mine: float | None, real: float | None) -> str:
                    if mine is None or not real:
                        return "n/a"
                    return f"{(mine - real) / real * 100.0:+.2f}%"
                rows.append((c, n, path, err(ev["ttft_ms"]["mean"], truth["ttft_ms_mean"]),
                             err(ev["itl_ms"]["mean"], truth["itl_ms_mean"]),
                             err(ev["output_tok_s"], truth["tok_s"]), ev.get("status")))
    finally:
        proc.kill()
    print("\naccuracy against the server's own clock (mean TTFT, mean ITL, output tok/s):")
    print(f"{'C':>4} {'n':>5}  {'path':<7} {'TTFT err':>9} {'ITL err':>9} {'tok/s err':>10}  status")
    for c, n, path, a, b, d, status in rows:
        print(f"{c:>4} {n:>5}  {path:<7} {a:>9} {b:>9} {d:>10}  {status}")


def backfill(n: int) -> None:
    from dsv4tui.agent.bench import stats
    from dsv4tui.core.campaign.ingest import Collector, collect
    from dsv4tui.core.hosts.agent_runner import AgentRunner
    from dsv4tui.core.hosts.local import LocalSession
    from dsv4tui.core.store import RunStore

    tmp = Path(tempfile.mkdtemp(prefix="dsv4tui-backfill-"))
    cid = "20261201-000000-beef"
    cdir = tmp / "home" / "campaigns" / cid
    cdir.mkdir(parents=True)
    lines = [{"type": "campaign_start", "seq": 0, "name": "backfill", "kind": "sweep",
              "variants": [{"name": "v", "label": "v"}], "plan": {"levels": [[16, n]]}},
             {"type": "run_start", "seq": 1, "run": "v0.r0.a0", "variant": 0, "label": "v",
              "plan": {"levels": [[16, n]]}, "meta": {"backend": "marlin", "checkpoint": "NVFP4",
                                                      "source": "launch"}}]
    reqs = []
    for i in range(n):
        ev = {"type": "request", "v": 1, "seq": 2 + i, "run": "v0.r0.a0", **request_event(i)}
        reqs.append(ev)
        lines.append(ev)
    lines.append({"type": "level", "seq": 2 + n, "run": "v0.r0.a0", "level": 0,
                  **stats.level_metrics(reqs, 16, n), "status": "done"})
    lines.append({"type": "run_end", "seq": 3 + n, "run": "v0.r0.a0", "status": "done"})
    lines.append({"type": "campaign_end", "seq": 4 + n, "state": "done"})
    with open(cdir / "journal.jsonl", "w", encoding="ascii") as fh:
        for ev in lines:
            fh.write(json.dumps(ev, separators=(",", ":")) + "\n")
    (cdir / "spec.json").write_text(json.dumps({"id": cid, "name": "backfill"}))
    (cdir / "runner.json").write_text(json.dumps({"pid": 1, "state": "done"}))
    size = (cdir / "journal.jsonl").stat().st_size
    env = {"DSV4TUI_AGENT_HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT)}

    async def go() -> float:
        session = LocalSession("local", base_env=env)
        agent = AgentRunner(session, [sys.executable, "-m", "dsv4tui.agent"], env=env)
        with RunStore(tmp / "runs.sqlite3") as store:
            collector = Collector(store, "local", cid)
            t0 = time.perf_counter()
            got = await collect(agent, collector, follow=False)
            dt = time.perf_counter() - t0
            stored = store.query("SELECT count(*) FROM requests")[0][0]
            assert stored == n, (stored, got)
        return dt

    dt = asyncio.run(go())
    print(f"\nbackfill: {n} finished requests ({size / 2**20:.1f} MiB of journal) collected into "
          f"an empty store in {dt:.2f} s ({n / dt:,.0f} requests/s)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    journal_cost(2000 if args.quick else 20000)
    accuracy([(1, 8), (16, 48)] if args.quick else [(1, 16), (16, 160), (64, 320)])
    backfill(2000 if args.quick else 10000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
