#!/usr/bin/env bash
# One full validation run on a GPU machine (used for docs/validation.md):
#  1. telemetry under three known workloads (benchmarks/gpu_validation.py),
#  2. a real OpenAI-compatible server (shared gpu-kit: transformers serve) with telemetry
#     recorded while the agent's sanity + sweep run against it, then the same sweep with a
#     peer (guidellm, offline wheels).
# Usage (repo root, on the GPU machine): bash benchmarks/device_validation.sh OUTDIR
# Expects: .agent/agent.pyz (the bundle dsv4tui deploys), .gpu-kit/, optional .peer-whl/.
set -u
out=${1:?usage: device_validation.sh OUTDIR}
mkdir -p "$out"
agent=(python3 .agent/agent.pyz)
log() { printf '\n== %s  %s\n' "$(date +%T)" "$*"; }

log "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'

if [ "${SKIP_GPU:-0}" != 1 ]; then
  log "1. telemetry under known workloads"
  PYTHONPATH=. python3 benchmarks/gpu_validation.py --out "$out/gpu" --duration 8 || echo "gpu_validation exit $?"
fi
# transformers serve answers 422 to the non-standard `ignore_eos`; its random-weight model
# rarely emits EOS, so max_tokens still fixes the output length (checked in the results).
eos=(${BENCH_EOS_FLAG:---no-ignore-eos})

log "2. real server (gpu-kit)"
bash .gpu-kit/real_server.sh 8000 || { tail -50 /tmp/real-server.log; exit 1; }
url=http://127.0.0.1:8000
model=/tmp/tiny-llama
"${agent[@]}" telemetry --interval 0.5 > "$out/server_telemetry.jsonl" 2>"$out/server_telemetry.err" &
tele=$!

log "sanity (the kit's model is random weights: expected to FAIL)"
"${agent[@]}" bench sanity --url $url --model $model | tee "$out/sanity.jsonl" | cut -c1-300

log "sweep C=1,8,16 (n=8,32,48), in 128 / out 64 tokens, chat"
"${agent[@]}" bench sweep --url $url --model $model --levels 1:8,8:32,16:48 --input-len 128 \
  --output-len 64 --warmup 2 "${eos[@]}" > "$out/sweep_chat.jsonl"
grep -E '"type":"(level|sweep)"' "$out/sweep_chat.jsonl" | cut -c1-400

log "same sweep, completions endpoint"
"${agent[@]}" bench sweep --url $url --model $model --levels 1:8,8:32,16:48 --input-len 128 \
  --output-len 64 --warmup 2 "${eos[@]}" --endpoint completions > "$out/sweep_completions.jsonl"
grep -E '"type":"(level|sweep|error)"' "$out/sweep_completions.jsonl" | cut -c1-400

kill $tele 2>/dev/null; wait $tele 2>/dev/null

if [ -d .peer-whl ]; then
  log "3. peer: guidellm, same shape (concurrency 1,8,16; 128 in / 64 out)"
  # guidellm always sends ignore_eos with a fixed output length; the kit's server rejects it,
  # so drop that one key from guidellm's request body in its private install (not ours).
  rm -rf /tmp/peer-site
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peer-site .peer-whl/*.whl >/dev/null 2>&1
  (cd .peer-whl && ls -1 *.whl) > /tmp/peer-site/.installed-ok
  sed -i 's/arguments.body\["ignore_eos"\] = True/pass  # ignore_eos dropped for transformers serve/' \
    /tmp/peer-site/guidellm/backends/openai/request_handlers.py
  sed -i '/"ignore_eos": True,/d' /tmp/peer-site/guidellm/backends/openai/request_handlers.py
  export PYTHONPATH=/tmp/kit-site${PYTHONPATH:+:$PYTHONPATH}
  RUN_SYNC=0 MAX_REQUESTS=48 MAX_SECONDS=90 REQUEST_FORMAT=/v1/chat/completions \
    timeout 300 bash .peer-whl/run_guidellm.sh $url $model "$out/peer" || echo "guidellm exit $?"
fi
log "done"
