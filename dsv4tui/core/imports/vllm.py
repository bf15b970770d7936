"""``vllm bench serve --save-result`` JSON read as a run.

The file (vllm ``vllm/benchmarks/serve.py`` ``main_async``): one JSON object, or with
``--append-result`` one per line, each ``{"date", "endpoint_type", "backend", "label",
"model_id", "tokenizer_id", "num_prompts", <--metadata KEY=VALUE pairs>, "request_rate"
(a number, or the string "inf"), "burstiness", "max_concurrency", "duration", "completed",
"failed", "total_input_tokens", "total_output_tokens", "request_throughput",
"request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
"max_concurrent_requests", "latencies", {mean,median,std}_{ttft,tpot,itl}_ms and
p<P>_{ttft,tpot,itl}_ms for each --metric-percentiles (default 99), the same for e2el when
--percentile-metrics names it}``; with ``--save-detailed`` also the per-request lists
``input_lens, output_lens, ttfts, itls, start_times, errors`` (seconds). It says nothing of
the server but the model it asked for, and not vllm's own version (``--metadata
version=...`` does, read as the tool's version when given).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsv4tui.core.imports import record
from dsv4tui.core.imports.record import ImportedRun, bad

TOOL = "vllm bench serve"
# keys only vllm's result JSON has (bench_serving's lines have none of them)
MARKS = ("endpoint_type", "tokenizer_id", "max_concurrent_requests", "burstiness")


def is_vllm(obj: Mapping[str, Any]) -> bool:
    return "completed" in obj and "duration" in obj and sum(k in obj for k in MARKS) >= 2


def parse(text: str, path: str) -> ImportedRun:
    from dsv4tui.core.imports.record import dig

    name = path.rsplit("/", 1)[-1]
    objs: list[tuple[str, dict[str, Any]]] = []
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        objs.append(("", whole))
    else:  # --append-result: one object a line
        for no, obj in record.json_lines(text, name):
            if not isinstance(obj, dict) or not is_vllm(obj):
                raise bad(name, f"line {no}", "not a vllm bench serve result (no completed / "
                          "duration / endpoint_type)")
            objs.append((f"line {no}", obj))
    levels: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    notes: list[str] = []
    for idx, (where, obj) in enumerate(objs):
        lv, reqs = _level(obj, idx, name, where or None)
        levels.append(lv)
        requests.extend(reqs)
    first = objs[0][1]
    models = {str(o.get("model_id")) for _, o in objs}
    if len(models) > 1:
        raise bad(name, None, f"its results measured different models ({', '.join(sorted(models))})"
                  ": import each model's results as a file of their own")
    version = first.get("version") if isinstance(first.get("version"), str) else None
    if version is None:
        notes.append(f"{name}: vllm bench serve does not write its version "
                     "(--metadata version=X does)")
    if not requests:
        notes.append(f"{name}: no per-request lists (vllm bench serve --save-detailed "
                     "writes them)")
    # vllm's own names: its model_id is --model (a path, or the server's model id), not
    # necessarily SGLang's model_path, so it must not read as a difference from one
    server_args = {k: first[k] for k in ("model_id", "tokenizer_id")
                   if isinstance(first.get(k), str)}
    plan = {"imported": {"file": path, "lines": len(objs), "backend": first.get("backend"),
                         "endpoint_type": first.get("endpoint_type"),
                         "date": first.get("date"), "notes": notes},
            "levels": [[lv["concurrency"], lv["requests"]] for lv in levels
                       if lv["rate"] is None],
            "rates": [[lv["rate"], lv["requests"]] for lv in levels if lv["rate"] is not None],
            "endpoint": {"openai-chat": "chat", "openai": "completions"}.get(
                str(first.get("endpoint_type"))),
            "burstiness": first.get("burstiness")}
    label = first.get("label") if isinstance(first.get("label"), str) else None
    return ImportedRun(tool=TOOL, version=version, definitions="vllm", path=path,
                       label=label or f"vllm-{name.rsplit('.', 1)[0]}", levels=levels, requests=requests,
                       plan=plan, notes=notes,
                       model=str(dig(first, "model_id")) if first.get("model_id") else None,
                       server_args=server_args or None, profile_name="vllm bench serve")


def _level(obj: Mapping[str, Any], idx: int, name: str, where: str | None
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    at = where or "key"

    def num(key: str) -> float | None:
        return record.check_measurement(name, f"{at} {key}" if where else f"key {key}", key,
                                        obj.get(key))

    completed = num("completed")
    duration = num("duration")
    if completed is None or not duration:
        raise bad(name, where, "completed and duration (> 0) are needed")
    failed = int(num("failed") or 0)
    raw_rate = obj.get("request_rate")
    rate = None if raw_rate in ("inf", None) or raw_rate == float("inf") else num("request_rate")
    cap = num("max_concurrency")
    done = int(completed)
    conc = int(cap) if cap is not None else (0 if rate is not None else done + failed)

    def stats(stem: str) -> dict[str, float | None]:
        return record.summary(num(f"mean_{stem}_ms"), num(f"median_{stem}_ms"),
                              num(f"p90_{stem}_ms"), num(f"p99_{stem}_ms"))

    reqs = _requests(obj, idx, name, where)
    e2e = stats("e2el")
    if e2e["mean"] is None and reqs:
        from dsv4tui.agent.bench import stats as agent_stats

        e2e = agent_stats.summarize((r["e2e_s"] for r in reqs if r["ok"]), 1000.0)
    good = num("request_goodput")
    lv = record.level(
        idx, concurrency=conc, requests=done + failed, completed=done, errors=failed,
        duration_s=duration, rate=rate, max_concurrency=int(cap) if cap is not None else None,
        output_tokens=int(num("total_output_tokens") or 0), output_tok_s=num("output_throughput"),
        request_throughput=num("request_throughput"),
        input_tokens=int(num("total_input_tokens") or 0) or None,
        total_tok_s=num("total_token_throughput"),
        ttft_ms=stats("ttft"), tpot_ms=stats("tpot"), itl_ms=stats("itl"), e2e_ms=e2e,
        imported={"source": TOOL, "file": name, "line": where, "definitions_of": "vllm",
                  "backend": obj.get("backend"),
                  "max_output_tokens_per_s": obj.get("max_output_tokens_per_s"),
                  "max_concurrent_requests": obj.get("max_concurrent_requests")})
    if good is not None:
        n = done + failed
        lv["goodput"] = {"targets": None, "good": round(good * duration), "requests": n,
                         "share": round(good * duration / n, 4) if n else None, "rate": good}
    return lv, reqs


def _requests(obj: Mapping[str, Any], idx: int, name: str, where: str | None
              ) -> list[dict[str, Any]]:
    """The per-request lists of --save-detailed as request rows (None without them)."""
    keys = ("ttfts", "itls", "start_times", "output_lens")
    if not all(isinstance(obj.get(k), list) for k in keys):
        return []
    n = len(obj["ttfts"])
    lists = {k: obj.get(k) for k in (*keys, "latencies", "input_lens", "errors")}
    for k, v in lists.items():
        if v is not None and (not isinstance(v, list) or len(v) != n):
            raise bad(name, f"{where + ' ' if where else ''}key {k}",
                      f"must be a list of {n} (one per request, as ttfts)")
    t0 = min((s for s in obj["start_times"] if isinstance(s, (int, float))), default=0.0)
    out = []
    for i in range(n):
        def item(key: str, i: int = i) -> Any:
            v = lists.get(key)
            return v[i] if isinstance(v, list) else None
        err = item("errors")
        ok = not err
        ttft = record.number(item("ttfts"))
        gaps = item("itls") if isinstance(item("itls"), list) else []
        lat = record.number(item("latencies"))
        if lat is None and ttft is not None:
            lat = ttft + sum(g for g in gaps if isinstance(g, (int, float)))
        start = record.number(item("start_times"))
        outs = record.number(item("output_lens"))
        ins = record.number(item("input_lens"))
        for key, v in (("ttfts", ttft), ("latencies", lat)):
            if v is not None and v < 0:
                raise bad(name, f"{where + ' ' if where else ''}key {key}[{i}]",
                          "must be >= 0")
        out.append(record.request(
            idx, i, ok=ok, start_s=None if start is None else round(start - t0, 6),
            ttft_s=ttft if ok else None, e2e_s=lat if ok else None,
            output_tokens=int(outs) if outs is not None else None,
            prompt_tokens=int(ins) if ins is not None else None,
            token_source="imported", error=str(err)[:500] if err else None,
            chunk_gaps_ms=[g * 1000.0 for g in gaps if isinstance(g, (int, float))]))
    return out
