"""The campaign report as data: what a report of stored runs holds, read from the store once
(:func:`build`, :func:`build_campaign`), rendered by two small renderers -- HTML
(:mod:`~dsv4tui.core.campaign.report_html`) and Markdown
(:mod:`~dsv4tui.core.campaign.report_md`) -- so both say the same facts in the same words.

What it holds, none of it recomputed:

- the comparison table of :func:`dsv4tui.core.campaign.compare.compare_runs` (numbers and their %
  change against the baseline run), also embedded as JSON (``Comparison.to_json``);
- the verdicts (:mod:`~dsv4tui.core.campaign.verdict`): each variant's change in output tok/s
  against the baseline per level with its 95 % interval across restarts (the change chart's
  error bars), or "one run each: no interval"; the accuracy canary's;
- startup time per phase of each run's launch (:mod:`~dsv4tui.core.campaign.startup_phases`);
- per variant, its kernel families (share of a decode step, tensor cores or not) next to its
  tok/s and roofline % (:mod:`~dsv4tui.core.campaign.variant_kernels`);
- what differs between the runs: the workload (``Comparison.differences``), the launch
  command lines flag by flag, and the server arguments the server reported;
- each run's launch command line, sanity answers, GPUs and server version;
- the launch findings of each run's newest kernel capture (kernels that leave the GPU idle).

A run with no finished level is left out of the table and the charts, and the notes say so
(with the run's status and reason); when no run has one there is no table and no chart, only
that message. Texts here are plain (control characters escaped by
:func:`~dsv4tui.core.campaign.labels.safe_text` where they come from a run); each renderer
escapes its own syntax.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsv4tui.core.campaign import startup_phases
from dsv4tui.core.campaign.columns import change_title, fmt_change
from dsv4tui.core.campaign.compare import Comparison, compare_runs, load_text, sim_name
from dsv4tui.core.campaign.kernel_launch import run_kernel_lines
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.variant_kernels import VariantKernels
from dsv4tui.core.campaign.verdict import ONE_RUN, VERDICT_HEAD, verdict_table
from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.campaign.verdict import CanaryRow, VerdictRow
    from dsv4tui.core.store.models import Run
    from dsv4tui.core.store.runstore import RunStore

NOT_RECORDED = "not recorded"
NO_INTERVAL = "one run each: no interval"

# --- what the report is made of -------------------------------------------------------------

@dataclass
class RunFacts:
    """One run as the report tells it (the store's rows, read once)."""

    run: Run
    levels: int
    argv: list[str] | None = None
    argv_from: str | None = None  # "run" (what ran) | "launch" (the launch it points at)
    server_args: dict[str, Any] | None = None
    quantization: str | None = None
    attention_backend: str | None = None
    meta_source: str | None = None  # launch | server_info | unknown
    variant: str | None = None
    launch: dict[str, Any] | None = None  # id, profile_name, startup_s, ok, error, phases
    sanity: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[str] | None = None  # its newest capture: title, launch note, findings

    @property
    def has_levels(self) -> bool:
        return self.levels > 0

    @property
    def name(self) -> str:
        """``#3 NVFP4_marlin``: how the report names a run."""
        return f"#{self.run.id} {self.run.label}"


@dataclass(frozen=True)
class ChangeBar:
    """One variant's change in output tok/s against the baseline at one load: a bar of the
    change chart, its error bar the 95 % interval across restarts (None: one run a side)."""

    label: str
    load: tuple[int, float | None]
    change_pct: float
    ci_low: float | None
    ci_high: float | None
    n_variant: int
    n_baseline: int
    verdict: str | None
    simulated: bool = False  # one of its runs measured the simulator

    @property
    def load_text(self) -> str:
        return load_text(self.load)

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    def text(self) -> str:
        """``+4.1 % [+1.2, +7.0] faster (n=3/3)`` or ``+4.1 % (one run each: no interval)``."""
        if not self.has_interval:
            return f"{self.change_pct:+.1f} % ({NO_INTERVAL})"
        return (f"{self.change_pct:+.1f} % [{self.ci_low:+.1f}, {self.ci_high:+.1f}] "
                f"{self.verdict} (n={self.n_variant}/{self.n_baseline})")


@dataclass
class Verdicts:
    """Each variant against the baseline across its repeats (core/campaign/verdict.py)."""

    baseline_label: str
    rows: list[VerdictRow]
    canary: list[CanaryRow]
    head: tuple[str, ...] = VERDICT_HEAD
    table: list[list[str]] = field(default_factory=list)  # VERDICT_HEAD's columns
    bars: list[ChangeBar] = field(default_factory=list)

    @property
    def any_interval(self) -> bool:
        return any(b.has_interval for b in self.bars)

    @property
    def note(self) -> str:
        """What the intervals are (or that there are none)."""
        what = ("95 % intervals across restarts (Welch on the logs of the per-repeat values; "
                "docs/metrics.md)")
        if self.bars and not self.any_interval:
            return f"{what}. {NO_INTERVAL.capitalize()}: {ONE_RUN.split(': ', 1)[1]}."
        return f"{what}. One run a side gives no interval."

    def chart_title(self) -> str:
        tail = "95 % interval across restarts" if self.any_interval else NO_INTERVAL
        return f"output tok/s change vs {self.baseline_label} per load ({tail})"


@dataclass(frozen=True)
class KernelsRow:
    """One variant's kernel families in the report's table."""

    kernels: VariantKernels

    def cells(self, families: Sequence[tuple[str, str]]) -> list[str]:
        k = self.kernels
        out = [k.label + (" (SIMULATED)" if k.simulated else ""),
               f"#{k.capture_id} at {k.load or '?'}",
               f"{k.tok_s:.1f}" if k.tok_s is not None else "-",
               k.roofline_text().replace(" of the memory-bound roofline", "")]
        for key, _ in families:
            f = k.family(key)
            out.append("-" if f is None or f.share is None else
                       f"{100 * f.share:.0f} % · tensor cores: "
                       + {True: "yes", False: "no", None: "?"}[f.tensor_cores])
        return out


KERNELS_NOTE = ("per variant, its newest kernel capture (taken at the level named): each "
                "family's share of a decode step's GPU kernel time and whether it ran on "
                "tensor cores, next to the variant's output tok/s at that level and its % of "
                "the memory-bound decode ceiling (roofline)")


@dataclass
class Report:
    title: str
    comparison: Comparison
    facts: list[RunFacts]
    generated_at: float = field(default_factory=time.time)
    campaign: dict[str, Any] | None = None  # id, name, host, state, reason, variants
    notes: list[str] = field(default_factory=list)
    verdicts: Verdicts | None = None
    startup: list[list[str]] = field(default_factory=list)  # startup_phases.HEAD's columns
    kernels: list[VariantKernels] = field(default_factory=list)  # per variant with a capture

    @property
    def measured(self) -> list[RunFacts]:
        return [f for f in self.facts if f.has_levels]

    @property
    def simulated(self) -> bool:
        return any(f.run.simulated for f in self.facts)

    def fact(self, run_id: int) -> RunFacts:
        return next(f for f in self.facts if f.run.id == run_id)

    # -- sections, as text both renderers print --------------------------------------------
    def compare_note(self) -> str:
        base = self.comparison.baseline_run
        return (f"per concurrency C and run; % change against the baseline "
                f"#{base.id if base else '-'} {base.label if base else ''}; TTFT and TPOT are "
                "p50 / p99 over the level's requests; tensor: mean tensor-pipe activity over "
                "the GPUs; tok/s/kW: output tok/s per kW of the GPUs' summed power.")

    def kernel_families(self) -> list[tuple[str, str]]:
        """The families any variant's capture has, in the agent's order."""
        from dsv4tui.agent.kernels.trace_parse import FAMILY_LABELS

        have = {f.key for k in self.kernels for f in k.families}
        known = [(key, label) for key, label in FAMILY_LABELS if key in have]
        extra = sorted({(f.key, f.label) for k in self.kernels for f in k.families
                        if f.key not in dict(FAMILY_LABELS)})
        return known + extra

    def kernels_table(self) -> tuple[list[str], list[list[str]]]:
        fams = self.kernel_families()
        head = ["variant", "capture", "tok/s", "roofline", *(label for _, label in fams)]
        return head, [KernelsRow(k).cells(fams) for k in self.kernels]

    def runs_rows(self) -> list[list[str]]:
        """The runs table (:data:`RUNS_HEAD`), plain text."""
        return [[f"#{f.run.id}", f.run.label, where(f.run), f.run.model or "-",
                 f.run.backend or "-", f.run.checkpoint or "-", f.quantization or "-",
                 f.attention_backend or "-", f.run.status_text, sanity_text(f.run),
                 when(f.run.started_at), str(f.levels)] for f in self.facts]

    def versions_rows(self) -> list[list[str]]:
        """GPUs and server versions (:data:`VERSIONS_HEAD`)."""
        rows = []
        for f in self.facts:
            r, launch = f.run, f.launch or {}
            startup = launch.get("startup_s")
            rows.append([f.name, gpus(r), r.server_version or NOT_RECORDED, r.model or "-",
                         "yes" if r.simulated else "no", f.meta_source or "-",
                         launch.get("profile_name") or r.profile_name or "-",
                         f"{startup:.1f}" if isinstance(startup, (int, float)) else "-"])
        return rows

    def variants_rows(self) -> list[list[str]]:
        return [[v.get("name") or "-", v.get("state") or "-", v.get("reason") or ""]
                for v in (self.campaign or {}).get("variants") or []]


RUNS_HEAD = ["run", "label", "target", "model", "MoE backend", "checkpoint", "quantization",
             "attention", "status", "sanity", "started", "levels"]
VERSIONS_HEAD = ["run", "GPUs", "server version", "model", "simulated", "what ran, from",
                 "profile", "startup s"]
VARIANTS_HEAD = ["variant", "state", "reason"]
SANITY_HEAD = ["", "case", "prompt", "expected", "answer", "latency s", "error"]
STARTUP_NOTE = ("seconds per startup phase of each run's launch (from the server's log); "
                "startup: launch -> ready on the host's clock, other: what the phases leave out "
                "(python start, imports); the change is against the baseline's startup")


def sanity_rows(f: RunFacts) -> list[list[str]]:
    """A run's sanity answers (:data:`SANITY_HEAD`); the first cell PASS / FAIL."""
    out = []
    for c in f.sanity:
        latency = c.get("latency_s")
        out.append(["PASS" if c.get("passed") else "FAIL", c.get("name") or "-",
                    c.get("prompt") or "-", c.get("expect") or "-",
                    (c.get("answer") or "").strip()[:200],
                    f"{latency:.2f}" if isinstance(latency, (int, float)) else "-",
                    c.get("error") or ""])
    return out


def _loads(text: Any) -> Any:
    if not isinstance(text, (str, bytes)) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _row(store: RunStore, table: str, row_id: int | None) -> dict[str, Any]:
    if row_id is None:
        return {}
    try:
        rows = store.query(f"SELECT * FROM {table} WHERE id = ?", (row_id,))
    except sqlite3.OperationalError:  # an older store without the table: what it has
        return {}
    return {k: rows[0][k] for k in rows[0].keys()} if rows else {}  # noqa: SIM118


def _str_list(v: Any) -> list[str] | None:
    return [str(x) for x in v] if isinstance(v, list) and v else None


def run_facts(store: RunStore, run: Run, levels: int) -> RunFacts:
    row = _row(store, "runs", run.id)
    facts = RunFacts(run=run, levels=levels,
                     quantization=row.get("quantization"),
                     attention_backend=row.get("attention_backend"),
                     meta_source=row.get("meta_source"), variant=row.get("variant"),
                     sanity=store.sanity_results(run_id=run.id))
    facts.sanity.sort(key=lambda c: (c.get("created_at") or 0, c.get("id") or 0))
    facts.kernels = run_kernel_lines(store, run.id)
    argv = _str_list(_loads(row.get("argv_json")))
    if argv:
        facts.argv, facts.argv_from = argv, "run"
    args = _loads(row.get("server_args_json"))
    facts.server_args = dict(args) if isinstance(args, Mapping) and args else None
    launch = _row(store, "launches", run.launch_id)
    if launch:
        profile = _loads(launch.get("profile_json"))
        facts.launch = {"id": launch.get("id"), "profile_name": launch.get("profile_name"),
                        "startup_s": launch.get("startup_s"), "ok": bool(launch.get("ok")),
                        "error": launch.get("error"),
                        "phases": profile.get("phases") if isinstance(profile, Mapping) else None}
        if facts.argv is None:
            argv = _str_list(_loads(launch.get("argv_json"))) or _str_list(
                profile.get("argv") if isinstance(profile, Mapping) else None)
            if argv:
                facts.argv, facts.argv_from = argv, "launch"
    return facts


def build(store: RunStore, refs: Sequence[str | int], baseline: str | int | None = None, *,
          title: str | None = None, campaign: Mapping[str, Any] | None = None) -> Report:
    """The report of runs ``refs`` (ids or labels) against ``baseline`` (default: the first
    run that has a finished level)."""
    cmp = compare_runs(store, refs, baseline)
    facts = []
    for info in cmp.runs:
        run = store.find_run(info.id)
        facts.append(run_facts(store, run, len(cmp.points.get(info.id) or {})))
    with_levels = [f.run.id for f in facts if f.has_levels]
    if baseline is None and with_levels and cmp.baseline_id not in with_levels:
        cmp = cmp.with_baseline(with_levels[0])  # the % change against a run that measured
    if title is None:
        title = "dsv4tui report: " + " vs ".join(
            f"#{f.run.id} {safe_text(f.run.label)}" for f in facts) if facts else \
            "dsv4tui report"
    report = Report(title=title, comparison=cmp, facts=facts,
                    campaign=dict(campaign) if campaign else None)
    report.notes = _notes(report)
    report.verdicts = _verdicts(cmp) if report.measured else None
    report.startup = _startup_rows(report)
    report.kernels = _kernels(store, facts)
    return report


def _verdicts(cmp: Comparison) -> Verdicts | None:
    rows, canary = cmp.verdicts(), cmp.canary_verdicts()
    base = cmp.baseline_run
    if (not rows and not canary) or base is None:
        return None
    sim = {r.id for r in cmp.runs if r.simulated}
    bars = [ChangeBar(r.label, r.load, h.change_pct, h.ci_low, h.ci_high, h.n_variant,
                      h.n_baseline, h.verdict, bool(sim & set(r.run_ids)))
            for r in rows if (h := r.headline).change_pct is not None]
    return Verdicts(base.label, rows, canary, table=verdict_table(rows, load_text), bars=bars)


def _startup_rows(report: Report) -> list[list[str]]:
    base = report.comparison.baseline_id
    named = [(f.name, f.launch) for f in report.facts]
    baseline = next((f.name for f in report.facts if f.run.id == base), None)
    return startup_phases.rows(named, baseline)


def _kernels(store: RunStore, facts: Sequence[RunFacts]) -> list[VariantKernels]:
    """Per variant (runs sharing a label are its repeats), the newest capture's families."""
    from dsv4tui.core.campaign.variant_kernels import for_runs

    by_label: dict[str, list[Run]] = {}
    for f in facts:
        by_label.setdefault(f.run.label, []).append(f.run)
    found = [for_runs(store, runs, label) for label, runs in by_label.items()]
    return [k for k in found if k is not None]


def build_campaign(store: RunStore, cid: str) -> Report:
    """The report of campaign ``cid``: its runs (in the order they ran), its variants."""
    from dsv4tui.core.store import campaigns as cstore

    row = cstore.get(store, cid)
    if row is None:
        raise UserError(f"campaign {cid} is not in the run store (dsv4tui campaign attach "
                        "HOST ID collects it)", EXIT_CONFIG)
    ids = sorted(cstore.run_ids(store, cid).values())
    variants = [{"name": v.get("name"), "state": v.get("state"), "reason": v.get("reason")}
                for v in row.detail.get("variants") or []]
    campaign = {"id": row.id, "name": row.name, "host": row.host, "state": row.state,
                "reason": row.error, "kind": row.kind, "created_at": row.created_at,
                "ended_at": row.ended_at, "variants": variants}
    title = f"dsv4tui report: campaign {safe_text(row.name)} on {safe_text(row.host)}"
    return build(store, ids, title=title, campaign=campaign)


def _notes(report: Report) -> list[str]:
    notes = []
    if not report.facts:
        notes.append("no runs to report (a campaign whose variants never reached a sweep has "
                     "none)")
    for f in report.facts:
        if not f.has_levels:
            why = f.run.status + (f": {f.run.error}" if f.run.error else "")
            notes.append(f"run #{f.run.id} ({safe_text(f.run.label)}) has no finished level "
                         f"({safe_text(why)}): it is not in the table or the charts")
    if report.facts and not report.measured:
        notes.append("none of these runs has a finished level: there is no comparison table "
                     "and no chart")
    base = report.comparison.baseline_run
    if base is not None and report.measured and not report.fact(base.id).has_levels:
        notes.append(f"the baseline #{base.id} has no finished level, so there is no % change "
                     "(pick another with --baseline)")
    return notes


# --- what differs between the runs ----------------------------------------------------------

def argv_options(argv: Sequence[str]) -> dict[str, str]:
    """A launch command line as ``{flag: value}``: ``--flag value`` and ``--flag=value``;
    a flag without a value is ``(set)``, a flag with several values keeps them all; what
    comes before the first flag (the python, ``-m module``) is ``(program)``."""
    out: dict[str, str] = {}
    i, head = 0, []
    while i < len(argv) and not argv[i].startswith("--"):
        head.append(argv[i])
        i += 1
    if head:
        out["(program)"] = shlex.join(head)
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            i += 1
            continue
        if "=" in arg:
            key, value = arg.split("=", 1)
            out[key] = value
            i += 1
            continue
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        out[arg] = " ".join(argv[i + 1:j]) if j > i + 1 else "(set)"
        i = j
    return out


@dataclass(frozen=True)
class Difference:
    key: str
    values: dict[int, str | None]  # run id -> the value (None: not given)


def _differences(by_run: Mapping[int, Mapping[str, str]]) -> list[Difference]:
    keys: list[str] = []
    for opts in by_run.values():
        keys += [k for k in opts if k not in keys]
    out = []
    for key in keys:
        values = {rid: opts.get(key) for rid, opts in by_run.items()}
        if len(set(values.values())) > 1:
            out.append(Difference(key, values))
    return out


def argv_differences(facts: Sequence[RunFacts]) -> list[Difference]:
    """The launch flags whose values differ between the runs that recorded their argv."""
    by_run = {f.run.id: argv_options(f.argv) for f in facts if f.argv}
    return _differences(by_run) if len(by_run) > 1 else []


def _arg_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def server_arg_differences(facts: Sequence[RunFacts]) -> list[Difference]:
    """The server arguments (as the servers reported them) that differ between the runs."""
    by_run = {f.run.id: {str(k): _arg_text(v) for k, v in f.server_args.items()}
              for f in facts if f.server_args}
    return _differences(by_run) if len(by_run) > 1 else []


# --- shared text ----------------------------------------------------------------------------

def when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def gpus(run: Run) -> str:
    if not run.gpu_names:
        return NOT_RECORDED
    counts: dict[str, int] = {}
    for name in run.gpu_names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def sanity_text(run: Run) -> str:
    return {True: "pass", False: "FAIL", None: "-"}[run.sanity_passed]


def where(run: Run) -> str:
    return run.target or run.host or "-"


def compare_header(cmp: Comparison) -> list[str]:
    """The CLI's header (``dsv4tui runs compare``): C, run, each column with its unit, each
    change column naming the baseline."""
    head = ["C", "run"]
    for col in cmp.columns():
        head.append(col.header)
        if col.change:
            head.append(change_title(cmp.baseline_id))
    return head


def compare_cells(report: Report) -> list[tuple[Any, list[tuple[str, str | None, Any]]]]:
    """The table's rows: ``(CompareRow, [(text, key, raw value)])``, the rows of runs with a
    finished level only; text as the CLI prints it (``col.text``, ``fmt_change``)."""
    measured = {f.run.id for f in report.measured}
    out = []
    for row in report.comparison.rows():
        if row.run.id not in measured:
            continue
        name = sim_name(row.name, row.run.simulated) + (" (baseline)" if row.is_baseline
                                                         else "")
        load = row.load if row.rate is not None else str(row.concurrency)  # "5 req/s"
        cells: list[tuple[str, str | None, Any]] = [(load, "concurrency", row.concurrency),
                                                    (safe_text(name), None, None)]
        if row.point is None:
            cells.append(("not run", None, None))
            cells += [("", None, None)] * (len(compare_header(report.comparison)) - 3)
        else:
            for col in report.comparison.columns():
                value = row.values.get(col.key)
                cells.append((col.text(value), col.key, value))
                if col.change:
                    change = row.changes.get(col.key)
                    cells.append(("base" if row.is_baseline else fmt_change(change),
                                  f"{col.key}_change_pct", change))
        out.append((row, cells))
    return out



__all__ = ["KERNELS_NOTE", "NOT_RECORDED", "NO_INTERVAL", "RUNS_HEAD", "SANITY_HEAD",
           "STARTUP_NOTE", "VARIANTS_HEAD", "VERSIONS_HEAD", "ChangeBar", "Difference",
           "KernelsRow", "Report", "RunFacts", "Verdicts", "argv_differences", "argv_options",
           "build", "build_campaign", "compare_cells", "compare_header", "gpus", "run_facts",
           "sanity_rows", "sanity_text", "server_arg_differences", "when", "where"]
