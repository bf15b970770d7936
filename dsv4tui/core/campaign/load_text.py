"""The load of a sweep written as text, as the CLI's flags and the Bench plan dialog take it:
levels ``C:n,…``, open-loop rates ``rate:n,…`` and goodput targets ``ttft:MS,tpot:MS,e2el:MS``.
The parsers are the agent's (agent/bench/levels.py), so its command line says the same: one
definition of each, for both sides."""

from __future__ import annotations

from dsv4tui.agent.bench.levels import (
    GOODPUT_KEYS,
    goodput_text,
    parse_goodput,
    parse_levels,
    parse_rates,
)

__all__ = ["GOODPUT_KEYS", "goodput_text", "parse_goodput", "parse_levels", "parse_rates"]
