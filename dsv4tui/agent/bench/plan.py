"""The sweep plan, defined once: its fields, their defaults and limits (``FIELDS``) and the
check of a whole plan (:func:`check`). ``bench sweep`` and the campaign runner check a plan
here; the console's pydantic ``SweepPlan`` (core/config.py) reads its defaults and limits from
``FIELDS`` and calls :func:`check`. A ValueError says what is wrong in one line.

Stdlib only: the agent is deployed on its own (Python 3.9).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from dsv4tui.agent.bench.arrivals import KINDS as ARRIVALS
from dsv4tui.agent.bench.levels import GOODPUT_KEYS


class Field(NamedTuple):
    """One plan field: ``kind`` (int, num, bool, choice, or data: checked by :func:`check`
    itself), its default, and for int/num fields the least value ``low`` (``above``: low
    itself refused) and the greatest ``high``; ``null``: None allowed."""

    kind: str
    default: Any
    low: Optional[float] = None
    high: Optional[float] = None
    above: bool = False
    null: bool = False
    choices: Tuple[str, ...] = ()


FIELDS: Dict[str, Field] = {
    "levels": Field("data", [[1, 8], [8, 32], [16, 48]]),
    "input_len": Field("int", 128, low=1),
    "output_len": Field("int", 256, low=1),
    "warmup": Field("int", 1, low=0),
    "temperature": Field("num", 0.0, low=0),
    "endpoint": Field("choice", "chat", choices=("chat", "completions")),
    "request_timeout_s": Field("num", 600.0, low=0, above=True),
    "stall_timeout_s": Field("num", 60.0, low=0, above=True),
    "max_error_rate": Field("num", 0.5, low=0, high=1),
    "ignore_eos": Field("bool", True),
    "seed": Field("int", None, low=0, null=True),
    "allow_busy": Field("bool", False),
    "rates": Field("data", []),
    "arrival": Field("choice", "poisson", choices=tuple(ARRIVALS)),
    "max_concurrency": Field("int", None, low=1, null=True),
    "random_range_ratio": Field("num", 1.0, low=0, high=1),
    "dataset": Field("data", None, null=True),
    "dataset_prompts": Field("data", None, null=True),
    "dataset_info": Field("data", None, null=True),
    "goodput": Field("data", None, null=True),
    "stop_when_saturated": Field("bool", False),
    "workers": Field("int", None, low=1, null=True),
}


def defaults() -> Dict[str, Any]:
    """A plan of the defaults (its lists copied: the caller may change them)."""
    return {k: list(f.default) if isinstance(f.default, list) else f.default
            for k, f in FIELDS.items()}


def make(given: Dict[str, Any]) -> Dict[str, Any]:
    """``given`` over the defaults, checked (ValueError: an unknown key, or :func:`check`)."""
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise ValueError("unknown keys %s" % ", ".join(unknown))
    plan = defaults()
    plan.update(given)
    check(plan)
    return plan


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def field_problem(key: str, f: Field, v: Any) -> Optional[str]:
    """What is wrong with value ``v`` of the int/num/bool/choice field ``key``, or None."""
    if v is None and f.null:
        return None
    if f.kind == "bool":
        return None if isinstance(v, bool) else "%s must be true or false" % key
    if f.kind == "choice":
        return None if v in f.choices else "%s must be %s" % (key, " or ".join(f.choices))
    low = f.low if f.low is not None else -math.inf
    if f.kind == "int":
        ok = _is_int(v) and v >= low
        return None if ok else "%s must be an integer >= %d%s" % (key, low,
                                                                  " or null" if f.null else "")
    ok = _is_num(v) and (v > low or (v == low and not f.above)) and (
        f.high is None or v <= f.high)
    if ok:
        return None
    if f.high is not None:
        return "%s must be between %g and %g" % (key, low, f.high)
    return "%s must be %s %g" % (key, ">" if f.above else ">=", low)


def check(plan: Dict[str, Any]) -> None:
    """ValueError (one line) unless ``plan`` (every field present) is a plan a sweep runs."""
    levels, rates = plan["levels"], plan["rates"]
    if not isinstance(levels, list) or not isinstance(rates, list):
        raise ValueError("levels and rates must be lists")
    if not levels and not rates:
        raise ValueError("levels: at least one C:n level or one rate:n level")
    for lv in levels:
        if (not isinstance(lv, (list, tuple)) or len(lv) != 2
                or not all(_is_int(x) and x >= 1 for x in lv)):
            raise ValueError("levels: %r is not [C, n] with C, n >= 1" % (lv,))
        if lv[1] < lv[0]:
            raise ValueError("levels: %d:%d: n must be at least C (with %d requests there "
                             "are never %d in flight)" % (lv[0], lv[1], lv[1], lv[0]))
    for lv in rates:
        if (not isinstance(lv, (list, tuple)) or len(lv) != 2 or not _is_num(lv[0])
                or lv[0] <= 0 or not _is_int(lv[1]) or lv[1] < 1):
            raise ValueError("rates: %r is not [rate, n] with rate > 0 req/s and n >= 1"
                             % (lv,))
    for key, f in FIELDS.items():
        if f.kind != "data":
            problem = field_problem(key, f, plan[key])
            if problem is not None:
                raise ValueError(problem)
    good = plan["goodput"]
    if good is not None and (not isinstance(good, dict) or not good
                             or any(k not in GOODPUT_KEYS.values() or not _is_num(v) or v <= 0
                                    for k, v in good.items())):
        raise ValueError("goodput must map ttft_ms, tpot_ms, e2el_ms to targets > 0 ms")
    _check_prompts(plan["dataset_prompts"])


def _check_prompts(prompts: Optional[List[Any]]) -> None:
    if prompts is None:
        return
    if not isinstance(prompts, list) or not prompts:
        raise ValueError("dataset_prompts must be a non-empty list of [prompt, output_len]")
    for i, e in enumerate(prompts):
        if (not isinstance(e, (list, tuple)) or len(e) != 2 or not isinstance(e[0], str)
                or not e[0] or not (e[1] is None or (_is_int(e[1]) and e[1] >= 1))):
            raise ValueError("dataset_prompts[%d] is not [prompt, output_len or null]" % i)
