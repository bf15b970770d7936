"""A campaign's kernel capture per variant (``kernels = { level = 16 }`` in the campaign).

When a variant's first run (repeat 0) has ended with its sweep kept (``done`` or ``partial``),
the runner takes one capture of the same server, in this process (it holds the host's bench
lock, so no other load runs beside it): the capture module's steady load of the level's C
streams (the sweep plan's input length, long outputs so the batch stays in decode), its wait
until the server runs that batch, ``/start_profile``, the traces parsed on this host
(agent/kernels/capture.py). The summary names the batch it measured beside the C it was
asked for (``load.measured_bs``; ``batch_far`` when it is under half of C), so a capture
never claims a load it did not see.

It runs after the sweep, not inside the level's own requests: the profiler's start-up and
the trace export stall SGLang's scheduler for seconds, which would land in the level's
stored tok/s and latencies.

The traces stay on the host (``<campaign dir>/kernels/<run>/``, or under the campaign's
``output_dir``); only the summary travels, as with ``dsv4tui kernels``. Journal events,
stamped with the variant and run: the capture's own ``kernels_target``, ``kernels_phase``,
``kernels_traces``, then ``kernels`` (the summary, with the sweep ``level`` index and its
``concurrency``, and the ``server_pid``), or ``kernels_failed`` (``kind``, ``message``). A
capture that fails never fails the variant: the run and its sweep are already recorded.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from dsv4tui.agent import protocol
from dsv4tui.agent.kernels.settings import CaptureSettings

# the campaign's ``kernels`` table: level (the C), then these of the capture's settings
KNOBS = ("steps", "warmup", "ramp_timeout", "output_len", "timeout", "top")


def check(conf: Any, plan: Dict[str, Any]) -> None:
    """ValueError (one line, from ``kernels.``) unless ``conf`` (a campaign's ``kernels``) is
    a capture the runner can take: its level one of the plan's C levels, valid settings. The
    console checks a campaign with it (core/config.py), the agent its spec again."""
    if not isinstance(conf, dict):
        raise ValueError("kernels must be a table (level = C, ...)")
    unknown = sorted(set(conf) - {"level", "output_dir", *KNOBS})
    if unknown:
        raise ValueError("kernels: unknown keys %s" % ", ".join(unknown))
    levels = [lv[0] for lv in plan.get("levels") or []]
    level = conf.get("level")
    if level not in levels or isinstance(level, bool):
        near = ""
        if levels and isinstance(level, (int, float)) and not isinstance(level, bool):
            near = "; did you mean %d?" % min(levels, key=lambda c: (abs(c - level), c))
        raise ValueError("kernels.level: %r is not one of the sweep's levels (C = %s%s)"
                         % (level, ", ".join(str(c) for c in levels) or "none", near))
    settings_of(conf, plan, "check")


def settings_of(conf: Dict[str, Any], plan: Dict[str, Any], run_dir: str) -> CaptureSettings:
    """The capture's settings: C = the level, the plan's input length, the campaign's knobs,
    traces to ``run_dir`` (under the campaign's ``output_dir`` when it names one)."""
    given = {k: conf[k] for k in KNOBS if conf.get(k) is not None}
    out_dir = run_dir
    if conf.get("output_dir"):
        out_dir = os.path.join(os.path.expanduser(str(conf["output_dir"])),
                               os.path.basename(run_dir))
    try:
        return CaptureSettings.of(dict(given, concurrency=conf["level"],
                                       input_len=plan.get("input_len") or 128,
                                       output_dir=out_dir))
    except ValueError as exc:
        raise ValueError("kernels.%s" % exc) from None


def level_index(plan: Dict[str, Any], c: int) -> Optional[int]:
    """The sweep's first level with concurrency ``c`` (the index its level events carry)."""
    for i, lv in enumerate(plan.get("levels") or []):
        if lv[0] == c:
            return i
    return None


def after_run(spec: Dict[str, Any], cdir: str, key: str, repeat: int, status: str,
              tgt: Dict[str, Any]) -> None:
    """The variant's capture, when the campaign asks for one and this is its first run;
    what happened goes to the journal. Only a cancel (KeyboardInterrupt) propagates."""
    conf = spec.get("kernels")
    if not isinstance(conf, dict) or repeat != 0:
        return
    plan = dict(spec.get("plan") or {})
    c = conf.get("level")
    where = {"level": level_index(plan, c) if isinstance(c, int) else None, "concurrency": c}
    if status not in ("done", "partial"):
        protocol.emit("kernels_failed", kind="not_taken", **where,
                      message="no kernel capture at C=%s: the run %s" % (c, status))
        return
    from dsv4tui.agent.bench.sweep import TargetSpec
    from dsv4tui.agent.kernels import capture

    try:
        settings = settings_of(conf, plan, os.path.join(cdir, "kernels", key))
        spec_ = TargetSpec(str(tgt["url"]), tgt.get("model") or None,
                           tgt.get("api_key_env") or None)
        summary = capture.take(settings, spec_)
    except protocol.AgentError as err:
        protocol.emit("kernels_failed", kind=err.kind, **where,
                      message="kernel capture at C=%s failed: %s" % (c, err.message))
        return
    except ValueError as exc:  # the spec's settings (the console checked them)
        protocol.emit("kernels_failed", kind="usage", **where,
                      message="kernel capture at C=%s: %s" % (c, exc))
        return
    except Exception as exc:  # a broken capture must not sink the campaign
        protocol.emit("kernels_failed", kind="error", **where,
                      message="kernel capture at C=%s failed: %s: %s"
                      % (c, type(exc).__name__, exc))
        return
    protocol.emit("kernels", **dict(summary, **where, server_pid=tgt.get("pid")))
