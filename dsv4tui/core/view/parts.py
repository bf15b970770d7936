"""The parts of the model a screen redraws. The App marks the parts that changed (the core's
functions that change the model say which); the screen on top redraws only those."""

from __future__ import annotations

CONN, SERVER, DECODE, LOGS, GPU, METRICS = ("conn", "server", "decode", "logs", "gpu",
                                            "metrics")
STARTUP, SANITY, SWEEP, RUNS, COMPARE, PROFILES, CAMPAIGN = (
    "startup", "sanity", "sweep", "runs", "compare", "profiles", "campaign")
ALL = frozenset({CONN, SERVER, DECODE, LOGS, GPU, METRICS, STARTUP, SANITY, SWEEP, RUNS, COMPARE,
                 CAMPAIGN, PROFILES})
