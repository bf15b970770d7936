"""A serving engine's Prometheus ``/metrics``: fetch, parse, and reduce to the numbers we use.

The exposition text is parsed with prometheus_client's own parser
(``prometheus_client.parser.text_string_to_metric_families``), never with a regex per
metric. Series are then reduced deliberately, because their labels vary between SGLang
versions and launch modes (``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``,
``dp_rank``, ``priority`` ...):

- ranks that hold the *same* requests (``tp_rank``, ``pp_rank`` and the other replica labels
  in :data:`REPLICA_LABELS`: with ``--enable-metrics-for-all-schedulers`` every TP rank
  reports the same batch) are collapsed by taking their maximum;
- what is left (one series per DP group, priority class, model ...) holds *different*
  requests and is summed (request counts, throughput) or maxed (usage ratios).

SGLang updates its scheduler gauges when it logs a prefill or decode batch, and every 30 s
when idle: right after traffic they can be stale. The idle check (``agent/idle.py``) sends a
1-token probe first, whose prefill refreshes them.

    scrape("http://127.0.0.1:30000") -> {"ok": True, "running": 3.0, "queued": 0.0, ...}

Python >= 3.9; stdlib + prometheus_client (bundled with the agent).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterable, List, Optional, Tuple

Samples = Dict[str, List[Tuple[Dict[str, str], float]]]

# Labels naming a replica of the same requests (collapsed with max before summing).
REPLICA_LABELS = ("tp_rank", "pp_rank", "attn_tp_rank", "attn_cp_rank", "moe_ep_rank",
                  "ep_rank", "cp_rank")

# What we read, per engine: (our name, sample names in order of preference, reduce).
METRICS: Tuple[Tuple[str, Tuple[str, ...], str], ...] = (
    ("running", ("sglang:num_running_reqs", "vllm:num_requests_running"), "sum"),
    ("queued", ("sglang:num_queue_reqs", "vllm:num_requests_waiting"), "sum"),
    ("gen_throughput", ("sglang:gen_throughput",), "sum"),
    ("token_usage", ("sglang:token_usage", "vllm:gpu_cache_usage_perc",
                     "vllm:kv_cache_usage_perc"), "max"),
    ("cache_hit_rate", ("sglang:cache_hit_rate",), "max"),
    ("generation_tokens_total", ("sglang:generation_tokens_total",
                                 "vllm:generation_tokens_total"), "sum"),
    ("prompt_tokens_total", ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total"), "sum"),
    ("requests_total", ("sglang:num_requests_total",), "sum"),
)
_MAX_BODY = 8 * 1024 * 1024


class MetricsError(ValueError):
    """The text is not the Prometheus exposition format."""


def parse(text: str) -> Samples:
    """Every sample of the exposition text, by sample name: ``{name: [(labels, value)]}``
    (counters keep their ``_total`` names, histograms their ``_bucket``/``_sum``/``_count``).
    Raises MetricsError on text the parser rejects."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out.setdefault(sample.name, []).append((dict(sample.labels),
                                                        float(sample.value)))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsError("not the Prometheus text format: %s" % (str(exc)[:160] or
                                                                   type(exc).__name__)) from None
    return out


def reduce_series(series: Iterable[Tuple[Dict[str, str], float]], how: str = "sum"
                  ) -> Optional[float]:
    """One number from a metric's series: replicas (same labels but the replica ranks)
    collapsed with max, then the groups summed (``how="sum"``) or maxed (``"max"``).
    None when there is no series (NaN values are skipped)."""
    groups: Dict[Tuple[Tuple[str, str], ...], float] = {}
    for labels, value in series:
        if value != value:  # NaN
            continue
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in REPLICA_LABELS))
        groups[key] = max(groups[key], value) if key in groups else value
    if not groups:
        return None
    return sum(groups.values()) if how == "sum" else max(groups.values())


def summarize(samples: Samples) -> Dict[str, Any]:
    """``engine`` (sglang / vllm / None) and each of :data:`METRICS` (None when absent),
    plus ``series``: how many series each number was reduced from."""
    out: Dict[str, Any] = {"engine": None}
    counts: Dict[str, int] = {}
    for key, names, how in METRICS:
        out[key] = None
        for name in names:
            if name in samples:
                out[key] = reduce_series(samples[name], how)
                counts[key] = len(samples[name])
                if out["engine"] is None:
                    out["engine"] = name.split(":", 1)[0]
                break
    out["series"] = counts
    return out


def fetch(base_url: str, api_key: Optional[str] = None, timeout: float = 5.0
          ) -> Tuple[int, str]:
    """GET ``base_url/metrics`` -> (status, body). No proxies (the server is on loopback).
    Raises OSError (URLError) when the server cannot be reached."""
    req = urllib.request.Request(base_url.rstrip("/") + "/metrics",
                                 headers={"Accept": "text/plain", "User-Agent": "dsv4tui-agent"})
    if api_key:
        req.add_header("Authorization", "Bearer " + api_key)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read(_MAX_BODY).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def scrape(base_url: str, api_key: Optional[str] = None, timeout: float = 5.0
           ) -> Dict[str, Any]:
    """Fetch and summarize a server's /metrics; never raises. Keys: ``ok``, ``status``
    (HTTP, 0 when unreachable), ``error`` (why not ok), ``time`` (host wall clock), and
    :func:`summarize`'s keys (all None when not ok)."""
    out: Dict[str, Any] = {"ok": False, "status": 0, "error": None, "time": time.time()}
    out.update({key: None for key, _, _ in METRICS}, engine=None, series={})
    try:
        status, body = fetch(base_url, api_key, timeout)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        out["error"] = "cannot reach %s/metrics: %s" % (base_url.rstrip("/"),
                                                        getattr(reason, "strerror", None)
                                                        or reason)
        return out
    out["status"] = status
    if status != 200:
        out["error"] = "/metrics answered HTTP %d (SGLang needs --enable-metrics)" % status
        return out
    try:
        summary = summarize(parse(body))
    except MetricsError as exc:
        out["error"] = "/metrics: %s" % exc
        return out
    out.update(summary)
    if summary["engine"] is None:
        out["error"] = "/metrics has none of the serving metrics we read"
        return out
    out["ok"] = True
    return out
