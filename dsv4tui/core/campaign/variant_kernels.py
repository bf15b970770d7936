"""A campaign variant's kernel families, from the capture linked to one of its runs: each family
(MoE GEMM, attention, norm, communication, sampling, other, ...) as its share of a decode step
and whether it ran on tensor cores, next to the variant's tok/s at the capture's level and its
% of the memory-bound roofline. One definition for the campaign report, the Campaign screen's
families line and ``campaign status`` (text and ``--json``'s ``kernels``).

The captures are the store's ``kernels`` rows whose ``run_id`` is the variant's run (a
campaign's ``kernels = { level = 16 }`` stores them so, as ``dsv4tui kernels`` does during a
run); with several repeats the newest capture of any of the variant's runs counts. The family
numbers are the agent's parse of the trace (``agent/kernels/trace_parse.py``); nothing here
recomputes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsv4tui.core.store.models import Run
    from dsv4tui.core.store.runstore import RunStore

TENSOR = {True: "tensor cores", False: "CUDA cores", None: "cores ?"}
TENSOR_SHORT = {True: "TC", False: "CC", None: "?"}
TENSOR_YES_NO = {True: "yes", False: "no", None: "?"}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


@dataclass(frozen=True)
class Family:
    key: str  # the agent's family key (trace_parse.FAMILY_LABELS)
    label: str
    share: float | None  # of a decode step's GPU kernel time, 0..1
    tensor_cores: bool | None
    step_ms: float | None = None  # share x the capture's mean decode-step GPU time

    def text(self, short: bool = False) -> str:
        pct = "?" if self.share is None else f"{100 * self.share:.0f} %"
        if short:  # "39%": a line that wraps keeps the number with its unit
            return f"{self.label} {pct.replace(' ', '')} {TENSOR_SHORT[self.tensor_cores]}"
        return f"{self.label} {pct} ({TENSOR[self.tensor_cores]})"

    def to_json(self) -> dict[str, Any]:
        return {"family": self.key, "label": self.label,
                "share": None if self.share is None else round(self.share, 4),
                "tensor_cores": self.tensor_cores,
                "step_ms": None if self.step_ms is None else round(self.step_ms, 3)}


@dataclass(frozen=True)
class VariantKernels:
    """One variant's (one run's) newest capture, read for the campaign's faces."""

    label: str
    run_id: int
    capture_id: int
    load: str | None  # "C=16, bs 15.9 measured"
    concurrency: int | None
    families: tuple[Family, ...] = field(default_factory=tuple)
    tok_s: float | None = None  # the run's output tok/s at the capture's C
    roofline_pct: float | None = None
    roofline_note: str | None = None  # why there is no roofline % ("no active parameter ...")
    simulated: bool = False

    def family(self, key: str) -> Family | None:
        return next((f for f in self.families if f.key == key), None)

    def roofline_text(self) -> str:
        from dsv4tui.core import roofline

        if self.roofline_pct is not None:
            return f"{roofline.format_pct(self.roofline_pct)} of the memory-bound roofline"
        return f"roofline n/a: {self.roofline_note}" if self.roofline_note else "roofline n/a"

    def speed_text(self) -> str:
        """``28.7 tok/s at C=16 (23 % of the memory-bound roofline)``, or ""."""
        if self.tok_s is None or self.concurrency is None:
            return ""
        return f"{self.tok_s:.1f} tok/s at C={self.concurrency} ({self.roofline_text()})"

    def text(self, top: int = 4) -> str:
        """``capture #3 at C=16: MoE GEMM 27 % (tensor cores), attention 47 % (CUDA cores),
        ... of a decode step; 28.7 tok/s at C=16 (23 % of the memory-bound roofline)``."""
        fams = ", ".join(f.text() for f in self.families[:top])
        out = f"capture #{self.capture_id} at {self.load or 'an unknown load'}: {fams} of a " \
              "decode step"
        speed = self.speed_text()
        if speed:
            out += f"; {speed}"
        return out + (" SIMULATED" if self.simulated else "")

    def short(self) -> str:
        """The Campaign screen's line: ``capture #3 C=16: MoE GEMM 27% TC · attention 47% CC
        · ...`` (TC tensor cores, CC CUDA cores), every family, largest first."""
        fams = " · ".join(f.text(short=True) for f in self.families)
        where = f"C={self.concurrency}" if self.concurrency is not None else "load ?"
        return f"capture #{self.capture_id} {where}: {fams}" + (" SIM" if self.simulated
                                                                  else "")

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "run_id": self.run_id, "capture_id": self.capture_id,
                "load": self.load, "concurrency": self.concurrency,
                "families": [f.to_json() for f in self.families],
                "output_tok_s": None if self.tok_s is None else round(self.tok_s, 2),
                "roofline_pct": None if self.roofline_pct is None else round(
                    self.roofline_pct, 3),
                "roofline_note": self.roofline_note, "simulated": self.simulated}


def _roofline(store: RunStore, run: Run, levels: Sequence[Any],
              concurrency: int) -> tuple[float | None, str | None]:
    from dsv4tui.core import roofline

    if run.profile is None and run.launch_id is not None:
        launch = store.launch(run.launch_id)  # a sweep's run: its server's launch has them
        if launch is not None and launch.profile:
            run = replace(run, profile=launch.profile)
    try:
        pct = roofline.percent_by_concurrency(roofline.for_run(run, levels)).get(concurrency)
    except roofline.RooflineError as exc:
        return None, str(exc).split(":")[0]
    return pct, None


def for_run(store: RunStore, run: Run, label: str | None = None) -> VariantKernels | None:
    """The newest capture with parsed families linked to ``run``; None without one."""
    return for_runs(store, [run], label)


def for_runs(store: RunStore, runs: Sequence[Run],
             label: str | None = None) -> VariantKernels | None:
    """The newest capture with parsed families linked to any of ``runs`` (a variant's
    repeats); None when none has one (or the store has no kernels table)."""
    from dsv4tui.core.campaign.kernel_compare import side
    from dsv4tui.core.store import kernels as kernel_store

    found: list[tuple[Any, Run]] = []
    for run in runs:
        try:
            items = kernel_store.captures(store, run_id=run.id)
        except sqlite3.OperationalError:  # an older store without the kernels table
            return None
        found += [(c, run) for c in items if c.summary.get("families")]
    if not found:
        return None
    cap, run = max(found, key=lambda cr: (cr[0].created_at, cr[0].id))
    sd = side(cap)
    step = sd["step_ms"] if sd["basis"] == "decode" else None
    fams = []
    for f in cap.summary["families"]:
        if not isinstance(f, Mapping):
            continue
        share = _num(f.get("share"))
        tc = f.get("tensor_cores")
        fams.append(Family(str(f.get("family")), str(f.get("label") or f.get("family")),
                           share, tc if isinstance(tc, bool) else None,
                           share * step if share is not None and step is not None else None))
    fams.sort(key=lambda f: f.share or 0.0, reverse=True)
    c = cap.concurrency if cap.concurrency is not None else _num(
        (cap.load or {}).get("concurrency"))
    conc = int(c) if c is not None else None
    tok, pct, note = None, None, None
    if conc is not None:
        levels = store.levels(run.id)
        level = next((lv for lv in levels if lv.concurrency == conc), None)
        if level is not None and level.output_tok_s:
            tok = float(level.output_tok_s)
            names = (cap.summary.get("telemetry") or {}).get("gpu_names") or []
            if not run.gpu_names and names:  # the capture saw the host's GPUs; the run did not
                run = replace(run, gpu_names=[str(n) for n in names])
            pct, note = _roofline(store, run, levels, conc)
    return VariantKernels(label or run.label, run.id, cap.id, sd["load"], conc, tuple(fams),
                          tok, pct, note, bool(sd["simulated"]))


def for_campaign(store: RunStore, info: Mapping[str, Any]) -> list[VariantKernels | None]:
    """Per variant of a campaign status (``run_ids`` per variant), in order."""
    out: list[VariantKernels | None] = []
    for v in info.get("variants") or []:
        runs = [r for r in (store.run(int(i)) for i in v.get("run_ids") or []) if r is not None]
        out.append(for_runs(store, runs, str(v.get("name"))) if runs else None)
    return out


def lines(items: Sequence[VariantKernels | None]) -> list[str]:
    """``campaign status``'s lines: one per variant with a capture."""
    got = [k for k in items if k is not None]
    if not got:
        return []
    return ["kernel families (share of a decode step; tensor cores or CUDA cores):",
            *[f"  {k.label}: {k.text(top=len(k.families))}" for k in got]]
