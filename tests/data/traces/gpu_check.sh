#!/usr/bin/env bash
# Run on a GPU machine with PyTorch + Triton + nvidia-ml-py (the H200 check in docs/kernels.md):
#   1. NVML GPM through the agent's own telemetry source while a BF16 GEMM loop, an FP32
#      (TF32 off) GEMM loop and the stand-in's decode step run -- is the tensor pipe read right?
#   2. `agent profile run` end to end against tests/data/traces/torch_standin.py with real
#      torch.profiler traces and real GPM over the window.
# Output lands in $OUT (or ./gpu_check_out).
set -uo pipefail
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'

[ -n "${SKIP_GPM:-}" ] || python3 - <<'EOF' 2>&1 | tee "$OUT/gpm_check.txt"
import threading, time, torch
from dsv4tui.agent import telemetry
from dsv4tui.agent.profile import summarize_frames

src = telemetry.open_source("nvml", 0.5)
print("source", src.name, "driver", src.driver)

def sample(seconds, work):
    frames, stop = [], threading.Event()
    def run():
        while not stop.is_set():
            g = src.sample()
            if g:
                frames.append((time.time(), g))
            time.sleep(0.5)
    t = threading.Thread(target=run); t.start()
    t0 = time.time()
    while time.time() - t0 < seconds:
        work()
    torch.cuda.synchronize(); stop.set(); t.join()
    return summarize_frames(frames[1:], src.name)

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
af = torch.randn(4096, 4096, device="cuda", dtype=torch.float32)
torch.backends.cuda.matmul.allow_tf32 = False
for name, work in (("idle", lambda: time.sleep(0.1)),
                   ("bf16 8192^2 matmul", lambda: a @ a),
                   ("fp32 4096^2 matmul, TF32 off", lambda: af @ af),
                   ("fp32 elementwise", lambda: af.mul_(1.0001))):
    s = sample(4.0, work)
    print("%-30s tensor %s  sm %s  dram %s  fp32 %s  util %s" % (
        name, s["tensor_active_pct"], s["sm_active_pct"], s["dram_active_pct"],
        s["fp32_active_pct"], s["util_gpu_pct"]))
src.close()
EOF

python3 tests/data/traces/torch_standin.py --port 31999 ${STANDIN_ARGS:-} > "$OUT/standin.log" 2>&1 &
SPID=$!
for i in $(seq 1 60); do curl -sf localhost:31999/health >/dev/null && break; sleep 0.5; done
export DSV4TUI_AGENT_HOME=$OUT/agent
timeout 240 python3 -m dsv4tui.agent profile run --url http://127.0.0.1:31999 --steps 8 -c 16 \
  --warmup ${WARMUP:-25} --telemetry nvml --output-len 100000 --output-dir "$OUT/prof" --top 12 \
  > "$OUT/profile_events.jsonl" 2> "$OUT/profile_stderr.txt"
echo "agent profile exit: $?"
kill $SPID 2>/dev/null
tail -c 3000 "$OUT/standin.log"
python3 - "$OUT/profile_events.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    ev = json.loads(line)
    if ev["type"] != "profile":
        print(line.strip()[:300]); continue
    print("basis", ev["basis"], ev["basis_note"]); print("steps", ev["steps"])
    print("telemetry", json.dumps(ev["telemetry"]))
    for k in ev["kernels"]:
        print("%6.2f%% %-17s %-5s %8.1fus x%-4d %s" % (100 * k["share"], k["family"],
              k["tensor_core_by_name"], k["mean_us"], k["calls"], k["short_name"]))
    for f in ev["families"]:
        print("%6.2f%% %-20s tc=%s (%s) %s" % (100 * f["share"], f["label"], f["tensor_cores"],
              f["tensor_basis"], f["tensor_note"]))
EOF
ls -la "$OUT/prof"
