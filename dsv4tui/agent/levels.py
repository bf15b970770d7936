"""Sweep levels ``C:n`` (C requests in flight, n requests in all), written as text
(``1:8,8:32``): one parser and one check of a level for the agent's ``bench sweep --levels``,
the console's ``sweep --levels``, the Bench plan dialog and the config's ``[sweep] levels``.
A ValueError says what is wrong and what to write instead, in one line.

Stdlib only: the agent is deployed on its own (Python 3.9).
"""

from __future__ import annotations

from typing import List, Tuple

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
