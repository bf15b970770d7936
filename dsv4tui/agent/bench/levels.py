"""The load of a sweep written as text -- levels ``C:n`` (C requests in flight, n requests in
all: ``1:8,8:32``), open-loop rates ``rate:n`` (``2:100``) and goodput targets
``ttft:MS,tpot:MS,e2el:MS`` (vLLM's keys) -- one parser of each and one check of a level, for
the agent's ``bench sweep``, the console's ``sweep`` flags, the Bench plan dialog and the
config's ``[sweep]``. A ValueError says what is wrong and what to write instead, in one line.

Stdlib only: the agent is deployed on its own (Python 3.9).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

EXAMPLE = "1:8,8:32"


def check_level(c: int, n: int) -> None:
    """ValueError unless C >= 1 and n >= C (with fewer than C requests in all, there are
    never C in flight: it would not be a level at C)."""
    if c < 1 or n < 1:
        raise ValueError("level %d:%d: C and n must be >= 1" % (c, n))
    if n < c:
        raise ValueError("level %d:%d: n must be at least C (with %d requests there are "
                         "never %d in flight)" % (c, n, n, c))


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def parse_levels(text: str, required: bool = True) -> List[Tuple[int, int]]:
    """``1:8,8:32`` -> [(1, 8), (8, 32)] (spaces around the items allowed). An empty item
    (``1:8,,`` or a trailing comma) is refused, as is any level check_level refuses. An empty
    text is no levels: a ValueError when ``required``."""
    if not text.strip():
        if required:
            raise ValueError("at least one level, e.g. %s (or a rate level, e.g. 2:100)"
                             % EXAMPLE)
        return []
    levels = []
    for part in text.split(","):
        item = part.strip()
        if not item:
            raise ValueError("%r has an empty level between commas (write C:n,C:n, e.g. %s)"
                             % (text, EXAMPLE))
        c, sep, n = (x.strip() for x in item.partition(":"))
        try:
            if not sep:
                raise ValueError(item)
            level = (_count(c), _count(n))
        except ValueError:
            raise ValueError("%r is not C:n (e.g. %s)" % (item, EXAMPLE)) from None
        check_level(*level)
        levels.append(level)
    return levels


def parse_rates(text: str) -> List[Tuple[float, int]]:
    """``2:100,4:200`` -> [(2.0, 100), (4.0, 200)] (requests/s : requests)."""
    rates = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        r, sep, n = part.partition(":")
        try:
            rate = float(r)
        except ValueError:
            rate = -1.0
        if not sep or not n.isdigit() or not rate > 0 or int(n) < 1:
            raise ValueError("%r is not rate:n (req/s : requests, e.g. 2:100)" % part)
        rates.append((rate, int(n)))
    return rates


GOODPUT_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms"}


def parse_goodput(text: str) -> Optional[Dict[str, float]]:
    """``ttft:500,tpot:50`` -> {"ttft_ms": 500.0, "tpot_ms": 50.0}; empty -> None."""
    out: Dict[str, float] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        key, sep, value = part.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if not sep or key not in GOODPUT_KEYS or not ms > 0:
            raise ValueError("%r is not ttft:MS, tpot:MS or e2el:MS (MS > 0)" % part)
        out[GOODPUT_KEYS[key]] = ms
    return out or None


def goodput_text(goodput: Optional[Dict[str, float]]) -> str:
    """The targets written back as text (``ttft:500,tpot:50``)."""
    names = {v: k for k, v in GOODPUT_KEYS.items()}
    return ",".join("%s:%g" % (names.get(k, k), v) for k, v in (goodput or {}).items())
