"""Serving metrics, one module (definitions: docs/metrics.md).

Works on plain request dicts (the agent's ``request`` events, or rows read back from the
store), so the agent and the console compute the same numbers. Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

SUMMARY_KEYS = ("mean", "p50", "p90", "p99")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); values sorted."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def summarize(values: Iterable[Optional[float]], scale: float = 1.0, digits: int = 3
              ) -> Dict[str, Optional[float]]:
    """mean/p50/p90/p99 of the non-None values times ``scale``; all None when empty."""
    vals = sorted(v * scale for v in values if v is not None)
    if not vals:
        return {k: None for k in SUMMARY_KEYS}
    out = {"mean": sum(vals) / len(vals), "p50": percentile(vals, 50),
           "p90": percentile(vals, 90), "p99": percentile(vals, 99)}
    return {k: round(v, digits) for k, v in out.items()}


def chunk_gaps(token_times: Sequence[float]) -> List[float]:
    """Gaps between successive token-carrying chunks (seconds)."""
    return [token_times[i + 1] - token_times[i] for i in range(len(token_times) - 1)]


def itl_values(gaps: Sequence[float], chunks: int, output_tokens: int) -> List[float]:
    """Per-token inter-token latencies: each chunk gap divided by the tokens it carried.

    Without per-chunk token counts the tokens after the first chunk are spread evenly over the
    gaps: (output_tokens - 1) / (chunks - 1) tokens per gap (1 for one token per chunk).
    """
    if not gaps:
        return []
    if chunks >= 2 and output_tokens >= 2 and output_tokens != chunks:
        factor = (chunks - 1) / (output_tokens - 1)
        return [g * factor for g in gaps]
    return list(gaps)


def tpot(e2e: Optional[float], ttft: Optional[float], output_tokens: int) -> Optional[float]:
    """Time per output token after the first: (e2e - TTFT) / (n - 1); None for n < 2."""
    if e2e is None or ttft is None or output_tokens < 2:
        return None
    return (e2e - ttft) / (output_tokens - 1)


def request_metrics(t_send: float, token_times: Sequence[float], first_answer_t: Optional[float],
                    t_end: float, output_tokens: int) -> Dict[str, Any]:
    """Per-request numbers from perf_counter timestamps (seconds, relative to the send)."""
    ttft = token_times[0] - t_send if token_times else None
    e2e = t_end - t_send
    per_token = tpot(e2e, ttft, output_tokens)
    gaps = chunk_gaps(token_times)
    itl = sorted(itl_values(gaps, len(token_times), output_tokens))
    return {
        "ttft_s": _r(ttft), "ttfat_s": _r(first_answer_t - t_send if first_answer_t else None),
        "e2e_s": _r(e2e), "tpot_s": _r(per_token),
        "decode_tok_s": _r(1.0 / per_token if per_token else None, 3),
        "chunks": len(token_times),
        "itl_ms": _itl_summary(itl),
        "chunk_gaps_ms": [round(g * 1000.0, 3) for g in gaps],
    }


def _itl_summary(itl_sorted: List[float]) -> Dict[str, Optional[float]]:
    out = summarize(itl_sorted, 1000.0)
    out["max"] = round(itl_sorted[-1] * 1000.0, 3) if itl_sorted else None
    return out


def _r(v: Optional[float], digits: int = 6) -> Optional[float]:
    return None if v is None else round(v, digits)


def _token_source(requests: Sequence[Mapping[str, Any]]) -> Optional[str]:
    sources = {r.get("token_source") for r in requests}
    if not sources:
        return None
    return sources.pop() if len(sources) == 1 else "mixed"


def level_metrics(requests: Sequence[Mapping[str, Any]], concurrency: int,
                  planned: Optional[int] = None) -> Dict[str, Any]:
    """Aggregate one level (C, n) from its request dicts (warm-ups excluded by the caller).

    Each dict needs: ok, start_s, e2e_s, ttft_s, output_tokens, token_source; optional
    ttfat_s, chunks, chunk_gaps_ms, error_kind, short_output (an ok request that produced
    fewer tokens than planned while ignore_eos was in force).
    """
    done = [r for r in requests if r.get("ok")]
    failed = [r for r in requests if not r.get("ok")]
    spans = [(r["start_s"], r["start_s"] + (r.get("e2e_s") or 0.0)) for r in requests
             if r.get("start_s") is not None]
    duration = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0
    tokens = sum(int(r.get("output_tokens") or 0) for r in done)
    tpots = [tpot(r.get("e2e_s"), r.get("ttft_s"), int(r.get("output_tokens") or 0))
             for r in done]
    itl: List[float] = []
    for r in done:
        gaps = r.get("chunk_gaps_ms") or []
        itl.extend(itl_values(gaps, int(r.get("chunks") or len(gaps) + 1),
                              int(r.get("output_tokens") or 0)))
    kinds: Dict[str, int] = {}
    for r in failed:
        kind = str(r.get("error_kind") or "unknown")
        kinds[kind] = kinds.get(kind, 0) + 1
    decode = [1.0 / t for t in tpots if t]
    short = [int(r.get("output_tokens") or 0) for r in done if r.get("short_output")]
    n = planned if planned is not None else len(requests)
    prompt = [r.get("prompt_tokens") for r in done]
    input_tokens = (sum(int(p) for p in prompt if p is not None)
                    if done and all(p is not None for p in prompt) else None)
    e2e_sum = sum(float(r.get("e2e_s") or 0.0) for r in done)
    return {
        "concurrency": concurrency,
        "requests": n,
        "completed": len(done),
        "errors": len(failed),
        "errors_by_kind": kinds,
        "not_run": max(n - len(requests), 0),
        "short_outputs": len(short),
        "short_min_tokens": min(short) if short else None,
        "duration_s": round(duration, 4),
        "output_tokens": tokens,
        "output_tok_s": round(tokens / duration, 3) if duration > 0 else None,
        "request_throughput": round(len(done) / duration, 4) if duration > 0 else None,
        "input_tokens": input_tokens,
        "total_tok_s": (round((input_tokens + tokens) / duration, 3)
                        if duration > 0 and input_tokens is not None else None),
        "concurrency_mean": round(e2e_sum / duration, 3) if duration > 0 and done else None,
        "per_request_tok_s_mean": round(sum(decode) / len(decode), 3) if decode else None,
        "ttft_ms": summarize((r.get("ttft_s") for r in done), 1000.0),
        "ttfat_ms": summarize((r.get("ttfat_s") for r in done), 1000.0),
        "tpot_ms": summarize(tpots, 1000.0),
        "itl_ms": summarize(itl),
        "e2e_ms": summarize((r.get("e2e_s") for r in done), 1000.0),
        "input_tokens_mean": _mean(r.get("prompt_tokens") for r in done),
        "token_count_source": _token_source(done),
    }


def goodput(requests: Sequence[Mapping[str, Any]], targets: Optional[Mapping[str, float]],
            duration_s: Optional[float]) -> Optional[Dict[str, Any]]:
    """Requests that met every target (``ttft_ms``, ``tpot_ms``, ``e2el_ms``; any subset), as
    vLLM's ``bench serve --goodput`` counts them: an ok request is good when its TTFT, TPOT
    (0 for a 1-token answer) and E2E are each <= their target. ``share``: good / requests that
    ran (a failed request meets no target); ``rate``: good / the level's duration (vLLM's
    ``request_goodput``). None without targets."""
    if not targets:
        return None
    ran = list(requests)
    good = 0
    for r in ran:
        if not r.get("ok"):
            continue
        ttft = r.get("ttft_s")
        e2e = r.get("e2e_s")
        per = tpot(e2e, ttft, int(r.get("output_tokens") or 0)) or 0.0
        values = {"ttft_ms": ttft, "tpot_ms": per, "e2el_ms": e2e}
        if all(values[k] is not None and values[k] * 1000.0 <= float(t)  # type: ignore[operator]
               for k, t in targets.items()):
            good += 1
    return {"targets": dict(targets), "good": good, "requests": len(ran),
            "share": round(good / len(ran), 4) if ran else None,
            "rate": round(good / duration_s, 4) if duration_s else None}


def std(values: Iterable[Optional[float]], scale: float = 1.0) -> Optional[float]:
    """Population standard deviation (numpy's default, bench_serving's ``std_*``)."""
    vals = [v * scale for v in values if v is not None]
    if not vals:
        return None
    mean = sum(vals) / len(vals)
    return math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))


def _mean(values: Iterable[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return round(sum(vals) / len(vals), 2) if vals else None


# The level keys `dsv4tui sweep --json` prints, in order (the public shape).
LEVEL_JSON_KEYS = ("concurrency", "requests", "completed", "errors", "duration_s",
                   "output_tokens", "output_tok_s", "per_request_tok_s_mean", "ttft_ms",
                   "tpot_ms", "itl_ms", "e2e_ms", "token_count_source", "rate",
                   "request_throughput", "goodput", "saturation")


def level_json(level: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: level.get(k) for k in LEVEL_JSON_KEYS}
