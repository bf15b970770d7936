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
when idle: right after traffic they can be stale. The idle check (``agent/bench/idle.py``) sends a
1-token probe first, whose prefill refreshes them.

    scrape("http://127.0.0.1:30000") -> {"ok": True, "running": 3.0, "queued": 0.0, ...}

Python >= 3.9; stdlib + prometheus_client (bundled with the agent).
"""

from __future__ import annotations

import math
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
    ("requests_total", ("sglang:num_requests_total",), "sum"),  # counted when they finish
    ("aborted_total", ("sglang:num_aborted_requests_total",), "sum"),  # cancelled ones
)
# Histograms (seconds), per engine: our name -> sample base names in order of preference.
HISTOGRAMS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("ttft", ("sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds")),
    ("itl", ("sglang:inter_token_latency_seconds", "vllm:inter_token_latency_seconds",
             "vllm:time_per_output_token_seconds")),
    ("e2e", ("sglang:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds")),
    ("queue", ("sglang:queue_time_seconds", "vllm:request_queue_time_seconds")),
)
# Gauges read when present (None otherwise).
EXTRA_GAUGES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("spec_accept_length", ("sglang:spec_accept_length",)),
)
# The values each number can take: (low, high) inclusive, None for no bound. A value outside
# (or NaN, +-Inf) is no measurement: it becomes None, and ``invalid`` says why.
BOUNDS: Dict[str, Tuple[Optional[float], Optional[float]]] = {
    "running": (0.0, None), "queued": (0.0, None), "gen_throughput": (0.0, None),
    "token_usage": (0.0, 1.0), "cache_hit_rate": (0.0, 1.0),
    "generation_tokens_total": (0.0, None), "prompt_tokens_total": (0.0, None),
    "requests_total": (0.0, None), "aborted_total": (0.0, None),
    "spec_accept_length": (0.0, None),
}
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


def invalid_reason(key: str, value: float) -> Optional[str]:
    """Why ``value`` cannot be what metric ``key`` says (None: it can): NaN, +-Inf, or
    outside :data:`BOUNDS` (a negative count, a usage ratio over 1)."""
    if value != value or value in (math.inf, -math.inf):
        return "%s is not a finite number" % value
    low, high = BOUNDS.get(key, (None, None))
    if low is not None and value < low:
        return "%g is below %g" % (value, low)
    if high is not None and value > high:
        return "%g is above %g" % (value, high)
    return None


def _checked(key: str, series: List[Tuple[Dict[str, str], float]], how: str,
             invalid: Dict[str, str]) -> Optional[float]:
    """:func:`reduce_series` of a metric whose every series must be a possible value:
    one impossible series makes the number None and its reason lands in ``invalid``."""
    for _, value in series:
        why = invalid_reason(key, value)
        if why is not None:
            invalid[key] = why
            return None
    got = reduce_series(series, how)
    if got is not None:
        why = invalid_reason(key, got)  # a sum can overflow
        if why is not None:
            invalid[key] = why
            return None
    return got


def summarize(samples: Samples) -> Dict[str, Any]:
    """``engine`` (sglang / vllm / None) and each of :data:`METRICS` (None when absent or
    impossible), ``series``: how many series each number was reduced from, and ``invalid``:
    {metric: why} for each number the server sent that cannot be (NaN, Inf, a negative
    count, a ratio over 1): those are None, never a number."""
    out: Dict[str, Any] = {"engine": None}
    counts: Dict[str, int] = {}
    invalid: Dict[str, str] = {}
    for key, names, how in METRICS:
        out[key] = None
        for name in names:
            if name in samples:
                out[key] = _checked(key, samples[name], how, invalid)
                counts[key] = len(samples[name])
                if out["engine"] is None:
                    out["engine"] = name.split(":", 1)[0]
                break
    out["series"] = counts
    out["invalid"] = invalid
    return out


def _group_key(labels: Dict[str, str], drop: Tuple[str, ...]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def reduce_histogram(samples: Samples, base: str) -> Optional[Dict[str, Any]]:
    """One histogram from a metric's series, reduced like :func:`reduce_series` (replica
    ranks collapsed with max, the rest summed), bucket by bucket: ``{"buckets": [[le,
    cumulative count], ...] (le ascending, +Inf last as None), "sum", "count"}``."""
    rows = samples.get(base + "_bucket")
    if not rows:
        return None
    per_le: Dict[float, Dict[Tuple[Tuple[str, str], ...], Dict[Tuple[Tuple[str, str], ...],
                                                                float]]] = {}
    for labels, value in rows:
        try:
            le = float(labels.get("le", "nan"))
        except ValueError:
            continue
        if le != le or value != value:  # NaN
            continue
        group = _group_key(labels, (*REPLICA_LABELS, "le"))
        replica = _group_key(labels, tuple(k for k in labels if k not in REPLICA_LABELS))
        per_le.setdefault(le, {}).setdefault(group, {})[replica] = value
    buckets: List[List[Any]] = []
    for le in sorted(per_le):
        total = float(sum(max(replicas.values()) for replicas in per_le[le].values()))
        if not math.isfinite(total) or total < 0:
            return None  # a count that cannot be: no histogram rather than a wrong one
        buckets.append([None if le == float("inf") else le, total])
    s_ = reduce_series(samples.get(base + "_sum") or [], "sum")
    c_ = reduce_series(samples.get(base + "_count") or [], "sum")
    s_ = s_ if s_ is not None and math.isfinite(s_) and s_ >= 0 else None
    c_ = c_ if c_ is not None and math.isfinite(c_) and c_ >= 0 else None
    return {"buckets": buckets, "sum": s_, "count": c_}


def details(samples: Samples, invalid: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """What a server panel and a level's server-side view need beyond :func:`summarize`:
    ``histograms`` (TTFT, ITL, E2E, queue time), extra gauges, and ``startup`` (seconds per
    phase from ``sglang:startup_time_seconds{phase=...}``). An impossible extra gauge is
    None, its reason added to ``invalid``."""
    invalid = {} if invalid is None else invalid
    hists: Dict[str, Any] = {}
    for key, names in HISTOGRAMS:
        for name in names:
            h = reduce_histogram(samples, name)
            if h is not None:
                hists[key] = h
                break
    out: Dict[str, Any] = {"histograms": hists}
    for key, names in EXTRA_GAUGES:
        out[key] = None
        for name in names:
            if name in samples:
                out[key] = _checked(key, samples[name], "max", invalid)
                break
    startup: Dict[str, float] = {}
    for labels, value in samples.get("sglang:startup_time_seconds") or []:
        if labels.get("phase") and math.isfinite(value) and value >= 0:
            startup[labels["phase"]] = max(value, startup.get(labels["phase"], 0.0))
    out["startup"] = startup
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


def scrape(base_url: str, api_key: Optional[str] = None, timeout: float = 5.0,
           full: bool = False) -> Dict[str, Any]:
    """Fetch and summarize a server's /metrics; never raises. Keys: ``ok``, ``status``
    (HTTP, 0 when unreachable), ``error`` (why not ok), ``time`` (host wall clock), and
    :func:`summarize`'s keys (all None when not ok); with ``full``, :func:`details`' too."""
    out: Dict[str, Any] = {"ok": False, "status": 0, "error": None, "time": time.time()}
    out.update({key: None for key, _, _ in METRICS}, engine=None, series={}, invalid={})
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
        samples = parse(body)
        summary = summarize(samples)
    except MetricsError as exc:
        out["error"] = "/metrics: %s" % exc
        return out
    out.update(summary)
    if full:
        out.update(details(samples, summary["invalid"]))
    if summary["engine"] is None:
        out["error"] = "/metrics has none of the serving metrics we read"
        return out
    out["ok"] = True
    return out


# -- reading histograms: quantiles over a window, a level's server-side view ------------------

def histogram_delta(new: Optional[Dict[str, Any]], old: Optional[Dict[str, Any]]
                    ) -> Optional[Dict[str, Any]]:
    """``new - old`` of one histogram (the requests observed between two scrapes); None
    when ``new`` is missing or the server restarted between them (counts went down)."""
    if not new:
        return None
    if not old:
        return {"buckets": [list(b) for b in new.get("buckets") or []],
                "sum": new.get("sum"), "count": new.get("count")}
    before = {_le(b[0]): float(b[1]) for b in old.get("buckets") or []}
    out: List[List[Any]] = []
    for le, count in new.get("buckets") or []:
        d = float(count) - before.get(_le(le), 0.0)
        if d < -1e-9:
            return None
        out.append([le, max(d, 0.0)])
    s0, s1 = old.get("sum"), new.get("sum")
    c0, c1 = old.get("count"), new.get("count")
    return {"buckets": out,
            "sum": None if s0 is None or s1 is None else float(s1) - float(s0),
            "count": None if c0 is None or c1 is None else float(c1) - float(c0)}


def _le(value: Any) -> float:
    return math.inf if value is None else float(value)


def quantile(hist: Optional[Dict[str, Any]], q: float) -> Optional[float]:
    """The q-quantile (0..1) of a histogram's observations, in its unit (seconds)."""
    if not hist:
        return None
    buckets = sorted(((_le(le), float(c)) for le, c in hist.get("buckets") or []),
                     key=lambda b: b[0])
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):  # beyond the last bound: all that can be said is "above it"
                return prev_le
            if count == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (count - prev_c)
        prev_le, prev_c = le, count
    return prev_le


def quantile_bucket(hist: Optional[Dict[str, Any]], q: float
                    ) -> Optional[Tuple[float, Optional[float]]]:
    """The bucket ``(lo, hi]`` the q-quantile falls in: all a histogram really knows
    (``hi`` None: above the last finite bound)."""
    if not hist:
        return None
    buckets = sorted(((_le(le), float(c)) for le, c in hist.get("buckets") or []),
                     key=lambda b: b[0])
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le = 0.0
    for le, count in buckets:
        if count >= rank and count > 0:
            return prev_le, None if math.isinf(le) else le
        prev_le = le
    return prev_le, None


def mean(hist: Optional[Dict[str, Any]]) -> Optional[float]:
    if not hist or not hist.get("count"):
        return None
    s = hist.get("sum")
    return None if s is None else float(s) / float(hist["count"])


def server_view(before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]],
                measured_s: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """What the server saw between two ``server_metrics`` samples (a sweep level's window):
    TTFT / ITL / E2E / queue time (ms: mean, p50, p99), requests finished, output tokens and
    their rate. None without two good samples (no /metrics, or the server restarted).

    ``measured_s``: the level's measured window (its ``duration_s``, first send -> last
    finish). The scrapes around a level also span what is not measured (its load workers
    starting, the queue sampler stopping: up to half a second and more), when none of its
    requests finishes; the server's counters move when a request finishes, so the tokens
    between the scrapes are the level's, and ``output_tok_s`` is them over the measured
    window (``window_s``); ``scrape_window_s`` is the time between the scrapes. Without it,
    the scrapes' span is the window."""
    if not before or not after or not before.get("ok") or not after.get("ok"):
        return None
    out: Dict[str, Any] = {"source": "metrics", "engine": after.get("engine"), "requests": None}
    hb, ha = before.get("histograms") or {}, after.get("histograms") or {}
    for key in ("ttft", "itl", "e2e", "queue"):
        d = histogram_delta(ha.get(key), hb.get(key))
        if d is None:
            out[f"{key}_ms"] = None
            continue
        vals = {"mean": mean(d), "p50": quantile(d, 0.5), "p99": quantile(d, 0.99)}
        view: Dict[str, Any] = {k: None if v is None else round(v * 1000.0, 3)
                                for k, v in vals.items()}
        for name, q in (("p50_bucket", 0.5), ("p99_bucket", 0.99)):
            b = quantile_bucket(d, q)
            view[name] = None if b is None else [
                round(b[0] * 1000.0, 3), None if b[1] is None else round(b[1] * 1000.0, 3)]
        out[f"{key}_ms"] = view
        if key == "e2e":
            out["requests"] = d.get("count")
    t0, t1 = before.get("time"), after.get("time")
    g0, g1 = before.get("generation_tokens_total"), after.get("generation_tokens_total")
    window = float(t1) - float(t0) if isinstance(t0, (int, float)) and \
        isinstance(t1, (int, float)) else None
    out["scrape_window_s"] = None if window is None else round(window, 3)
    if measured_s is not None and measured_s > 0:
        window = float(measured_s)
    out["window_s"] = None if window is None else round(window, 3)
    if g0 is not None and g1 is not None and float(g1) >= float(g0):
        out["output_tokens"] = float(g1) - float(g0)
        out["output_tok_s"] = (round(out["output_tokens"] / window, 3)
                               if window and window > 0 else None)
    else:
        out["output_tokens"] = out["output_tok_s"] = None
    return out



# -- ``metrics``: the server's numbers, streamed next to the telemetry ------------------------

def _target(args: Any) -> Tuple[Optional[str], str]:
    """Where to scrape now: ``--url``, else our server (it may be restarted between two
    ticks), else the host/port the console named. ``(url, what)``."""
    if args.url:
        return args.url, "url"
    from dsv4tui.agent.host import target

    ours = target.ours()
    if ours is not None:
        return str(ours["url"]), "ours"
    if args.port:
        from dsv4tui.agent.host import health

        probe = health.probe_host(args.host)
        host = "[%s]" % probe if ":" in probe else probe
        return "http://%s:%d" % (host, args.port), "port"
    return None, "none"


def run(args: Any) -> int:
    from dsv4tui.agent import protocol

    interval = max(float(args.interval), 0.2)
    sent = 0
    next_tick = time.monotonic()
    while args.count is None or sent < args.count:
        delay = next_tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        url, what = _target(args)
        if url is None:
            out: Dict[str, Any] = {"ok": False, "status": 0, "time": time.time(),
                                   "error": "no server to read: none started by dsv4tui "
                                            "and no port named"}
        else:
            out = scrape(url, timeout=min(5.0, max(interval * 2, 1.0)), full=True)
        protocol.emit("server_metrics", url=url, target=what, interval=interval, **out)
        sent += 1
        # one scrape at a time: a slow one skips the ticks it overran, never piles up
        next_tick = max(next_tick + interval, time.monotonic())
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("metrics", help="the serving engine's /metrics, one sample per tick")
    p.add_argument("--url", help="the server's base URL (default: ours, else --host/--port)")
    p.add_argument("--host", default="127.0.0.1", help="with --port: a server not ours")
    p.add_argument("--port", type=int, help="with no server of ours: read this port")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--count", type=int, help="stop after this many samples")
    p.set_defaults(func=run)
