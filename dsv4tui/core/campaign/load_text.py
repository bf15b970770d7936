"""The load of a sweep written as text, as the CLI's flags and the Bench plan dialog take it:
levels ``C:n,…``, open-loop rates ``rate:n,…`` and goodput targets ``ttft:MS,tpot:MS,e2el:MS``
(vLLM's keys). One parser for both faces; a ValueError says what to write instead.
The levels' parser is the agent's (agent/levels.py), so its command line says the same."""

from __future__ import annotations

from dsv4tui.agent.levels import parse_levels

__all__ = ["GOODPUT_KEYS", "goodput_text", "parse_goodput", "parse_levels", "parse_rates"]


def parse_rates(text: str) -> list[tuple[float, int]]:
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
        if not sep or not n.isdigit() or rate <= 0 or int(n) < 1:
            raise ValueError(f"{part!r} is not rate:n (req/s : requests, e.g. 2:100)")
        rates.append((rate, int(n)))
    return rates


GOODPUT_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms"}


def parse_goodput(text: str) -> dict[str, float] | None:
    """``ttft:500,tpot:50`` -> {"ttft_ms": 500.0, "tpot_ms": 50.0}; empty -> None."""
    out: dict[str, float] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        key, sep, value = part.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if not sep or key not in GOODPUT_KEYS or ms <= 0:
            raise ValueError(f"{part!r} is not ttft:MS, tpot:MS or e2el:MS (MS > 0)")
        out[GOODPUT_KEYS[key]] = ms
    return out or None


def goodput_text(goodput: dict[str, float] | None) -> str:
    """The targets written back as text (``ttft:500,tpot:50``)."""
    names = {v: k for k, v in GOODPUT_KEYS.items()}
    return ",".join(f"{names.get(k, k)}:{v:g}" for k, v in (goodput or {}).items())
