"""The settings of one kernel capture, defined once: each field's default and limits
(``FIELDS``, the sweep plan's :class:`~dsv4tui.agent.bench.plan.Field`) and
:class:`CaptureSettings`, what :class:`~dsv4tui.agent.kernels.capture.ProfileRun` takes.
``agent kernels run``'s flags, a campaign's capture per variant (agent/campaign/variant_kernels.py)
and the console's ``kernels = { ... }`` table of a campaign (core/config.py) read their defaults
and limits here. A ValueError says what is wrong in one line.

Stdlib only: the agent is deployed on its own (Python 3.9).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional

from dsv4tui.agent.bench.plan import Field, field_problem

TELEMETRY = ("auto", "nvml", "nvidia-smi", "simulated", "off")

FIELDS: Dict[str, Field] = {
    "steps": Field("int", 5, low=1),  # forward steps profiled (SGLang's num_steps)
    "concurrency": Field("int", 16, low=1),  # streams of the steady load
    "warmup": Field("num", 3.0, low=0),  # seconds of load at least, before profiling
    "ramp_timeout": Field("num", 60.0, low=0),  # waiting for the batch, then capture flagged
    "input_len": Field("int", 128, low=1),
    "output_len": Field("int", 1024, low=1),  # long: the batch stays in decode
    "stop_after": Field("num", 60.0, low=0),  # /stop_profile when no trace came by then
    "timeout": Field("num", 300.0, low=0, above=True),  # no trace by then: give up
    "top": Field("int", 25, low=1),  # kernels listed
    "telemetry": Field("choice", "auto", choices=TELEMETRY),
    "by_stage": Field("bool", False),
    "output_dir": Field("data", None, null=True),  # where SGLang writes (default: the cache)
    "trace_dir": Field("data", None, null=True),  # where this agent looks (default: output_dir)
    "ranks": Field("data", None, null=True),  # TP ranks parsed (default: all)
}


@dataclass(frozen=True)
class CaptureSettings:
    """One capture's settings (defaults: ``FIELDS``); :func:`check` before use."""

    steps: int = FIELDS["steps"].default
    concurrency: int = FIELDS["concurrency"].default
    warmup: float = FIELDS["warmup"].default
    ramp_timeout: float = FIELDS["ramp_timeout"].default
    input_len: int = FIELDS["input_len"].default
    output_len: int = FIELDS["output_len"].default
    stop_after: float = FIELDS["stop_after"].default
    timeout: float = FIELDS["timeout"].default
    top: int = FIELDS["top"].default
    telemetry: str = FIELDS["telemetry"].default
    by_stage: bool = FIELDS["by_stage"].default
    output_dir: Optional[str] = FIELDS["output_dir"].default
    trace_dir: Optional[str] = FIELDS["trace_dir"].default
    ranks: Optional[List[int]] = FIELDS["ranks"].default

    @classmethod
    def of(cls, given: Dict[str, Any]) -> "CaptureSettings":
        """From a dict of some fields (ValueError: an unknown key, or :func:`check`)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError("unknown kernel capture settings: %s" % ", ".join(unknown))
        out = cls(**given)
        check(out)
        return out


def check(settings: CaptureSettings) -> None:
    """ValueError (one line, naming the field) unless ``settings`` can run."""
    for key, f in FIELDS.items():
        value = getattr(settings, key)
        if f.kind != "data":
            problem = field_problem(key, f, value)
            if problem is not None:
                raise ValueError(problem)
    for key in ("output_dir", "trace_dir"):
        value = getattr(settings, key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError("%s must be a path" % key)
    ranks = settings.ranks
    if ranks is not None and (not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)):
        raise ValueError("ranks must be a list of TP ranks >= 0")
