"""What a sweep plan costs before it runs: its requests, an estimated duration and the load
generator's memory on the host. One estimate for the CLI (``dsv4tui sweep`` needs ``--yes``
above the thresholds) and the dashboard's sweep plan dialog (it asks), so a size that cannot
be meant (``--levels 1:999999``) is caught before minutes of silence.

The duration is a floor, not a forecast: each stream is assumed to decode at
:data:`STREAM_TOK_S` tokens/s (a fast server at a small batch; a big batch is slower) and
prefill at :data:`PREFILL_TOK_S`. The memory is what the agent holds for the biggest level
(its prompts, their request bodies, and every finished request's record with its chunk gaps).

Works on plain plan dicts (``bench.DEFAULT_PLAN``'s keys, ``SweepPlan.model_dump()``).
Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

STREAM_TOK_S = 50.0  # decode tokens/s of one stream (a floor for the duration)
PREFILL_TOK_S = 10000.0
CHARS_PER_TOKEN = 6.0  # a random-words prompt: ~5 letters and a space per word (token)
PROMPT_COPIES = 3  # the prompt, its JSON body and the request bytes
RECORD_BYTES = 2048  # one finished request's event (a dict of ~25 fields)
GAP_BYTES = 40  # one chunk gap in it (a float in a list, twice: the record and its line)
LEVEL_OVERHEAD_S = 2.0  # the idle check and the level's set-up
CONFIRM_S = 3600.0  # longer than this: the CLI needs --yes, the dialog asks
CONFIRM_BYTES = 2e9  # more load-generator memory than this: the same


def _mean_lengths(plan: Mapping[str, Any]) -> Tuple[float, float, float]:
    """(mean prompt chars, mean prompt tokens, mean output tokens) of one request."""
    ratio = float(plan.get("random_range_ratio", 1.0) or 0.0)
    ratio = min(max(ratio, 0.0), 1.0)
    out_len = float(plan.get("output_len") or 1)
    prompts = plan.get("dataset_prompts")
    if isinstance(prompts, list) and prompts:
        chars = [len(p[0]) for p in prompts if isinstance(p, (list, tuple)) and p]
        outs = [float(p[1]) if len(p) > 1 and p[1] else out_len * (1 + ratio) / 2
                for p in prompts if isinstance(p, (list, tuple)) and p]
        mean_chars = sum(chars) / len(chars) if chars else 0.0
        return mean_chars, mean_chars / 4.0, (sum(outs) / len(outs) if outs else out_len)
    in_tokens = float(plan.get("input_len") or 1) * (1 + ratio) / 2
    return in_tokens * CHARS_PER_TOKEN, in_tokens, out_len * (1 + ratio) / 2


def estimate(plan: Mapping[str, Any]) -> Dict[str, Any]:
    """``requests`` (warm-ups included), ``seconds`` (a floor), ``peak_bytes`` (the biggest
    level on the host), ``biggest`` (that level's name), ``confirm`` (the reasons it needs a
    yes, empty when none) and ``text`` (all of it in one line)."""
    chars, in_tokens, out_tokens = _mean_lengths(plan)
    per_request_s = in_tokens / PREFILL_TOK_S + out_tokens / STREAM_TOK_S
    per_request_bytes = PROMPT_COPIES * (chars + 200) + RECORD_BYTES + GAP_BYTES * out_tokens
    warm = max(int(plan.get("warmup") or 0), 0)
    seconds = 0.0
    requests = 0
    peak, biggest = 0.0, None
    levels: List[Tuple[str, int, float]] = []
    for c, n in plan.get("levels") or []:
        c, n = max(int(c), 1), max(int(n), 1)
        levels.append(("C=%d" % c, n, math.ceil(n / c) * per_request_s))
    cap = plan.get("max_concurrency")
    for r, n in plan.get("rates") or []:
        n, r = max(int(n), 1), max(float(r), 1e-9)
        span = n / r + per_request_s
        if cap:
            span = max(span, math.ceil(n / int(cap)) * per_request_s)
        levels.append(("rate %g/s" % r, n, span))
    for name, n, span in levels:
        requests += n + warm
        seconds += span + (per_request_s if warm else 0.0) + LEVEL_OVERHEAD_S
        size = (n + warm) * per_request_bytes
        if size > peak:
            peak, biggest = size, name
    confirm: List[str] = []
    if seconds > CONFIRM_S:
        confirm.append("longer than %s" % duration_text(CONFIRM_S))
    if peak > CONFIRM_BYTES:
        confirm.append("over %s of host memory" % bytes_text(CONFIRM_BYTES))
    text = ("%s requests, at least %s (each stream at %g tok/s), about %s of host memory "
            "(level %s)" % ("{:,}".format(requests), duration_text(seconds), STREAM_TOK_S,
                                 bytes_text(peak), biggest or "-"))
    return {"requests": requests, "seconds": round(seconds, 1), "peak_bytes": int(peak),
            "biggest": biggest, "confirm": confirm, "text": text}


def duration_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 20 min``, ``58 days``."""
    if seconds < 90:
        return "%d s" % round(seconds)
    if seconds < 3600:
        return "%d min" % round(seconds / 60)
    if seconds < 3 * 86400:
        h, m = divmod(round(seconds / 60), 60)
        return "%d h %d min" % (h, m) if m else "%d h" % h
    return "{:,} days".format(round(seconds / 86400))


def bytes_text(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return "%.1f %s" % (n / size, unit)
    return "%d B" % n


def context_problem(plan: Mapping[str, Any], context: Optional[int],
                    source: Optional[str] = None) -> Optional[str]:
    """Why no request of ``plan`` fits in a context of ``context`` tokens (None: they fit,
    or the context is unknown): the longest output asked plus its prompt."""
    if not isinstance(context, int) or isinstance(context, bool) or context <= 0:
        return None
    out_len = int(plan.get("output_len") or 0)
    prompts = plan.get("dataset_prompts")
    longest_out = out_len
    longest_in = int(plan.get("input_len") or 0)
    if isinstance(prompts, list) and prompts:
        given = [int(p[1]) for p in prompts if isinstance(p, (list, tuple)) and len(p) > 1
                 and p[1]]
        longest_out = max([*given, out_len])
        longest_in = max(int(len(p[0]) / 4) for p in prompts
                         if isinstance(p, (list, tuple)) and p)
    where = "the server's context of %s tokens%s" % (
        "{:,}".format(context), " (%s)" % source if source else "")
    if longest_out >= context:
        return ("output_len %s is over %s: no request could finish"
                % ("{:,}".format(longest_out), where))
    if longest_out + longest_in > context:
        return ("a request of %s prompt + %s output tokens is over %s"
                % ("{:,}".format(longest_in), "{:,}".format(longest_out), where))
    return None
