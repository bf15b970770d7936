"""``bench sanity`` and ``bench sweep``: correctness prompts and concurrency sweeps, measured
next to the server (its loopback). Events are documented in docs/metrics.md.

    python -m dsv4tui.agent bench sanity --url http://127.0.0.1:30000 [--cases-json JSON]
    python -m dsv4tui.agent bench sweep --url http://127.0.0.1:30000 --levels 1:8,8:32
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import queue
import random
import re
import signal
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent import idle, protocol, stats
from dsv4tui.agent.openai_stream import (
    TRANSPORTS,
    Endpoint,
    RawResponse,
    StreamResult,
    build_body,
    chat_path,
    get_json,
    make_client,
    parse_stream,
    parse_stream_async,
    perf,
)
from dsv4tui.agent.openai_stream import run as run_loop

# Mirrors dsv4tui.config.DEFAULT_SANITY and SweepPlan (the agent cannot import config).
DEFAULT_CASES = [{"name": "arith-17x23", "prompt": "What is 17*23? Number only.",
                  "expect": r"^\s*391\s*$", "max_tokens": 24, "temperature": 0.0}]
DEFAULT_PLAN: Dict[str, Any] = {
    "levels": [[1, 8], [8, 32], [16, 48]], "input_len": 128, "output_len": 256, "warmup": 1,
    "temperature": 0.0, "endpoint": "chat", "request_timeout_s": 600.0, "stall_timeout_s": 60.0,
    "max_error_rate": 0.5, "ignore_eos": True, "seed": None, "allow_busy": False}

_WORDS = ["the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "as", "with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not", "but", "what", "all", "were", "when", "we", "there", "can", "an", "your", "which", "their", "said", "if", "do", "will", "each", "about", "how", "up", "out", "them", "then", "she", "many", "some", "so", "these", "would", "other", "into", "has", "more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than", "first", "been", "its", "who", "now", "people", "my", "made", "over", "did", "down", "only", "way", "find", "use", "may", "water", "long", "little", "very", "after", "words", "called", "just", "where", "most", "know", "get", "through", "back", "much", "before", "go", "good", "new", "write", "our", "used", "me", "man", "day", "too", "any", "same", "right", "look", "think", "also", "around", "another", "came", "come", "work", "three", "must", "because", "does", "part", "even", "place", "well", "such", "here", "take", "why", "help", "put", "different", "away", "again", "off", "went", "old", "number", "great", "tell", "men", "say", "small", "every", "found", "still", "between", "name", "should", "home", "big", "give", "air", "line", "set", "own", "under", "read", "last", "never", "us", "left", "end", "along", "while", "might", "next", "sound", "below", "saw", "something", "thought", "both", "few", "those", "always", "show", "large", "often", "together", "asked", "house", "world", "going", "want", "school", "important", "until", "form", "food", "keep", "children", "feet", "land", "side", "without", "boy", "once", "animal", "life", "enough", "took", "four", "head", "above", "kind", "began", "almost", "live", "page", "got", "earth", "need", "far", "hand", "high", "year", "mother", "light", "country", "father", "let", "night", "picture", "being", "study", "second", "soon", "story", "since", "white", "ever", "paper", "hard", "near", "sentence", "better", "best", "across", "during", "today", "however", "sure", "knew", "try", "told", "young", "sun", "thing", "whole", "hear", "example", "heard", "several", "change", "answer", "room", "sea", "against", "top", "turned", "learn", "point", "city", "play", "toward", "five", "himself", "usually", "money", "seen", "car", "morning", "river"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="sanity prompts and concurrency sweeps against an "
                       "OpenAI-compatible server")
    bsub = p.add_subparsers(dest="bench_command", required=True)
    san = bsub.add_parser("sanity", help="ask each case's prompt; check the answer's regex")
    _common(san)
    san.add_argument("--cases-json", help="JSON list of {name, prompt, expect, max_tokens, "
                     "temperature} (or @FILE); default: the 17*23 case")
    san.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    san.set_defaults(func=run_sanity)
    swp = bsub.add_parser("sweep", help="levels of (C concurrent, n requests)")
    _common(swp)
    swp.add_argument("--plan-json", help="JSON object with SweepPlan fields (or @FILE)")
    swp.add_argument("--levels", help="C:n,C:n,... e.g. 1:8,8:32,16:48")
    swp.add_argument("--input-len", type=int)
    swp.add_argument("--output-len", type=int)
    swp.add_argument("--warmup", type=int)
    swp.add_argument("--temperature", type=float)
    swp.add_argument("--request-timeout", type=float, dest="request_timeout_s")
    swp.add_argument("--stall-timeout", type=float, dest="stall_timeout_s")
    swp.add_argument("--max-error-rate", type=float)
    swp.add_argument("--seed", type=int, help="prompt seed (default: random per run)")
    swp.add_argument("--no-ignore-eos", action="store_true",
                     help="do not send ignore_eos (servers that reject it)")
    swp.add_argument("--allow-busy", action="store_true", default=False,
                     help="measure a level even when the server is busy before it (another "
                     "client's requests); the level is marked busy instead of refused")
    swp.set_defaults(func=run_sweep)


def _common(p: Any) -> None:
    p.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--model", help="model name to send (default: discovered from /v1/models)")
    p.add_argument("--api-key-env", help="env var holding the API key (sent as Bearer)")
    p.add_argument("--endpoint", choices=("chat", "completions"))
    p.add_argument("--transport", choices=TRANSPORTS, default="raw")
    p.add_argument("--connect-timeout", type=float, default=10.0)


# --- inputs ------------------------------------------------------------------------------


def _usage(message: str) -> protocol.AgentError:
    return protocol.AgentError("usage", message, protocol.EXIT_USAGE)


def _load_json(text: Optional[str], what: str) -> Any:
    if text is None:
        return None
    try:
        if text.startswith("@"):
            with open(text[1:], encoding="utf-8") as fh:
                text = fh.read()
        return json.loads(text)
    except OSError as exc:
        raise _usage("%s: cannot read %s: %s" % (what, text[1:], exc.strerror)) from None
    except ValueError as exc:
        raise _usage("%s is not valid JSON: %s" % (what, exc)) from None


def parse_levels(text: str) -> List[List[int]]:
    levels = []
    for part in text.split(","):
        try:
            c, n = (int(x) for x in part.strip().split(":"))
        except ValueError:
            raise _usage("--levels: %r is not C:n (e.g. 1:8,8:32)" % part) from None
        levels.append([c, n])
    return levels


def build_plan(args: Any) -> Dict[str, Any]:
    plan = dict(DEFAULT_PLAN)
    given = _load_json(args.plan_json, "--plan-json")
    if given is not None:
        if not isinstance(given, dict):
            raise _usage("--plan-json must be a JSON object")
        unknown = sorted(set(given) - set(DEFAULT_PLAN))
        if unknown:
            raise _usage("--plan-json: unknown keys %s" % ", ".join(unknown))
        plan.update(given)
    for key in ("input_len", "output_len", "warmup", "temperature", "request_timeout_s",
                "stall_timeout_s", "max_error_rate", "seed", "endpoint"):
        value = getattr(args, key, None)
        if value is not None:
            plan[key] = value
    if args.levels:
        plan["levels"] = parse_levels(args.levels)
    if getattr(args, "no_ignore_eos", False):
        plan["ignore_eos"] = False
    if getattr(args, "allow_busy", False):
        plan["allow_busy"] = True
    _check_plan(plan)
    return plan


def _check_plan(plan: Dict[str, Any]) -> None:
    levels = plan["levels"]
    if not isinstance(levels, list) or not levels:
        raise _usage("levels: at least one C:n level")
    for lv in levels:
        if (not isinstance(lv, (list, tuple)) or len(lv) != 2
                or not all(isinstance(x, int) and x >= 1 for x in lv)):
            raise _usage("levels: %r is not [C, n] with C, n >= 1" % (lv,))
        if lv[1] < lv[0]:
            raise _usage("levels: %d:%d: n must be at least C (with %d requests there are "
                         "never %d in flight)" % (lv[0], lv[1], lv[1], lv[0]))
    for key, low in (("input_len", 1), ("output_len", 1), ("warmup", 0)):
        if not isinstance(plan[key], int) or plan[key] < low:
            raise _usage("%s must be an integer >= %d" % (key, low))
    for key in ("request_timeout_s", "stall_timeout_s"):
        if not isinstance(plan[key], (int, float)) or plan[key] <= 0:
            raise _usage("%s must be > 0" % key)
    if not isinstance(plan["max_error_rate"], (int, float)) or not 0 <= plan["max_error_rate"] <= 1:
        raise _usage("max_error_rate must be between 0 and 1")
    if plan["endpoint"] not in ("chat", "completions"):
        raise _usage("endpoint must be chat or completions")
    for key in ("ignore_eos", "allow_busy"):
        if not isinstance(plan[key], bool):
            raise _usage("%s must be true or false" % key)
    if plan["seed"] is not None and (not isinstance(plan["seed"], int)
                                     or isinstance(plan["seed"], bool)):
        raise _usage("seed must be an integer or null")


def load_cases(text: Optional[str]) -> List[Dict[str, Any]]:
    cases = _load_json(text, "--cases-json")
    if cases is None:
        return [dict(c) for c in DEFAULT_CASES]
    if not isinstance(cases, list) or not cases:
        raise _usage("--cases-json must be a non-empty JSON list")
    out = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or not case.get("prompt") or "expect" not in case:
            raise _usage("sanity case %d needs a prompt and an expect regex" % i)
        try:
            re.compile(case["expect"])
        except (re.error, TypeError) as exc:
            raise _usage("sanity case %d: bad regex %r: %s" % (i, case["expect"], exc)) from None
        out.append({"name": case.get("name") or "case-%d" % (i + 1), "prompt": case["prompt"],
                    "expect": case["expect"], "max_tokens": int(case.get("max_tokens", 24)),
                    "temperature": float(case.get("temperature", 0.0))})
    return out


def make_prompt(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


# --- target ------------------------------------------------------------------------------


class Target:
    def __init__(self, endpoint: Endpoint, model: str, model_source: str,
                 api_key: Optional[str], server_version: Optional[str]) -> None:
        self.endpoint = endpoint
        self.model = model
        self.model_source = model_source
        self.api_key = api_key
        self.server_version = server_version


async def resolve_target(args: Any) -> Target:
    try:
        endpoint = Endpoint(args.url)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise _usage("the API key env var %s is not set" % args.api_key_env)
    version = await _server_version(endpoint, api_key)
    if args.model:
        return Target(endpoint, args.model, "flag", api_key, version)
    problems = []
    for api, pick in (("/v1/models", _model_from_list), ("/model_info", _model_from_info),
                      ("/get_model_info", _model_from_info)):
        try:
            name = pick(await get_json(endpoint, api, api_key, args.connect_timeout))
        except Exception as exc:  # any failure: try the next way
            problems.append("%s: %s" % (api, _short(exc)))
            if "connect" in type(exc).__name__.lower():
                raise protocol.AgentError("connect", "cannot connect to %s: %s"
                                          % (endpoint.base, _short(exc))) from None
            continue
        if name:
            return Target(endpoint, name, api, api_key, version)
        problems.append("%s: no model name" % api)
    raise protocol.AgentError("model", "cannot discover the served model (%s); pass --model NAME"
                              % "; ".join(problems), protocol.EXIT_USAGE)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def _model_from_list(obj: Any) -> Optional[str]:
    data = obj.get("data") if isinstance(obj, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0].get("id")
    return None


def _model_from_info(obj: Any) -> Optional[str]:
    if isinstance(obj, dict):
        return obj.get("served_model_name") or obj.get("model_path")
    return None


async def _server_version(endpoint: Endpoint, api_key: Optional[str]) -> Optional[str]:
    for api in ("/server_info", "/get_server_info"):
        try:
            info = await get_json(endpoint, api, api_key, 5.0)
        except Exception:
            continue
        if isinstance(info, dict) and info.get("version"):
            return str(info["version"])
    return None


def _emit_target(target: Target, args: Any, **extra: Any) -> None:
    protocol.emit("bench_target", url=target.endpoint.base, model=target.model,
                  model_source=target.model_source, server_version=target.server_version,
                  transport=args.transport, **extra)


# --- sanity ------------------------------------------------------------------------------


def run_sanity(args: Any) -> int:
    from dsv4tui.agent import bench_lock

    bench_lock.check_free("a sanity check")  # its requests would land in someone's sweep
    cases = load_cases(args.cases_json)
    failed = run_loop(_sanity(args, cases))
    if failed:
        raise protocol.AgentError("sanity_failed", "%d of %d sanity cases failed"
                                  % (failed, len(cases)))
    return 0


async def _sanity(args: Any, cases: List[Dict[str, Any]]) -> int:
    target = await resolve_target(args)
    endpoint = args.endpoint or "chat"
    _emit_target(target, args, endpoint=endpoint)
    client = make_client(args.transport, target.endpoint, target.api_key, 1, args.connect_timeout)
    failed = 0
    try:
        for i, case in enumerate(cases):
            body = build_body(endpoint, target.model, case["prompt"], case["max_tokens"],
                              case["temperature"])
            raw = await client.request(target.endpoint.path(chat_path(endpoint)), body,
                                       args.timeout, min(args.timeout, 60.0))
            res = parse_stream(raw)
            passed = res.ok and re.search(case["expect"], res.answer) is not None
            failed += not passed
            protocol.emit("sanity_case", index=i, name=case["name"], prompt=case["prompt"],
                          expect=case["expect"], answer=res.answer, passed=passed,
                          latency_s=round(res.t_end - res.t_send, 4),
                          ttft_s=_rel(res.token_times[0] if res.token_times else None, res),
                          output_tokens=res.output_tokens, reasoning_chars=len(res.reasoning),
                          error_kind=res.error_kind, error=res.error)
    finally:
        await client.aclose()
    protocol.emit("sanity", passed=failed == 0, total=len(cases), failed=failed)
    return failed


def _rel(t: Optional[float], res: StreamResult) -> Optional[float]:
    return None if t is None else round(t - res.t_send, 6)


# --- sweep -------------------------------------------------------------------------------


class _Sink:
    """Writes events from a thread, so a slow pipe (SSH) never blocks the measuring loop."""

    def __init__(self) -> None:
        self._q: "queue.SimpleQueue[Optional[Tuple[str, Dict[str, Any]]]]" = queue.SimpleQueue()
        self.broken = False
        self._thread = threading.Thread(target=self._run, name="bench-events", daemon=True)
        self._thread.start()

    def emit(self, type_: str, **fields: Any) -> None:
        self._q.put((type_, fields))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self.broken:
                continue
            try:
                protocol.emit(item[0], **item[1])
            except (OSError, ValueError):
                self.broken = True

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=30)


class Sweep:
    """State of one sweep; survives a KeyboardInterrupt so the final events still go out.

    Level status (docs/metrics.md): ``done`` = all n requests ran and succeeded; ``partial``
    = some failed or did not run, under the error limit, or the sweep was cancelled during
    it; ``failed`` = over ``max_error_rate``, the server went away, stalled, was busy (without
    ``allow_busy``) or could not be reached. The sweep is ``done`` only when every level is.
    """

    def __init__(self, args: Any, plan: Dict[str, Any], sink: Any) -> None:
        for key, value in DEFAULT_PLAN.items():  # a plan from an older caller: the defaults
            plan.setdefault(key, value)
        self.args = args
        self.plan = plan
        self.sink = sink
        self.status = "running"  # done | partial | failed | cancelled once finished
        self.reason: Optional[str] = None
        self.levels_done = 0
        self.levels: List[Dict[str, Any]] = []  # the level events sent
        self.current: Optional[Dict[str, Any]] = None  # the level in progress
        self.cancel: Optional[asyncio.Event] = None
        self.cancelled = False
        self.seed = plan["seed"] if plan["seed"] is not None else random.randrange(1 << 30)

    async def run(self) -> None:
        self.cancel = protocol.cancel_event_on_signals()
        target = await resolve_target(self.args)
        plan = self.plan
        self.sink.emit("bench_target", url=target.endpoint.base, model=target.model,
                       model_source=target.model_source, server_version=target.server_version,
                       transport=self.args.transport, plan=plan, seed=self.seed)
        gc.collect()
        gc.freeze()  # what exists now (imports, client) is never scanned again
        biggest = max(c for c, _ in plan["levels"])
        client = make_client(self.args.transport, target.endpoint, target.api_key, biggest,
                             self.args.connect_timeout)
        try:
            await self._probe_ignore_eos(client, target)
            for li, (c, n) in enumerate(plan["levels"]):
                if self.cancel.is_set():
                    break
                await self._level(client, target, li, c, n)
                if self.levels and self.levels[-1]["status"] == "failed":
                    break
        finally:
            await client.aclose()
        if self.cancel.is_set():
            self.cancelled = True

    async def _probe_ignore_eos(self, client: Any, target: Target) -> None:
        """Servers outside SGLang/vLLM may reject the non-standard ``ignore_eos`` (transformers
        serve: HTTP 422). One tiny request finds out; then the sweep runs without it and says
        so, instead of failing every request."""
        plan = self.plan
        if not plan["ignore_eos"] or target.server_version:
            return  # SGLang (it answers /server_info with a version) takes ignore_eos
        endpoint = plan["endpoint"]
        path = target.endpoint.path(chat_path(endpoint))
        body = build_body(endpoint, target.model, "Say OK.", 2, plan["temperature"], True)
        data = client.request_bytes(path, body) if hasattr(client, "request_bytes") else None
        res = parse_stream(await client.request(path, body, 60.0, 30.0, data))
        if not res.ok and res.status in (400, 422) and "ignore_eos" in str(res.error or ""):
            plan["ignore_eos"] = False
            self.sink.emit("notice", kind="ignore_eos_rejected", status=res.status,
                           message="the server rejects ignore_eos (HTTP %s); sweeping without "
                           "it, so a request may end at EOS before output_len" % res.status)

    async def _idle_check(self, client: Any, target: Target, c: int
                          ) -> Optional[Dict[str, Any]]:
        plan = self.plan
        endpoint = plan["endpoint"]
        body = build_body(endpoint, target.model, "Say OK.", 1, 0.0)
        fut = asyncio.ensure_future(idle.check(
            client, target.endpoint, target.endpoint.path(chat_path(endpoint)), body,
            target.api_key, target.model, plan["request_timeout_s"], plan["stall_timeout_s"],
            self.cancel))
        if not await self._unless_cancelled(fut):
            return None
        return fut.result()

    async def _level(self, client: Any, target: Target, li: int, c: int, n: int) -> None:
        plan = self.plan
        assert self.cancel is not None
        check = await self._idle_check(client, target, c)
        if check is None:
            return  # cancelled
        busy = check["verdict"] == "busy"
        refusal = None
        if check["verdict"] == "unreachable":
            refusal = ("unreachable", "cannot connect to the server before level C=%d: %s"
                       % (c, check["detail"]))
        elif check["verdict"] == "unresponsive":
            refusal = ("unresponsive", "the server is not answering before level C=%d: %s"
                       % (c, check["detail"]))
        elif busy and not plan["allow_busy"]:
            refusal = ("busy", "server busy before level C=%d: %s" % (c, idle.describe(check)))
        if refusal is not None:
            self._open(li, c, n, check, busy, 0)
            self.finish_level(*refusal)
            return
        if busy:
            self.sink.emit("notice", kind="busy", level=li, concurrency=c, idle=check,
                           message="measuring level C=%d although the server is busy (%s): "
                           "allow_busy is set" % (c, idle.describe(check)))
        rng = random.Random(self.seed * 1000 + li)
        endpoint = plan["endpoint"]
        path = target.endpoint.path(chat_path(endpoint))
        bodies = [build_body(endpoint, target.model, make_prompt(rng, plan["input_len"]),
                             plan["output_len"], plan["temperature"], plan["ignore_eos"])
                  for _ in range(n + plan["warmup"])]
        datas = [client.request_bytes(path, b) if hasattr(client, "request_bytes") else None
                 for b in bodies]
        timeout, stall = plan["request_timeout_s"], plan["stall_timeout_s"]
        try:
            await client.warm(c)
        except Exception:
            # pre-opening connections is an optimisation: if the server is unreachable, every
            # request of the level fails on its own and is counted with its error kind
            pass
        warm = asyncio.ensure_future(asyncio.gather(*(
            client.request(path, bodies[n + i], timeout, stall, datas[n + i])
            for i in range(plan["warmup"]))))
        if not await self._unless_cancelled(warm):
            return
        warm_raws: List[RawResponse] = warm.result()
        warm_errors = sum(1 for r in warm_raws if not parse_stream(r).ok)
        problem = await self._warmup_problem(client, target, warm_raws, c, stall)
        if problem is not None:
            self._open(li, c, n, check, busy, warm_errors)
            self.finish_level(*problem)
            return
        self.sink.emit("level_start", level=li, concurrency=c, requests=n,
                       warmup=plan["warmup"], warmup_errors=warm_errors, time=time.time(),
                       idle=check, busy=busy)
        results = self._open(li, c, n, check, busy, warm_errors)
        limit = plan["max_error_rate"] * n
        failed_level = asyncio.Event()
        halt: Dict[str, str] = {}  # why no more requests are sent: "stalled" | "connect"
        # A worker whose request stalled sends nothing more until another request of the level
        # finishes (the server is not stuck after all); when no request is left in flight but
        # stalled ones, every request in flight has stalled: the level fails at once.
        flow = {"next": 0, "active": min(c, n), "paused": 0, "answered": 0}
        resume = asyncio.Condition()
        done: "asyncio.Queue[Optional[Tuple[int, RawResponse]]]" = asyncio.Queue()
        planned_tokens = plan["output_len"] if plan["ignore_eos"] else None
        t0 = perf()

        def judge() -> None:
            """No worker is sending or receiving, some are paused on a stall, requests are
            left: every request in flight stalled."""
            if flow["active"] == 0 and flow["paused"] and flow["next"] < n and not halt:
                halt["stalled"] = "every request in flight stalled"

        def may_go_on(seen: int) -> bool:
            return bool(halt) or flow["answered"] > seen or flow["next"] >= n

        async def worker() -> None:
            while not halt and flow["next"] < n:
                i = flow["next"]
                flow["next"] += 1
                raw = await client.request(path, bodies[i], timeout, stall, datas[i])
                done.put_nowait((i, raw))
                if raw.error_kind is None:
                    flow["answered"] += 1
                elif raw.error_kind == "connect" and not halt:
                    halt["connect"] = raw.error or "cannot connect"
                async with resume:
                    if raw.error_kind == "stall":
                        seen = flow["answered"]
                        flow["active"] -= 1
                        flow["paused"] += 1
                        judge()
                        resume.notify_all()
                        await resume.wait_for(functools.partial(may_go_on, seen))
                        flow["paused"] -= 1
                        flow["active"] += 1
                    else:
                        resume.notify_all()
            async with resume:
                flow["active"] -= 1
                judge()
                resume.notify_all()

        async def post() -> None:
            """Parse finished responses one at a time, yielding between slices, and emit."""
            errors = 0
            while True:
                item = await done.get()
                if item is None:
                    return
                res = await parse_stream_async(item[1])
                event = request_event(res, li, c, item[0], t0, planned_tokens)
                results.append(event)
                self.sink.emit("request", **event)
                if not event["ok"]:
                    errors += 1
                    if errors > limit:
                        failed_level.set()
                if self.sink.broken:
                    self.cancel.set()  # type: ignore[union-attr]
                await asyncio.sleep(0)

        poster = asyncio.ensure_future(post())
        gc.disable()  # a full collection here takes tens of ms: never during a level
        try:
            workers: "asyncio.Future[Any]" = asyncio.gather(*(worker() for _ in range(min(c, n))))
            stops: "List[asyncio.Future[Any]]" = [asyncio.ensure_future(self.cancel.wait()),
                                                  asyncio.ensure_future(failed_level.wait())]
            await asyncio.wait([workers, *stops], return_when=asyncio.FIRST_COMPLETED)
            for fut in [workers, *stops]:
                fut.cancel()
            await asyncio.gather(workers, *stops, return_exceptions=True)
            done.put_nowait(None)  # finished requests are still parsed and kept
            await poster
        finally:
            poster.cancel()
            gc.enable()
        failure: Optional[Tuple[str, str]] = None
        errs = sum(1 for r in results if not r["ok"])
        if "stalled" in halt:
            failure = ("stalled", "level C=%d: the server stalled: every request in flight got "
                       "no bytes for %.1f s; stopped after %d of %d requests (the rest were not "
                       "sent)" % (c, stall, len(results), n))
        elif failed_level.is_set():
            failure = ("error_rate", "level C=%d: %d of %d requests failed (max error rate %g)"
                       % (c, errs, n, plan["max_error_rate"]))
        if (failure is None or failure[0] == "error_rate") and errs and not self.cancel.is_set():
            why = await _unreachable(target.endpoint)
            if why is not None:
                failure = ("server_gone", "level C=%d: the server went away (%s) after %d of %d "
                           "requests; %d failed" % (c, why, len(results), n, errs))
        if failure is not None:
            self.finish_level(*failure)
        else:
            self.finish_level(interrupted=self.cancel.is_set() and len(results) < n)
        gc.collect()

    async def _warmup_problem(self, client: Any, target: Target, raws: List[RawResponse],
                              c: int, stall: float) -> Optional[Tuple[str, str]]:
        """A warm-up that shows the server stuck or gone fails the level before it starts."""
        if raws and all(r.error_kind == "stall" for r in raws):
            return ("stalled", "level C=%d: the server stalled during the warm-up (no bytes for "
                    "%.1f s); no request of the level was sent" % (c, stall))
        if any(r.error_kind == "connect" for r in raws):
            why = await _unreachable(target.endpoint)
            if why is not None:
                return ("server_gone", "level C=%d: the server went away during the warm-up "
                        "(%s); no request of the level was sent" % (c, why))
        return None

    async def _unless_cancelled(self, fut: "asyncio.Future[Any]") -> bool:
        """Wait for ``fut``; False (and ``fut`` cancelled) if the sweep is cancelled first."""
        assert self.cancel is not None
        stop = asyncio.ensure_future(self.cancel.wait())
        await asyncio.wait([fut, stop], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if fut.done():
            return True
        fut.cancel()
        await asyncio.gather(fut, return_exceptions=True)
        return False

    def _open(self, li: int, c: int, n: int, check: Dict[str, Any], busy: bool,
              warm_errors: int) -> List[Dict[str, Any]]:
        """The level is in progress from here (its request events go to the list returned)."""
        results: List[Dict[str, Any]] = []
        self.current = {"level": li, "concurrency": c, "requests": n, "results": results,
                        "started_at": time.time(), "cpu0": time.process_time(), "idle": check,
                        "busy": busy, "warmup_errors": warm_errors}
        return results

    def finish_level(self, failure: Optional[str] = None, reason: Optional[str] = None,
                     interrupted: bool = False) -> None:
        """Send the ``level`` event of the level in progress (none: nothing to do).
        ``failure``: why it failed (a code, and ``reason`` in words); ``interrupted``: the
        sweep was cancelled during it."""
        cur = self.current
        if cur is None:
            return
        self.current = None
        results = cur["results"]
        c, n = cur["concurrency"], cur["requests"]
        level = stats.level_metrics(results, c, n)
        status = "done"
        if failure is not None:
            status = "failed"
        elif interrupted:
            status = "partial"
            reason = "level C=%d: cancelled after %d of %d requests" % (c, len(results), n)
        elif level["errors"] or level["not_run"]:
            status = "partial"
            kinds = ", ".join("%s %d" % kv for kv in sorted(level["errors_by_kind"].items()))
            reason = "level C=%d: %d of %d requests failed (%s)" % (c, level["errors"], n, kinds)
            if level["not_run"]:
                reason += "; %d did not run" % level["not_run"]
        cpu = time.process_time() - cur["cpu0"]
        now = time.time()
        level.update(level=cur["level"], status=status, reason=reason, failure=failure,
                     partial=len(results) < n, idle=cur["idle"], busy=cur["busy"],
                     warmup_errors=cur["warmup_errors"], ignore_eos=bool(self.plan["ignore_eos"]),
                     planned_output_len=self.plan["output_len"], started_at=cur["started_at"],
                     finished_at=now, time=now, client_cpu_s=round(cpu, 4),
                     client_cpu_us_per_token=(round(cpu * 1e6 / level["output_tokens"], 2)
                                              if level["output_tokens"] else None))
        self.sink.emit("level", **level)
        self.levels.append(level)
        self.levels_done += 1

    def conclude(self) -> None:
        """Set ``status`` and ``reason`` from the levels (done only when every planned level
        ran and is done)."""
        planned = len(self.plan["levels"])
        failed = [lv for lv in self.levels if lv["status"] == "failed"]
        partial = [lv for lv in self.levels if lv["status"] == "partial"]
        if self.cancelled:
            self.status = "cancelled"
            self.reason = "cancelled after %d of %d levels" % (
                sum(1 for lv in self.levels if lv["status"] == "done"), planned)
        elif failed:
            self.status, self.reason = "failed", failed[0]["reason"]
        elif partial:
            self.status = "partial"
            self.reason = "%d of %d levels partial: %s" % (len(partial), planned,
                                                           partial[0]["reason"])
        elif self.levels_done < planned:
            self.status = "partial"
            self.reason = "only %d of %d levels ran" % (self.levels_done, planned)
        else:
            self.status, self.reason = "done", None

    def summary(self) -> Dict[str, Any]:
        """The ``sweep`` event's fields."""
        kinds: Dict[str, int] = {}
        for lv in self.levels:
            for kind, count in lv["errors_by_kind"].items():
                kinds[kind] = kinds.get(kind, 0) + count
        levels = self.levels
        return {"status": self.status, "reason": self.reason, "levels": self.levels_done,
                "levels_planned": len(self.plan["levels"]),
                "level_status": [lv["status"] for lv in levels],
                "requests": sum(n for _, n in self.plan["levels"]),
                "completed": sum(lv["completed"] for lv in levels),
                "errors": sum(lv["errors"] for lv in levels), "errors_by_kind": kinds,
                "not_run": sum(n for _, n in self.plan["levels"])
                - sum(lv["completed"] + lv["errors"] for lv in levels),
                "short_outputs": sum(lv["short_outputs"] for lv in levels),
                "busy_levels": sum(1 for lv in levels if lv["busy"])}


async def _unreachable(endpoint: Endpoint, timeout: float = 2.0) -> Optional[str]:
    """None when a TCP connection to the server opens, else why not."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(endpoint.host, endpoint.port),
                                           timeout)
    except asyncio.TimeoutError:
        return "cannot connect to %s: timed out" % endpoint.base
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else _short(exc)
        return "cannot connect to %s: %s" % (endpoint.base, why)
    writer.close()
    return None


def request_event(res: StreamResult, level: int, c: int, index: int, t0: float,
                  planned_tokens: Optional[int] = None) -> Dict[str, Any]:
    """The ``request`` event for one finished request (times in seconds). ``planned_tokens``:
    the fixed output length asked for (ignore_eos in force); an ok request with fewer output
    tokens is marked ``short_output``."""
    out_tokens = res.output_tokens
    event: Dict[str, Any] = {"level": level, "concurrency": c, "index": index, "ok": res.ok,
                             "start_s": round(res.t_send - t0, 6)}
    event.update(stats.request_metrics(res.t_send, res.token_times, res.first_answer_t,
                                       res.t_end, out_tokens))
    event.update(output_tokens=out_tokens, token_source=res.token_source,
                 prompt_tokens=res.prompt_tokens, finish_reason=res.finish_reason,
                 done_marker=res.done_marker, status=res.status, error_kind=res.error_kind,
                 error=res.error,
                 short_output=bool(planned_tokens is not None and res.ok
                                   and out_tokens < planned_tokens))
    return event


def execute_sweep(args: Any, plan: Dict[str, Any], sink: Any) -> Sweep:
    """Run a whole sweep, its events to ``sink`` (``emit(type, **fields)``, ``broken``),
    ending with the ``sweep`` event; returns the Sweep (``status``, ``reason``). Ctrl-C and
    SIGTERM cancel it cleanly (what finished is kept). The host-side campaign runner calls
    this with its journal as the sink; ``bench sweep`` with stdout."""
    sweep = Sweep(args, plan, sink)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_loop(sweep.run())
    except KeyboardInterrupt:
        sweep.cancelled = True
    finally:  # the loop's own handlers are gone with it: Ctrl-C/SIGTERM end us cleanly again
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    if sweep.current is not None:  # interrupted mid-level: keep what finished
        sweep.finish_level(interrupted=True)
    sweep.conclude()
    sink.emit("sweep", **sweep.summary())
    return sweep


def run_sweep(args: Any) -> int:
    from dsv4tui.agent import bench_lock

    plan = build_plan(args)
    if args.endpoint:
        plan["endpoint"] = args.endpoint
    # the host's one load generator: never beside a campaign's (or another sweep's)
    if not bench_lock.acquire({"id": None, "name": "bench sweep", "kind": "sweep"}):
        raise bench_lock.busy_error(bench_lock.holder(), "another sweep")
    sink = _Sink()
    try:
        sweep = execute_sweep(args, plan, sink)
    finally:
        sink.close()
        bench_lock.release()
    if sweep.status == "cancelled":
        return 130
    if sweep.status != "done":
        raise protocol.AgentError("sweep_" + sweep.status, sweep.reason or "sweep " + sweep.status)
    return 0
