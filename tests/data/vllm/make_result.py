"""Write a ``vllm bench serve --save-result --save-detailed`` JSON against a server, to vllm's
schema, without vllm (its client imports the vllm engine package, which does not install
here). Our own code, following what vllm's does (read from vllm ``vllm/benchmarks/serve.py``
``calculate_metrics`` / ``benchmark`` / ``main_async`` and
``vllm/benchmarks/lib/endpoint_request_func.py`` ``async_request_openai_chat_completions``):

- TTFT: the first SSE message with non-empty ``choices`` (the role-only chunk counts);
- ITL: the gap before each later message with ``choices``;
- latency: the last message with ``choices`` - the start (the usage chunk does not count);
- output tokens: ``usage.completion_tokens``; input tokens: ``usage.prompt_tokens``;
- TPOT: (latency - TTFT) / (output tokens - 1); mean / median / std (population) /
  p99 (linear) as numpy's; duration: first send -> all done.

    python3 tests/data/vllm/make_result.py URL MODEL OUT.json [C] [N] [IN] [OUT]
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from datetime import datetime
from typing import Any

import httpx

WORDS = ["the", "model", "routes", "each", "token", "through", "a", "small", "set", "of",
         "experts", "and", "the", "attention", "layers", "keep", "a", "sliding", "window"]


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    pos = (len(v) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def std(values: list[float]) -> float:
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((x - m) ** 2 for x in values) / len(values))


async def one(client: httpx.AsyncClient, url: str, model: str, prompt: str, out_len: int
              ) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": prompt}]}], "max_completion_tokens": out_len, "stream": True,
        "stream_options": {"include_usage": True}, "ignore_eos": True}
    res: dict[str, Any] = {"ttft": 0.0, "itl": [], "latency": 0.0, "output_tokens": 0,
                           "prompt_len": 0, "error": "", "text": ""}
    st = time.perf_counter()
    res["start_time"] = st
    last = st
    first = False
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                res["error"] = r.reason_phrase
                return res
            async for line in r.aiter_lines():
                line = line.strip()
                if not line or line.startswith(":") or not line.startswith("data: "):
                    continue
                chunk = line.removeprefix("data: ")
                if chunk == "[DONE]":
                    continue
                now = time.perf_counter()
                data = json.loads(chunk)
                if choices := data.get("choices"):
                    if not first:
                        first = True
                        res["ttft"] = now - st
                    else:
                        res["itl"].append(now - last)
                    res["text"] += choices[0]["delta"].get("content") or ""
                    last = now
                elif usage := data.get("usage"):
                    res["output_tokens"] = usage.get("completion_tokens")
                    res["prompt_len"] = usage.get("prompt_tokens") or 0
        res["latency"] = last - st
        if not first:
            res["error"] = "Never received a valid chunk to calculate TTFT."
    except httpx.HTTPError as exc:
        res["error"] = str(exc)
    return res


async def main(url: str, model: str, out: str, c: int, n: int, in_len: int, out_len: int
               ) -> None:
    prompts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(in_len)) for i in range(n)]
    sem = asyncio.Semaphore(c)
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def limited(p: str) -> dict[str, Any]:
            async with sem:
                return await one(client, url, model, p, out_len)
        t0 = time.perf_counter()
        outs = await asyncio.gather(*(limited(p) for p in prompts))
        dur = time.perf_counter() - t0
    ok = [o for o in outs if not o["error"]]
    ttfts = [o["ttft"] for o in ok]
    itls = [g for o in ok for g in o["itl"]]
    tpots = [(o["latency"] - o["ttft"]) / (o["output_tokens"] - 1) for o in ok
             if o["output_tokens"] > 1]
    total_in = sum(o["prompt_len"] for o in ok)
    total_out = sum(o["output_tokens"] for o in ok)
    peak = 0
    cur = 0
    for _, d in sorted([(o["start_time"], 1) for o in ok]
                       + [(o["start_time"] + o["latency"], -1) for o in ok]):
        cur += d
        peak = max(peak, cur)
    result: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": "openai-chat",
        "backend": "openai-chat", "label": None, "model_id": model, "tokenizer_id": model,
        "num_prompts": n, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": c,
        "duration": dur, "completed": len(ok), "failed": len(outs) - len(ok),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur, "request_goodput": None,
        "output_throughput": total_out / dur,
        "total_token_throughput": (total_in + total_out) / dur,
        "input_lens": [o["prompt_len"] for o in outs],
        "output_lens": [o["output_tokens"] if not o["error"] else 0 for o in outs],
        "ttfts": [o["ttft"] for o in outs], "itls": [o["itl"] for o in outs],
        "latencies": [o["latency"] for o in outs],
        "start_times": [o["start_time"] for o in outs],
        "queue_times": [0.0 for _ in outs],
        "generated_texts": [o["text"] for o in outs], "errors": [o["error"] for o in outs],
        "max_output_tokens_per_s": 0.0, "max_concurrent_requests": peak, "rtfx": 0.0}
    for stem, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls)):
        ms = [v * 1000 for v in vals]
        result[f"mean_{stem}_ms"] = mean(ms)
        result[f"median_{stem}_ms"] = pct(ms, 50)
        result[f"std_{stem}_ms"] = std(ms)
        result[f"p99_{stem}_ms"] = pct(ms, 99)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], a[1], a[2], *(int(x) for x in a[3:7])))
