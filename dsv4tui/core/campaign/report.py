"""A report of stored runs people can send: one HTML file (charts inline as SVG) or Markdown
with its SVG charts beside it. Written for ``dsv4tui runs report``, ``dsv4tui campaign
report`` (and at a campaign's end), and the dashboard's Runs/compare view.

What it holds, all read from the store, none of it recomputed:

- the comparison table of :func:`dsv4tui.core.campaign.compare.compare_runs` (numbers and their %
  change against the baseline run), also embedded as JSON (``Comparison.to_json``);
- its charts (:mod:`dsv4tui.core.campaign.charts`): output tok/s per C as grouped bars per run,
  TTFT and TPOT p50 per C, tensor-pipe activity per C, tok/s per kW per C;
- what differs between the runs: the workload (``Comparison.differences``), the launch
  command lines flag by flag, and the server arguments the server reported;
- each run's launch command line, sanity answers, GPUs and server version;
- the launch findings of each run's newest kernel capture (kernels that leave the GPU idle).

A run with no finished level is left out of the table and the charts, and the report says so
(with the run's status and reason); when no run has one there is no table and no chart, only
that message. Every text from a run (labels, answers, argv) is escaped: control characters by
:func:`~dsv4tui.core.campaign.labels.safe_text`, then HTML or Markdown syntax.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dsv4tui import __version__
from dsv4tui.core import paths
from dsv4tui.core.campaign import charts as ch
from dsv4tui.core.campaign import startup_phases
from dsv4tui.core.campaign.columns import change_title, fmt_change
from dsv4tui.core.campaign.compare import Comparison, compare_runs, sim_name
from dsv4tui.core.campaign.export import md_cell
from dsv4tui.core.campaign.kernel_compare import variant_line
from dsv4tui.core.campaign.kernel_launch import run_kernel_lines
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.errors import EXIT_CONFIG, UserError

if TYPE_CHECKING:
    from dsv4tui.core.store.models import Run
    from dsv4tui.core.store.runstore import RunStore

FORMATS = ("html", "md")
NOT_RECORDED = "not recorded"


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
    launch: dict[str, Any] | None = None  # id, profile_name, startup_s, ok, error
    sanity: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[str] | None = None  # its newest capture's families, launch note, findings

    @property
    def has_levels(self) -> bool:
        return self.levels > 0


@dataclass
class Report:
    title: str
    comparison: Comparison
    facts: list[RunFacts]
    generated_at: float = field(default_factory=time.time)
    campaign: dict[str, Any] | None = None  # id, name, host, state, reason, variants
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> list[RunFacts]:
        return [f for f in self.facts if f.has_levels]

    def fact(self, run_id: int) -> RunFacts:
        return next(f for f in self.facts if f.run.id == run_id)


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
    except Exception:  # an older store without the table: what it has is what we say
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
    families = variant_line(store, run)  # the families next to tok/s and the roofline %
    if families is not None:
        facts.kernels = [families, *(facts.kernels or [])[1:]]
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
    return report


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

def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _gpus(run: Run) -> str:
    if not run.gpu_names:
        return NOT_RECORDED
    counts: dict[str, int] = {}
    for name in run.gpu_names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def _sanity(run: Run) -> str:
    return {True: "pass", False: "FAIL", None: "-"}[run.sanity_passed]


def _where(run: Run) -> str:
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


# --- HTML -----------------------------------------------------------------------------------

def _e(value: Any) -> str:
    return html.escape(safe_text("" if value is None else str(value)), quote=True)


_CSS = {
    "light": ("#ffffff", "#1f2328", "#59636e", "#d1d9e0", "#f6f8fa", "#9a6700", "#fff8c5",
              "#cf222e", "#1a7f37"),
    "dark": ("#0d1117", "#e6edf3", "#9198a1", "#3d444d", "#151b23", "#d29922", "#2b2111",
             "#f85149", "#3fb950"),
}


def _style(theme: str) -> str:
    bg, fg, muted, border, alt, warn, warn_bg, bad, good = _CSS.get(theme, _CSS["light"])
    return f"""
:root {{ color-scheme: {"dark" if theme == "dark" else "light"}; }}
body {{ background: {bg}; color: {fg}; margin: 2rem auto; max-width: 72rem; padding: 0 1rem;
  font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }}
h1 {{ font-size: 1.5rem; margin-bottom: .2rem; }}
h2 {{ font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid {border}; }}
h3 {{ font-size: 1rem; margin-bottom: .3rem; }}
.meta, .muted {{ color: {muted}; }}
table {{ border-collapse: collapse; margin: .5rem 0; font-size: 13px; }}
th, td {{ border: 1px solid {border}; padding: .2rem .5rem; text-align: left;
  vertical-align: top; }}
th {{ background: {alt}; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
tr.baseline td {{ font-weight: 600; }}
td.up {{ color: {good}; }} td.down {{ color: {bad}; }}
.note {{ background: {warn_bg}; border-left: 4px solid {warn}; padding: .4rem .7rem;
  margin: .4rem 0; }}
.sim {{ display: inline-block; background: {warn}; color: {bg}; font-weight: 700;
  padding: 0 .4rem; border-radius: 3px; }}
pre {{ background: {alt}; border: 1px solid {border}; padding: .5rem; overflow-x: auto;
  white-space: pre-wrap; word-break: break-all; font-size: 12px; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(34rem, 1fr));
  gap: 1rem; }}
figure {{ margin: 0; }} figure svg {{ max-width: 100%; height: auto; }}
.fail {{ color: {bad}; font-weight: 600; }} .pass {{ color: {good}; }}
"""


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, raw: bool = False,
           cls: str = "") -> str:
    """A table; cells escaped unless ``raw`` (then they are HTML already)."""
    out = [f'<table class="{cls}">' if cls else "<table>", "<thead><tr>"]
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _runs_table_html(report: Report) -> str:
    base = report.comparison.baseline_id
    rows = []
    for f in report.facts:
        r = f.run
        label = _e(r.label) + (' <span class="sim">SIMULATED</span>' if r.simulated else "")
        if r.id == base and f.has_levels:
            label += ' <span class="muted">(baseline)</span>'
        sanity = {True: '<span class="pass">pass</span>',
                  False: '<span class="fail">FAIL</span>', None: "-"}[r.sanity_passed]
        rows.append([f"#{r.id}", label, _e(_where(r)), _e(r.model or "-"),
                     _e(r.backend or "-"), _e(r.checkpoint or "-"), _e(f.quantization or "-"),
                     _e(f.attention_backend or "-"), _e(r.status_text), sanity,
                     _e(_when(r.started_at)), str(f.levels)])
    return _table(["run", "label", "target", "model", "MoE backend", "checkpoint",
                   "quantization", "attention", "status", "sanity", "started", "levels"],
                  rows, raw=True)


def _compare_html(report: Report) -> str:
    cmp = report.comparison
    head = compare_header(cmp)
    out = ['<table id="compare-table">', "<thead><tr>"]
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row, cells in compare_cells(report):
        attrs = f' data-run="{row.run.id}" data-concurrency="{row.concurrency}"'
        out.append(f'<tr class="{"baseline" if row.is_baseline else ""}"{attrs}>')
        for text, key, value in cells:
            if key is None:
                out.append(f"<td>{_e(text)}</td>")
                continue
            classes = ["num"]
            if key.endswith("_change_pct") and isinstance(value, (int, float)) and \
                    not row.is_baseline and value:
                better = value > 0 if not key.startswith("ttft") else value < 0
                classes.append("up" if better else "down")
            data = "" if value is None else f' data-value="{value!r}"'
            out.append(f'<td class="{" ".join(classes)}" data-key="{key}"{data}>{_e(text)}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _differences_html(report: Report) -> str:
    cmp = report.comparison
    parts = []
    workload = cmp.differences()
    if workload:
        parts.append("<h3>Workload</h3><ul>" + "".join(
            f"<li>{_e(d)}</li>" for d in workload) + "</ul>"
            '<p class="note">the workloads differ, so a % change mixes two things.</p>')
    ids = [f.run.id for f in report.facts]
    for title, diffs in (("Launch flags", argv_differences(report.facts)),
                         ("Server arguments (as the servers reported them)",
                          server_arg_differences(report.facts))):
        if not diffs:
            continue
        runs = [i for i in ids if any(i in d.values for d in diffs)]
        head = ["", *(f"#{i} {safe_text(report.fact(i).run.label)}" for i in runs)]
        rows = [[d.key, *(d.values.get(i) if d.values.get(i) is not None else "(not given)"
                          for i in runs)] for d in diffs]
        parts.append(f"<h3>{_e(title)}</h3>" + _table(head, rows))
    missing = [f"#{f.run.id}" for f in report.facts if not f.argv]
    if missing and len(report.facts) > 1:
        parts.append(f'<p class="muted">launch command line {NOT_RECORDED} for '
                     f'{_e(", ".join(missing))}</p>')
    if not parts:
        parts.append('<p class="muted">nothing recorded differs between these runs\' '
                     "workloads, launch flags or server arguments.</p>")
    return "".join(parts)


def _argv_html(report: Report) -> str:
    out = []
    for f in report.facts:
        head = f"<h3>#{f.run.id} {_e(f.run.label)}</h3>"
        if f.argv:
            src = {"run": "what the server ran", "launch": "its launch"}.get(f.argv_from or "",
                                                                            "")
            out.append(head + f'<pre>{_e(shlex.join(f.argv))}</pre>'
                       + (f'<p class="muted">from {src}</p>' if src else ""))
        else:
            out.append(head + f'<p class="muted">{NOT_RECORDED} (the server was not started '
                       "by dsv4tui, or the run predates recording it)</p>")
    return "".join(out)


def _sanity_html(report: Report) -> str:
    out = []
    for f in report.facts:
        head = f"<h3>#{f.run.id} {_e(f.run.label)}</h3>"
        if not f.sanity:
            out.append(head + '<p class="muted">no sanity answers stored</p>')
            continue
        rows = []
        for c in f.sanity:
            mark = '<span class="pass">PASS</span>' if c.get("passed") else \
                '<span class="fail">FAIL</span>'
            latency = c.get("latency_s")
            rows.append([mark, _e(c.get("name") or "-"), _e(c.get("prompt") or "-"),
                         _e(c.get("expect") or "-"), _e((c.get("answer") or "").strip()[:200]),
                         _e(f"{latency:.2f}" if isinstance(latency, (int, float)) else "-"),
                         _e(c.get("error") or "")])
        out.append(head + _table(["", "case", "prompt", "expected", "answer", "latency s",
                                  "error"], rows, raw=True))
    return "".join(out)


def _versions_html(report: Report) -> str:
    rows = []
    for f in report.facts:
        r = f.run
        launch = f.launch or {}
        startup = launch.get("startup_s")
        rows.append([f"#{r.id} {r.label}", _gpus(r), r.server_version or NOT_RECORDED,
                     r.model or "-", "yes" if r.simulated else "no",
                     f.meta_source or "-", launch.get("profile_name") or r.profile_name or "-",
                     f"{startup:.1f}" if isinstance(startup, (int, float)) else "-"])
    return _table(["run", "GPUs", "server version", "model", "simulated", "what ran, from",
                   "profile", "startup s"], rows)


def _campaign_html(camp: Mapping[str, Any]) -> str:
    head = (f"<p>campaign <b>{_e(camp.get('name'))}</b> (id {_e(camp.get('id'))}) on "
            f"{_e(camp.get('host'))}: <b>{_e(camp.get('state'))}</b>"
            + (f" &mdash; {_e(camp.get('reason'))}" if camp.get("reason") else "")
            + f'<br><span class="muted">started {_e(_when(camp.get("created_at")))}, ended '
              f'{_e(_when(camp.get("ended_at")))}</span></p>')
    rows = [[v.get("name") or "-", v.get("state") or "-", v.get("reason") or ""]
            for v in camp.get("variants") or []]
    return head + (_table(["variant", "state", "reason"], rows) if rows else "")


def _json_script(data: Any) -> str:
    text = json.dumps(data, indent=1, default=str).replace("<", "\\u003c").replace(
        ">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="dsv4tui-compare">{text}</script>'


STARTUP_NOTE = ("seconds per startup phase of each run's launch (from the server's log); "
                "startup: launch -> ready on the host's clock, other: what the phases leave out "
                "(python start, imports); the change is against the baseline's startup")


def _startup_rows(report: Report) -> list[list[str]]:
    base = report.comparison.baseline_id
    named = [(f"#{f.run.id} {f.run.label}", f.launch) for f in report.facts]
    baseline = next((f"#{f.run.id} {f.run.label}" for f in report.facts if f.run.id == base),
                    None)
    return startup_phases.rows(named, baseline)


def to_html(report: Report, theme: str = "light") -> str:
    """One self-contained HTML file: styles inline, charts inline SVG, nothing fetched."""
    cmp = report.comparison
    sim = any(f.run.simulated for f in report.facts)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(report.title)}</title>", f"<style>{_style(theme)}</style>",
             "</head><body>", f"<h1>{_e(report.title)}</h1>",
             f'<p class="meta">written {_e(_when(report.generated_at))} by dsv4tui '
             f"{_e(__version__)}"
             + (' &middot; <span class="sim">SIMULATED</span> numbers from the built-in '
                "simulator, not a real server" if sim else "") + "</p>"]
    for note in report.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if report.campaign:
        parts += ["<h2>Campaign</h2>", _campaign_html(report.campaign)]
    if report.facts:
        parts += ["<h2>Runs</h2>", _runs_table_html(report)]
    if report.measured:
        base = cmp.baseline_run
        parts += ["<h2>Comparison</h2>",
                  f'<p class="muted">per concurrency C and run; % change against the baseline '
                  f'#{base.id if base else "-"} {_e(base.label if base else "")}; TTFT and TPOT '
                  "are p50 / p99 over the level's requests; tensor: mean tensor-pipe activity "
                  "over the GPUs; tok/s/kW: output tok/s per kW of the GPUs' summed power.</p>",
                  _compare_html(report), *_verdicts_html(report), "<h2>Charts</h2>"]
        drawn, missing = [], []
        for spec, svg in ch.charts(cmp, theme):
            if svg is None:
                missing.append(f'<p class="muted">{_e(spec.title)}: not drawn &mdash; '
                               f'{_e(spec.empty or "no run has this number")}</p>')
            else:
                drawn.append(f'<figure id="chart-{spec.key}">'
                             f'{ch.inline_svg(svg, f"{spec.key}-")}</figure>')
        parts += ['<div class="charts">', *drawn, "</div>", *missing]
    startup = _startup_rows(report)
    if startup:
        parts += ["<h2>Startup per phase</h2>", f'<p class="muted">{_e(STARTUP_NOTE)}</p>',
                  _table(startup_phases.HEAD, startup, cls="startup")]
    if report.facts:
        parts += ["<h2>What differs between the runs</h2>", _differences_html(report),
                  "<h2>Launch command lines</h2>", _argv_html(report),
                  "<h2>Sanity</h2>", _sanity_html(report),
                  "<h2>GPUs and server versions</h2>", _versions_html(report)]
        kern = [f for f in report.facts if f.kernels]
        if kern:
            parts.append("<h2>Kernels: what leaves the GPU idle</h2>")
            parts += [f"<h3>#{f.run.id} {_e(f.run.label)}</h3><ul>"
                      + "".join(f"<li>{_e(line)}</li>" for line in f.kernels or []) + "</ul>"
                      for f in kern]
    parts += [_json_script(cmp.to_json()), "</body></html>"]
    return "\n".join(parts) + "\n"


def _verdict_parts(report: Report) -> tuple[list[Any], list[Any]]:
    cmp = report.comparison
    return cmp.verdicts(), cmp.canary_verdicts()


def _verdicts_html(report: Report) -> list[str]:
    """Each variant against the baseline across its repeats (core/campaign/verdict.py)."""
    from dsv4tui.core.campaign.compare import load_text
    from dsv4tui.core.campaign.verdict import VERDICT_HEAD, verdict_table

    rows, canary = _verdict_parts(report)
    if not rows and not canary:
        return []
    out = ["<h2>Verdicts</h2>", '<p class="muted">95 % intervals across restarts (Welch on '
           "the logs of the per-repeat values; docs/metrics.md). One run a side gives no "
           "interval.</p>"]
    if rows:
        out.append('<table id="verdicts"><tr>' + "".join(f"<th>{_e(h)}</th>"
                                                         for h in VERDICT_HEAD) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                for row in verdict_table(rows, load_text)]
        out.append("</table>")
    if canary:
        out.append('<ul id="canary">' + "".join(f"<li>{_e(c.text())}</li>" for c in canary)
                   + "</ul>")
    return out


def _verdicts_md(report: Report) -> list[str]:
    from dsv4tui.core.campaign.compare import load_text
    from dsv4tui.core.campaign.verdict import VERDICT_HEAD, verdict_table

    rows, canary = _verdict_parts(report)
    if not rows and not canary:
        return []
    lines = ["## Verdicts", "", "95 % intervals across restarts (Welch on the logs of the "
             "per-repeat values; docs/metrics.md).", ""]
    if rows:
        lines += _md_table(VERDICT_HEAD, verdict_table(rows, load_text))
    lines += [f"- canary: {md_cell(c.text())}" for c in canary]
    return [*lines, ""] if canary else lines


# --- Markdown -------------------------------------------------------------------------------

def _md_table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def chart_file(stem: str, spec: ch.ChartSpec) -> str:
    return f"{stem}-{re.sub(r'[^a-z0-9]+', '-', spec.key.lower()).strip('-')}.svg"


def to_markdown(report: Report, stem: str, theme: str = "light"
                ) -> tuple[str, dict[str, str]]:
    """``(markdown, {file name: svg})``: the charts are files beside the Markdown, named
    ``STEM-<metric>.svg`` and linked relatively."""
    cmp = report.comparison
    files: dict[str, str] = {}
    sim = any(f.run.simulated for f in report.facts)
    lines = [f"# {md_cell(report.title)}", "",
             f"written {_when(report.generated_at)} by dsv4tui {__version__}"
             + (" · **SIMULATED**: numbers from the built-in simulator" if sim else ""), ""]
    for note in report.notes:
        lines += [f"> {md_cell(note)}", ""]
    if report.campaign:
        c = report.campaign
        lines += ["## Campaign", "",
                  f"campaign **{md_cell(c.get('name'))}** (id {md_cell(c.get('id'))}) on "
                  f"{md_cell(c.get('host'))}: **{md_cell(c.get('state'))}**"
                  + (f" — {md_cell(c.get('reason'))}" if c.get("reason") else ""), ""]
        lines += _md_table(["variant", "state", "reason"],
                           [[v.get("name") or "-", v.get("state") or "-", v.get("reason") or ""]
                            for v in c.get("variants") or []])
    if report.facts:
        lines += ["## Runs", ""]
        lines += _md_table(["run", "label", "target", "model", "MoE backend", "checkpoint",
                            "quantization", "attention", "status", "sanity", "started",
                            "levels"],
                           [[f"#{f.run.id}", f.run.label + (" (SIMULATED)" if f.run.simulated
                                                              else ""),
                             _where(f.run), f.run.model or "-", f.run.backend or "-",
                             f.run.checkpoint or "-", f.quantization or "-",
                             f.attention_backend or "-", f.run.status_text, _sanity(f.run),
                             _when(f.run.started_at), f.levels] for f in report.facts])
    if report.measured:
        base = cmp.baseline_run
        lines += ["## Comparison", "",
                  f"% change against the baseline #{base.id if base else '-'} "
                  f"{md_cell(base.label if base else '')}", ""]
        lines += _md_table(compare_header(cmp), [[t for t, _, _ in cells]
                                                 for _, cells in compare_cells(report)])
        lines += _verdicts_md(report)
        lines += ["## Charts", ""]
        for spec, svg in ch.charts(cmp, theme):
            if svg is None:
                lines += [f"{md_cell(spec.title)}: not drawn — "
                          f"{md_cell(spec.empty or 'no run has this number')}", ""]
            else:
                name = chart_file(stem, spec)
                files[name] = svg
                lines += [f"![{md_cell(spec.title)}]({quote(name)})", ""]
    startup = _startup_rows(report)
    if startup:
        lines += ["## Startup per phase", "", md_cell(STARTUP_NOTE), ""]
        lines += _md_table(startup_phases.HEAD, startup)
    if report.facts:
        lines += ["## What differs between the runs", ""]
        workload = cmp.differences()
        for d in workload:
            lines.append(f"- workload: {md_cell(d)}")
        if workload:
            lines.append("")
        any_diff = bool(workload)
        for title, diffs in (("Launch flags", argv_differences(report.facts)),
                             ("Server arguments", server_arg_differences(report.facts))):
            if not diffs:
                continue
            any_diff = True
            runs = [f.run.id for f in report.facts if any(f.run.id in d.values for d in diffs)]
            lines += [f"### {title}", ""]
            lines += _md_table(["", *(f"#{i} {report.fact(i).run.label}" for i in runs)],
                               [[d.key, *(d.values.get(i) if d.values.get(i) is not None
                                          else "(not given)" for i in runs)] for d in diffs])
        if not any_diff:
            lines += ["nothing recorded differs between these runs' workloads, launch flags or "
                      "server arguments.", ""]
        lines += ["## Launch command lines", ""]
        for f in report.facts:
            lines += [f"### #{f.run.id} {md_cell(f.run.label)}", ""]
            if f.argv:
                lines += ["```", safe_text(shlex.join(f.argv)).replace("```", "'''"), "```", ""]
            else:
                lines += [NOT_RECORDED, ""]
        lines += ["## Sanity", ""]
        for f in report.facts:
            lines += [f"### #{f.run.id} {md_cell(f.run.label)}", ""]
            if not f.sanity:
                lines += ["no sanity answers stored", ""]
                continue
            lines += _md_table(["", "case", "expected", "answer", "error"],
                               [["PASS" if c.get("passed") else "FAIL", c.get("name") or "-",
                                 c.get("expect") or "-", (c.get("answer") or "").strip()[:200],
                                 c.get("error") or ""] for c in f.sanity])
        lines += ["## GPUs and server versions", ""]
        lines += _md_table(["run", "GPUs", "server version", "model", "simulated"],
                           [[f"#{f.run.id} {f.run.label}", _gpus(f.run),
                             f.run.server_version or NOT_RECORDED, f.run.model or "-",
                             "yes" if f.run.simulated else "no"] for f in report.facts])
        kern = [f for f in report.facts if f.kernels]
        if kern:
            lines += ["## Kernels: what leaves the GPU idle", ""]
            for f in kern:
                lines += [f"### #{f.run.id} {md_cell(f.run.label)}", ""]
                lines += [f"- {md_cell(line)}" for line in f.kernels or []] + [""]
    return "\n".join(lines).rstrip() + "\n", files


# --- files ----------------------------------------------------------------------------------

def reports_dir() -> Path:
    path = paths.data_dir() / "reports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_path(stem: str, fmt: str = "html") -> Path:
    return reports_dir() / f"{stem}.{fmt}"


def runs_stem(ids: Sequence[int]) -> str:
    shown = "-".join(str(i) for i in ids[:6]) + ("-etc" if len(ids) > 6 else "")
    return f"runs-{shown}-{time.strftime('%Y%m%d-%H%M%S')}"


SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def format_of(path: Path | None, fmt: str | None) -> str:
    """The report's format: ``fmt`` when given, else the file's suffix (.html/.htm, .md/
    .markdown; no suffix: html). A suffix that names another format (``r.pdf``), or one that
    disagrees with ``fmt`` (``--format md`` into ``r.html``), is refused: the file would hold
    something its name does not say."""
    if fmt and fmt not in FORMATS:
        raise UserError(f"unknown report format {fmt!r} (html or md)", EXIT_CONFIG)
    suffix = path.suffix.lower() if path is not None else ""
    if not suffix:
        return fmt or "html"
    named = SUFFIXES.get(suffix)
    where = safe_text(str(path))
    if named is None:
        raise UserError(f"--out {where}: a report is HTML (.html) or Markdown (.md), not "
                        f"{suffix}", EXIT_CONFIG)
    if fmt and fmt != named:
        raise UserError(f"--out {where} names {named}, --format says {fmt}: use a .{fmt} "
                        "file or drop --format", EXIT_CONFIG)
    return named


def write(report: Report, path: Path, fmt: str = "html", theme: str = "light") -> list[Path]:
    """Write the report (Markdown: and its charts beside it); the files written, the report
    first. Charts need matplotlib: ChartsUnavailable (exit 2) before anything is written."""
    ch.require()
    path = path.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "md":
            text, files = to_markdown(report, path.stem, theme)
            path.write_text(text, encoding="utf-8")
            written = [path]
            for name, svg in files.items():
                (path.parent / name).write_text(svg, encoding="utf-8")
                written.append(path.parent / name)
            return written
        path.write_text(to_html(report, theme), encoding="utf-8")
        return [path]
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror or exc}",
                        EXIT_CONFIG) from None


__all__ = ["FORMATS", "SUFFIXES", "Difference", "Report", "RunFacts", "argv_differences",
           "argv_options", "build", "build_campaign", "chart_file", "compare_cells", "compare_header",
           "default_path", "format_of", "reports_dir", "run_facts", "runs_stem",
           "server_arg_differences", "to_html", "to_markdown", "write"]
