#!/usr/bin/env bash
# On a GPU machine, the agent in its four parts as deployed (the zipapp) against a real server:
#  1. one telemetry frame (NVML + GPM on the real GPU) from host/telemetry;
#  2. a sweep of a real OpenAI-compatible server (shared gpu-kit: transformers serve) by
#     bench/sweep, every event kept: the running level's aggregate (level_progress, about once
#     a second) held against the level's final numbers and the requests before it;
#  3. the GPU summary per level from the telemetry recorded beside it.
# Usage (repo root, on the GPU machine): bash benchmarks/device_events.sh OUTDIR
# Expects: .agent/agent.pyz (python3 -c 'from dsv4tui.core.hosts.deploy import build_bundle;
# print(build_bundle().path)', copied there) and .gpu-kit/ (../shared/gpu-kit).
set -u
out=${1:?usage: device_events.sh OUTDIR}
mkdir -p "$out"
agent=(python3 .agent/agent.pyz)
log() { printf '\n== %s  %s\n' "$(date +%T)" "$*"; }

log "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
log "1. one telemetry frame through the bundle"
"${agent[@]}" telemetry --count 1 --interval 1 | tee "$out/frame.jsonl" | cut -c1-600

log "2. real server (gpu-kit)"
bash .gpu-kit/real_server.sh 8000 || { tail -50 /tmp/real-server.log; exit 1; }
"${agent[@]}" telemetry --interval 0.5 > "$out/telemetry.jsonl" &
tel=$!
"${agent[@]}" bench sweep --url http://127.0.0.1:8000 --model /tmp/tiny-llama \
  --levels 1:8,8:64,16:160 --input-len 128 --output-len 64 --warmup 2 --no-ignore-eos \
  --seed 7 > "$out/sweep.jsonl"
echo "sweep exit $?"
kill $tel
python3 - "$out" <<'PY'
import json, sys, zipfile
sys.path.insert(0, ".agent/agent.pyz")
from dsv4tui.agent.bench import stats
out = sys.argv[1]
evs = [json.loads(l) for l in open(out + "/sweep.jsonl") if l.startswith("{")]
reqs, level_ev = {}, {}
progress = {}
for i, e in enumerate(evs):
    t = e.get("type")
    if t == "request":
        reqs.setdefault(e.get("level"), []).append((i, e))
    elif t == "level_progress":
        progress.setdefault(e.get("level"), []).append((i, e))
    elif t == "level":
        level_ev[e.get("level")] = e
print("events:", {t: sum(1 for e in evs if e.get("type") == t) for t in
                  sorted({e.get("type") for e in evs})})
for lv, fin in sorted(level_ev.items()):
    ps = progress.get(lv, [])
    worst = 0.0
    for i, p in ps:  # each aggregate against the same formulas over the requests before it
        before = [r for j, r in reqs.get(lv, []) if j < i]
        ref = stats.level_metrics(before, int(fin.get("concurrency") or 1)) if before else None
        if ref and p.get("output_tok_s") and ref.get("output_tok_s"):
            worst = max(worst, abs(p["output_tok_s"] - ref["output_tok_s"]) / ref["output_tok_s"])
    last = ps[-1][1] if ps else {}
    print(f"C={fin.get('concurrency')}: {len(ps)} level_progress over "
          f"{fin.get('duration_s')} s; last: completed {last.get('completed')} "
          f"tok/s {last.get('output_tok_s')} TTFT p50 {(last.get('ttft_ms') or {}).get('p50')} ms"
          f" | level: completed {fin.get('completed')} tok/s {fin.get('output_tok_s')} "
          f"TTFT p50 {(fin.get('ttft_ms') or {}).get('p50')} ms | worst tok/s gap vs the "
          f"requests before it {100 * worst:.3f} %")
PY
log "3. GPU frames while it ran"
python3 - "$out" <<'PY'
import json, sys
fr = [json.loads(l) for l in open(sys.argv[1] + "/telemetry.jsonl") if '"frame"' in l]
g = [f["gpus"][0] for f in fr if f.get("gpus")]
busy = [x for x in g if (x.get("util_gpu") or 0) > 10]
def mx(k): return max((x.get(k) or 0) for x in g) if g else None
print(f"{len(fr)} frames, {len(busy)} busy; max util {mx('util_gpu')} % tensor "
      f"{mx('tensor_active')} % sm {mx('sm_active')} % dram {mx('dram_active')} % "
      f"power {mx('power_w')} W source {fr[0].get('source') if fr else None}")
PY
