"""CLI: ``dsv4tui server metrics (HOST | --url URL) [--json] [--watch]``: the serving engine's
own Prometheus numbers (SGLang's ``/metrics``; vLLM's names are read too).

* once (default): gauges, counters, and TTFT / ITL / E2E / queue-time quantiles over every
  request since the server started (the histograms are cumulative; said so);
* ``--watch``: one sample per ``--interval``, quantiles and token rates over the last
  ``--window`` seconds (redrawn in place on a terminal, one block per sample when piped;
  with ``--json`` one object per line);
* HOST: the agent scrapes next to the server (ours, else the profile's port);
  ``--url``: this machine scrapes the URL itself (no agent, no SSH).

No /metrics (a server started without ``--enable-metrics``) or no server: one line, exit 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, TextIO

from dsv4tui.cli.output import finite, print_json
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import (
    EXIT_CONFIG,
    EXIT_CONNECT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    UserError,
)
from dsv4tui.core.server.metrics_window import MetricsWindow, mean, quantile, quantile_bucket

HISTOGRAMS = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"), ("queue", "queue"))
# What one observation of each histogram is: SGLang observes TTFT, E2E and queue time once
# per request, ITL once per token interval (a decode step's interval split over its tokens)
OBSERVED = {"ttft": "requests", "itl": "token intervals", "e2e": "requests",
            "queue": "requests"}
HOME, CLEAR_EOL, CLEAR_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"


def add_parser(cmds: Any) -> None:
    c = cmds.add_parser("metrics", help="the server's own /metrics: load, KV, TTFT/ITL quantiles",
                        description="the serving engine's own Prometheus numbers (SGLang's /metrics): "
                        "once, since the server started; --watch: over the last --window "
                        "seconds")
    c.add_argument("host", metavar="HOST", nargs="?",
                   help="local, demo, a [hosts] name, an ssh alias (or give --url)")
    c.add_argument("--url", help="scrape this server from here (e.g. http://127.0.0.1:30000)")
    c.add_argument("--profile", "-p", help="with HOST: the profile whose port is read when "
                   "no server of ours runs (default: the host's default)")
    c.add_argument("--watch", action="store_true", help="keep sampling; quantiles over --window")
    c.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between samples with --watch (default: telemetry.interval_s)")
    c.add_argument("--window", type=float, default=60.0, metavar="S",
                   help="with --watch: the sliding window of quantiles and rates (default 60)")
    c.add_argument("--count", type=int, help="with --watch: stop after this many samples")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=run)


# -- what is shown --------------------------------------------------------------------------

def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000.0, 3)


def _quantiles(hist: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """p50/p99 (interpolated inside their bucket), the buckets they fall in (all a histogram
    really knows: ``[lo, hi]`` ms, hi None above the last bound), the mean, and the count as
    ``observations`` of what ``observed`` says (requests; ITL: token intervals)."""
    if not hist or not hist.get("count"):
        return None
    out: dict[str, Any] = {"p50": _ms(quantile(hist, 0.5)), "p99": _ms(quantile(hist, 0.99)),
                           "mean": _ms(mean(hist))}
    for name, q in (("p50_bucket", 0.5), ("p99_bucket", 0.99)):
        b = quantile_bucket(hist, q)
        out[name] = None if b is None else [_ms(b[0]), _ms(b[1])]
    out["observations"] = hist.get("count")
    out["observed"] = OBSERVED[key]
    return out


def summary(sample: dict[str, Any], window: MetricsWindow | None, now: float
            ) -> dict[str, Any]:
    """The JSON shape: the gauges and counters of ``sample``, the latency quantiles (ms) and
    over what they were taken (``since_start``, or the last ``window_s`` seconds)."""
    keys = ("running", "queued", "token_usage", "cache_hit_rate", "gen_throughput",
            "spec_accept_length", "requests_total", "prompt_tokens_total",
            "generation_tokens_total")
    out: dict[str, Any] = {k: sample.get(k) for k in ("url", "engine", "time")}
    out.update({k: sample.get(k) for k in keys})
    out["startup_s"] = sample.get("startup") or {}
    # numbers the server sent that cannot be (NaN, Inf, a negative count): null above, why here
    out["invalid"] = dict(sample.get("invalid") or {})
    hists = sample.get("histograms") or {}
    if window is None:
        out["over"] = "since_start"
        out["latency_ms"] = {k: _quantiles(hists.get(k), k) for k, _ in HISTOGRAMS}
    else:
        out["over"] = f"last_{window.window_s:g}s"
        out["latency_ms"] = {k: _quantiles(window.histogram(k, now), k)
                            for k, _ in HISTOGRAMS}
        out["generation_tok_s"] = window.rate("generation_tokens_total", now)
        out["requests_per_s"] = window.rate("requests_total", now)
    return out


def _n(v: Any, fmt: str = "{:,.0f}", scale: float = 1.0) -> str:
    return "—" if not isinstance(v, (int, float)) else fmt.format(float(v) * scale)


def _bucket(q: dict[str, Any], name: str) -> str:
    """``≈51 (0-100)``: the interpolated value and the bucket it is known to."""
    b = q.get(f"{name}_bucket")
    where = ""
    if isinstance(b, list) and len(b) == 2:
        where = f" ({_n(b[0])}-{_n(b[1])})" if b[1] is not None else f" (>{_n(b[0])})"
    return f"≈{_n(q.get(name), '{:,.1f}')}{where}"


def render(where: str, s: dict[str, Any], simulated: bool) -> str:
    head = f"{where} · {s.get('url') or '?'}/metrics · {s.get('engine') or '?'}"
    if simulated:
        head += " · SIMULATED"
    bad = s.get("invalid") or {}

    def g(key: str, fmt: str = "{:,.0f}", scale: float = 1.0) -> str:
        return "invalid" if key in bad else _n(s.get(key), fmt, scale)

    gen = g("gen_throughput", "{:,.1f}")
    lines = [head,
             f"running {g('running')}  queued {g('queued')}  "
             f"kv {g('token_usage', '{:.0f}%', 100)}  "
             f"cache hit {g('cache_hit_rate', '{:.0f}%', 100)}  "
             + (f"gen {gen} tok/s (gauge)" if s.get("running") or s.get("queued")
                else f"gen idle (gauge left at {gen} tok/s)")
             + (f"  spec accept {g('spec_accept_length', '{:.2f}')}"
                if s.get("spec_accept_length") is not None or "spec_accept_length" in bad
                else ""),
             f"requests {g('requests_total')}  prompt tokens "
             f"{g('prompt_tokens_total')}  generation tokens "
             f"{g('generation_tokens_total')} (since start)"]
    if bad:
        lines.append("invalid (the server sent a number that cannot be): "
                     + "; ".join(f"{k} {why}" for k, why in sorted(bad.items())))
    if "generation_tok_s" in s:
        lines.append(f"generation {_n(s['generation_tok_s'], '{:,.1f}')} tok/s, "
                     f"{_n(s['requests_per_s'], '{:.2f}')} requests/s over the window "
                     "(counters)")
    over = ("since the server started" if s["over"] == "since_start"
            else f"over the {s['over'].removeprefix('last_')} window")
    lines.append(f"server-side latency, ms, {over}:")
    for key, label in HISTOGRAMS:
        q = s["latency_ms"].get(key)
        if not q or q.get("p50") is None:
            lines.append(f"  {label:<6} —")
            continue
        extra = ""
        if q.get("mean") is not None:
            extra = (f"  mean {_n(q['mean'], '{:,.1f}')}  ({_n(q.get('observations'))} "
                     f"{q.get('observed') or 'observations'})")
        lines.append(f"  {label:<6} p50 {_bucket(q, 'p50'):>14}  "
                     f"p99 {_bucket(q, 'p99'):>14}{extra}")
    if s.get("startup_s"):
        lines.append("startup s: " + " · ".join(f"{k} {v:.1f}"
                                               for k, v in s["startup_s"].items()))
    lines.append("(≈: interpolated inside the histogram bucket in brackets, all the server knows)")
    return "\n".join(lines)


# -- where the samples come from ------------------------------------------------------------

async def _url_samples(url: str, interval: float, count: int | None
                       ) -> AsyncIterator[dict[str, Any]]:
    from dsv4tui.agent.host.server_metrics import scrape

    sent = 0
    while count is None or sent < count:
        started = time.monotonic()
        out = await asyncio.to_thread(scrape, url.rstrip("/"), None,
                                      min(5.0, max(interval * 2, 1.0)), True)
        out["url"] = url.rstrip("/")
        yield out
        sent += 1
        if count is None or sent < count:
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


def _agent_args(args: Any, settings: Any, interval: float, count: int | None) -> list[str]:
    from dsv4tui.core.hosts.resolve import host_spec

    spec = host_spec(args.host, settings)
    argv = ["metrics", "--interval", f"{interval:g}"]
    if count is not None:
        argv += ["--count", str(count)]
    if spec.config.profiles:
        _, prof = spec.config.profile(args.profile)
        argv += ["--host", prof.host, "--port", str(prof.port)]
    return argv


def _check(sample: dict[str, Any], where: str) -> None:
    if not sample.get("ok"):
        # no HTTP answer at all (status 0: refused, DNS, timeout) is a connection problem
        raise UserError(f"{where}: {safe_text(sample.get('error') or 'no /metrics')}",
                        EXIT_FAILED if sample.get("status") else EXIT_CONNECT)


def run(args: Any) -> int:
    if bool(args.host) == bool(args.url):
        raise UserError("server metrics: give a HOST or --url (one of them)", EXIT_CONFIG)
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UserError(f"server metrics: --url {safe_text(args.url)}: give http://HOST:PORT",
                        EXIT_CONFIG)
    settings, _ = load_settings(args)
    interval = args.interval if args.interval is not None else settings.telemetry.interval_s
    if not interval >= 0.2:
        raise UserError("--interval must be >= 0.2 s", EXIT_CONFIG)
    if not args.window > 0:
        raise UserError("--window must be > 0 s", EXIT_CONFIG)
    if args.count is not None and args.count < 1:
        raise UserError("--count must be >= 1", EXIT_CONFIG)
    if not args.watch:
        return run_async(_once(args, settings, interval))
    out = sys.stdout
    try:
        return run_async(_watch(args, settings, interval, out))
    except UserError as exc:
        if exc.exit_code == EXIT_INTERRUPTED:  # Ctrl-C is how the watch ends
            return 0
        raise


async def _samples(args: Any, settings: Any, interval: float, count: int | None
                   ) -> AsyncGenerator[tuple[dict[str, Any], str, bool], None]:
    """(sample, where, simulated) from the URL or the host's agent."""
    if args.url:
        simulated = await asyncio.to_thread(_url_simulated, args.url)
        async for s in _url_samples(args.url, interval, count):
            yield s, "url", simulated
        return
    from dsv4tui.core.hosts.resolve import open_host

    argv = _agent_args(args, settings, interval, count)
    async with open_host(args.host, settings) as host:
        simulated = bool(getattr(host, "simulated", False)) or await _host_simulated(host)
        async for ev in host.agent.events(*argv):
            if ev.get("type") == "server_metrics":
                yield ev, host.name, simulated


def _url_simulated(url: str) -> bool:
    """Whether the server says it is simulated (dsv4tui's simulator does, in /server_info)."""
    import httpx

    try:
        info = httpx.get(url.rstrip("/") + "/server_info", timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(info, dict) and bool(info.get("simulated"))


async def _host_simulated(host: Any) -> bool:
    """The same for the server on a host: its status's /server_info summary."""
    try:
        events = await host.agent.call("server", "status", timeout=15.0)
    except UserError:
        return False
    status: dict[str, Any] = next((e for e in events if e.get("type") == "status"), {})
    info = status.get("server_info") or {}
    return isinstance(info, dict) and bool(info.get("simulated"))


async def _once(args: Any, settings: Any, interval: float) -> int:
    async with contextlib.aclosing(_samples(args, settings, interval, 1)) as samples:
        async for sample, where, simulated in samples:
            _check(sample, where)
            s = summary(sample, None, time.monotonic())
            if args.json:
                print_json({"host": args.host, "simulated": simulated, **s})
            else:
                print(safe_text(render(where, s, simulated), keep_newlines=True))
            return 0
    raise UserError("the agent sent no metrics sample", EXIT_FAILED)


async def _watch(args: Any, settings: Any, interval: float, out: TextIO) -> int:
    window = MetricsWindow(keep_s=max(args.window * 2, 120.0), window_s=args.window)
    redraw = out.isatty() and not args.json
    if redraw:
        out.write("\x1b[2J" + HOME)
    first = True
    async with contextlib.aclosing(_samples(args, settings, interval, args.count)) as samples:
        async for sample, where, simulated in samples:
            now = time.monotonic()
            if first:
                _check(sample, where)  # nothing to read: say so once, exit 1
                first = False
            window.add(sample, now)
            if not sample.get("ok"):  # it went away: say so each tick, keep watching
                if args.json:
                    out.write(json.dumps({"host": args.host, "ok": False,
                                          "error": sample.get("error")}) + "\n")
                else:
                    out.write(f"{where}: {safe_text(sample.get('error') or 'no /metrics')}\n")
                out.flush()
                continue
            s = summary(sample, window, now)
            if args.json:
                out.write(json.dumps(finite({"host": args.host, "simulated": simulated, **s}),
                                     allow_nan=False) + "\n")
            elif redraw:
                body = "".join(ln + CLEAR_EOL + "\n"
                               for ln in safe_text(render(where, s, simulated),
                                                   keep_newlines=True).splitlines())
                out.write(HOME + body + CLEAR_BELOW)
            else:
                out.write(safe_text(render(where, s, simulated), keep_newlines=True) + "\n\n")
            out.flush()
    return 0
