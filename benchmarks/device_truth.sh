#!/usr/bin/env bash
# What the truth fixes claim, against a real server on a GPU machine (docs/validation.md §5):
#  1. closed loop C=1: the client's TTFT of the first request (a fresh connection) against the
#     later ones (the same keep-alive connection): no Nagle / delayed-ACK stall on reuse;
#  2. open loop: a rate the server keeps up with, then two it cannot: saturated verdicts from
#     what completed (achieved vs offered), and --stop-when-saturated stops the sweep;
#  3. a --url nothing listens on: the agent's reach check says so before anything runs.
# Usage (repo root, on the GPU machine): bash benchmarks/device_truth.sh OUTDIR
# Expects: .agent/agent.pyz (the bundle dsv4tui deploys) and .gpu-kit/.
set -u
out=${1:?usage: device_truth.sh OUTDIR}
mkdir -p "$out"
agent=(python3 .agent/agent.pyz)
log() { printf '\n== %s  %s\n' "$(date +%T)" "$*"; }
bash .gpu-kit/real_server.sh 8000 || { tail -50 /tmp/real-server.log; exit 1; }
url=http://127.0.0.1:8000
model=/tmp/tiny-llama
common=(--url $url --model $model --input-len 64 --output-len 32 --warmup 2 --no-ignore-eos --seed 7)

log "1. closed loop C=1, 16 requests on one keep-alive connection"
"${agent[@]}" bench sweep "${common[@]}" --levels 1:16 > "$out/c1.jsonl"
python3 - "$out/c1.jsonl" <<'PY'
import json, statistics, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
reqs = [e for e in evs if e.get("type") == "request" and e.get("ok")]
ttft = [1000 * r["ttft_s"] for r in sorted(reqs, key=lambda r: r.get("index", 0)) if r.get("ttft_s")]
print("requests ok", len(reqs), "ttft ms first %.1f, later p50 %.1f min %.1f max %.1f" % (
    ttft[0], statistics.median(ttft[1:]), min(ttft[1:]), max(ttft[1:])))
lv = next(e for e in evs if e.get("type") == "level")
print("level (client side) ttft p50 %.1f ms, tpot p50 %.1f ms, output tok/s %.1f" % (
    lv["ttft_ms"]["p50"], lv["tpot_ms"]["p50"], lv["output_tok_s"]))
PY

log "2. open loop 1, 8, 32 req/s (24 requests each), --stop-when-saturated"
"${agent[@]}" bench sweep "${common[@]}" --levels '' --rates 1:24,8:24,32:24,64:24 \
  --stop-when-saturated > "$out/rates.jsonl"
python3 - "$out/rates.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    e = json.loads(l)
    if e.get("type") == "level":
        s = e.get("saturation") or {}
        print("offered %s req/s: %s/%s done, achieved %s, request_throughput %.2f, saturated %s"
              " | %s" % (e.get("rate"), e.get("completed"), e.get("requests"),
                         s.get("achieved_rate"), e.get("request_throughput") or 0,
                         s.get("saturated"), json.dumps(s)[:300]))
    elif e.get("type") not in ("request", "progress", "bench_target"):
        print(e.get("type"), json.dumps(e)[:300])
PY

log "3. a --url nothing listens on"
"${agent[@]}" bench reach --url http://127.0.0.1:1 ; echo "exit $?"
