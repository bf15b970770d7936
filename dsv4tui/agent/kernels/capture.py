"""``kernels``: where the GPU time goes, measured next to the server (docs/kernels.md).

    python -m dsv4tui.agent kernels run --url http://127.0.0.1:30000 --steps 5 [--concurrency 16]
    python -m dsv4tui.agent kernels parse DIR_OR_FILES... [--tensor-active PCT]
    python -m dsv4tui.agent kernels model-facts (--model-path PATH | --url URL)

``run``: a steady load of C concurrent streaming requests (long outputs, ``ignore_eos``) is
started and given a warm-up; then the GPU telemetry is sampled while SGLang's
``/start_profile`` (activities CPU+GPU, ``num_steps``) records a torch trace. When the
``*.trace.json.gz`` files land in the output directory (SGLang writes them on its own host:
this agent must run there, or ``--trace-dir`` must see them), the load stops, the traces are
parsed here (only the summary travels to the console) and the tensor-core flag of each kernel
family is decided from the kernel names and the tensor-pipe activity of the same window.
Its settings are :class:`~dsv4tui.agent.kernels.settings.CaptureSettings`; :func:`take` runs one
in-process (``kernels run``, and a campaign's capture per variant, which holds the bench lock).

Events: ``kernels_target``, ``kernels_phase`` (progress), ``kernels_traces``, and the final
``kernels`` (the summary). ``model-facts`` emits one ``model_facts`` event.

Python >= 3.9, stdlib + httpx only.
"""

from __future__ import annotations

import asyncio
import functools
import glob
import json
import math
import os
import random
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent import protocol
from dsv4tui.agent.bench.openai_stream import (
    TRANSPORTS,
    Endpoint,
    build_body,
    chat_path,
    make_client,
    parse_stream,
)
from dsv4tui.agent.kernels import settings, trace_parse
from dsv4tui.agent.kernels.settings import CaptureSettings

TRACE_GLOBS = ("*.trace.json.gz", "*.trace.json")
LEAD_S = 3.0  # seconds of steady load before /start_profile whose telemetry counts
MIN_BUSY_PCT = 20.0  # ... when the GPUs were busy then; else the whole run's telemetry counts
RAMP_SHARE = 0.9  # the load has ramped up when this share of its streams run on the server
RAMP_TIMEOUT_S = 60.0  # waiting that long for the ramp, the capture is taken anyway (flagged)
RAMP_POLL_S = 0.25
BATCH_FAR = 0.5  # a measured batch under this share of the load's C is far from it: flagged


def _usage(message: str) -> protocol.AgentError:
    return protocol.AgentError("usage", message, protocol.EXIT_USAGE)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("kernels", help="kernel capture of a running SGLang server, trace "
                       "parsing, model facts")
    psub = p.add_subparsers(dest="kernels_command", required=True)

    d = {k: f.default for k, f in settings.FIELDS.items()}
    run = psub.add_parser("run", help="steady load + /start_profile, then parse the traces")
    run.add_argument("--url", required=True, help="the server's base URL")
    run.add_argument("--steps", type=int, default=d["steps"],
                     help="forward steps to profile (SGLang num_steps, default %d)" % d["steps"])
    run.add_argument("--concurrency", "-c", type=int, default=d["concurrency"],
                     help="concurrent streaming requests of the steady load (default %d)"
                     % d["concurrency"])
    run.add_argument("--output-dir", help="where SGLang writes the traces (default: a new "
                     "directory under the agent cache)")
    run.add_argument("--trace-dir", help="where this agent looks for them (default: output-dir)")
    run.add_argument("--warmup", type=float, default=d["warmup"],
                     help="at least this many seconds of load before profiling starts, and "
                     "then until the server runs the load's batch (default %g)" % d["warmup"])
    run.add_argument("--ramp-timeout", type=float, default=d["ramp_timeout"],
                     help="wait at most this long for the server's batch to reach the load's "
                     "concurrency; then capture anyway, flagged (default %g)" % d["ramp_timeout"])
    run.add_argument("--input-len", type=int, default=d["input_len"])
    run.add_argument("--output-len", type=int, default=d["output_len"],
                     help="tokens per load request (long, so the batch stays in decode)")
    run.add_argument("--stop-after", type=float, default=d["stop_after"],
                     help="call /stop_profile when no trace appeared after this many seconds")
    run.add_argument("--timeout", type=float, default=d["timeout"],
                     help="give up when no trace appeared after this many seconds")
    run.add_argument("--telemetry", default=d["telemetry"], choices=settings.TELEMETRY,
                     help="tensor-pipe source for the window (default %s)" % d["telemetry"])
    run.add_argument("--rank", type=int, action="append",
                     help="parse only this TP rank's trace (repeatable; default: all)")
    run.add_argument("--top", type=int, default=d["top"],
                     help="kernels listed (default %d)" % d["top"])
    run.add_argument("--by-stage", action="store_true",
                     help="send profile_by_stage (SGLang writes -EXTEND/-DECODE files)")
    run.add_argument("--model", help="model name for the load (default: discovered)")
    run.add_argument("--api-key-env", help="env var holding the API key")
    run.add_argument("--transport", choices=TRANSPORTS, default="raw")
    run.add_argument("--connect-timeout", type=float, default=10.0)
    run.set_defaults(func=run_kernels)

    parse = psub.add_parser("parse", help="summarize trace files or directories")
    parse.add_argument("paths", nargs="+")
    parse.add_argument("--top", type=int, default=settings.FIELDS["top"].default)
    parse.add_argument("--rank", type=int, action="append")
    parse.add_argument("--tensor-active", type=float,
                       help="measured tensor-pipe activity (percent) over the trace window")
    parse.set_defaults(func=run_parse)

    facts = psub.add_parser("model-facts", help="parameters and bytes per weight from the "
                            "model's config.json")
    facts.add_argument("--model-path", help="model directory or Hugging Face id (cache)")
    facts.add_argument("--url", help="ask the server (/server_info) for its model path")
    facts.add_argument("--api-key-env")
    facts.set_defaults(func=run_model_facts)


# --- parse ---------------------------------------------------------------------------------


def run_parse(args: Any) -> int:
    try:
        summary = trace_parse.parse_traces(args.paths, top=args.top, ranks=args.rank)
    except trace_parse.TraceError as exc:
        raise protocol.AgentError("trace", str(exc)) from None
    trace_parse.attribute_tensor_cores(summary, args.tensor_active,
                                       "given" if args.tensor_active is not None else None)
    protocol.emit("kernels", **summary)
    return 0


# --- telemetry over the window ------------------------------------------------------------


class TelemetryWindow:
    """Samples the GPUs in a thread (the agent's telemetry sources) while the capture runs."""

    def __init__(self, wanted: str, interval: float = 0.5) -> None:
        self.wanted = wanted
        self.interval = interval
        self.frames: List[Tuple[float, List[Dict[str, Any]]]] = []
        self.source_name: Optional[str] = None
        self.problem: Optional[str] = None
        self._source: Any = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.trace_started_at = 0.0  # when /start_profile was sent (epoch seconds)

    def start(self) -> None:
        self.started_at = time.time()
        if self.wanted == "off":
            self.problem = "telemetry off (--telemetry off)"
            return
        from dsv4tui.agent.host import telemetry

        try:
            self._source = telemetry.open_source(self.wanted, self.interval)
        except protocol.AgentError as exc:
            self.problem = exc.message
            return
        except Exception as exc:  # a broken driver must not sink the capture
            self.problem = "%s: %s" % (type(exc).__name__, exc)
            return
        self.source_name = self._source.name
        self._thread = threading.Thread(target=self._run, name="kernels-telemetry", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        src = self._source
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                gpus = src.sample()
            except Exception as exc:
                self.problem = "sampling failed: %s" % exc
                return
            if gpus:
                self.frames.append((time.time(), gpus))
            if not src.paced:
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def stop(self) -> None:
        self.stopped_at = time.time()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._source is not None:
            try:
                self._source.close()
            except Exception:
                pass

    def summary(self, window: Optional[List[float]] = None) -> Dict[str, Any]:
        """The telemetry of the steady load in the ``LEAD_S`` before /start_profile plus the
        trace's own window (epoch seconds, from the trace), when at least two ticks fall
        there; else of the whole run. Left out: the profiler's start-up and the trace
        export, when the server's scheduler is blocked and the GPUs idle (where they are in,
        the busy fraction, ``util_gpu``, accounts for them)."""
        frames = self.frames
        scope = "whole run"
        if window and len(window) == 2 and self.trace_started_at:
            ps = self.trace_started_at
            chosen = [f for f in frames
                      if ps - LEAD_S < f[0] <= ps or window[0] < f[0] < window[1] + self.interval]
            part = summarize_frames(chosen, self.source_name)
            busy = part.get("util_gpu_pct")
            if len(chosen) >= 2 and busy is not None and busy >= MIN_BUSY_PCT:
                frames, scope = chosen, "steady load before /start_profile + trace window"
        out = summarize_frames(frames, self.source_name, self.problem,
                               self.stopped_at - self.started_at)
        out["scope"] = scope
        return out


def _mean(values: List[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def summarize_frames(frames: List[Tuple[float, List[Dict[str, Any]]]], source: Optional[str],
                     problem: Optional[str] = None, seconds: float = 0.0) -> Dict[str, Any]:
    """Mean GPM activity of the GPUs that were busy over the window (all GPUs if none was)."""
    load: Dict[int, List[float]] = {}
    for _, gpus in frames:
        for g in gpus:
            v = g.get("util_gpu")
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                v = g.get("sm_active")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                load.setdefault(g.get("index", -1), []).append(float(v))
    means = {i: sum(v) / len(v) for i, v in load.items() if v}
    top = max(means.values()) if means else 0.0
    # The server's GPUs: those at least half as busy as the busiest (others are idle
    # bystanders whose zeros would dilute the numbers).
    busy = sorted(i for i, m in means.items() if top >= 1.0 and m >= 0.5 * top)
    chosen = set(busy) if busy else None

    def values(field: str) -> List[float]:
        out = []
        for _, gpus in frames:
            for g in gpus:
                if chosen is not None and g.get("index", -1) not in chosen:
                    continue
                v = g.get(field)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.append(float(v))
        return out

    tensor = _mean(values("tensor_active"))
    names = sorted({str(g.get("name")) for _, gpus in frames for g in gpus if g.get("name")})
    note = problem
    if frames and tensor is None and note is None:
        note = "no tensor-pipe counter (GPM unsupported on this GPU or source)"
    return {
        "source": source, "frames": len(frames), "seconds": round(seconds, 2),
        "gpus": sorted({g.get("index") for _, gpus in frames for g in gpus
                        if g.get("index") is not None}),
        "busy_gpus": busy, "gpu_names": names,
        "tensor_active_pct": round(tensor, 3) if tensor is not None else None,
        "sm_active_pct": _r(_mean(values("sm_active"))),
        "dram_active_pct": _r(_mean(values("dram_active"))),
        "fp32_active_pct": _r(_mean(values("fp32_active"))),
        "util_gpu_pct": _r(_mean(values("util_gpu"))),
        "note": note,
    }


def _r(x: Optional[float]) -> Optional[float]:
    return round(x, 2) if x is not None else None


# --- steady load ---------------------------------------------------------------------------


class SteadyLoad:
    """C workers, each sending one long streaming request after another until stopped."""

    def __init__(self, target: Any, concurrency: int, input_len: int, output_len: int,
                 transport: str, connect_timeout: float, seed: int) -> None:
        self.target = target
        self.concurrency = concurrency
        self.input_len = input_len
        self.output_len = output_len
        self.transport = transport
        self.connect_timeout = connect_timeout
        self.rng = random.Random(seed)
        self.done = 0
        self.errors = 0
        self.tokens = 0
        self.first_error: Optional[str] = None
        self.started = 0.0
        self._client: Any = None
        self._tasks: List["asyncio.Task[None]"] = []
        self._live: Dict[int, Any] = {}  # id -> RawResponse of the requests in flight

    def _sent(self, box: List[Any], raw: Any) -> None:
        box.append(raw)
        self._live[id(raw)] = raw

    def streaming(self) -> int:
        """Requests in flight whose answer has begun (their prefill is done: the server
        runs them in its batch), as the load generator sees them: two body pieces at least,
        since a chat stream's first piece can be the role alone, sent before the prefill."""
        return sum(1 for raw in list(self._live.values()) if len(raw.pieces) >= 2)

    async def start(self) -> None:
        self._client = make_client(self.transport, self.target.endpoint, self.target.api_key,
                                   self.concurrency, self.connect_timeout)
        self.started = time.monotonic()
        self._tasks = [asyncio.ensure_future(self._worker()) for _ in range(self.concurrency)]

    async def _worker(self) -> None:
        from dsv4tui.agent.bench.sweep import make_prompt

        path = self.target.endpoint.path(chat_path("chat"))
        while True:
            body = build_body("chat", self.target.model, make_prompt(self.rng, self.input_len),
                              self.output_len, 0.0, True)
            box: List[Any] = []
            try:
                raw = await self._client.request(path, body, 3600.0, 120.0,
                                                 on_send=functools.partial(self._sent, box))
            finally:
                for r in box:
                    self._live.pop(id(r), None)
            res = parse_stream(raw, self.output_len)
            if res.ok:
                self.done += 1
                self.tokens += res.output_tokens
            else:
                self.errors += 1
                if self.first_error is None:
                    self.first_error = "%s: %s" % (res.error_kind, res.error)
                await asyncio.sleep(0.2)  # a failing server must not be hammered

    async def stop(self) -> Dict[str, Any]:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            try:
                await self._client.aclose()
            except Exception:
                pass
        return {"concurrency": self.concurrency, "input_len": self.input_len,
                "output_len": self.output_len, "requests_done": self.done,
                "errors": self.errors, "first_error": self.first_error,
                "seconds": round(time.monotonic() - self.started, 2)}


def _source_words(source: str) -> str:
    return {"metrics": "from /metrics",
            "metrics+streams": "from /metrics, capped by the streams answering"}.get(
        source, "streams answering, as the load sees them")


def measured_batch(summary: Dict[str, Any], concurrency: int,
                   ramp: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The batch a capture measured, beside the load's C: the trace's mean decode batch
    size, else the server's running requests when profiling started (``ramp``). A batch
    under ``BATCH_FAR`` x C is far from the load it names: ``batch_far`` and
    ``batch_note`` say so (the console shows it wherever the load is shown)."""
    dec = (summary.get("steps") or {}).get("decode") or {}
    bs: Any = dec.get("mean_bs")
    source: Any = "trace"
    if not isinstance(bs, (int, float)) and ramp is not None:
        bs, source = ramp.get("running"), ramp.get("source")
    out: Dict[str, Any] = {"measured_bs": bs, "measured_bs_source": source if bs is not None
                           else None, "ramp": ramp, "batch_far": False, "batch_note": None}
    if not isinstance(bs, (int, float)):
        return out
    if bs < BATCH_FAR * concurrency:
        why = "the load had not ramped up"
        if ramp is not None and ramp.get("max_running_requests"):
            why = "the server runs at most %d requests" % ramp["max_running_requests"]
        elif ramp is not None and not ramp.get("reached"):
            why = "the server's batch did not reach it within %.0f s" % ramp["waited_s"]
        out["batch_far"] = True
        out["batch_note"] = ("measured batch %g is far from the load's C=%d (%s): this "
                             "capture is not one of C=%d" % (bs, concurrency, why, concurrency))
    return out


# --- HTTP ------------------------------------------------------------------------------------


async def _post(endpoint: Endpoint, api: str, body: Dict[str, Any], api_key: Optional[str],
                timeout: float) -> Tuple[int, str]:
    import httpx

    headers = {"Authorization": "Bearer " + api_key} if api_key else {}
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as client:
        resp = await client.post(endpoint.base + api, json=body)
        return resp.status_code, resp.text.strip()


async def _get(endpoint: Endpoint, api: str, api_key: Optional[str],
               timeout: float = 10.0) -> Any:
    import httpx

    headers = {"Authorization": "Bearer " + api_key} if api_key else {}
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as client:
        resp = await client.get(endpoint.base + api)
        resp.raise_for_status()
        return resp.json()


async def server_info(endpoint: Endpoint, api_key: Optional[str]) -> Dict[str, Any]:
    """``/server_info`` (or the older ``/get_server_info``); {} when neither answers."""
    for api in ("/server_info", "/get_server_info"):
        try:
            info = await _get(endpoint, api, api_key, 10.0)
        except Exception:
            continue
        if isinstance(info, dict):
            return info
    return {}


def _info_labels(info: Dict[str, Any]) -> Dict[str, Any]:
    raw_sim = info.get("simulated")
    sim: Dict[str, Any] = raw_sim if isinstance(raw_sim, dict) else {}
    return {
        "server_version": info.get("version"),
        "model_path": info.get("model_path"),
        "tp_size": info.get("tp_size"), "dp_size": info.get("dp_size"),
        "ep_size": info.get("ep_size"),
        "backend": sim.get("backend") or info.get("moe_runner_backend"),
        "quantization": info.get("quantization"),
        "checkpoint": sim.get("checkpoint"),
        "attention_backend": info.get("attention_backend"),
        "simulated": bool(sim),
    }


# --- run -------------------------------------------------------------------------------------


def _trace_files(directory: str) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for pattern in TRACE_GLOBS:
        for path in glob.glob(os.path.join(directory, pattern)):
            try:
                out[path] = os.path.getsize(path)
            except OSError:
                continue
    return out


def settings_of(args: Any) -> CaptureSettings:
    """``kernels run``'s flags as the capture's settings (one usage line when one is wrong)."""
    try:
        return CaptureSettings.of({
            "steps": args.steps, "concurrency": args.concurrency, "warmup": args.warmup,
            "ramp_timeout": args.ramp_timeout, "input_len": args.input_len,
            "output_len": args.output_len, "stop_after": args.stop_after,
            "timeout": args.timeout, "top": args.top, "telemetry": args.telemetry,
            "by_stage": bool(args.by_stage), "output_dir": args.output_dir,
            "trace_dir": args.trace_dir, "ranks": args.rank})
    except ValueError as exc:
        raise _usage("--" + str(exc).replace("_", "-")) from None


def target_of(args: Any) -> Any:
    """``kernels run``'s server flags as the bench's TargetSpec."""
    from dsv4tui.agent.bench.sweep import TargetSpec

    return TargetSpec(args.url, args.model, args.api_key_env, args.transport,
                      args.connect_timeout)


def run_kernels(args: Any) -> int:
    from dsv4tui.agent.host import bench_lock

    conf = settings_of(args)
    # its steady load would skew a campaign's sweep (and a campaign would skew the capture)
    if not bench_lock.acquire({"id": None, "name": "kernel capture", "kind": "kernels"}):
        raise bench_lock.busy_error(bench_lock.holder(), "a kernel capture under load")
    try:
        summary = take(conf, target_of(args))
    finally:
        bench_lock.release()
    protocol.emit("kernels", **summary)
    return 0


def take(conf: CaptureSettings, spec: Any) -> Dict[str, Any]:
    """One capture of the server ``spec`` (a bench TargetSpec) names, in this process, on
    a loop of its own; returns the summary (the ``kernels`` event's fields). Its progress
    events (``kernels_target``, ``kernels_phase``, ``kernels_traces``) go out as it runs.
    The caller holds the host's bench lock (``kernels run``, or the campaign runner).
    Ctrl-C / SIGTERM stop it at a clean point (the server's profiler stopped) and raise
    KeyboardInterrupt; a failure is an AgentError. Signal handlers are as they were after."""
    import signal

    from dsv4tui.agent.bench.openai_stream import run as run_loop

    job = ProfileRun(conf, spec)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = run_loop(job.run())
    except KeyboardInterrupt:
        job.cancelled = True
        summary = None
    finally:  # the loop's own handlers are gone with it
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    if job.cancelled or summary is None:
        raise KeyboardInterrupt
    return summary


class ProfileRun:
    """Steady load, ``/start_profile``, the traces parsed: :meth:`run` returns the summary."""

    def __init__(self, conf: CaptureSettings, spec: Any) -> None:
        self.conf = conf
        self.spec = spec  # the bench TargetSpec: where, the transport, the connect timeout
        self.cancelled = False
        self.cancel: Optional[asyncio.Event] = None

    def phase(self, phase: str, message: str, **extra: Any) -> None:
        protocol.emit("kernels_phase", phase=phase, message=message, time=round(time.time(), 3),
                      **extra)

    async def run(self) -> Optional[Dict[str, Any]]:
        """The capture's summary; None when cancelled."""
        from dsv4tui.agent.bench.sweep import resolve_target
        from dsv4tui.agent.state import cache_dir

        conf = self.conf
        self.cancel = protocol.cancel_event_on_signals()
        target = await resolve_target(self.spec)
        info = await server_info(target.endpoint, target.api_key)
        labels = _info_labels(info)
        stamp = time.strftime("%Y%m%d-%H%M%S") + "-%04x" % random.randrange(1 << 16)
        out_dir = os.path.abspath(os.path.expanduser(
            conf.output_dir or os.path.join(str(cache_dir()), "kernels", stamp)))
        watch = os.path.abspath(os.path.expanduser(conf.trace_dir or out_dir))
        try:
            os.makedirs(out_dir, exist_ok=True)
        except OSError as exc:
            raise protocol.AgentError("output_dir", "cannot create %s: %s"
                                      % (out_dir, exc.strerror or exc)) from None
        expected = 1
        if isinstance(labels.get("tp_size"), int) and labels["tp_size"] > 0:
            expected = labels["tp_size"]
        protocol.emit("kernels_target", url=target.endpoint.base, model=target.model,
                      output_dir=out_dir, trace_dir=watch, steps=conf.steps,
                      concurrency=conf.concurrency, expected_files=expected, **labels)
        load = SteadyLoad(target, conf.concurrency, conf.input_len, conf.output_len,
                          self.spec.transport, self.spec.connect_timeout,
                          random.randrange(1 << 30))
        tele = TelemetryWindow(conf.telemetry)
        started_trace = False
        found: Dict[str, int] = {}
        stopped_by = None
        load_info: Dict[str, Any] = {}
        ramp: Optional[Dict[str, Any]] = None
        try:
            self.phase("load", "steady load: %d concurrent streams of %d tokens"
                       % (conf.concurrency, conf.output_len))
            await load.start()
            tele.start()  # from the start: the steady load before /start_profile counts too
            if await self._sleep(conf.warmup):
                return None
            if load.errors and not load.done:
                raise protocol.AgentError("load_failed", "the steady load fails: %s"
                                          % load.first_error)
            ramp = await self._ramp(target, load, info)
            if ramp is None:
                return None
            if load.errors and not load.done and not load.streaming():
                raise protocol.AgentError("load_failed", "the steady load fails: %s"
                                          % load.first_error)
            before = _trace_files(watch)
            body = {"output_dir": out_dir, "num_steps": conf.steps,
                    "activities": ["CPU", "GPU"], "with_stack": False, "record_shapes": False}
            if conf.by_stage:
                body["profile_by_stage"] = True
            self.phase("profiling", "/start_profile: %d steps, traces to %s"
                       % (conf.steps, out_dir))
            tele.trace_started_at = time.time()
            start_call = asyncio.ensure_future(_post(target.endpoint, "/start_profile", body,
                                                     target.api_key, conf.timeout))
            started_trace = True
            found, stopped_by = await self._wait_traces(target, start_call, watch, before,
                                                        expected)
            if self.cancelled:
                return None
        finally:
            tele.stop()
            load_info = await load.stop()
            if self.cancelled and started_trace and not found:
                try:  # leave the server as we found it
                    await _post(target.endpoint, "/stop_profile", {}, target.api_key, 10.0)
                except Exception:
                    pass
        files = sorted(found)
        protocol.emit("kernels_traces", files=[{"path": p, "bytes": found[p]} for p in files],
                      stopped_by=stopped_by)
        self.phase("parsing", "parsing %d trace file(s)" % len(files))
        summary = await self._parse(files)
        tele_info = tele.summary(summary.get("window_unix"))
        trace_parse.attribute_tensor_cores(summary, tele_info.get("tensor_active_pct"),
                                           tele_info.get("source"), tele_info.get("util_gpu_pct"))
        load_info.update(measured_batch(summary, conf.concurrency, ramp))
        if load_info.get("batch_far"):
            self.phase("flagged", load_info["batch_note"])
        summary.update(url=target.endpoint.base, model=target.model, profiled_steps=conf.steps,
                       output_dir=out_dir, stopped_by=stopped_by, load=load_info,
                       telemetry=tele_info, server=labels, time=round(time.time(), 3))
        return summary

    async def _ramp(self, target: Any, load: SteadyLoad, info: Dict[str, Any]
                    ) -> Optional[Dict[str, Any]]:
        """Wait until the server runs the load's batch: ``RAMP_SHARE`` of its C streams (at
        most the server's ``max_running_requests``) running, from ``/metrics``
        (``num_running_reqs``), else from the load's own streams whose answer has begun.
        After ``--ramp-timeout`` the capture goes on (its batch is then flagged). Returns
        what was seen when profiling starts, or None when cancelled."""
        from dsv4tui.agent.host import server_metrics

        c = self.conf.concurrency
        cap = info.get("max_running_requests")
        want = min(c, cap) if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 \
            else c
        need = max(1, math.ceil(RAMP_SHARE * want))
        t0 = time.monotonic()
        use_metrics = True
        announced = False
        while True:
            running: Optional[float] = None
            source = "streams"
            if use_metrics:
                got = await asyncio.to_thread(server_metrics.scrape, target.endpoint.base,
                                              target.api_key, 2.0)
                if got.get("ok") and got.get("running") is not None:
                    running, source = float(got["running"]), "metrics"
                else:
                    use_metrics = False  # no /metrics: the load's own view from now on
            if running is None:
                running = float(load.streaming())
            elif load.streaming() < running:
                # /metrics may count requests still in prefill as running (the simulator
                # does; SGLang's chunked prefill can): the decode batch is at most the
                # streams whose answer has begun
                running, source = float(load.streaming()), "metrics+streams"
            waited = time.monotonic() - t0
            reached = running >= need
            if reached or waited >= self.conf.ramp_timeout:
                if not reached:
                    self.phase("ramp", "the server's batch reached %g of C=%d in %.0f s "
                               "(%s); capturing anyway" % (running, c, waited,
                                                           _source_words(source)))
                return {"running": running, "source": source, "target": want, "need": need,
                        "waited_s": round(waited, 2), "reached": reached,
                        "max_running_requests": cap if want < c else None}
            if not announced:
                announced = True
                self.phase("ramp", "waiting for the server's batch to reach C=%d (%g running "
                           "now, %s)" % (want, running, _source_words(source)))
            if await self._sleep(RAMP_POLL_S):
                return None

    async def _parse(self, files: List[str]) -> Dict[str, Any]:
        """Parse the traces; a file still being written (truncated) gets two more tries."""
        for attempt in range(3):
            try:
                return trace_parse.parse_traces(files, top=self.conf.top,
                                                ranks=self.conf.ranks)
            except trace_parse.TraceError as exc:
                if attempt == 2 or "truncated" not in str(exc):
                    raise protocol.AgentError("trace", str(exc)) from None
                self.phase("parsing", "a trace is still being written; retrying")
                await asyncio.sleep(2.0)
        raise AssertionError("unreachable")

    async def _sleep(self, seconds: float) -> bool:
        """Sleep; True when cancelled meanwhile."""
        assert self.cancel is not None
        try:
            await asyncio.wait_for(self.cancel.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        self.cancelled = True
        return True

    async def _wait_traces(self, target: Any, start_call: "asyncio.Future[Tuple[int, str]]",
                           watch: str, before: Dict[str, int], expected: int
                           ) -> Tuple[Dict[str, int], Optional[str]]:
        """Wait for new trace files whose sizes stopped changing; call /stop_profile when
        they are late. Returns ({path: bytes}, how the trace stopped)."""
        conf = self.conf
        t0 = time.monotonic()
        stop_sent = False
        last: Dict[str, int] = {}
        stable_since: Optional[float] = None
        announced = 0
        while True:
            if await self._sleep(0.25):
                start_call.cancel()
                return {}, None
            now = time.monotonic()
            if start_call.done() and not start_call.cancelled():
                exc = start_call.exception()
                if exc is not None:
                    raise protocol.AgentError("start_profile", "/start_profile failed: %s"
                                              % (str(exc) or type(exc).__name__)) from None
                code, text = start_call.result()
                if code >= 400:
                    raise protocol.AgentError("start_profile", "/start_profile answered HTTP %d: %s"
                                              % (code, text[:300]))
            current = {p: s for p, s in _trace_files(watch).items()
                       if p not in before or before[p] != s}
            if len(current) > announced:
                announced = len(current)
                self.phase("waiting_traces", "%d of %d trace file(s) written"
                           % (len(current), expected))
            if current and current == last:
                if stable_since is None:
                    stable_since = now
                settle = 1.0 if len(current) >= expected else 5.0
                if now - stable_since >= settle:
                    if not start_call.done():
                        start_call.cancel()
                    return current, ("stop_profile" if stop_sent else "num_steps")
            else:
                stable_since = None
            last = current
            elapsed = now - t0
            if not current and not stop_sent and elapsed >= conf.stop_after:
                stop_sent = True
                self.phase("stopping", "no trace after %.0f s: calling /stop_profile" % elapsed)
                try:
                    code, text = await _post(target.endpoint, "/stop_profile", {},
                                             target.api_key, 60.0)
                    if code >= 400:
                        self.phase("stopping", "/stop_profile answered HTTP %d: %s"
                                   % (code, text[:200]))
                except Exception as exc:
                    self.phase("stopping", "/stop_profile failed: %s" % exc)
            if not current and elapsed >= conf.timeout:
                start_call.cancel()
                raise protocol.AgentError(
                    "no_traces", "no trace file appeared in %s within %.0f s; SGLang writes "
                    "traces on the server's own host (run the agent there, or pass --trace-dir)"
                    % (watch, elapsed))


# --- model facts -----------------------------------------------------------------------------

# quantization name -> bytes per quantized weight (no scale overhead; docs/roofline.md).
QUANT_BYTES = {
    "fp8": 1.0, "w8a8_fp8": 1.0, "modelopt_fp8": 1.0, "fbgemm_fp8": 1.0, "w8a8_int8": 1.0,
    "mxfp4": 0.5, "modelopt_fp4": 0.5, "nvfp4": 0.5, "nvfp4_online": 0.5, "petit_nvfp4": 0.5,
    "w4afp8": 0.5, "awq": 0.5, "awq_marlin": 0.5, "gptq": 0.5, "gptq_marlin": 0.5,
    "moe_wna16": 0.5, "mxfp8": 1.0, "int4": 0.5, "int8": 1.0,
}
DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0,
               "float8_e4m3fn": 1.0, "fp8": 1.0}


def _i(cfg: Dict[str, Any], *keys: str) -> Optional[int]:
    for key in keys:
        v = cfg.get(key)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
    return None


def count_params(config: Dict[str, Any]) -> Dict[str, Any]:
    """Total and active parameters of a decoder-only (MoE) transformer from its config.json.

    Counts embeddings, attention (MLA or GQA), dense MLPs, routed + shared experts and the
    router; leaves out biases, norms' tiny weights beyond the per-layer two, and MTP/draft
    layers. ``active`` = parameters one token passes through (k routed experts);
    ``decode_read`` = what a decode step must read: ``active`` without the input embedding
    table (only C rows are gathered) but with the LM head.
    """
    text_cfg = config.get("text_config")
    cfg: Dict[str, Any] = text_cfg if isinstance(text_cfg, dict) else config
    h = _i(cfg, "hidden_size", "d_model", "n_embd")
    layers = _i(cfg, "num_hidden_layers", "n_layer", "num_layers")
    vocab = _i(cfg, "vocab_size")
    if not h or not layers:
        raise ValueError("config.json lacks hidden_size / num_hidden_layers")
    vocab = vocab or 0
    heads = _i(cfg, "num_attention_heads", "n_head") or max(1, h // 128)
    notes: List[str] = []
    kv_lora = _i(cfg, "kv_lora_rank")
    if kv_lora:
        q_lora = _i(cfg, "q_lora_rank")
        nope = _i(cfg, "qk_nope_head_dim") or 128
        rope = _i(cfg, "qk_rope_head_dim") or 64
        v_dim = _i(cfg, "v_head_dim") or nope
        q = (h * q_lora + q_lora + q_lora * heads * (nope + rope)) if q_lora else \
            h * heads * (nope + rope)
        attn = q + h * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim) + \
            heads * v_dim * h
        attn_kind = "MLA"
    else:
        kv_heads = _i(cfg, "num_key_value_heads") or heads
        head_dim = _i(cfg, "head_dim") or h // heads
        attn = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
        attn_kind = "GQA" if kv_heads != heads else "MHA"
    experts = _i(cfg, "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
    top_k = _i(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts")
    inter = _i(cfg, "intermediate_size", "ffn_hidden_size") or 4 * h
    dense_mlp = 3 * h * inter
    moe_layers = 0
    expert = shared = router = 0
    if experts and experts > 1:
        moe_inter = _i(cfg, "moe_intermediate_size", "expert_intermediate_size") or inter
        expert = 3 * h * moe_inter
        n_shared = _i(cfg, "n_shared_experts", "num_shared_experts") or 0
        shared_inter = _i(cfg, "shared_expert_intermediate_size")
        shared = n_shared * expert + (3 * h * shared_inter if shared_inter else 0)
        router = h * experts
        first_dense = _i(cfg, "first_k_dense_replace") or 0
        freq = _i(cfg, "moe_layer_freq", "decoder_sparse_step") or 1
        raw_only = cfg.get("mlp_only_layers")
        mlp_only: List[Any] = raw_only if isinstance(raw_only, list) else []
        moe_layers = sum(1 for i in range(layers)
                         if i >= first_dense and (i - first_dense) % max(freq, 1) == 0
                         and i not in mlp_only)
        if not top_k:
            top_k = 1
            notes.append("num_experts_per_tok missing: assumed 1")
    dense_layers = layers - moe_layers
    norms = layers * 2 * h + h
    embed = vocab * h
    tied = bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    lm_head = 0 if tied else vocab * h
    base = embed + lm_head + layers * attn + dense_layers * dense_mlp + norms
    total = base + moe_layers * ((experts or 0) * expert + shared + router) if moe_layers \
        else base
    active = base + moe_layers * ((top_k or 0) * expert + shared + router) if moe_layers else base
    decode_read = active - embed + (vocab * h if tied else 0)
    if cfg.get("num_nextn_predict_layers"):
        notes.append("MTP (next-n) layers not counted")
    return {
        "total_params": int(total), "active_params": int(active),
        "decode_read_params": int(decode_read),
        "layers": layers, "moe_layers": moe_layers, "hidden_size": h, "vocab_size": vocab,
        "attention": attn_kind, "experts": experts if moe_layers else None,
        "experts_per_token": top_k if moe_layers else None,
        "expert_params": int(expert) if moe_layers else None,
        "shared_expert_params": int(shared) if moe_layers else None,
        "dense_params_per_step": int(decode_read - moe_layers * (top_k or 0) * expert),
        "notes": notes,
    }


def bytes_per_weight(config: Dict[str, Any], quant_file: Optional[Dict[str, Any]] = None,
                     server_quant: Optional[str] = None) -> Tuple[Optional[float], str, str]:
    """(bytes per quantized weight, the format's name, where that came from)."""
    qc = config.get("quantization_config")
    if isinstance(qc, dict):
        method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
        algo = str(qc.get("quant_algo") or "").lower()
        bits = qc.get("bits") or qc.get("w_bit")
        groups = qc.get("config_groups")
        if isinstance(groups, dict):
            for g in groups.values():
                w = g.get("weights") if isinstance(g, dict) else None
                if isinstance(w, dict) and isinstance(w.get("num_bits"), int):
                    bits = w["num_bits"]
                    break
        if "nvfp4" in algo or algo == "fp4":
            return 0.5, "NVFP4", "config.json quantization_config"
        if method in QUANT_BYTES:
            return QUANT_BYTES[method], method.upper(), "config.json quantization_config"
        if isinstance(bits, int) and bits > 0:
            return bits / 8.0, "%s %d-bit" % (method or "quantized", bits), \
                "config.json quantization_config"
    if isinstance(quant_file, dict):
        q = quant_file.get("quantization", quant_file)
        algo = str(q.get("quant_algo") or "").lower() if isinstance(q, dict) else ""
        if "fp4" in algo:
            return 0.5, "NVFP4", "hf_quant_config.json"
        if "fp8" in algo:
            return 1.0, "FP8", "hf_quant_config.json"
    if server_quant and server_quant.lower() in QUANT_BYTES:
        return QUANT_BYTES[server_quant.lower()], server_quant.upper(), "server --quantization"
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "").lower()
    if dtype in DTYPE_BYTES:
        return DTYPE_BYTES[dtype], dtype, "config.json torch_dtype"
    return None, "unknown", "not found"


def find_config(model_path: str) -> str:
    """config.json of a model directory, or of a Hugging Face id in the local HF cache."""
    p = os.path.expanduser(model_path)
    if os.path.isfile(p) and p.endswith(".json"):
        return p
    if os.path.isdir(p):
        cfg = os.path.join(p, "config.json")
        if os.path.isfile(cfg):
            return cfg
        raise FileNotFoundError("no config.json in %s" % p)
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub")
    repo = "models--" + model_path.strip("/").replace("/", "--")
    candidates = glob.glob(os.path.join(hub, repo, "snapshots", "*", "config.json"))
    if candidates:
        return max(candidates, key=os.path.getmtime)
    raise FileNotFoundError("%s is not a directory here and not in the Hugging Face cache (%s)"
                            % (model_path, hub))


def model_facts(model_path: str, server_quant: Optional[str] = None) -> Dict[str, Any]:
    path = find_config(model_path)
    with open(path, encoding="utf-8") as fh:
        config = json.load(fh)
    if not isinstance(config, dict):
        raise ValueError("%s is not a JSON object" % path)
    quant_file = None
    qpath = os.path.join(os.path.dirname(path), "hf_quant_config.json")
    if os.path.isfile(qpath):
        try:
            with open(qpath, encoding="utf-8") as fh:
                quant_file = json.load(fh)
        except (OSError, ValueError):
            quant_file = None
    facts = count_params(config)
    bpp, fmt, bsource = bytes_per_weight(config, quant_file, server_quant)
    facts.update(model_path=model_path, config_path=path,
                 architectures=config.get("architectures"), model_type=config.get("model_type"),
                 bytes_per_param=bpp, weight_format=fmt, bytes_source=bsource,
                 bytes_note=("the quantized width, applied to every weight read; layers kept "
                             "in BF16/FP8 (often attention and the LM head) and block scales "
                             "make the real bytes higher"))
    return facts


def run_model_facts(args: Any) -> int:
    model_path = args.model_path
    server_quant = None
    if not model_path:
        if not args.url:
            raise _usage("pass --model-path PATH or --url URL")
        try:
            endpoint = Endpoint(args.url)
        except ValueError as exc:
            raise _usage(str(exc)) from None
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        info = asyncio.run(server_info(endpoint, key))
        if not info:
            raise protocol.AgentError("connect", "no /server_info from %s" % endpoint.base)
        model_path = info.get("model_path")
        server_quant = info.get("quantization")
        if not model_path:
            raise protocol.AgentError("model_facts", "/server_info names no model_path")
    try:
        facts = model_facts(str(model_path), server_quant)
    except FileNotFoundError as exc:
        raise protocol.AgentError("model_facts", str(exc)) from None
    except (OSError, ValueError) as exc:
        raise protocol.AgentError("model_facts", "cannot read the model config: %s" % exc) \
            from None
    protocol.emit("model_facts", **facts)
    return 0
