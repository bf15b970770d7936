"""aiperf's profile export read as a run: the aggregate ``profile_export_aiperf.json`` and the
per-record ``profile_export.jsonl`` (aiperf ``aiperf/exporters/json_exporter.py``,
``aiperf/post_processors/record_export_results_processor.py``; docs
``docs/tutorials/working-with-profile-exports.md``).

The aggregate: ``{"schema_version", "aiperf_version", "input_config": {"models", "endpoint":
{"urls", "type", "streaming"}, "phases": [{"name", "type", "concurrency" | "request_rate",
"requests"}], ...}, <metric tag>: {"unit", "avg", "p50", "p90", "p99", "min", "max", "std",
"count", "sum"}, "start_time", "end_time", "error_summary", ...}``. A record line:
``{"metadata": {"request_start_ns", "request_end_ns", "benchmark_phase", ...}, "metrics":
{<tag>: {"value", "unit"}}, "error": null | {...}}``. One aiperf run is one load, so one
level; reading the aggregate also keeps the records of the ``profile_export.jsonl`` beside
it, reading the records alone computes the level from them (their TTFT, latency and token
counts; percentiles as ours).

aiperf's names: ``inter_token_latency`` = (latency - TTFT) / (OSL - first chunk's tokens),
our TPOT, so it is the TPOT column; ``inter_chunk_latency`` the ITL column (per chunk).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from dsv4tui.core.imports import record
from dsv4tui.core.imports.record import ImportedRun, bad, dig

TOOL = "aiperf"
RECORDS_FILE = "profile_export.jsonl"
AGGREGATE_FILE = "profile_export_aiperf.json"
_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "sec": 1000.0, "s": 1000.0}


def is_aggregate(obj: Mapping[str, Any]) -> bool:
    return "aiperf_version" in obj or ("input_config" in obj and "request_latency" in obj)


def is_record(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return (isinstance(meta, Mapping) and isinstance(obj.get("metrics"), (Mapping, type(None)))
            and "request_start_ns" in meta)


def _ms(name: str, key: str, stat: Mapping[str, Any] | None, which: str) -> float | None:
    if not isinstance(stat, Mapping):
        return None
    unit = str(stat.get("unit") or "ms")
    scale = _MS.get(unit)
    if scale is None:
        raise bad(name, f"key {key}.unit", f"unknown time unit {unit!r}")
    v = record.check_measurement(name, f"key {key}.{which}", which, stat.get(which))
    return None if v is None else v * scale


def _summary(name: str, obj: Mapping[str, Any], key: str) -> dict[str, float | None]:
    stat = obj.get(key)
    return record.summary(*(_ms(name, key, stat, s) for s in ("avg", "p50", "p90", "p99")))  \
        if isinstance(stat, Mapping) else record.summary()


def _avg(name: str, obj: Mapping[str, Any], key: str) -> float | None:
    stat = obj.get(key)
    if not isinstance(stat, Mapping):
        return None
    return record.check_measurement(name, f"key {key}.avg", "avg", stat.get("avg"))


def _load(obj: Mapping[str, Any]) -> tuple[int, float | None, int | None]:
    """(C, rate, requests) of the profiling phase in ``input_config``."""
    phases = dig(obj, "input_config", "phases")
    phase: Mapping[str, Any] = {}
    if isinstance(phases, list):
        phase = next((p for p in phases if isinstance(p, Mapping)
                      and p.get("name", "profiling") == "profiling"), {})
    conc = record.number(phase.get("concurrency"))
    rate = record.number(phase.get("request_rate"))
    reqs = record.number(phase.get("requests"))
    return (int(conc) if conc is not None else 0, rate, int(reqs) if reqs is not None else None)


def parse_aggregate(obj: Mapping[str, Any], path: str) -> ImportedRun:
    name = os.path.basename(path)
    conc, rate, _ = _load(obj)
    completed = _avg(name, obj, "request_count")
    duration = _avg(name, obj, "benchmark_duration")
    if completed is None or not duration:
        raise bad(name, "key request_count / benchmark_duration",
                  "an aiperf profile export needs both (> 0)")
    errors = int(_avg(name, obj, "error_request_count") or 0)
    done = int(completed)
    unit = str(dig(obj, "benchmark_duration", "unit") or "sec")
    duration_s = duration * _MS.get(unit, 1000.0) / 1000.0
    lv = record.level(
        0, concurrency=conc, requests=done + errors, completed=done, errors=errors,
        duration_s=duration_s, rate=rate, max_concurrency=conc or None,
        output_tokens=int(_avg(name, obj, "total_output_tokens")
                          or _avg(name, obj, "total_osl") or 0),
        output_tok_s=_avg(name, obj, "output_token_throughput"),
        request_throughput=_avg(name, obj, "request_throughput"),
        input_tokens=int(_avg(name, obj, "total_isl") or 0) or None,
        total_tok_s=_avg(name, obj, "total_token_throughput"),
        concurrency_mean=_avg(name, obj, "effective_concurrency"),
        ttft_ms=_summary(name, obj, "time_to_first_token"),
        tpot_ms=_summary(name, obj, "inter_token_latency"),
        itl_ms=_summary(name, obj, "inter_chunk_latency"),
        e2e_ms=_summary(name, obj, "request_latency"),
        ttfat_ms=_summary(name, obj, "time_to_first_output_token"),
        token_count_source="usage" if dig(obj, "input_config", "endpoint",
                                          "use_server_token_count") else "tokenizer",
        imported={"source": TOOL, "file": name, "definitions_of": "aiperf",
                  "inter_token_latency_ms": _summary(name, obj, "inter_token_latency"),
                  "usage_completion_tokens": _avg(name, obj, "total_usage_completion_tokens")})
    run = _run(obj, path, [lv])
    beside = os.path.join(os.path.dirname(os.path.abspath(path)), RECORDS_FILE)
    if os.path.isfile(beside):
        reqs = _records(record.read_text(beside), beside)
        run.requests = [dict(r, level=0) for r in reqs]
        run.plan["imported"]["records_file"] = beside
        run.notes.append(f"{name}: per-request records from the {RECORDS_FILE} beside it "
                         f"({len(reqs)})")
    else:
        run.notes.append(f"{name}: no {RECORDS_FILE} beside it: levels only, no requests")
    return run


def _run(obj: Mapping[str, Any], path: str, levels: list[dict[str, Any]]) -> ImportedRun:
    name = os.path.basename(path)
    models = dig(obj, "input_config", "models", "items")
    model = None
    if isinstance(models, list) and models and isinstance(models[0], Mapping):
        model = models[0].get("name")
    urls = dig(obj, "input_config", "endpoint", "urls")
    url = urls[0] if isinstance(urls, list) and urls and isinstance(urls[0], str) else None
    endpoint = dig(obj, "input_config", "endpoint", "type")
    isl = dig(obj, "input_config", "datasets", 0, "prompts", "isl", "mean")
    osl = dig(obj, "input_config", "datasets", 0, "prompts", "osl", "mean")
    plan = {"imported": {"file": os.path.abspath(path), "endpoint": endpoint,
                         "streaming": dig(obj, "input_config", "endpoint", "streaming"),
                         "cli_command": dig(obj, "run_info", "cli_command"),
                         "schema_version": obj.get("schema_version")},
            "levels": [[lv["concurrency"], lv["requests"]] for lv in levels
                       if lv["rate"] is None],
            "rates": [[lv["rate"], lv["requests"]] for lv in levels if lv["rate"] is not None],
            "endpoint": endpoint if endpoint in ("chat", "completions") else None,
            "input_len": int(isl) if isinstance(isl, (int, float)) else None,
            "output_len": int(osl) if isinstance(osl, (int, float)) else None}
    version = obj.get("aiperf_version")
    return ImportedRun(tool=TOOL, version=version if isinstance(version, str) else None,
                       definitions="aiperf", path=path, label=f"aiperf-{os.path.splitext(name)[0]}",
                       levels=levels, plan=plan, model=model if isinstance(model, str) else None,
                       url=url, profile_name="aiperf",
                       server_args={"served_model_name": model} if isinstance(model, str)
                       else None)


def _metric(name: str, no: int, metrics: Mapping[str, Any], key: str) -> Any:
    m = metrics.get(key)
    if not isinstance(m, Mapping):
        return None
    v = m.get("value")
    scale = _MS.get(str(m.get("unit") or ""), 1.0) if key not in (
        "output_sequence_length", "input_sequence_length") else 1.0
    if isinstance(v, list):
        if not all(isinstance(x, (int, float)) and x >= 0 for x in v):
            raise bad(name, f"line {no}", f"metrics.{key} must be a list of numbers >= 0")
        return [x * scale for x in v]
    n = record.check_measurement(name, f"line {no}", f"metrics.{key}", v)
    return None if n is None else n * scale


def _records(text: str, path: str) -> list[dict[str, Any]]:
    """The profiling records of a profile_export.jsonl as request rows (level 0)."""
    name = os.path.basename(path)
    rows: list[tuple[int, Mapping[str, Any]]] = []
    for no, obj in record.json_lines(text, name):
        if not isinstance(obj, dict) or not is_record(obj):
            raise bad(name, f"line {no}", "not an aiperf record (no metadata.request_start_ns)")
        if obj["metadata"].get("benchmark_phase", "profiling") != "profiling":
            continue  # warm-up records are not the measurement
        rows.append((no, obj))
    if not rows:
        raise bad(name, None, "no profiling records")
    starts = [record.number(o["metadata"].get("request_start_ns")) for _, o in rows]
    t0 = min((s for s in starts if s is not None), default=0.0)
    out = []
    for i, (no, obj) in enumerate(rows):
        raw = obj.get("metrics")
        metrics: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        err = obj.get("error")
        ok = err is None and bool(metrics)
        start = record.number(obj["metadata"].get("request_start_ns"))
        ttft = _metric(name, no, metrics, "time_to_first_token")
        e2e = _metric(name, no, metrics, "request_latency")
        osl = _metric(name, no, metrics, "output_sequence_length")
        isl = _metric(name, no, metrics, "input_sequence_length")
        gaps = _metric(name, no, metrics, "inter_chunk_latency") or []
        row = record.request(
            0, i, ok=ok, start_s=None if start is None else round((start - t0) / 1e9, 6),
            ttft_s=None if ttft is None else ttft / 1000.0,
            e2e_s=None if e2e is None else e2e / 1000.0,
            output_tokens=None if osl is None else int(osl),
            prompt_tokens=None if isl is None else int(isl), token_source="tokenizer",
            chunk_gaps_ms=gaps if isinstance(gaps, list) else [],
            error=None if ok else json.dumps(err)[:500])
        itl = _metric(name, no, metrics, "inter_token_latency")
        if itl is not None:  # aiperf's own per-request TPOT (its first-chunk token rule)
            row["tpot_s"] = itl / 1000.0
        out.append(row)
    return out


def parse_records(text: str, path: str) -> ImportedRun:
    """A profile_export.jsonl alone: the level computed from its records (with the
    aggregate beside it, when there, for the load and the tool's version)."""
    from dsv4tui.agent.bench import stats

    name = os.path.basename(path)
    reqs = _records(text, path)
    agg: Mapping[str, Any] = {}
    beside = os.path.join(os.path.dirname(os.path.abspath(path)), AGGREGATE_FILE)
    if os.path.isfile(beside):
        try:
            with open(beside, encoding="utf-8") as fh:
                loaded = json.load(fh)
            agg = loaded if isinstance(loaded, Mapping) else {}
        except (OSError, ValueError):
            agg = {}
    conc, rate, _ = _load(agg)
    if not conc and rate is None:  # the records alone: the most requests in flight at once
        spans = sorted((r["start_s"], r["start_s"] + (r["e2e_s"] or 0.0)) for r in reqs
                       if r["start_s"] is not None)
        edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                       key=lambda x: (x[0], x[1]))
        cur = 0
        for _, d in edges:
            cur += d
            conc = max(conc, cur)
    lv = stats.level_metrics(reqs, conc)
    lv.update({"level": 0, "rate": rate, "kind": "closed" if rate is None else "rate",
               "max_concurrency": conc if rate is not None else None,
               "token_count_source": "tokenizer", "status": "done" if not lv.get("errors")
               else "partial", "partial": False})
    lv["tpot_ms"] = stats.summarize((r["tpot_s"] for r in reqs if r["ok"]), 1000.0)
    lv["imported"] = {"source": TOOL, "file": name, "definitions_of": "aiperf",
                      "computed_from_records": True}
    run = _run(agg, path, [lv])
    run.requests = reqs
    run.notes.append(f"{name}: the level is computed by dsv4tui from aiperf's per-request "
                     "metrics (TTFT, latency, OSL, inter-chunk gaps; percentiles as ours)")
    return run
