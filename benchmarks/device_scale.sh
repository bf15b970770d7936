#!/usr/bin/env bash
# Issue 17 on the lent GPU machine (16 cores), one run (used for docs/validation.md §6):
#  1. the scale benchmark: the known-timing server spread over processes, the agent's sweep
#     with 1 worker and with N at C = 64, 256, 512 (benchmarks/bench_scale.py);
#  2. the load shapes against a real server (shared gpu-kit: transformers serve), run by the
#     agent zipapp exactly as dsv4tui deploys it: a closed-loop sweep with 1 worker and with 4
#     (same numbers expected), open-loop Poisson rate levels with range-ratio lengths, warm-ups,
#     a seed and goodput targets, and a JSON-lines dataset.
# Usage (repo root, on the GPU machine): bash benchmarks/device_scale.sh OUTDIR
# Expects: .agent/agent.pyz (python -c 'from dsv4tui.core.hosts.deploy import build_bundle; ...'),
# .gpu-kit/ (a copy of the shared kit).
set -u
out=${1:?usage: device_scale.sh OUTDIR}
mkdir -p "$out"
agent=(python3 .agent/agent.pyz)
log() { printf '\n== %s  %s\n' "$(date +%T)" "$*"; }
levels() { python3 benchmarks/level_summary.py "$1"; }

log "machine"
nproc
python3 --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

log "1. scale: known-timing server over processes, 1 worker vs N"
PYTHONPATH=. python3 benchmarks/bench_scale.py 2>&1 | tee "$out/scale.txt"

log "2. real server (gpu-kit)"
bash .gpu-kit/real_server.sh 8000 || { tail -50 /tmp/real-server.log; exit 1; }
url=http://127.0.0.1:8000
model=/tmp/tiny-llama
common=(--url $url --model $model --input-len 128 --output-len 64 --no-ignore-eos)

log "closed loop C=1,8,16 (n=8,32,48), 1 worker"
"${agent[@]}" bench sweep "${common[@]}" --levels 1:8,8:32,16:48 --warmup 2 --workers 1 \
  --seed 7 > "$out/closed_w1.jsonl"
levels "$out/closed_w1.jsonl"
log "same, 4 workers (the zipapp's worker start method)"
"${agent[@]}" bench sweep "${common[@]}" --levels 1:8,8:32,16:48 --warmup 2 --workers 4 \
  --seed 7 > "$out/closed_w4.jsonl"
levels "$out/closed_w4.jsonl"

log "open loop: Poisson 1, 4, 16 req/s, lengths in [0.5 L, L], goodput ttft:500,tpot:50"
"${agent[@]}" bench sweep "${common[@]}" --levels '' --rates 1:20,4:40,16:96 --warmup 2 \
  --random-range-ratio 0.5 --seed 7 --goodput ttft:500,tpot:50 --workers 2 \
  > "$out/open_rates.jsonl"
levels "$out/open_rates.jsonl"

log "dataset: 24 JSON-lines prompts, C=8"
python3 - > /tmp/prompts.jsonl <<'EOF'
import json
for i in range(24):
    print(json.dumps({"prompt": f"Question {i}: explain the number {i * 17} in one paragraph.",
                      "output_len": 16 + 2 * i}))
EOF
"${agent[@]}" bench sweep --url $url --model $model --no-ignore-eos --levels 8:24 \
  --dataset /tmp/prompts.jsonl --seed 7 --warmup 0 > "$out/dataset.jsonl"
levels "$out/dataset.jsonl"
python3 - "$out/dataset.jsonl" <<'EOF'
import json, sys
reqs = [e for e in map(json.loads, open(sys.argv[1])) if e.get("type") == "request"]
print("dataset requests:", len(reqs), "output tokens:", sorted(r.get("output_tokens") for r in reqs)[:6], "...")
EOF
log "done"
