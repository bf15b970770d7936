"""SGLang ``bench_serving`` result lines: our runs written in its format, and its results read
into the store as runs, so both sit in one compare view (``dsv4tui runs export ID --format
bench-serving``, ``dsv4tui runs import FILE``).

bench_serving appends one JSON object per benchmark to its ``--output-file``
(sglang ``python/sglang/benchmark/metrics.py`` ``save_results``: its arguments
``backend, dataset_name, request_rate, max_concurrency, sharegpt_output_len,
random_input_len, random_output_len, random_range_ratio``, then ``duration`` and every field
of ``BenchmarkMetrics``: ``completed, total_input, total_output, total_output_retokenized,
request_throughput, input_throughput, output_throughput, output_throughput_retokenized,
total_throughput, total_throughput_retokenized, {mean,median,std,p99}_ttft_ms,
{mean,median,std,p99}_tpot_ms, {mean,median,std,p95,p99,max}_itl_ms,
{mean,median,std,p99}_e2e_latency_ms, concurrency, accept_length``; older versions wrote
``total_input_tokens`` / ``total_output_tokens``). One line per level: a closed-loop C is
bench_serving's ``--request-rate inf --max-concurrency C``; a rate level its
``--request-rate R`` (``--max-concurrency`` the cap).

The numbers we write are ours under their names (docs/metrics.md has the side-by-side): our
TTFT counts the first reasoning token too, our ITL is per token (theirs per chunk: equal when
each chunk is one token), input tokens are the server's ``usage`` (theirs: their tokenizer's
count of the prompt), and we never re-tokenize (``*_retokenized`` are null). A ``dsv4tui`` key
per line keeps what their format has no place for (n, errors, the run, and what served it:
``simulated``, backend, checkpoint), so an export read back keeps every shared number equal
and a simulated run stays marked simulated (SIM) when imported. Their ``server_info`` (the
server's ``/server_info``, which bench_serving 0.5.2x keeps in each line) is what the run's
server said it ran: written from the run's server facts, and read back into them (source
``imported``: backend, checkpoint, version, server args). vLLM's ``request_goodput`` and
``*_e2el_ms`` are read too, and ``request_goodput`` is written when the run had goodput targets.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsv4tui.agent.bench import stats
from dsv4tui.core.errors import EXIT_CONFIG, UserError
from dsv4tui.core.imports.record import Imported

if TYPE_CHECKING:
    from dsv4tui.core.imports.record import ImportedRun
    from dsv4tui.core.store.models import Run
    from dsv4tui.core.store.runstore import RunStore

SOURCE = "sglang bench_serving"
DEFINITIONS = ("bench_serving's definitions: TTFT to the first chunk with content, ITL per "
               "chunk, TPOT = (latency - TTFT) / (output tokens - 1), output tokens from usage "
               "else the requested length, input tokens from its tokenizer (docs/metrics.md)")

# (our summary key, their stem) for mean / median / p99 (+ std from the requests)
_SUMMARIES = (("ttft_ms", "ttft_ms"), ("tpot_ms", "tpot_ms"), ("itl_ms", "itl_ms"),
              ("e2e_ms", "e2e_latency_ms"))
# the numbers both sides define alike: an export read back keeps these equal
SHARED = ("completed", "duration_s", "output_tokens", "output_tok_s", "request_throughput",
          "input_tokens", "total_tok_s", "concurrency_mean", "ttft_ms.mean", "ttft_ms.p50",
          "ttft_ms.p99", "tpot_ms.mean", "tpot_ms.p50", "tpot_ms.p99", "itl_ms.mean",
          "itl_ms.p50", "itl_ms.p99", "e2e_ms.mean", "e2e_ms.p50", "e2e_ms.p99")


def shared_values(level: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`SHARED` numbers of a level's stats (``a.b``: key b of summary a)."""
    out: dict[str, Any] = {}
    for key in SHARED:
        top, _, sub = key.partition(".")
        v = level.get(top)
        out[key] = (v.get(sub) if isinstance(v, Mapping) else None) if sub else v
    return out


# --- export ---------------------------------------------------------------------------------

def _ms(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _request_series(reqs: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    ok = [r for r in reqs if r.get("ok")]
    itl: list[float] = []
    tpots: list[float] = []
    for r in ok:
        gaps = r.get("chunk_gaps_ms") or []
        n = int(r.get("output_tokens") or 0)
        itl.extend(stats.itl_values(gaps, int(r.get("chunks") or len(gaps) + 1), n))
        t = stats.tpot(r.get("e2e_s"), r.get("ttft_s"), n)
        if t is not None:
            tpots.append(t * 1000.0)
    return {"ttft_ms": _ms([None if r.get("ttft_s") is None else r["ttft_s"] * 1000.0
                            for r in ok]),
            "tpot_ms": tpots, "itl_ms": itl,
            "e2e_ms": _ms([None if r.get("e2e_s") is None else r["e2e_s"] * 1000.0
                           for r in ok])}


def level_line(run: Run, level: Mapping[str, Any], reqs: Sequence[Mapping[str, Any]],
               server_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One level as a bench_serving result line (a dict; JSON-encode it); ``server_info``:
    what the run's server said it ran (its args and ``version``), where bench_serving keeps
    the server's ``/server_info``."""
    plan = run.plan or {}
    info = plan.get("dataset_info") or {}
    rate = level.get("rate")
    closed = not isinstance(rate, (int, float)) or rate <= 0
    conc = int(level.get("concurrency") or 0)
    dataset = None
    if plan.get("dataset_prompts") or info:
        dataset = "sharegpt" if info.get("format") == "sharegpt" else "custom"
    series = _request_series(reqs)
    out: dict[str, Any] = {
        "backend": "dsv4tui", "dataset_name": dataset or "random",
        "request_rate": math.inf if closed else float(rate),  # type: ignore[arg-type]
        "max_concurrency": conc if closed else (level.get("max_concurrency") or None),
        # bench_serving's None: each entry's length from its answer (ours too, unless
        # --output-len replaced them: then every entry has none and the plan's applies)
        "sharegpt_output_len": plan.get("output_len") if dataset == "sharegpt" and not any(
            isinstance(e, (list, tuple)) and len(e) > 1 and e[1]
            for e in plan.get("dataset_prompts") or []) else None,
        "random_input_len": plan.get("input_len"), "random_output_len": plan.get("output_len"),
        "random_range_ratio": plan.get("random_range_ratio", 1.0),
        "server_info": dict(server_info) if server_info else None,
        "duration": level.get("duration_s"), "completed": level.get("completed"),
        "total_input": level.get("input_tokens"), "total_output": level.get("output_tokens"),
        "total_output_retokenized": None,
        "request_throughput": level.get("request_throughput"),
        "input_throughput": _div(level.get("input_tokens"), level.get("duration_s")),
        "output_throughput": level.get("output_tok_s"), "output_throughput_retokenized": None,
        "total_throughput": level.get("total_tok_s"), "total_throughput_retokenized": None,
    }
    for ours, theirs in _SUMMARIES:
        summary = level.get(ours) if isinstance(level.get(ours), Mapping) else {}
        out[f"mean_{theirs}"] = summary.get("mean")  # type: ignore[union-attr]
        out[f"median_{theirs}"] = summary.get("p50")  # type: ignore[union-attr]
        out[f"std_{theirs}"] = _round(stats.std(series[ours]))
        if ours == "itl_ms":
            vals = sorted(series[ours])
            out["p95_itl_ms"] = _round(stats.percentile(vals, 95)) if vals else None
        out[f"p99_{theirs}"] = summary.get("p99")  # type: ignore[union-attr]
        if ours == "itl_ms":
            out["max_itl_ms"] = _round(max(series[ours])) if series[ours] else None
    out["concurrency"] = level.get("concurrency_mean")
    out["accept_length"] = None
    out["total_input_tokens"] = out["total_input"]  # the names older versions wrote
    out["total_output_tokens"] = out["total_output"]
    good = level.get("goodput") if isinstance(level.get("goodput"), Mapping) else None
    if good:
        out["request_goodput"] = good.get("rate")  # type: ignore[union-attr]
    out["dsv4tui"] = {"run_id": run.id, "label": run.label, "level": level.get("level"),
                      "concurrency": conc, "rate": None if closed else rate,
                      "requests": level.get("requests"), "errors": level.get("errors"),
                      "token_count_source": level.get("token_count_source"),
                      "goodput": good, "seed": level.get("seed"),
                      # what served it: a simulated run read back is still simulated
                      "simulated": bool(run.simulated), "backend": run.backend,
                      "checkpoint": run.checkpoint,
                      "definitions": "dsv4tui (docs/metrics.md)"}
    return out


def export_run(store: RunStore, run: Run) -> str:
    """Every level of a run, one bench_serving line each."""
    from dsv4tui.core.campaign.compare import run_server_facts

    facts = run_server_facts(store, [run.id]).get(run.id) or {}
    info = dict(facts.get("args") or {})
    if info and facts.get("sglang_version"):
        info["version"] = facts["sglang_version"]
    lines = []
    for lv in store.levels(run.id):
        reqs = store.requests(run.id, lv.idx)
        lines.append(json.dumps(level_line(run, lv.to_dict(), reqs, info or None)))
    if not lines:
        raise UserError(f"run {run.id} has no levels to export", EXIT_CONFIG)
    return "\n".join(lines) + "\n"


def _div(a: Any, b: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not b:
        return None
    return round(a / b, 4)


def _round(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


# --- import ---------------------------------------------------------------------------------

def _num(obj: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        v = obj.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def _count(obj: Mapping[str, Any], *keys: str) -> int | None:
    v = _num(obj, *keys)
    return None if v is None else int(v)


def _not_a_measurement(key: str, v: Any) -> bool:
    """A number below zero, or NaN (request_rate may be Infinity: bench_serving's 'all at
    once')."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    if math.isnan(v) or (math.isinf(v) and key != "request_rate"):
        return True
    return v < 0


# A latency a hair below zero is bench_serving's own float arithmetic, not a measurement: its
# TPOT is (latency - TTFT) / (tokens - 1) with the latency read when the last chunk arrived
# and TTFT after that chunk was parsed, so when every token comes in one chunk (a server that
# does not stream) TPOT is minus the parse time, e.g. -0.00016 ms. Below zero by less than
# TINY_NEGATIVE_MS, or by less than TINY_NEGATIVE_SHARE of the line's largest latency, reads
# as 0 (with a note); anything further below zero is refused.
TINY_NEGATIVE_MS = 1e-3
TINY_NEGATIVE_SHARE = 1e-5


def _tiny_negatives(obj: Mapping[str, Any]) -> dict[str, float]:
    """The ``*_ms`` keys of a line a hair below zero (see TINY_NEGATIVE_MS) and their values."""
    ms = {k: float(v) for k, v in obj.items() if k.endswith("_ms") and isinstance(v, (int, float))
          and not isinstance(v, bool) and math.isfinite(v)}
    limit = max(TINY_NEGATIVE_MS, TINY_NEGATIVE_SHARE * max(ms.values(), default=0.0))
    return {k: v for k, v in ms.items() if -limit < v < 0}


def read_as_zero_note(name: str, no: int, values: Mapping[str, float]) -> str:
    """The note an import keeps for the latencies it read as 0."""
    shown = ", ".join(f"{k} {v:.2g}" for k, v in sorted(values.items()))
    return (f"{name} line {no}: {shown} read as 0 (bench_serving's float arithmetic when a "
            "request's tokens all arrived in one chunk: TTFT = E2E, the answer was not "
            "streamed)")


def parse_lines(text: str, name: str) -> list[tuple[int, dict[str, Any], dict[str, float]]]:
    """(line number, object, the tiny negative latencies read as 0: key -> value as written)
    of every result line; UserError (one line) naming the line."""
    out = []
    from dsv4tui.core.imports.record import json_lines  # here: core.imports imports this module

    for no, obj in json_lines(text, name):
        if not isinstance(obj, dict):
            raise UserError(f"runs import: {name} line {no}: not a JSON object", EXIT_CONFIG)
        if _count(obj, "completed") is None or _num(obj, "duration") is None:
            raise UserError(f"runs import: {name} line {no}: not a bench_serving result (no "
                            "completed / duration)", EXIT_CONFIG)
        if (_num(obj, "duration") or 0.0) <= 0:
            raise UserError(f"runs import: {name} line {no}: duration must be > 0",
                            EXIT_CONFIG)
        tiny = _tiny_negatives(obj)
        bad = sorted(k for k, v in obj.items() if _not_a_measurement(k, v) and k not in tiny)
        if bad:  # a count, a time or a throughput below zero (or NaN) is not a measurement
            raise UserError(f"runs import: {name} line {no}: {', '.join(bad[:4])} "
                            "must be numbers >= 0", EXIT_CONFIG)
        obj.update(dict.fromkeys(tiny, 0.0))
        out.append((no, obj, tiny))
    if not out:
        raise UserError(f"runs import: {name}: no result lines", EXIT_CONFIG)
    return out


def level_from_line(obj: Mapping[str, Any], idx: int, name: str, no: int,
                    read_as_zero: Mapping[str, float] | None = None) -> dict[str, Any]:
    """A level's stats (the agent's ``level`` event shape) from one result line
    (``read_as_zero``: the tiny negative latencies :func:`parse_lines` read as 0)."""
    ours = obj.get("dsv4tui") if isinstance(obj.get("dsv4tui"), Mapping) else {}
    rate = _num(obj, "request_rate")  # inf (closed loop) reads as None
    completed = _count(obj, "completed") or 0
    failed = _count(obj, "failed") or 0
    duration = _num(obj, "duration")
    cap = _count(obj, "max_concurrency")
    conc = _count(ours, "concurrency")  # type: ignore[arg-type]
    if conc is None:
        conc = cap if cap is not None else (0 if rate is not None else completed + failed)
    requests = _count(ours, "requests") or completed + failed  # type: ignore[arg-type]
    errors = _count(ours, "errors")  # type: ignore[arg-type]
    errors = failed if errors is None else errors
    level: dict[str, Any] = {
        "level": idx, "concurrency": conc, "requests": requests, "completed": completed,
        "errors": errors, "errors_by_kind": {"imported": errors} if errors else {},
        "not_run": max(requests - completed - errors, 0), "short_outputs": 0,
        "short_min_tokens": None, "duration_s": duration,
        "output_tokens": _count(obj, "total_output", "total_output_tokens"),
        "output_tok_s": _num(obj, "output_throughput"),
        "per_request_tok_s_mean": None,
        "request_throughput": _num(obj, "request_throughput"),
        "input_tokens": _count(obj, "total_input", "total_input_tokens"),
        "total_tok_s": _num(obj, "total_throughput", "total_token_throughput"),
        "concurrency_mean": _num(obj, "concurrency"),
        "token_count_source": (ours.get("token_count_source")  # type: ignore[union-attr]
                               or "imported"),
        "rate": rate, "kind": "closed" if rate is None else "rate",
        "max_concurrency": cap if rate is not None else None,
        "status": "done" if not errors else "partial", "partial": False, "reason": None,
        "failure": None, "busy": False,
        "imported": {"source": SOURCE, "file": name, "line": no, "definitions": DEFINITIONS,
                     "backend": obj.get("backend"), "dataset_name": obj.get("dataset_name"),
                     "read_as_zero": dict(read_as_zero or {})},
    }
    for key, stem, alt in (("ttft_ms", "ttft_ms", None), ("tpot_ms", "tpot_ms", None),
                           ("itl_ms", "itl_ms", None), ("e2e_ms", "e2e_latency_ms", "e2el_ms")):
        def pick(stat: str, stem: str = stem, alt: str | None = alt) -> float | None:
            return _num(obj, f"{stat}_{stem}", *((f"{stat}_{alt}",) if alt else ()))

        level[key] = {"mean": pick("mean"), "p50": pick("median"), "p90": pick("p90"),
                      "p99": pick("p99")}
    level["ttfat_ms"] = {"mean": None, "p50": None, "p90": None, "p99": None}
    inputs = level["input_tokens"]
    level["input_tokens_mean"] = round(inputs / completed, 2) if inputs and completed else None
    good_rate = _num(obj, "request_goodput")
    if isinstance(ours.get("goodput"), Mapping):  # type: ignore[union-attr]
        level["goodput"] = dict(ours["goodput"])  # type: ignore[index]
    elif good_rate is not None and duration:
        good = round(good_rate * duration)
        level["goodput"] = {"targets": None, "good": good, "requests": requests,
                            "share": round(good / requests, 4) if requests else None,
                            "rate": good_rate}
    return level


def server_info_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The server's ``/server_info`` that bench_serving (0.5.2x) keeps in a result line
    (``server_info``; a PD-disaggregated server's decode side, as bench_serving reads it)."""
    info = obj.get("server_info")
    if isinstance(info, Mapping) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    return dict(info) if isinstance(info, Mapping) and info else None


def _server_meta(lines: Sequence[tuple[int, Mapping[str, Any], Any]], name: str
                 ) -> tuple[dict[str, Any] | None, list[str]]:
    """What the lines' ``server_info`` says served them (the agent's ``describe`` fields,
    source ``imported``) and notes; UserError when the lines name different servers (one run
    is one server: a file bench_serving appended to across launches is imported per server)."""
    from dsv4tui.agent.host.target import from_server_info
    from dsv4tui.core.campaign.compare import server_args_differences

    metas = {no: from_server_info(info) for no, obj, _ in lines
             if (info := server_info_of(obj)) is not None}
    if not metas:
        return None, []
    diffs = server_args_differences({no: {"args": m["server_args"],
                                          "sglang_version": m["sglang_version"]}
                                     for no, m in metas.items()}, limit=3)
    if diffs:
        raise UserError(f"runs import: {name}: its lines come from different servers "
                        f"({'; '.join(diffs)}; # is the line): import each server's lines "
                        "as a file of their own", EXIT_CONFIG)
    meta = dict(next(iter(metas.values())), source="imported")
    missing = [no for no, _, _ in lines if no not in metas]
    notes = [f"{name} line{'s' if len(missing) > 1 else ''} "
             f"{', '.join(str(n) for n in missing)}: no server_info (its server facts are "
             "the other lines')"] if missing else []
    return meta, notes


def import_file(store: RunStore, path: str, label: str | None = None) -> Imported:
    """Read a bench_serving result file into the store as one run (marked imported, its
    definitions noted, what its ``server_info`` says served it kept as the run's server facts,
    source ``imported``), in one transaction; returns the run id, its levels and the notes
    the import made. ``runs import`` reads every tool's files through
    :func:`dsv4tui.core.imports.import_file`, which sniffs and comes here for these."""
    from dsv4tui.core.imports import record

    return record.save(store, parse_file(record.read_text(path), path), label)


def parse_file(text: str, path: str) -> ImportedRun:
    """A bench_serving result file as an :class:`ImportedRun` (nothing stored yet)."""
    from dsv4tui.core.imports.record import ImportedRun

    name = os.path.basename(path) or path
    lines = parse_lines(text, name)
    levels = [level_from_line(obj, i, name, no, tiny)
              for i, (no, obj, tiny) in enumerate(lines)]
    server, notes = _server_meta(lines, name)
    notes = [read_as_zero_note(name, no, tiny) for no, _, tiny in lines if tiny] + notes
    first = lines[0][1]
    ours = first.get("dsv4tui") if isinstance(first.get("dsv4tui"), Mapping) else {}
    label = (ours.get("label") if ours else None) or os.path.splitext(name)[0]
    goodputs = [lv["goodput"].get("targets") for lv in levels
                if isinstance(lv.get("goodput"), Mapping) and lv["goodput"].get("targets")]
    plan = {"imported": {"source": SOURCE, "file": os.path.abspath(path), "lines": len(lines),
                         "definitions": DEFINITIONS, "backend": first.get("backend"),
                         "server_info": server is not None, "notes": notes},
            "input_len": first.get("random_input_len"),
            "output_len": first.get("random_output_len"),
            "random_range_ratio": first.get("random_range_ratio"),
            "levels": [[lv["concurrency"], lv["requests"]] for lv in levels
                       if lv["rate"] is None],
            "rates": [[lv["rate"], lv["requests"]] for lv in levels if lv["rate"] is not None],
            "max_concurrency": first.get("max_concurrency") if first.get("request_rate")
            not in (None, math.inf) else None,
            "goodput": goodputs[0] if goodputs else None}
    # our own export says what served it (the "dsv4tui" key), bench_serving's the server's
    # /server_info: any simulated line makes the run simulated, so simulated numbers never
    # read as a real server's
    marks = [obj.get("dsv4tui") for _, obj, _ in lines]
    ours_all = [m for m in marks if isinstance(m, Mapping)]
    simulated = any(m.get("simulated") is True for m in ours_all) or bool(
        server and server["simulated"])
    srv = server or {}
    backend = ours.get("backend") if ours and isinstance(ours.get("backend"), str) else \
        srv.get("backend")
    checkpoint = (ours.get("checkpoint") if ours and isinstance(ours.get("checkpoint"), str)
                  else srv.get("checkpoint"))
    info = server_info_of(first) or {}
    model = (first.get("model_id") or first.get("model") or info.get("served_model_name")
             or srv.get("model_path"))
    # our own export read back keeps our definitions (its numbers are ours)
    whose = "dsv4tui" if ours_all and first.get("backend") == "dsv4tui" else "sglang bench_serving"
    return ImportedRun(
        tool=SOURCE, version=None, definitions=whose, path=path, label=str(label),
        levels=levels, plan=plan, notes=notes,
        model=model if isinstance(model, str) else None, backend=backend,
        checkpoint=checkpoint, server_version=srv.get("sglang_version"),
        simulated=simulated, profile_name="bench_serving", server=server,
        note=f"imported from {name} ({SOURCE} result lines; their definitions: "
             "docs/metrics.md)")
