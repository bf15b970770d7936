#!/usr/bin/env bash
# On a GPU machine: (1) the run-to-run spread of one real server across restarts -- the A/A
# case of issue 26's verdicts, on real hardware: REPEATS x (start the server, sweep, stop it);
# (2) a fresh real torch-profiler trace (a tensor-core GEMM, a CUDA-core fp32 GEMM, a small-grid
# reduction, elementwise work) for the kernel launch parser of issue 31 (grid, occupancy, SM
# coverage), parsed here with `dsv4tui kernels --trace`.
# Usage (repo root, on the GPU machine): bash benchmarks/device_repeats.sh OUTDIR [REPEATS]
# Expects: .agent/agent.pyz (the bundle dsv4tui deploys: python -c 'from dsv4tui.core.hosts.deploy
# import build_bundle; ...') and .gpu-kit/ (../shared/gpu-kit).
set -u
out=${1:?usage: device_repeats.sh OUTDIR [REPEATS]}
n=${2:-3}
mkdir -p "$out"
agent=(python3 .agent/agent.pyz)
log() { printf '\n== %s  %s\n' "$(date +%T)" "$*"; }
url=http://127.0.0.1:8000
model=/tmp/tiny-llama
# transformers serve answers 422 to ignore_eos; max_tokens fixes the length (random weights)
common=(--url $url --model $model --levels 1:8,8:32,16:48 --input-len 128 --output-len 64
        --warmup 2 --no-ignore-eos --seed 7)

log "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

log "2. a real trace: torch.profiler over 20 synthetic decode steps"
python3 - "$out" <<'PY'
import gzip, json, os, shutil, sys
import torch
out = sys.argv[1]
dev = "cuda"
w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
x = torch.randn(16, 8192, device=dev, dtype=torch.bfloat16)
w32 = torch.randn(4096, 4096, device=dev)
x32 = torch.randn(16, 4096, device=dev)
small = torch.randn(64, 262144, device=dev)
big = torch.randn(64 * 1024 * 1024, device=dev)
torch.backends.cuda.matmul.allow_tf32 = False
def step():
    y = x @ w                       # bf16 GEMM on tensor cores
    z = x32 @ w32                   # fp32 GEMM, TF32 off: CUDA cores
    s = small.sum(dim=1)            # a reduction over 64 rows: a small grid
    b = big.mul_(1.0001)            # elementwise, memory bound, a full grid
    return y, z, s, b
for _ in range(5):
    step()
torch.cuda.synchronize()
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(20):
        step()
    torch.cuda.synchronize()
path = os.path.join(out, "trace.json")
prof.export_chrome_trace(path)
with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.remove(path)
print("trace", path + ".gz", os.path.getsize(path + ".gz"), "bytes; torch", torch.__version__)
PY

for i in $(seq 1 "$n"); do
  log "1. repeat $i of $n: start the server"
  start=$(date +%s.%N)
  bash .gpu-kit/real_server.sh 8000 > "$out/start_$i.txt" 2>&1 || { cat "$out/start_$i.txt"; tail -40 /tmp/real-server.log; exit 1; }
  ready=$(date +%s.%N)
  cat "$out/start_$i.txt" | tail -2
  echo "ready after $(python3 -c "print(round($ready - $start, 1))") s"
  log "repeat $i: sweep"
  "${agent[@]}" bench sweep "${common[@]}" > "$out/sweep_$i.jsonl" 2> "$out/sweep_$i.err"
  echo "sweep exit $?"
  python3 - "$out/sweep_$i.jsonl" <<'PY'
import json, sys
kinds = {}
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    kinds[e.get("type")] = kinds.get(e.get("type"), 0) + 1
    if e.get("type") == "level":
        print("C=%s %s/%s ok, errors %s, %.1f tok/s, TTFT p50 %.1f ms, TPOT p50 %.1f ms" % (
            e.get("concurrency"), e.get("completed"), e.get("requests"), e.get("errors_by_kind") or e.get("errors"),
            e.get("output_tok_s") or 0, (e.get("ttft_ms") or {}).get("p50") or 0,
            (e.get("tpot_ms") or {}).get("p50") or 0))
    elif e.get("type") in ("notice", "level_prep", "sweep", "error"):
        print(e.get("type"), json.dumps(e)[:240])
print("event kinds", kinds)
PY
  log "repeat $i: stop the server (the session real_server.sh started)"
  pid=$(sed -n 's/^server pid \([0-9]*\).*/\1/p' "$out/start_$i.txt" | head -1)
  [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 30); do curl -sf "$url/health" >/dev/null || break; sleep 1; done
  sleep 3
done
log "done"
ls -la "$out"
