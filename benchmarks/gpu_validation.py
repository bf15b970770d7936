#!/usr/bin/env python3
"""Validate dsv4tui's GPU telemetry on real hardware (written for an NVIDIA H200).

Runs the agent's ``telemetry`` command in a subprocess (exactly what a console would run)
and, on one GPU, three ~8 s torch workloads that all read ~100 % ``utilization.gpu`` but use
different pipes:

  bf16_matmul          bf16 8192x8192 matmul loop        expect any-tensor >= 80 %
  fp32_elementwise     fp32 elementwise, memory-bound     expect any-tensor <= 5 %, DRAM >= 60 %
  fp32_matmul_no_tf32  fp32 matmul with TF32 off          expect any-tensor <= 5 %

(plus an ``idle`` baseline first). It writes the frames of each workload to
``DIR/<workload>.json``, a ``DIR/meta.json`` (date, driver, versions, command), a
``DIR/summary.md`` table for docs/validation.md, prints the table with PASS/FAIL, and exits 0
only when every expectation holds (1: a FAIL, 2: usage/torch/CUDA problem, 3: no driver).

Record-only mode, for a run where something else (the inference server under load) keeps the
GPUs busy -- no torch needed::

    python benchmarks/gpu_validation.py --out DIR --record 120 --name sglang-c64

Usage::

    python benchmarks/gpu_validation.py --out DIR [--gpu 0] [--duration 8] [--interval 0.5]

Needs only torch (workloads) and this repository (found from this file's location, or on
PYTHONPATH); the agent's pynvml is nvidia-ml-py's. The JSON files are fixtures as they are:
copy them to tests/data/telemetry/h200/ and tests/test_telemetry_captures.py re-checks them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FORMAT = "dsv4tui-gpu-validation"
FORMAT_VERSION = 1

# metric -> table heading
COLUMNS = (
    ("util_gpu", "util.gpu"), ("tensor_active", "any-tensor"), ("hmma_active", "HMMA"),
    ("sm_active", "SM util"), ("sm_occupancy", "occupancy"), ("dram_active", "DRAM"),
    ("fp32_active", "FP32"), ("power_w", "power W"),
)

WORKLOADS: dict[str, dict[str, Any]] = {
    "idle": {"what": "nothing running (baseline)", "expect": []},
    "bf16_matmul": {"what": "bf16 8192x8192 matmul loop",
                    "expect": [("tensor_active", ">=", 80.0)]},
    "fp32_elementwise": {"what": "fp32 elementwise loop over 1 GiB tensors (memory-bound)",
                         "expect": [("tensor_active", "<=", 5.0), ("dram_active", ">=", 60.0)]},
    "fp32_matmul_no_tf32": {"what": "fp32 8192x8192 matmul, TF32 off (CUDA cores)",
                            "expect": [("tensor_active", "<=", 5.0)]},
}
ALIASES = {"a": "bf16_matmul", "b": "fp32_elementwise", "c": "fp32_matmul_no_tf32"}


# -- evaluation (pure; tests/test_telemetry_captures.py uses these) -----------------------------

def gpu_series(frames: list[dict[str, Any]], gpu_index: int, metric: str,
               t0: float | None = None, t1: float | None = None) -> list[float]:
    """The non-null values of one metric of one GPU from frames with t0 <= time <= t1."""
    out = []
    for fr in frames:
        if fr.get("type") != "frame":
            continue
        t = fr.get("time", 0.0)
        if (t0 is not None and t < t0) or (t1 is not None and t > t1):
            continue
        for g in fr.get("gpus", []):
            if g.get("index") == gpu_index and isinstance(g.get(metric), (int, float)):
                out.append(float(g[metric]))
    return out


def summarize(frames: list[dict[str, Any]], gpu_index: int, t0: float | None = None,
              t1: float | None = None) -> dict[str, float | None]:
    """Median of each table metric over the window (None where the GPU never reported it)."""
    out: dict[str, float | None] = {}
    for metric, _title in COLUMNS:
        values = gpu_series(frames, gpu_index, metric, t0, t1)
        out[metric] = round(statistics.median(values), 2) if values else None
    return out


def check(summary: dict[str, float | None], expect: list[Any]) -> list[dict[str, Any]]:
    """One verdict per expectation; a metric that was never reported fails."""
    verdicts = []
    for metric, op, threshold in expect:
        value = summary.get(metric)
        ok = value is not None and (value >= threshold if op == ">=" else value <= threshold)
        verdicts.append({"metric": metric, "op": op, "threshold": threshold, "value": value,
                         "ok": bool(ok)})
    return verdicts


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def table(rows: list[tuple[str, dict[str, float | None], str]], markdown: bool = False) -> str:
    heads = ["workload"] + [title for _m, title in COLUMNS] + ["result"]
    body = [[name] + [fmt(summary.get(m)) for m, _t in COLUMNS] + [result]
            for name, summary, result in rows]
    if markdown:
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]  # noqa: B905 (py3.9)
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]  # noqa: B905
    return "\n".join(lines)


# -- the agent, recording ----------------------------------------------------------------------

class Recorder:
    """``python -m dsv4tui.agent telemetry`` in a subprocess; every event kept with its time."""

    def __init__(self, interval: float, source: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsv4tui.agent", "--cancel-on-eof", "telemetry",
             "--interval", f"{interval:g}", "--source", source],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=str(REPO))
        self.events: list[dict[str, Any]] = []
        self.error: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if ev.get("type") == "frame":
                    self.events.append(ev)
                elif ev.get("type") == "error":
                    self.error = ev
            self._first.set()
        self._first.set()

    def wait_first(self, timeout: float = 60.0) -> dict[str, Any]:
        if not self._first.wait(timeout):
            raise SystemExit(f"telemetry: no frame within {timeout:.0f} s")
        if self.error is not None:
            code = 3 if self.error.get("kind") in ("no_driver", "no_gpu", "driver_error") else 1
            print(f"telemetry failed: {self.error.get('message')}", file=sys.stderr)
            raise SystemExit(code)
        if not self.events:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise SystemExit(f"telemetry exited without a frame: {err.strip()[-400:]}")
        return self.events[0]

    def frames(self, t0: float | None = None, t1: float | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if (t0 is None or e["time"] >= t0)
                    and (t1 is None or e["time"] <= t1)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()  # --cancel-on-eof: the agent stops cleanly
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._thread.join(timeout=5)


# -- workloads (torch imported only here) ------------------------------------------------------

def run_workload(name: str, seconds: float) -> int:
    """Run one workload on cuda:0 for about ``seconds``; returns the iterations done."""
    import torch

    dev = torch.device("cuda", 0)
    deadline = time.monotonic() + seconds
    n = 0
    if name == "idle":
        time.sleep(seconds)
        return 0
    if name in ("bf16_matmul", "fp32_matmul_no_tf32"):
        dtype = torch.bfloat16 if name == "bf16_matmul" else torch.float32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        a = torch.randn(8192, 8192, device=dev, dtype=dtype)
        b = torch.randn(8192, 8192, device=dev, dtype=dtype)
        c = torch.empty(8192, 8192, device=dev, dtype=dtype)
        while time.monotonic() < deadline:
            for _ in range(10):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize(dev)
            n += 10
        return n
    if name == "fp32_elementwise":
        x = torch.rand(1 << 28, device=dev, dtype=torch.float32)  # 1 GiB
        y = torch.empty_like(x)
        while time.monotonic() < deadline:
            for _ in range(20):
                torch.mul(x, 1.0001, out=y)
                torch.add(y, 1e-7, out=x)
            torch.cuda.synchronize(dev)
            n += 20
        return n
    raise ValueError(name)


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        from importlib.metadata import version

        out["nvidia_ml_py"] = version("nvidia-ml-py")
    except Exception:
        out["nvidia_ml_py"] = None
    try:
        from dsv4tui import __version__

        out["dsv4tui"] = __version__
    except Exception:
        out["dsv4tui"] = None
    return out


def _write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")


def record_only(args: argparse.Namespace, out: Path) -> int:
    rec = Recorder(args.interval, args.agent_source)
    try:
        first = rec.wait_first()
        start = time.time()
        print(f"recording telemetry of {len(first['gpus'])} GPU(s) for {args.record:g} s "
              f"-> {out / (args.name + '.json')}")
        end = start + args.record
        while time.time() < end:
            time.sleep(min(10.0, max(0.0, end - time.time())))
            print(f"  {len(rec.frames())} frames", flush=True)
    finally:
        rec.stop()
    frames = rec.frames(start, end)
    gpus = sorted({g["index"] for f in frames for g in f["gpus"]})
    rows = [(f"gpu {i}", summarize(frames, i), "") for i in gpus]
    doc = {"kind": FORMAT, "version": FORMAT_VERSION, "mode": "record", "name": args.name,
           "start": start, "end": end, "interval": args.interval,
           "driver": first.get("driver"), "source": first.get("source"),
           "meta": _meta(args, first), "summary": {r[0]: r[1] for r in rows}, "frames": frames}
    _write(out / f"{args.name}.json", doc)
    print(table(rows))
    return 0


def _meta(args: argparse.Namespace, first: dict[str, Any]) -> dict[str, Any]:
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017
            "hostname": socket.gethostname(), "driver": first.get("driver"),
            "source": first.get("source"), "command": [sys.executable, *sys.argv],
            "versions": _versions(), "interval": args.interval}


def validate(args: argparse.Namespace, out: Path) -> int:
    names = [ALIASES.get(w, w) for w in args.workloads.split(",") if w]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(WORKLOADS)}",
              file=sys.stderr)
        return 2
    rec = Recorder(args.interval, args.agent_source)
    rows = []
    all_ok = True
    meta: dict[str, Any] = {}
    try:
        first = rec.wait_first()
        gpus = {g["index"]: g for g in first["gpus"]}
        if args.gpu not in gpus:
            print(f"no GPU {args.gpu}; this host has {sorted(gpus)}", file=sys.stderr)
            return 2
        target = gpus[args.gpu]
        if target.get("uuid"):  # the NVML GPU becomes cuda:0, whatever CUDA's own order
            os.environ["CUDA_VISIBLE_DEVICES"] = target["uuid"]
        try:
            import torch
        except ImportError:
            print("torch is not importable: pip install torch (or use --record)",
                  file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print("torch sees no CUDA device", file=sys.stderr)
            return 2
        meta = _meta(args, first)
        meta.update(gpu_index=args.gpu, gpu_name=target.get("name"), gpu_uuid=target.get("uuid"),
                    gpm=target.get("gpm"), torch=torch.__version__, cuda=torch.version.cuda,
                    torch_device=torch.cuda.get_device_name(0),
                    workloads={n: WORKLOADS[n]["what"] for n in names})
        print(f"GPU {args.gpu}: {target.get('name')} ({target.get('uuid')}), driver "
              f"{first.get('driver')}, telemetry every {args.interval:g} s from "
              f"{first.get('source')}")
        if not target.get("gpm"):
            print("warning: this GPU reports no GPM support: tensor metrics will be n/a",
                  file=sys.stderr)
        for name in names:
            time.sleep(args.gap)
            start = time.time()
            print(f"  {name}: {WORKLOADS[name]['what']} for {args.duration:g} s ...", flush=True)
            iters = run_workload(name, args.duration)
            end = time.time()
            time.sleep(args.interval * 2)  # the frame covering the end arrives
            t0, t1 = start + args.warmup, end - 0.25
            frames = rec.frames(start - 1.0, end + args.interval * 2)
            summary = summarize(frames, args.gpu, t0, t1)
            verdicts = check(summary, WORKLOADS[name]["expect"])
            ok = all(v["ok"] for v in verdicts)
            all_ok = all_ok and ok
            result = "-" if not verdicts else ("PASS" if ok else "FAIL")
            rows.append((name, summary, result))
            _write(out / f"{name}.json", {
                "kind": FORMAT, "version": FORMAT_VERSION, "mode": "workload", "workload": name,
                "what": WORKLOADS[name]["what"], "gpu_index": args.gpu,
                "gpu_uuid": target.get("uuid"), "gpu_name": target.get("name"),
                "driver": first.get("driver"), "start": start, "end": end,
                "steady": [t0, t1], "interval": args.interval, "iterations": iters,
                "expect": [list(e) for e in WORKLOADS[name]["expect"]],
                "summary": summary, "verdicts": verdicts, "pass": ok, "frames": frames})
    finally:
        rec.stop()
    text = table(rows)
    md = table(rows, markdown=True)
    meta["all_pass"] = all_ok
    meta["table"] = text
    _write(out / "meta.json", meta)
    (out / "summary.md").write_text(
        f"GPU {args.gpu} {meta.get('gpu_name')}, driver {meta.get('driver')}, "
        f"{meta['date']}, median over each workload's steady window "
        f"({args.duration:g} s runs, first {args.warmup:g} s dropped), "
        f"telemetry every {args.interval:g} s\n\n{md}\n\n"
        f"command: `{' '.join(meta['command'])}`\n", encoding="utf-8")
    print()
    print(text)
    print()
    print("ALL PASS" if all_ok else "SOME EXPECTATIONS FAILED", f"(files in {out})")
    return 0 if all_ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", required=True, type=Path, help="directory for the JSON files")
    p.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU to load (default 0)")
    p.add_argument("--duration", type=float, default=8.0, help="seconds per workload (8)")
    p.add_argument("--warmup", type=float, default=1.5,
                   help="seconds dropped at the start of each workload (1.5)")
    p.add_argument("--gap", type=float, default=2.0, help="idle seconds between workloads (2)")
    p.add_argument("--interval", type=float, default=0.5, help="telemetry interval (0.5 s)")
    p.add_argument("--workloads", default="idle,a,b,c",
                   help="comma list: idle, a|bf16_matmul, b|fp32_elementwise, "
                        "c|fp32_matmul_no_tf32 (default idle,a,b,c)")
    p.add_argument("--agent-source", default="nvml",
                   choices=("nvml", "auto", "nvidia-smi", "simulated"),
                   help="telemetry source to validate (default nvml: GPM needs it)")
    p.add_argument("--record", type=float, default=None, metavar="SECONDS",
                   help="only record frames for SECONDS (no torch) while something else runs")
    p.add_argument("--name", default="record", help="file name for --record (default record)")
    args = p.parse_args(argv)
    if args.interval < 0.2:
        p.error("--interval must be >= 0.2")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.record is not None:
        return record_only(args, args.out)
    return validate(args, args.out)


if __name__ == "__main__":
    sys.exit(main())
