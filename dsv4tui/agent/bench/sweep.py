"""``bench sanity`` and ``bench sweep``: correctness prompts and load sweeps, measured next
to the server (its loopback). Events are documented in docs/metrics.md.

    python -m dsv4tui.agent bench sanity --url http://127.0.0.1:30000 [--cases-json JSON]
    python -m dsv4tui.agent bench sweep --url http://127.0.0.1:30000 --levels 1:8,8:32
    python -m dsv4tui.agent bench sweep --url ... --rates 2:100,4:200 --goodput ttft:500

A sweep's levels are closed-loop ``C:n`` levels (C requests in flight, n in all) and then
open-loop ``rate:n`` levels (requests sent on a seeded Poisson or constant timeline,
agent/bench/arrivals.py); a big level is spread over worker processes (agent/bench/workers.py).
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import queue
import random
import re
import signal
import threading
import time
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from dsv4tui.agent import protocol
from dsv4tui.agent.bench import arrivals, datasets, idle, plan_size, saturation, stats, workers
from dsv4tui.agent.bench import levels as level_text
from dsv4tui.agent.bench import plan as sweep_plan
from dsv4tui.agent.bench import progress as level_progress
from dsv4tui.agent.bench.loadgen import HALT_STALLED, HALT_STOP, Flow, LevelLoad, request_event
from dsv4tui.agent.bench.openai_stream import (
    TRANSPORTS,
    Endpoint,
    RawResponse,
    StreamResult,
    build_body,
    chat_path,
    get_json,
    make_client,
    parse_stream,
)
from dsv4tui.agent.bench.openai_stream import run as run_loop
from dsv4tui.agent.bench.sanity_cases import DEFAULT_CASES

__all__ = ["Sweep", "TargetSpec", "build_plan", "checked_plan", "request_event",
           "resolve_target", "run", "run_loop"]

OPEN_LOOP_EST_S = 10.0  # in flight at a rate r without a cap: about r x this (workers, pool)
PREP_SLICE = 2000  # requests built between two looks at the clock and the cancel
PREP_ANNOUNCE = 10000  # a level this big says that it is preparing (a smaller one is quick)

_WORDS = ["the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "as", "with", "his", "they", "at", "be", "this", "from", "have", "or", "by", "one", "had", "not", "but", "what", "all", "were", "when", "we", "there", "can", "an", "your", "which", "their", "said", "if", "do", "will", "each", "about", "how", "up", "out", "them", "then", "she", "many", "some", "so", "these", "would", "other", "into", "has", "more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than", "first", "been", "its", "who", "now", "people", "my", "made", "over", "did", "down", "only", "way", "find", "use", "may", "water", "long", "little", "very", "after", "words", "called", "just", "where", "most", "know", "get", "through", "back", "much", "before", "go", "good", "new", "write", "our", "used", "me", "man", "day", "too", "any", "same", "right", "look", "think", "also", "around", "another", "came", "come", "work", "three", "must", "because", "does", "part", "even", "place", "well", "such", "here", "take", "why", "help", "put", "different", "away", "again", "off", "went", "old", "number", "great", "tell", "men", "say", "small", "every", "found", "still", "between", "name", "should", "home", "big", "give", "air", "line", "set", "own", "under", "read", "last", "never", "us", "left", "end", "along", "while", "might", "next", "sound", "below", "saw", "something", "thought", "both", "few", "those", "always", "show", "large", "often", "together", "asked", "house", "world", "going", "want", "school", "important", "until", "form", "food", "keep", "children", "feet", "land", "side", "without", "boy", "once", "animal", "life", "enough", "took", "four", "head", "above", "kind", "began", "almost", "live", "page", "got", "earth", "need", "far", "hand", "high", "year", "mother", "light", "country", "father", "let", "night", "picture", "being", "study", "second", "soon", "story", "since", "white", "ever", "paper", "hard", "near", "sentence", "better", "best", "across", "during", "today", "however", "sure", "knew", "try", "told", "young", "sun", "thing", "whole", "hear", "example", "heard", "several", "change", "answer", "room", "sea", "against", "top", "turned", "learn", "point", "city", "play", "toward", "five", "himself", "usually", "money", "seen", "car", "morning", "river"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="sanity prompts and load sweeps against an "
                       "OpenAI-compatible server")
    bsub = p.add_subparsers(dest="bench_command", required=True)
    san = bsub.add_parser("sanity", help="ask each case's prompt; check the answer's regex")
    _common(san)
    san.add_argument("--cases-json", help="JSON list of {name, prompt, expect, max_tokens, "
                     "temperature} (or @FILE); default: the 17*23 case")
    san.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    san.set_defaults(func=run_sanity)
    swp = bsub.add_parser("sweep", help="closed-loop levels (C concurrent, n requests) and "
                          "open-loop levels (rate req/s, n requests)")
    _common(swp)
    swp.add_argument("--plan-json", help="JSON object with SweepPlan fields (or @FILE)")
    swp.add_argument("--levels", help="C:n,C:n,... e.g. 1:8,8:32,16:48 ('' for none)")
    swp.add_argument("--rates", help="rate:n,... open-loop levels, e.g. 2:100,4:200 (req/s)")
    swp.add_argument("--arrival", choices=arrivals.KINDS, help="rate levels' arrivals "
                     "(default poisson)")
    swp.add_argument("--max-concurrency", type=int, help="at most this many requests of a "
                     "rate level in flight")
    swp.add_argument("--input-len", type=int)
    swp.add_argument("--output-len", type=int)
    swp.add_argument("--random-range-ratio", type=float, help="lengths uniform in "
                     "[L*r, L] (bench_serving's); 1 = fixed (default)")
    swp.add_argument("--dataset", help="prompts from a file on this host: ShareGPT JSON or "
                     "JSON lines of {prompt, output_len}")
    swp.add_argument("--warmup", type=int)
    swp.add_argument("--temperature", type=float)
    swp.add_argument("--request-timeout", type=float, dest="request_timeout_s")
    swp.add_argument("--stall-timeout", type=float, dest="stall_timeout_s")
    swp.add_argument("--max-error-rate", type=float)
    swp.add_argument("--seed", type=int, help="prompt and arrival seed (default: random per "
                     "run, reported)")
    swp.add_argument("--goodput", help="targets a good request meets: ttft:MS,tpot:MS,e2el:MS "
                     "(any of them)")
    swp.add_argument("--stop-when-saturated", action="store_true", default=False,
                     help="stop after two levels in a row in which the server did not keep up")
    swp.add_argument("--workers", type=int, help="load generator processes per level "
                     "(default: from the level and the host's cores)")
    swp.add_argument("--no-ignore-eos", action="store_true",
                     help="do not send ignore_eos (servers that reject it)")
    swp.add_argument("--allow-busy", action="store_true", default=False,
                     help="measure a level even when the server is busy before it (another "
                     "client's requests); the level is marked busy instead of refused")
    swp.set_defaults(func=run_sweep)
    reach = bsub.add_parser("reach", help="does the server answer HTTP from this host? (a "
                            "reach event: reachable, connected, answered, status, error)")
    reach.add_argument("--url", required=True, help="the server's base URL")
    reach.add_argument("--timeout", type=float, default=3.0, help="seconds to connect")
    reach.add_argument("--answer-timeout", type=float, default=10.0,
                       help="seconds to wait for an HTTP answer once connected")
    reach.set_defaults(func=run_reach)


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
    try:
        return [list(lv) for lv in level_text.parse_levels(text, required=False)]
    except ValueError as exc:
        raise _usage("--levels: %s" % exc) from None


def parse_rates(text: str) -> List[List[float]]:
    try:
        return [[rate, n] for rate, n in level_text.parse_rates(text)]
    except ValueError as exc:
        raise _usage("--rates: %s" % exc) from None


def parse_goodput(text: str) -> Dict[str, float]:
    """``ttft:500,tpot:50,e2el:20000`` -> {ttft_ms: 500, tpot_ms: 50, e2el_ms: 20000}."""
    try:
        return level_text.parse_goodput(text) or {}
    except ValueError as exc:
        raise _usage("--goodput: %s" % exc) from None


def checked_plan(given: Dict[str, Any]) -> Dict[str, Any]:
    """``given`` over the plan's defaults, checked (agent/bench/plan.py): the plan a sweep
    runs, or a usage error saying what is wrong."""
    try:
        return sweep_plan.make(given)
    except ValueError as exc:
        raise _usage(str(exc)) from None


def build_plan(args: Any) -> Dict[str, Any]:
    """The plan of ``bench sweep``'s flags: ``--plan-json``, then the flags over it."""
    given = _load_json(getattr(args, "plan_json", None), "--plan-json")
    if given is not None and not isinstance(given, dict):
        raise _usage("--plan-json must be a JSON object")
    plan = dict(given or {})
    for key in ("input_len", "output_len", "warmup", "temperature", "request_timeout_s",
                "stall_timeout_s", "max_error_rate", "seed", "endpoint", "arrival",
                "max_concurrency", "random_range_ratio", "workers"):
        value = getattr(args, key, None)
        if value is not None:
            plan[key] = value
    if getattr(args, "levels", None) is not None:
        plan["levels"] = parse_levels(args.levels)
    if getattr(args, "rates", None):
        plan["rates"] = parse_rates(args.rates)
        if getattr(args, "levels", None) is None and given is None:
            plan["levels"] = []  # --rates alone: only the rate levels
    if getattr(args, "goodput", None):
        plan["goodput"] = parse_goodput(args.goodput)
    if getattr(args, "dataset", None):
        try:
            fmt, entries = datasets.load(args.dataset)
        except datasets.DatasetError as exc:
            raise _usage("--dataset: %s" % exc) from None
        if getattr(args, "output_len", None) is not None:
            entries = datasets.without_lengths(entries)  # --output-len given: it wins
        shipped = datasets.ship(entries, plan.get("seed") or 0)
        plan.update(dataset=args.dataset, dataset_prompts=[list(e) for e in shipped],
                    dataset_info=datasets.info(args.dataset, fmt, len(entries), len(shipped)))
    if getattr(args, "no_ignore_eos", False):
        plan["ignore_eos"] = False
    if getattr(args, "allow_busy", False):
        plan["allow_busy"] = True
    if getattr(args, "stop_when_saturated", False):
        plan["stop_when_saturated"] = True
    unknown = sorted(set(given or {}) - set(sweep_plan.FIELDS))
    if unknown:
        raise _usage("--plan-json: unknown keys %s" % ", ".join(unknown))
    return checked_plan(plan)


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


def _length(rng: random.Random, full: int, ratio: float) -> int:
    """A length uniform in [max(int(full * ratio), 1), full] (bench_serving's
    ``compute_random_lens``); ``full`` itself when ratio is 1 (no draw)."""
    if ratio >= 1:
        return full
    return rng.randint(max(int(full * ratio), 1), full)


def level_requests(plan: Dict[str, Any], seed: int, li: int, count: int
                   ) -> List[Tuple[str, int]]:
    """(prompt, max_tokens) of ``count`` requests of level ``li`` (the level's n, then its
    warm-ups): random words of ``input_len`` (or a length in [L*r, L]), or the dataset's
    prompts in a seeded order (cycled when the level needs more)."""
    return list(iter_level_requests(plan, seed, li, count))


def iter_level_requests(plan: Dict[str, Any], seed: int, li: int, count: int
                        ) -> Iterator[Tuple[str, int]]:
    """:func:`level_requests` one at a time (the same sequence): a big level is prepared in
    slices, with progress and a cancel between them."""
    rng = random.Random(seed * 1000 + li)
    ratio = float(plan["random_range_ratio"])
    out_len = int(plan["output_len"])
    prompts = plan.get("dataset_prompts")
    if prompts:
        order = list(range(len(prompts)))
        rng.shuffle(order)
        for j in range(count):
            prompt, given = prompts[order[j % len(order)]]
            yield (prompt, int(given) if given else _length(rng, out_len, ratio))
        return
    for _ in range(count):
        words = _length(rng, int(plan["input_len"]), ratio)
        tokens = _length(rng, out_len, ratio)
        yield (make_prompt(rng, words), tokens)


def shapes(plan: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The sweep's levels in the order they run: closed-loop ``C:n``, then ``rate:n``."""
    out: List[Dict[str, Any]] = [{"kind": "closed", "c": int(c), "n": int(n), "rate": None,
                                  "cap": None} for c, n in plan["levels"]]
    out += [{"kind": "rate", "c": int(plan["max_concurrency"] or 0), "n": int(n),
             "rate": float(r), "cap": plan["max_concurrency"], "arrival": plan["arrival"]}
            for r, n in plan["rates"]]
    return out


def level_name(shape: Dict[str, Any]) -> str:
    """How a level is named in reasons: ``C=8`` or ``rate 4/s`` (``, at most C=16``)."""
    if shape["kind"] == "closed":
        return "C=%d" % shape["c"]
    text = "rate %g/s" % shape["rate"]
    return text + (" (at most %d in flight)" % shape["cap"] if shape["cap"] else "")


def _streams(shape: Dict[str, Any]) -> int:
    """Requests in flight at once: C, the cap, or about rate x OPEN_LOOP_EST_S."""
    if shape["kind"] == "closed":
        return shape["c"]
    if shape["cap"]:
        return min(shape["cap"], shape["n"])
    return max(1, min(shape["n"], math.ceil(shape["rate"] * OPEN_LOOP_EST_S)))


# --- target ------------------------------------------------------------------------------


class TargetSpec(NamedTuple):
    """The server to measure, as asked: its base URL, the model to send (None: discovered),
    the env var holding its API key, the HTTP transport, the seconds to connect and the
    sanity/canary endpoint (a sweep's is its plan's)."""

    url: str
    model: Optional[str] = None
    api_key_env: Optional[str] = None
    transport: str = "raw"
    connect_timeout: float = 10.0
    endpoint: Optional[str] = None

    @classmethod
    def of(cls, args: Any) -> "TargetSpec":
        """From ``bench``'s flags (``--url``, ``--model``, ...)."""
        return cls(args.url, args.model, args.api_key_env, args.transport,
                   args.connect_timeout, args.endpoint)


class Target:
    """The server resolved: its endpoint, the model discovered (or given) and from where,
    its API key and version."""

    def __init__(self, endpoint: Endpoint, model: str, model_source: str,
                 api_key: Optional[str], server_version: Optional[str]) -> None:
        self.endpoint = endpoint
        self.model = model
        self.model_source = model_source
        self.api_key = api_key
        self.server_version = server_version


async def resolve_target(spec: TargetSpec) -> Target:
    """The server ``spec`` names, resolved: the model discovered unless given."""
    try:
        endpoint = Endpoint(spec.url)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    api_key = None
    if spec.api_key_env:
        api_key = os.environ.get(spec.api_key_env)
        if not api_key:
            raise _usage("the API key env var %s is not set" % spec.api_key_env)
    version = await _server_version(endpoint, api_key)
    if spec.model:
        return Target(endpoint, spec.model, "flag", api_key, version)
    problems = []
    for api, pick in (("/v1/models", _model_from_list), ("/model_info", _model_from_info),
                      ("/get_model_info", _model_from_info)):
        try:
            name = pick(await get_json(endpoint, api, api_key, spec.connect_timeout))
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


async def context_length(endpoint: Endpoint, api_key: Optional[str]
                         ) -> Tuple[Optional[int], Optional[str]]:
    """The server's context in tokens and where it was read: ``/v1/models``'
    ``max_model_len`` (SGLang, vLLM: the resolved one), else ``/server_info``'s
    ``context_length``; (None, None) when neither says."""
    def count(v: Any) -> Optional[int]:
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    try:
        models = await get_json(endpoint, "/v1/models", api_key, 5.0)
        data = models.get("data") if isinstance(models, dict) else None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            got = count(data[0].get("max_model_len"))
            if got is not None:
                return got, "/v1/models max_model_len"
    except Exception:
        pass
    for api in ("/server_info", "/get_server_info"):
        try:
            info = await get_json(endpoint, api, api_key, 5.0)
        except Exception:
            continue
        got = count(info.get("context_length")) if isinstance(info, dict) else None
        if got is not None:
            return got, api + " context_length"
    return None, None


async def _server_version(endpoint: Endpoint, api_key: Optional[str]) -> Optional[str]:
    for api in ("/server_info", "/get_server_info"):
        try:
            info = await get_json(endpoint, api, api_key, 5.0)
        except Exception:
            continue
        if isinstance(info, dict) and info.get("version"):
            return str(info["version"])
    return None


def _emit_target(target: Target, spec: TargetSpec, **extra: Any) -> None:
    protocol.emit("bench_target", url=target.endpoint.base, model=target.model,
                  model_source=target.model_source, server_version=target.server_version,
                  transport=spec.transport, **extra)


# --- sanity ------------------------------------------------------------------------------


def run_sanity(args: Any) -> int:
    from dsv4tui.agent.host import bench_lock

    bench_lock.check_free("a sanity check")  # its requests would land in someone's sweep
    cases = load_cases(args.cases_json)
    failed = run_loop(sanity_cases(TargetSpec.of(args), cases, args.timeout))
    if failed:
        raise protocol.AgentError("sanity_failed", "%d of %d sanity cases failed"
                                  % (failed, len(cases)))
    return 0


async def sanity_cases(spec: TargetSpec, cases: List[Dict[str, Any]], timeout: float) -> int:
    """Ask each case's prompt (``timeout`` seconds each); how many failed."""
    target = await resolve_target(spec)
    endpoint = spec.endpoint or "chat"
    _emit_target(target, spec, endpoint=endpoint)
    client = make_client(spec.transport, target.endpoint, target.api_key, 1, spec.connect_timeout)
    failed = 0
    try:
        for i, case in enumerate(cases):
            res = await _ask(client, target, endpoint, case, timeout)
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


async def _ask(client: Any, target: Any, endpoint: str, case: Dict[str, Any],
               timeout: float) -> StreamResult:
    """One prompt of a sanity case or a canary item, streamed; its parsed answer."""
    body = build_body(endpoint, target.model, case["prompt"], case["max_tokens"],
                      case["temperature"])
    raw = await client.request(target.endpoint.path(chat_path(endpoint)), body, timeout,
                               min(timeout, 60.0))
    return parse_stream(raw, case["max_tokens"])


async def canary_items(spec: TargetSpec, items: List[Dict[str, Any]], concurrency: int = 8,
                       max_tokens: int = 32, source: str = "built-in", timeout: float = 120.0
                       ) -> Dict[str, Any]:
    """The accuracy canary (agent/bench/canary.py) through the sanity path: each item at
    temperature 0, ``concurrency`` in flight; a ``canary_item`` event per item, then the
    ``canary`` summary (share correct with its Wilson interval), which it returns."""
    from dsv4tui.agent.bench import canary

    target = await resolve_target(spec)
    endpoint = spec.endpoint or "chat"
    client = make_client(spec.transport, target.endpoint, target.api_key, concurrency,
                         spec.connect_timeout)
    gate = asyncio.Semaphore(concurrency)
    results: List[Optional[bool]] = [None] * len(items)
    wrong: List[Dict[str, Any]] = []
    errors = 0

    async def one(i: int, item: Dict[str, Any]) -> None:
        nonlocal errors
        async with gate:
            res = await _ask(client, target, endpoint, {"prompt": item["prompt"],
                             "max_tokens": max_tokens, "temperature": 0.0}, timeout)
        ok = res.ok and canary.correct(item, res.answer)
        errors += not res.ok
        results[i] = ok
        if not ok:
            wrong.append({"index": i, "name": item.get("name"),
                          "expected": item.get("answer", item.get("answer_regex")),
                          "answer": (res.answer or "")[:200], "error": res.error})
        protocol.emit("canary_item", index=i, name=item.get("name"), prompt=item["prompt"],
                      expected=item.get("answer", item.get("answer_regex")),
                      answer=res.answer, correct=ok, error=res.error)

    t0 = time.time()
    try:
        await asyncio.gather(*(one(i, x) for i, x in enumerate(items)))
    finally:
        await client.aclose()
    correct = sum(1 for r in results if r)
    low, high = canary.wilson(correct, len(items))
    summary = {"correct": correct, "total": len(items), "errors": errors,
               "share": round(correct / len(items), 4) if items else None,
               "low": round(low, 4), "high": round(high, 4), "source": source,
               "concurrency": concurrency, "elapsed_s": round(time.time() - t0, 3),
               "wrong": sorted(wrong, key=lambda w: int(w["index"]))}
    protocol.emit("canary", **summary)
    return summary


def _rel(t: Optional[float], res: StreamResult) -> Optional[float]:
    return None if t is None else round(t - res.t_send, 6)


# --- sweep -------------------------------------------------------------------------------


class Sink:
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
    ``allow_busy``), could not be reached, or a load worker died. The sweep is ``done`` only
    when every level is (or it stopped, as asked, after two saturated levels in a row).
    """

    def __init__(self, target: TargetSpec, plan: Dict[str, Any], sink: Any) -> None:
        for key, value in sweep_plan.defaults().items():  # an older caller's: the defaults
            plan.setdefault(key, value)
        self.target_spec = target  # where, and the transport and connect timeout
        self.plan = plan
        self.sink = sink
        self.shapes = shapes(plan)
        self.status = "running"  # done | partial | failed | cancelled once finished
        self.reason: Optional[str] = None
        self.levels_done = 0
        self.levels: List[Dict[str, Any]] = []  # the level events sent
        self.current: Optional[Dict[str, Any]] = None  # the level in progress
        self.cancel: Optional[asyncio.Event] = None
        self.cancelled = False
        self.stopped_saturated: Optional[str] = None  # why the sweep stopped early
        self.seed = plan["seed"] if plan["seed"] is not None else random.randrange(1 << 30)

    def _plan_event(self) -> Dict[str, Any]:
        """The plan as events carry it: the dataset's prompts by count, not their text."""
        plan = dict(self.plan)
        if plan.get("dataset_prompts"):
            plan["dataset_prompts"] = len(plan["dataset_prompts"])
        return plan

    async def run(self) -> None:
        self.cancel = protocol.cancel_event_on_signals()
        target = await resolve_target(self.target_spec)
        plan = self.plan
        self.sink.emit("bench_target", url=target.endpoint.base, model=target.model,
                       model_source=target.model_source, server_version=target.server_version,
                       transport=self.target_spec.transport, plan=self._plan_event(),
                       seed=self.seed)
        ctx, where = await context_length(target.endpoint, target.api_key)
        problem = plan_size.context_problem(plan, ctx, where)
        if problem is not None:  # every request would decode until its timeout: none is sent
            raise protocol.AgentError("too_long", problem + "; lower --output-len/--input-len "
                                      "(nothing was sent)", protocol.EXIT_USAGE)
        gc.collect()
        gc.freeze()  # what exists now (imports, client) is never scanned again
        biggest = max(_streams(s) for s in self.shapes)
        client = make_client(self.target_spec.transport, target.endpoint, target.api_key,
                             biggest, self.target_spec.connect_timeout)
        try:
            await self._probe_ignore_eos(client, target)
            for li, shape in enumerate(self.shapes):
                if self.cancel.is_set():
                    break
                await self._level(client, target, li, shape)
                if self.levels and self.levels[-1]["status"] == "failed":
                    break
                if plan["stop_when_saturated"] and self._saturated_twice():
                    break
        finally:
            await client.aclose()
        if self.cancel.is_set():
            self.cancelled = True

    def _saturated_twice(self) -> bool:
        last = self.levels[-2:]
        if len(last) < 2 or not all((lv.get("saturation") or {}).get("saturated")
                                    for lv in last):
            return False
        left = len(self.shapes) - len(self.levels)
        if left <= 0:
            return False
        names = " and ".join(lv["name"] for lv in last)
        self.stopped_saturated = ("stopped after two saturated levels in a row (%s; "
                                  "stop_when_saturated); %d level%s not run"
                                  % (names, left, "" if left == 1 else "s"))
        self.sink.emit("notice", kind="saturated_stop", message=self.stopped_saturated,
                       levels=[lv["level"] for lv in last])
        return True

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

    def _workers_for(self, shape: Dict[str, Any]) -> int:
        if not workers.can_fork():
            return 1
        return workers.choose(self.plan["workers"], _streams(shape))

    async def _level(self, client: Any, target: Target, li: int, shape: Dict[str, Any]
                     ) -> None:
        plan = self.plan
        assert self.cancel is not None
        c, n, name = shape["c"], shape["n"], level_name(shape)
        check = await self._idle_check(client, target, c)
        if check is None:
            return  # cancelled
        busy = check["verdict"] == "busy"
        refusal = None
        if check["verdict"] == "unreachable":
            refusal = ("unreachable", "cannot connect to the server before level %s: %s"
                       % (name, check["detail"]))
        elif check["verdict"] == "unresponsive":
            refusal = ("unresponsive", "the server is not answering before level %s: %s"
                       % (name, check["detail"]))
        elif busy and not plan["allow_busy"]:
            refusal = ("busy", "server busy before level %s: %s" % (name, idle.describe(check)))
        if refusal is not None:
            self._open(li, shape, check, busy, [])
            self.finish_level(*refusal)
            return
        if busy:
            self.sink.emit("notice", kind="busy", level=li, concurrency=c, idle=check,
                           message="measuring level %s although the server is busy (%s): "
                           "allow_busy is set" % (name, idle.describe(check)))
        endpoint = plan["endpoint"]
        path = target.endpoint.path(chat_path(endpoint))
        prepared = await self._prepare(client, target, li, name, n, path)
        if prepared is None:
            return  # cancelled while preparing
        specs, bodies, datas = prepared
        planned = [tokens if plan["ignore_eos"] else None for _, tokens in specs]
        asked = [tokens for _, tokens in specs]
        timeout, stall = plan["request_timeout_s"], plan["stall_timeout_s"]
        w = self._workers_for(shape)
        streams = _streams(shape)
        try:  # the agent's own pool: the warm-up, and the level itself when not spread
            await client.warm(min(streams, n) if w == 1 else max(1, min(plan["warmup"], n)))
        except Exception:
            # pre-opening connections is an optimisation: if the server is unreachable, every
            # request of the level fails on its own and is counted with its error kind
            pass
        warm = asyncio.ensure_future(asyncio.gather(*(
            client.request(path, bodies[n + i], timeout, stall, datas[n + i])
            for i in range(plan["warmup"]))))
        if plan["warmup"]:
            self._prep(li, name, "warmup", "level %s: warm-up, %d request%s of %s tokens"
                       % (name, plan["warmup"], "" if plan["warmup"] == 1 else "s",
                          "{:,}".format(specs[n][1])))
        slow = asyncio.ensure_future(self._say_slow_warmup(li, name, warm))
        try:
            if not await self._unless_cancelled(warm):
                return
        finally:
            slow.cancel()
        warm_raws: List[RawResponse] = warm.result()
        warmups = [_warmup_record(i, parse_stream(r, specs[n + i][1]))
                   for i, r in enumerate(warm_raws)]
        bad = [w for w in warmups if not w["ok"]]
        if bad:
            self.sink.emit("notice", kind="warmup_failed", level=li, failed=len(bad),
                           warmup=len(warmups),
                           message="level %s: %d of %d warm-up requests failed (%s: %s)"
                           % (name, len(bad), len(warmups), bad[0]["error_kind"],
                              bad[0]["error"]))
        problem = await self._warmup_problem(client, target, warm_raws, name, stall)
        if problem is not None:
            self._open(li, shape, check, busy, warmups)
            self.finish_level(*problem)
            return
        schedule = None
        if shape["kind"] == "rate":
            schedule = arrivals.timeline(n, shape["rate"], self.seed * 1000 + li,
                                         shape["arrival"])
        self.sink.emit("level_start", level=li, concurrency=c, requests=n,
                       warmup=plan["warmup"], warmup_errors=sum(not r["ok"] for r in warmups),
                       time=time.time(), idle=check, busy=busy, rate=shape["rate"],
                       arrival=shape.get("arrival"), max_concurrency=shape["cap"], workers=w,
                       name=name)
        results = self._open(li, shape, check, busy, warmups, workers_=w)
        self.current["asked"] = [tokens for _, tokens in specs[:n]]  # type: ignore[index]
        sampler = None
        if check.get("source") == "metrics" and workers.can_fork():
            try:
                sampler = saturation.MetricsSampler(target.endpoint.base, target.api_key).start()
            except OSError:
                sampler = None
        limit = plan["max_error_rate"] * n
        stop = asyncio.Event()
        failed_level = {"set": False}
        errors = [0]

        tally = level_progress.LevelTally(li, c, n)
        flows: List[Flow] = []  # the level's flow (shared with its workers): what is in flight

        def deliver(event: Dict[str, Any]) -> None:
            results.append(event)
            self.sink.emit("request", **event)
            tally.add(event)
            if not event["ok"]:
                errors[0] += 1
                if errors[0] > limit and not failed_level["set"]:
                    failed_level["set"] = True
                    stop.set()
            if self.sink.broken:
                self.cancel.set()  # type: ignore[union-attr]

        async def cancel_stops() -> None:
            await self.cancel.wait()  # type: ignore[union-attr]
            stop.set()

        watcher = asyncio.ensure_future(cancel_stops())
        reporter = asyncio.ensure_future(level_progress.report(
            tally, self.sink.emit, lambda: flows[-1].in_flight if flows else None))
        halt, dead, worker_errors = 0, [], []  # type: ignore[var-annotated]
        try:
            if w == 1:
                flow = Flow(n, active=min(c, n) if schedule is None else 0)
                flows.append(flow)
                load = LevelLoad(client, path, bodies, datas, timeout, stall, flow, deliver,
                                 level=li, c=c, planned=planned, senders=min(c, n),
                                 schedule=schedule, indices=range(n), cap=shape["cap"],
                                 asked=asked)
                await load.run(stop)
                halt = flow.halt_code
                self.current["perf0"] = load.t0  # type: ignore[index]
            else:
                work = workers.Work(
                    transport=self.target_spec.transport, endpoint=target.endpoint,
                    api_key=target.api_key, connect_timeout=self.target_spec.connect_timeout,
                    path=path, bodies=bodies, datas=datas, timeout=timeout, stall=stall,
                    level=li, c=c, planned=planned, n=n, streams=streams, schedule=schedule,
                    cap=shape["cap"], asked=asked)
                try:
                    flows.append(workers.level_flow(work))  # shared: the workers' one count
                    out = await workers.run_spread(work, w, deliver, stop, flows[-1])
                except OSError as exc:  # no fork, no shared memory: say so, run in-process
                    self.sink.emit("notice", kind="workers_unavailable", level=li,
                                   message="cannot start %d load workers (%s); level %s runs "
                                   "in one process" % (w, exc, name))
                    flow = Flow(n, active=min(c, n) if schedule is None else 0)
                    flows.append(flow)
                    load = LevelLoad(client, path, bodies, datas, timeout, stall, flow,
                                     deliver, level=li, c=c, planned=planned,
                                     senders=min(c, n), schedule=schedule, indices=range(n),
                                     cap=shape["cap"], asked=asked)
                    await load.run(stop)
                    halt = flow.halt_code
                    self.current["workers"] = 1  # type: ignore[index]
                    self.current["perf0"] = load.t0  # type: ignore[index]
                else:
                    halt = out.halt
                    dead, worker_errors = out.dead, out.errors
                    self.current["child_cpu_s"] = out.cpu_s  # type: ignore[index]
                    self.current["worker_pids"] = out.pids  # type: ignore[index]
                    self.current["perf0"] = out.t0  # type: ignore[index]
        finally:
            watcher.cancel()
            reporter.cancel()
            if sampler is not None:
                self.current["queue_samples"] = sampler.stop()  # type: ignore[index]
        self.current["schedule"] = schedule  # type: ignore[index]
        failure: Optional[Tuple[str, str]] = None
        errs = sum(1 for r in results if not r["ok"])
        for d in dead:
            self.sink.emit("notice", kind="worker_died", level=li, worker=d["worker"] + 1,
                           workers=w, pid=d["pid"], exit=d["exit"], requests=d["requests"],
                           message="load worker %d of %d (pid %d) of level %s died (%s) after "
                           "%d requests" % (d["worker"] + 1, w, d["pid"], name, d["exit"],
                                            d["requests"]))
        if dead:
            d = dead[0]
            failure = ("worker_died", "level %s: load worker %d of %d (pid %d) died (%s); "
                       "stopped after %d of %d requests (the requests in flight in it are "
                       "lost)" % (name, d["worker"] + 1, w, d["pid"], d["exit"], len(results), n))
        elif worker_errors and halt == HALT_STOP and not self.cancel.is_set() \
                and not failed_level["set"]:
            failure = ("worker_failed", "level %s: %s" % (name, worker_errors[0]))
        elif halt == HALT_STALLED:
            failure = ("stalled", "level %s: the server stalled: every request in flight got "
                       "no bytes for %.1f s; stopped after %d of %d requests (the rest were not "
                       "sent)" % (name, stall, len(results), n))
        elif failed_level["set"]:
            failure = ("error_rate", "level %s: %d of %d requests failed (max error rate %g)"
                       % (name, errs, n, plan["max_error_rate"]))
        if (failure is None or failure[0] == "error_rate") and errs and not self.cancel.is_set():
            why = await _unreachable(target.endpoint)
            if why is not None:
                failure = ("server_gone", "level %s: the server went away (%s) after %d of %d "
                           "requests; %d failed" % (name, why, len(results), n, errs))
        if failure is not None:
            self.finish_level(*failure)
        else:
            self.finish_level(interrupted=self.cancel.is_set() and len(results) < n)
        gc.collect()

    def _prep(self, li: int, name: str, phase: str, message: str, announce: bool = True,
              **extra: Any) -> None:
        """A ``level_prep`` event: what a level does before its first request (preparing
        its prompts, the warm-up), so a big one is never minutes of silence."""
        self.sink.emit("level_prep", level=li, name=name, phase=phase, message=message,
                       announce=announce, time=time.time(), **extra)

    async def _say_slow_warmup(self, li: int, name: str, warm: "asyncio.Future[Any]") -> None:
        """A warm-up still running after 2 s, 30 s, 60 s ... says so."""
        t0 = time.monotonic()
        for after in [2.0] + [30.0 * k for k in range(1, 1000)]:
            await asyncio.sleep(max(0.0, t0 + after - time.monotonic()))
            if warm.done():
                return
            self._prep(li, name, "warmup", "level %s: the warm-up is still running after %s"
                       % (name, plan_size.duration_text(after)))

    async def _prepare(self, client: Any, target: Target, li: int, name: str, n: int,
                       path: str) -> Optional[Tuple[List[Tuple[str, int]], List[bytes],
                                                    List[Optional[bytes]]]]:
        """The level's requests (n, then its warm-ups), their bodies and request bytes, built
        in slices: progress every 2 s, and a cancel honoured between slices. None:
        cancelled."""
        plan = self.plan
        count = n + plan["warmup"]
        big = count >= PREP_ANNOUNCE
        self._prep(li, name, "preparing", "level %s: preparing %s prompts" % (
            name, "{:,}".format(count)), announce=big, requests=count)
        endpoint = plan["endpoint"]
        raw_bytes = hasattr(client, "request_bytes")
        specs: List[Tuple[str, int]] = []
        bodies: List[bytes] = []
        datas: List[Optional[bytes]] = []
        said = time.monotonic()
        for k, (prompt, tokens) in enumerate(iter_level_requests(plan, self.seed, li, count)):
            body = build_body(endpoint, target.model, prompt, tokens, plan["temperature"],
                              plan["ignore_eos"])
            specs.append((prompt, tokens))
            bodies.append(body)
            datas.append(client.request_bytes(path, body) if raw_bytes else None)
            if k % PREP_SLICE == PREP_SLICE - 1:
                await asyncio.sleep(0)
                if self.cancel is not None and self.cancel.is_set():
                    return None
                if time.monotonic() - said >= 2.0:
                    said = time.monotonic()
                    self._prep(li, name, "preparing", "level %s: %s of %s prompts ready" % (
                        name, "{:,}".format(k + 1), "{:,}".format(count)), requests=count,
                        ready=k + 1)
        return specs, bodies, datas

    async def _warmup_problem(self, client: Any, target: Target, raws: List[RawResponse],
                              name: str, stall: float) -> Optional[Tuple[str, str]]:
        """A warm-up that shows the server stuck or gone fails the level before it starts."""
        if raws and all(r.error_kind == "stall" for r in raws):
            return ("stalled", "level %s: the server stalled during the warm-up (no bytes for "
                    "%.1f s); no request of the level was sent" % (name, stall))
        if any(r.error_kind == "connect" for r in raws):
            why = await _unreachable(target.endpoint)
            if why is not None:
                return ("server_gone", "level %s: the server went away during the warm-up "
                        "(%s); no request of the level was sent" % (name, why))
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

    def _open(self, li: int, shape: Dict[str, Any], check: Dict[str, Any], busy: bool,
              warmups: List[Dict[str, Any]], workers_: int = 1) -> List[Dict[str, Any]]:
        """The level is in progress from here (its request events go to the list returned)."""
        results: List[Dict[str, Any]] = []
        self.current = {"level": li, "shape": shape, "concurrency": shape["c"],
                        "requests": shape["n"], "results": results, "started_at": time.time(),
                        "cpu0": time.process_time(), "idle": check, "busy": busy,
                        "warmups": warmups, "workers": workers_, "child_cpu_s": 0.0}
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
        shape = cur["shape"]
        c, n, name = cur["concurrency"], cur["requests"], level_name(shape)
        level = stats.level_metrics(results, c, n)
        status = "done"
        if failure is not None:
            status = "failed"
        elif interrupted:
            status = "partial"
            reason = "level %s: cancelled after %d of %d requests" % (name, len(results), n)
        elif level["errors"] or level["not_run"]:
            status = "partial"
            kinds = ", ".join("%s %d" % kv for kv in sorted(level["errors_by_kind"].items()))
            reason = "level %s: %d of %d requests failed (%s)" % (name, level["errors"], n,
                                                                   kinds)
            if level["not_run"]:
                reason += "; %d did not run" % level["not_run"]
        cpu = time.process_time() - cur["cpu0"] + float(cur.get("child_cpu_s") or 0.0)
        now = time.time()
        warm = cur["warmups"]
        level.update(level=cur["level"], status=status, reason=reason, failure=failure,
                     partial=len(results) < n, idle=cur["idle"], busy=cur["busy"],
                     warmup_errors=sum(1 for r in warm if not r["ok"]),
                     ignore_eos=bool(self.plan["ignore_eos"]),
                     started_at=cur["started_at"],
                     finished_at=now, time=now, client_cpu_s=round(cpu, 4),
                     client_cpu_us_per_token=(round(cpu * 1e6 / level["output_tokens"], 2)
                                              if level["output_tokens"] else None))
        level.update(self._planned_lengths(cur))
        level.update(self._level_extras(cur, level))
        self.sink.emit("level", **level)
        self.levels.append(level)
        self.levels_done += 1

    def _planned_lengths(self, cur: Dict[str, Any]) -> Dict[str, Any]:
        """What the level's counted requests asked for (max_tokens): ``planned_output_len``
        is that one number when every request asked the same, else null (a dataset's own
        lengths, or a range ratio), and ``planned_output_lens`` {mean, min, max} always."""
        asked = cur.get("asked")
        if asked is None:  # refused before it was built: what it would have asked
            asked = [t for _, t in level_requests(self.plan, self.seed, cur["level"],
                                                  cur["requests"])]
        if not asked:
            return {"planned_output_len": None, "planned_output_lens": None}
        return {"planned_output_len": asked[0] if len(set(asked)) == 1 else None,
                "planned_output_lens": {"mean": round(sum(asked) / len(asked), 2),
                                        "min": min(asked), "max": max(asked)}}

    def _level_extras(self, cur: Dict[str, Any], level: Dict[str, Any]) -> Dict[str, Any]:
        """What a level event adds to stats.level_metrics: its load shape, warm-ups, send
        lag, goodput and saturation (docs/metrics.md)."""
        shape, results, plan = cur["shape"], cur["results"], self.plan
        closed = shape["kind"] == "closed"
        out: Dict[str, Any] = {
            "name": level_name(shape), "kind": shape["kind"], "rate": shape["rate"],
            "arrival": shape.get("arrival"), "max_concurrency": shape["cap"],
            "workers": cur.get("workers", 1), "seed": self.seed, "warmup_requests": cur["warmups"],
            "random_range_ratio": plan["random_range_ratio"],
            "dataset": (plan.get("dataset_info") or {}).get("name") if plan.get(
                "dataset_prompts") else None,
            "goodput": stats.goodput(results, plan["goodput"], level["duration_s"]),
        }
        schedule = cur.get("schedule")
        offered = None
        due: List[Tuple[float, Optional[float]]] = []
        if not closed:
            out["send_lag_ms"] = stats.summarize(r.get("send_lag_ms") for r in results)
            out["send_lag_ms"]["max"] = max((r["send_lag_ms"] for r in results
                                             if r.get("send_lag_ms") is not None), default=None)
            out["cap_wait_ms"] = stats.summarize(r.get("cap_wait_ms") for r in results)
            offered = arrivals.offered_rate(schedule) if schedule else None
            # (due, ok finish) per request sent, on the level's clock (saturation's pace)
            for r in results:
                if r.get("sched_s") is None:
                    continue
                done = r.get("ok") and r.get("start_s") is not None and r.get("e2e_s") is not None
                due.append((r["sched_s"], r["start_s"] + r["e2e_s"] if done else None))
        samples = cur.get("queue_samples") or []
        window = None
        t0s = [r["start_s"] for r in results if r.get("start_s") is not None]
        if samples and t0s and results:
            # samples are perf_counter times: place the level's window on that clock
            first_send = min(t0s)
            last = (max(t0s) if not closed else
                    max(r["start_s"] + (r.get("e2e_s") or 0.0) for r in results))
            base = cur.get("perf0")
            if base is not None:
                window = (base + first_send, base + last)
        prev = next(((lv["concurrency"], lv["output_tok_s"]) for lv in reversed(self.levels)
                     if lv.get("kind", "closed") == "closed" and lv.get("output_tok_s")
                     and lv["status"] != "failed"), None)
        out["saturation"] = saturation.verdict(
            closed=closed, samples=samples, window=window, in_flight=_streams(shape),
            offered_rate=offered,
            # achieved is the level's request_throughput: what completed over its window
            achieved_rate=None if closed else level["request_throughput"],
            tok_s=level["output_tok_s"], previous=prev if closed else None,
            concurrency=shape["c"], arrivals=due or None)
        if level["completed"] == 0:
            out["saturation"].update(saturated=None, detail="no request completed")
        return out

    def conclude(self) -> None:
        """Set ``status`` and ``reason`` from the levels (done only when every planned level
        ran and is done, or the sweep stopped as asked after two saturated levels)."""
        planned = len(self.shapes)
        failed = [lv for lv in self.levels if lv["status"] == "failed"]
        partial = [lv for lv in self.levels if lv["status"] == "partial"]
        if self.cancelled:
            self.status, self.reason = "cancelled", self._cancel_reason(planned)
        elif failed:
            self.status, self.reason = "failed", failed[0]["reason"]
        elif partial:
            self.status = "partial"
            self.reason = "%d of %d levels partial: %s" % (len(partial), planned,
                                                           partial[0]["reason"])
        elif self.stopped_saturated is not None:
            self.status, self.reason = "done", self.stopped_saturated
        elif self.levels_done < planned:
            self.status = "partial"
            self.reason = "only %d of %d levels ran" % (self.levels_done, planned)
        else:
            self.status, self.reason = "done", None

    def _cancel_reason(self, planned: int) -> str:
        """What a cancelled sweep measured: the level it stopped in (or after), every request
        that finished, the levels complete."""
        measured = sum(int(lv.get("completed") or 0) + int(lv.get("errors") or 0)
                       for lv in self.levels)
        done = sum(1 for lv in self.levels if lv["status"] == "done")
        last = self.levels[-1] if self.levels else None
        where = ("during level %s" % last.get("name") if last is not None and last.get("partial")
                 else "after level %s" % last.get("name") if last is not None
                 else "before the first level")
        return "cancelled %s: %s request%s measured, %d of %d levels complete" % (
            where, "{:,}".format(measured), "" if measured == 1 else "s", done, planned)

    def summary(self) -> Dict[str, Any]:
        """The ``sweep`` event's fields."""
        kinds: Dict[str, int] = {}
        for lv in self.levels:
            for kind, count in lv["errors_by_kind"].items():
                kinds[kind] = kinds.get(kind, 0) + count
        levels = self.levels
        planned_requests = sum(s["n"] for s in self.shapes)
        return {"status": self.status, "reason": self.reason, "levels": self.levels_done,
                "levels_planned": len(self.shapes),
                "level_status": [lv["status"] for lv in levels],
                "requests": planned_requests,
                "completed": sum(lv["completed"] for lv in levels),
                "errors": sum(lv["errors"] for lv in levels), "errors_by_kind": kinds,
                "not_run": planned_requests - sum(lv["completed"] + lv["errors"]
                                                  for lv in levels),
                "short_outputs": sum(lv["short_outputs"] for lv in levels),
                "busy_levels": sum(1 for lv in levels if lv["busy"]),
                "saturated_levels": sum(1 for lv in levels
                                        if (lv.get("saturation") or {}).get("saturated")),
                "stopped_saturated": self.stopped_saturated is not None, "seed": self.seed}


def _warmup_record(i: int, res: StreamResult) -> Dict[str, Any]:
    """A warm-up request as the level event keeps it (``warmup_requests``): not counted."""
    ttft = res.token_times[0] - res.t_send if res.token_times else None
    return {"index": i, "warmup": True, "ok": res.ok,
            "ttft_s": None if ttft is None else round(ttft, 6),
            "e2e_s": round(res.t_end - res.t_send, 6), "output_tokens": res.output_tokens,
            "prompt_tokens": res.prompt_tokens, "error_kind": res.error_kind, "error": res.error}


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




def run_reach(args: Any) -> int:
    """``bench reach --url``: does the server answer HTTP, from this host (agent/bench/reach.py;
    the console checks a ``--url`` before it starts a sweep: no answer, nothing to store)."""
    from dsv4tui.agent.bench import reach

    try:
        endpoint = Endpoint(args.url)
    except ValueError as exc:
        raise _usage("--url: %s" % exc) from None
    protocol.emit("reach", **run_loop(reach.probe(endpoint, max(float(args.timeout), 0.1),
                                                  max(float(args.answer_timeout), 0.1))))
    return 0


def run(plan: Dict[str, Any], target: TargetSpec, sink: Any) -> Sweep:
    """Run a whole sweep, its events to ``sink`` (``emit(type, **fields)``, ``broken``),
    ending with the ``sweep`` event; returns the Sweep (``status``, ``reason``). Ctrl-C and
    SIGTERM cancel it cleanly (what finished is kept). The host-side campaign runner calls
    this with its journal as the sink; ``bench sweep`` with stdout. ``plan``: a checked one
    (:func:`checked_plan`, :func:`build_plan`)."""
    sweep = Sweep(target, plan, sink)
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
    from dsv4tui.agent.host import bench_lock

    plan = build_plan(args)
    # the host's one load generator: never beside a campaign's (or another sweep's)
    if not bench_lock.acquire({"id": None, "name": "bench sweep", "kind": "sweep"}):
        raise bench_lock.busy_error(bench_lock.holder(), "another sweep")
    sink = Sink()
    try:
        sweep = run(plan, TargetSpec.of(args), sink)
    finally:
        sink.close()
        bench_lock.release()
    if sweep.status == "cancelled":
        return 130
    if sweep.status != "done":
        raise protocol.AgentError("sweep_" + sweep.status, sweep.reason or "sweep " + sweep.status)
    return 0
