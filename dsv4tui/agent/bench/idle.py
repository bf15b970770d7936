"""Is the server idle? Checked before each sweep level (before its warm-up): a level measured
beside another client's requests is 33-51 % slow and says nothing about the server.

One check = a 1-token probe request, then the first source that can answer:

1. ``metrics``: the server's ``/metrics`` (``sglang:num_running_reqs`` +
   ``sglang:num_queue_reqs``, series reduced as ``server_metrics`` documents). SGLang
   refreshes these gauges when it schedules a batch, so the probe's own prefill makes them
   current (it reports the running batch *without* the probe).
2. ``log``: when the server is the one this agent started on that port (its state file),
   the ``#running-req`` / ``#queue-req`` of the prefill and decode lines the server wrote
   while the probe ran (only those: a line from before the probe can be our own last level).
3. ``latency``: the probe's latency against the last probe of the same server that was
   judged idle (kept per server in the agent's cache dir, ``idle_probe.json``). Busy when
   slower than 2 x that + 50 ms. The first probe of a server with no other source sets the
   reference and the verdict is ``unknown``.

Verdicts: ``idle``, ``busy``, ``unknown`` (no source could tell), ``unreachable`` (the probe
could not connect), ``unresponsive`` (the probe stalled or timed out). A busy verdict is
checked once more after a second, so a server still freeing our own last requests is not
called busy.

Python >= 3.9, stdlib + the agent's modules.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent.bench.openai_stream import Endpoint, parse_stream
from dsv4tui.agent.host import logparse, server_metrics
from dsv4tui.agent.state import cache_dir

BASELINE_FILE = "idle_probe.json"
LATENCY_FACTOR = 2.0
LATENCY_SLACK_S = 0.05
RECHECK_AFTER_S = 1.0
_LOG_WINDOW = 1024 * 1024
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


def our_log(endpoint: Endpoint) -> Optional[str]:
    """The log file of the server this agent started, when it listens on ``endpoint``."""
    try:
        from dsv4tui.agent.host.server import read_state

        state = read_state()
    except Exception:  # a broken state file only means: no log source
        return None
    if not state or state.get("stopped_at") or not state.get("log"):
        return None
    try:
        port = int(state.get("port") or 0)
    except (TypeError, ValueError):
        return None
    host = str(state.get("host") or "127.0.0.1")
    if port != endpoint.port:
        return None
    if endpoint.host != host and not (endpoint.host in _LOOPBACK and host in _LOOPBACK):
        return None
    return str(state["log"])


def _size(path: Optional[str]) -> Optional[int]:
    if not path:
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def log_counts(path: str, offset: int) -> Optional[Tuple[int, int, int]]:
    """(running, queued, lines) from the prefill/decode lines written since ``offset``; per
    DP rank the largest, summed over DP ranks. None when there are no such lines."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < offset:  # the log was replaced (a restart): read it from the start
                offset = 0
            fh.seek(max(offset, size - _LOG_WINDOW))
            text = fh.read(_LOG_WINDOW).decode("utf-8", "replace")
    except OSError:
        return None
    per_dp: Dict[int, Tuple[int, int]] = {}
    lines = 0
    for line in text.splitlines():
        ev = logparse.parse_line(line)
        if not ev or ev.get("kind") not in ("prefill", "decode") or ev.get("running_req") is None:
            continue
        lines += 1
        dp = logparse.ranks(ev.get("prefix") or "").get("DP", 0)
        run, queue = per_dp.get(dp, (0, 0))
        per_dp[dp] = (max(run, int(ev["running_req"])), max(queue, int(ev.get("queue_req") or 0)))
    if not lines:
        return None
    return (sum(r for r, _ in per_dp.values()), sum(q for _, q in per_dp.values()), lines)


# --- the latency reference ----------------------------------------------------------------


def server_key(endpoint: Endpoint, model: str) -> str:
    """Which server a latency reference belongs to: URL + model (+ our server's pid, so a
    restart with another backend starts a new reference)."""
    key = "%s|%s" % (endpoint.base, model)
    if our_log(endpoint):
        try:
            from dsv4tui.agent.host.server import read_state

            key += "|pid=%s" % (read_state() or {}).get("pid")
        except Exception:
            pass
    return key


def _load_baselines() -> Dict[str, Any]:
    try:
        with open(str(cache_dir() / BASELINE_FILE), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_baseline(key: str) -> Optional[Dict[str, Any]]:
    entry = _load_baselines().get(key)
    if isinstance(entry, dict) and isinstance(entry.get("latency_s"), (int, float)):
        return entry
    return None


def save_baseline(key: str, latency_s: float, source: str) -> None:
    data = _load_baselines()
    data[key] = {"latency_s": round(latency_s, 6), "time": time.time(), "source": source}
    if len(data) > 64:  # keep the newest
        data = dict(sorted(data.items(), key=lambda kv: -float((kv[1] or {}).get("time") or 0))
                    [:64])
    path = str(cache_dir() / BASELINE_FILE)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


# --- the check ----------------------------------------------------------------------------


def describe(idle: Dict[str, Any]) -> str:
    """``8 running, 3 queued (from /metrics)`` and the like, for reasons and notices."""
    source = idle.get("source")
    if source in ("metrics", "log"):
        where = "/metrics" if source == "metrics" else "the server log"
        return "%s running, %s queued (from %s)" % (idle.get("running"), idle.get("queued"), where)
    if source == "latency":
        return ("a 1-token probe took %.3f s, idle reference %.3f s (from probe latency)"
                % (idle.get("probe_latency_s") or 0.0, idle.get("baseline_latency_s") or 0.0))
    return idle.get("detail") or idle.get("verdict") or "?"


async def _once(client: Any, endpoint: Endpoint, path: str, body: bytes, api_key: Optional[str],
                timeout: float, stall: float, key: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"verdict": "unknown", "source": None, "running": None,
                           "queued": None, "probe_latency_s": None, "baseline_latency_s": None,
                           "detail": None}
    log = our_log(endpoint)
    offset = _size(log)
    data = client.request_bytes(path, body) if hasattr(client, "request_bytes") else None
    res = parse_stream(await client.request(path, body, timeout, stall, data))
    if res.error_kind == "connect":
        out.update(verdict="unreachable", detail=res.error)
        return out
    if res.error_kind in ("stall", "timeout"):
        out.update(verdict="unresponsive",
                   detail="a 1-token probe got no answer: %s" % res.error)
        return out
    if res.ok:
        out["probe_latency_s"] = round(res.t_end - res.t_send, 6)
    else:
        out["detail"] = "the probe failed (%s: %s)" % (res.error_kind, res.error)
    loop = asyncio.get_running_loop()
    metrics = await loop.run_in_executor(None, server_metrics.scrape, endpoint.base, api_key,
                                         5.0)
    problems: List[str] = []
    if metrics["ok"] and metrics["running"] is not None:
        out.update(source="metrics", running=int(metrics["running"]),
                   queued=int(metrics["queued"] or 0))
    else:
        problems.append(metrics["error"] or "no running-requests gauge")
        counts = log_counts(log, offset) if log and offset is not None else None
        if counts is not None:
            out.update(source="log", running=counts[0], queued=counts[1])
        else:
            problems.append("no recent #running-req line in our server's log" if log else
                            "not a server this agent started (no log)")
    if out["source"] is not None:
        out["verdict"] = "busy" if (out["running"] or 0) + (out["queued"] or 0) > 0 else "idle"
    elif out["probe_latency_s"] is not None:
        base = load_baseline(key)
        lat = out["probe_latency_s"]
        out["source"] = "latency"
        if base is None:
            out.update(verdict="unknown", detail="first probe of this server (%.3f s): the "
                       "reference for the next checks; %s" % (lat, "; ".join(problems)))
            save_baseline(key, lat, "first")
            return out
        ref = float(base["latency_s"])
        out["baseline_latency_s"] = ref
        busy = lat > LATENCY_FACTOR * ref + LATENCY_SLACK_S
        out["verdict"] = "busy" if busy else "idle"
    else:
        out["detail"] = "; ".join(p for p in [out["detail"], *problems] if p)
    if out["verdict"] == "idle" and out["probe_latency_s"] is not None:
        save_baseline(key, out["probe_latency_s"], out["source"])
    return out


async def check(client: Any, endpoint: Endpoint, path: str, body: bytes,
                api_key: Optional[str], model: str, timeout: float, stall: float,
                cancel: Optional[asyncio.Event] = None) -> Dict[str, Any]:
    """Run the idle check (a probe, then the sources; a busy verdict once more after
    :data:`RECHECK_AFTER_S`). Returns ``verdict``, ``source``, ``running``, ``queued``,
    ``probe_latency_s``, ``baseline_latency_s``, ``detail``, ``checks``, ``time``."""
    key = server_key(endpoint, model)
    checks = 1
    result = await _once(client, endpoint, path, body, api_key, timeout, stall, key)
    if result["verdict"] == "busy" and not (cancel is not None and cancel.is_set()):
        await asyncio.sleep(RECHECK_AFTER_S)
        checks = 2
        result = await _once(client, endpoint, path, body, api_key, timeout, stall, key)
    result["checks"] = checks
    result["time"] = time.time()
    return result
