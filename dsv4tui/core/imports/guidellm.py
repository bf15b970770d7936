"""guidellm's ``benchmarks.json`` / ``benchmarks.yaml`` (0.7-0.8, report schema version 2)
read as a run (guidellm ``src/guidellm/benchmark/schemas/report.py``
``GenerativeBenchmarksReport``: ``{"metadata": {"version", "guidellm_version", ...},
"config": {"spec": {"backend": {"target", "model", "request_format"}, "data", ...}},
"benchmarks": [GenerativeBenchmark]}``).

Each benchmark is a level: its ``config.strategy`` says the load (``synchronous`` C=1,
``concurrent`` ``streams``, ``throughput`` its ``max_concurrency``, ``constant`` /
``poisson`` a ``rate``); its ``metrics`` are ``StatusDistributionSummary`` objects
(``successful`` / ``errored`` / ``incomplete`` / ``total``, each ``{mean, median, std_dev,
count, total_sum, percentiles: {p50, p90, p99, ...}}``); its ``requests`` the per-request
stats guidellm kept (``successful`` / ``errored`` / ``incomplete`` lists, all of them unless
it sampled).

guidellm's names: ``inter_token_latency_ms`` = (last token - first token) / (n - 1), our
TPOT, so it is the TPOT column; its ``time_per_output_token_ms`` = (last token - start) / n
includes TTFT and is kept in the level's ``imported``; it has no per-chunk ITL.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from dsv4tui.core.imports import record
from dsv4tui.core.imports.record import ImportedRun, bad, dig

TOOL = "guidellm"


def is_report(obj: Mapping[str, Any]) -> bool:
    if not isinstance(obj.get("benchmarks"), list):
        return False
    if isinstance(dig(obj, "metadata", "guidellm_version"), str):
        return True
    first = dig(obj, "benchmarks", 0)
    return isinstance(first, Mapping) and first.get("type_") == "generative_benchmark"


def looks_yaml(text: str) -> bool:
    """A YAML mapping at the top (guidellm's ``benchmarks.yaml`` starts ``benchmarks:``,
    ``config:`` or ``metadata:``), whatever the file is called."""
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")), "")
    return bool(re.match(r"^[A-Za-z_][\w-]*:(\s|$)", first))


def load(text: str, path: str) -> Any:
    """The report as an object: JSON, or YAML (guidellm's other output); one-line errors
    naming the line."""
    name = os.path.basename(path)
    if looks_yaml(text):
        try:
            import yaml
        except ImportError:
            raise bad(name, None, "reading YAML needs PyYAML (pip install pyyaml), or give "
                      "guidellm's benchmarks.json") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else None
            raise bad(name, where, f"not YAML ({getattr(exc, 'problem', None) or 'bad'})") \
                from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise bad(name, None, f"not JSON ({exc})") from None


def _succ(name: str, b: int, metrics: Mapping[str, Any], key: str, scale: float = 1.0
          ) -> dict[str, float | None]:
    s = dig(metrics, key, "successful")
    if not isinstance(s, Mapping):
        return record.summary()
    where = f"key benchmarks[{b}].metrics.{key}.successful"

    def get(v: Any, what: str) -> float | None:
        n = record.check_measurement(name, where, what, v)
        return None if n is None else n * scale

    pct = s.get("percentiles") if isinstance(s.get("percentiles"), Mapping) else {}
    return record.summary(get(s.get("mean"), "mean"), get(s.get("median"), "median"),
                          get(pct.get("p90"), "percentiles.p90"),  # type: ignore[union-attr]
                          get(pct.get("p99"), "percentiles.p99"))  # type: ignore[union-attr]


def _total(name: str, b: int, metrics: Mapping[str, Any], key: str, stat: str = "total_sum"
           ) -> float | None:
    return record.check_measurement(name, f"key benchmarks[{b}].metrics.{key}.successful",
                                    stat, dig(metrics, key, "successful", stat))


def _load(name: str, b: int, bench: Mapping[str, Any]) -> tuple[int, float | None]:
    strategy = dig(bench, "config", "strategy")
    if not isinstance(strategy, Mapping):
        raise bad(name, f"key benchmarks[{b}].config.strategy", "missing")
    kind = strategy.get("type_")
    cap = record.number(strategy.get("max_concurrency"))
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        streams = record.number(strategy.get("streams"))
        if streams is None:
            raise bad(name, f"key benchmarks[{b}].config.strategy.streams", "missing")
        return int(streams), None
    rate = record.number(strategy.get("rate"))
    if kind in ("constant", "poisson") and rate is not None:
        return int(cap or 0), rate
    if kind == "throughput":
        return int(cap or 0), None
    raise bad(name, f"key benchmarks[{b}].config.strategy.type_",
              f"{kind!r} is not a load dsv4tui keeps (synchronous, concurrent, throughput, "
              "constant, poisson)")


def parse(text: str, path: str, obj: Any = None) -> ImportedRun:
    name = os.path.basename(path)
    report = load(text, path) if obj is None else obj
    if not isinstance(report, Mapping) or not is_report(report):
        raise bad(name, "key benchmarks", "not a guidellm benchmarks report")
    benches = report["benchmarks"]
    if not benches:
        raise bad(name, "key benchmarks", "no benchmarks")
    levels: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for b, bench in enumerate(benches):
        if not isinstance(bench, Mapping) or not isinstance(bench.get("metrics"), Mapping):
            raise bad(name, f"key benchmarks[{b}].metrics", "missing")
        lv, reqs = _level(name, b, bench)
        levels.append(lv)
        requests.extend(reqs)
    backend = dig(report, "config", "spec", "backend") or dig(benches[0], "config", "backend")
    backend = backend if isinstance(backend, Mapping) else {}
    model = backend.get("model")
    data = dig(report, "config", "spec", "data", 0)
    data = data if isinstance(data, Mapping) else {}
    fmt = str(backend.get("request_format") or "")
    plan = {"imported": {"file": os.path.abspath(path), "benchmarks": len(benches),
                         "backend": backend.get("kind"), "request_format": fmt or None,
                         "report_version": dig(report, "metadata", "version")},
            "levels": [[lv["concurrency"], lv["requests"]] for lv in levels
                       if lv["rate"] is None],
            "rates": [[lv["rate"], lv["requests"]] for lv in levels if lv["rate"] is not None],
            "endpoint": "chat" if "chat" in fmt else ("completions" if "completions" in fmt
                                                      else None),
            "input_len": data.get("prompt_tokens"), "output_len": data.get("output_tokens")}
    version = dig(report, "metadata", "guidellm_version")
    notes = []
    kept = sum(1 for r in requests)
    total = sum(lv["requests"] for lv in levels)
    if kept < total:
        notes.append(f"{name}: guidellm kept {kept} of {total} requests (it samples)")
    return ImportedRun(tool=TOOL, version=version if isinstance(version, str) else None,
                       definitions="guidellm", path=path,
                       label=f"guidellm-{os.path.splitext(name)[0]}", levels=levels,
                       requests=requests,
                       plan=plan, notes=notes, model=model if isinstance(model, str) else None,
                       url=backend.get("target") if isinstance(backend.get("target"), str)
                       else None, profile_name="guidellm",
                       server_args={"served_model_name": model} if isinstance(model, str)
                       else None)


def _level(name: str, b: int, bench: Mapping[str, Any]
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    m = bench["metrics"]
    conc, rate = _load(name, b, bench)
    totals = m.get("request_totals") if isinstance(m.get("request_totals"), Mapping) else {}
    done = int(record.check_measurement(name, f"key benchmarks[{b}].metrics.request_totals",
                                        "successful", totals.get("successful")) or 0)
    errors = int(record.number(totals.get("errored")) or 0)
    incomplete = int(record.number(totals.get("incomplete")) or 0)
    duration = record.check_measurement(name, f"key benchmarks[{b}]", "duration",
                                        bench.get("duration"))
    if not duration:
        raise bad(name, f"key benchmarks[{b}].duration", "must be a number > 0")
    outputs = _total(name, b, m, "output_token_count")
    inputs = _total(name, b, m, "prompt_token_count")
    lv = record.level(
        b, concurrency=conc, requests=done + errors + incomplete, completed=done,
        errors=errors, duration_s=duration, rate=rate, max_concurrency=conc or None,
        output_tokens=int(outputs) if outputs is not None else None,
        output_tok_s=_total(name, b, m, "output_tokens_per_second", "mean"),
        request_throughput=_total(name, b, m, "requests_per_second", "mean"),
        input_tokens=int(inputs) if inputs is not None else None,
        total_tok_s=_total(name, b, m, "tokens_per_second", "mean"),
        concurrency_mean=_total(name, b, m, "request_concurrency", "mean"),
        ttft_ms=_succ(name, b, m, "time_to_first_token_ms"),
        tpot_ms=_succ(name, b, m, "inter_token_latency_ms"),
        e2e_ms=_succ(name, b, m, "request_latency", 1000.0),
        ttfat_ms=_succ(name, b, m, "time_to_first_output_token_ms"),
        imported={"source": TOOL, "file": name, "benchmark": b, "definitions_of": "guidellm",
                  "strategy": dig(bench, "config", "strategy"),
                  "time_per_output_token_ms": _succ(name, b, m, "time_per_output_token_ms"),
                  "inter_token_latency_ms": _succ(name, b, m, "inter_token_latency_ms")})
    if incomplete:
        lv["status"] = "partial"
    reqs = []
    start0 = record.number(dig(bench, "start_time"))
    groups = bench.get("requests") if isinstance(bench.get("requests"), Mapping) else {}
    i = 0
    for status in ("successful", "errored", "incomplete"):
        items = groups.get(status) or []  # type: ignore[union-attr]
        if not isinstance(items, list):
            raise bad(name, f"key benchmarks[{b}].requests.{status}", "must be a list")
        for j, r in enumerate(items):
            if not isinstance(r, Mapping):
                raise bad(name, f"key benchmarks[{b}].requests.{status}[{j}]", "not an object")
            where = f"key benchmarks[{b}].requests.{status}[{j}]"
            ttft = record.check_measurement(name, where, "time_to_first_token_ms",
                                            r.get("time_to_first_token_ms"))
            lat = record.check_measurement(name, where, "request_latency",
                                           r.get("request_latency"))
            start = record.number(r.get("request_start_time"))
            outs = record.number(r.get("output_tokens"))
            ins = record.number(r.get("prompt_tokens"))
            ok = status == "successful"
            row = record.request(
                b, i, ok=ok, start_s=(round(start - start0, 6) if start is not None
                                      and start0 is not None else None),
                ttft_s=None if ttft is None or not ok else ttft / 1000.0,
                e2e_s=lat if ok else None,
                output_tokens=int(outs) if outs is not None else None,
                prompt_tokens=int(ins) if ins is not None else None,
                token_source="usage" if dig(r, "output_metrics", "total_tokens") is not None
                else "iterations",
                error=None if ok else str(dig(r, "info", "error") or status)[:500])
            itl = record.number(r.get("inter_token_latency_ms"))
            if itl is not None:
                row["tpot_s"] = itl / 1000.0
            reqs.append(row)
            i += 1
    return lv, reqs
