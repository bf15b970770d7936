"""What does a sweep report when the server misbehaves? (issue #13: "a sweep must never report
what did not happen"). Four cases, each a real agent subprocess against a real server:

- truncated: every stream ends cleanly after 4 of 16 tokens (no finish_reason, usage, [DONE]);
- crash:     the simulated SGLang crashes on admitting request K+1 (``crash-after:K``), late in
             the last level;
- busy:      8 other clients loop on 40-token requests to the simulator during the sweep
             (compared with the same sweep on the idle simulator);
- stall:     the simulator stops sending tokens (``stall``): how long until the C=2 level
             fails, and how many requests were sent into the stuck server.

Prints, per case, the sweep's final status, exit code, per-level status/completed/errors and
output tok/s, and the wall time.

    python benchmarks/sweep_honesty.py [--cases truncated,crash,busy,stall] [--crash-after K]
        [--agent-repo DIR]    # the agent code under test (e.g. an export of an older commit)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
AGENT_ENV = dict(ENV)  # --agent-repo changes where the agent comes from


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sim(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, "-m", "dsv4tui.sim.sglang", "--model-path", "/models/DeepSeek-V4-Flash",
            "--served-model-name", "dsv4-sim", "--port", str(port), "--tp-size", "8",
            "--enable-metrics", "--decode-log-interval", "5", "--sim-speed", "200",
            "--sim-decode-speed", "20", "--sim-no-children", *extra]
    log = open(tmp / f"sim-{port}.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV,
                            start_new_session=True, cwd=tmp)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit("the simulator did not become ready")


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(5)


def sweep(url: str, *args: str, home: Path) -> tuple[int, list[dict[str, Any]], float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url", url,
                          *args], capture_output=True, text=True, env={
                              **AGENT_ENV, "DSV4TUI_AGENT_HOME": str(home)}, cwd=home,
                         timeout=600)
    wall = time.monotonic() - t0
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return out.returncode, events, wall


def report(case: str, code: int, events: list[dict[str, Any]], wall: float) -> None:
    final = next((e for e in reversed(events) if e.get("type") == "sweep"), {})
    print(f"\n## {case}: sweep status={final.get('status')} exit={code} wall={wall:.1f} s")
    if final.get("reason"):
        print(f"   reason: {final['reason']}")
    for lv in (e for e in events if e.get("type") == "level"):
        tok = lv.get("output_tok_s")
        short = lv.get("short_outputs")
        idle = lv.get("idle") or {}
        print(f"   level C={lv['concurrency']}: status={lv.get('status', '(none)')} "
              f"completed={lv['completed']}/{lv['requests']} errors={lv['errors']} "
              f"{lv.get('errors_by_kind') or ''} output_tokens={lv['output_tokens']} "
              f"tok/s={tok} short={short} idle={idle.get('verdict')}/{idle.get('source')}")


def load(url: str, c: int, stop_at: threading.Event) -> None:
    def one() -> None:
        while not stop_at.is_set():
            try:
                httpx.post(url + "/v1/completions", timeout=60, json={
                    "prompt": "busy", "max_tokens": 40, "ignore_eos": True})
            except httpx.HTTPError:
                time.sleep(0.05)

    for _ in range(c):
        threading.Thread(target=one, daemon=True).start()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="truncated,crash,busy,stall")
    p.add_argument("--crash-after", type=int, default=13,
                   help="sim admissions before the crash (13: the last request of the last "
                   "level with one idle probe per level; 11 without probes)")
    p.add_argument("--agent-repo", type=Path, help="run the agent from this source tree")
    args = p.parse_args()
    if args.agent_repo:
        AGENT_ENV["PYTHONPATH"] = str(args.agent_repo.resolve())
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        home = tmp / "agent-home"
        home.mkdir()
        if "truncated" in cases:
            srv = subprocess.Popen([sys.executable, str(REPO / "benchmarks" /
                                                        "known_timing_server.py"), "--port", "0",
                                    "--ttft-ms", "20", "--itl-ms", "2", "--truncate-after", "4"],
                                   stdout=subprocess.PIPE, text=True)
            assert srv.stdout is not None
            port = json.loads(srv.stdout.readline())["port"]
            try:
                code, events, wall = sweep(f"http://127.0.0.1:{port}", "--model", "known-timing",
                                           "--levels", "4:16", "--output-len", "16", home=home)
                report("truncated (4 of 16 tokens, clean end, no finish/usage/[DONE])", code,
                       events, wall)
            finally:
                srv.kill()
                srv.wait(5)
        if "crash" in cases:
            proc, url = start_sim(tmp, "--sim-fault", f"crash-after:{args.crash_after}")
            try:
                code, events, wall = sweep(url, "--levels", "1:2,4:8", "--output-len", "16",
                                           "--input-len", "16", home=home)
                report(f"crash (crash-after:{args.crash_after})", code, events, wall)
            finally:
                stop(proc)
        if "busy" in cases:
            proc, url = start_sim(tmp)
            try:
                level = ["--levels", "1:4", "--output-len", "24", "--input-len", "16"]
                code, events, wall = sweep(url, *level, home=home)
                report("idle simulator (reference)", code, events, wall)
                idle_tok = next(e for e in events if e.get("type") == "level")["output_tok_s"]
                halt = threading.Event()
                load(url, 8, halt)
                time.sleep(1.0)
                code, events, wall = sweep(url, *level, home=home)
                report("busy (8 other clients looping on 40-token requests)", code, events, wall)
                code2, events2, wall2 = sweep(url, *level, "--allow-busy", home=home)
                halt.set()
                if code2 != 2:  # --allow-busy exists
                    report("busy with --allow-busy", code2, events2, wall2)
                lv = [e for e in events + events2 if e.get("type") == "level"
                      and e.get("output_tok_s")]
                for e in lv:
                    print(f"   measured busy: {e['output_tok_s']} tok/s = "
                          f"{100 * (1 - e['output_tok_s'] / idle_tok):.0f} % slower than idle "
                          f"({idle_tok} tok/s)")
            finally:
                stop(proc)
        if "stall" in cases:
            for warmup in ("1", "0"):
                walls = {}
                for timeout in (1.0, 3.0):
                    proc, url = start_sim(tmp, "--sim-fault", "stall")
                    try:
                        before = requests_total(url)
                        code, events, wall = sweep(url, "--levels", "2:8", "--output-len", "16",
                                                   "--stall-timeout", str(timeout), "--warmup",
                                                   warmup, home=home)
                        report(f"stall (stall timeout {timeout:g} s, warm-up {warmup})", code,
                               events, wall)
                        print(f"   requests sent into the stuck server: "
                              f"{requests_total(url) - before:g} (idle probes and warm-up "
                              f"included)")
                        walls[timeout] = wall
                    finally:
                        stop(proc)
                per_s = (walls[3.0] - walls[1.0]) / 2.0  # stall timeouts waited in a row
                fixed = walls[1.0] - per_s
                print(f"   => warm-up {warmup}: {per_s:.1f} stall timeouts waited in a row; at "
                      f"the default 60 s: ~{(fixed + 60 * per_s) / 60:.1f} min to fail the level")

def requests_total(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith("sglang:num_requests_total"):
            return float(line.split()[-1])
    return float("nan")

if __name__ == "__main__":
    main()
