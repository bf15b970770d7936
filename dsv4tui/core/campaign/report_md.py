"""The campaign report (:mod:`~dsv4tui.core.campaign.report_model`) as Markdown, its SVG
charts as files beside it (``STEM-<metric>.svg``, linked relatively). The intervals are text
here (the verdicts table and the change chart's caption). Every text is escaped (control
characters, then Markdown syntax)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from dsv4tui import __version__
from dsv4tui.core.campaign import charts as ch
from dsv4tui.core.campaign import startup_phases
from dsv4tui.core.campaign.export import md_cell
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.report_model import (
    KERNELS_NOTE,
    NOT_RECORDED,
    RUNS_HEAD,
    SANITY_HEAD,
    STARTUP_NOTE,
    VARIANTS_HEAD,
    VERSIONS_HEAD,
    Report,
    argv_differences,
    compare_cells,
    compare_header,
    sanity_rows,
    server_arg_differences,
    when,
)

CHANGE_CHART = "output_tok_s_change"

def _md_table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def chart_file(stem: str, spec: ch.ChartSpec) -> str:
    return f"{stem}-{re.sub(r'[^a-z0-9]+', '-', spec.key.lower()).strip('-')}.svg"


def _verdicts_md(report: Report) -> list[str]:
    v = report.verdicts
    if v is None:
        return []
    lines = ["## Verdicts", "", md_cell(v.note), ""]
    if v.rows:
        lines += _md_table(v.head, v.table)
    lines += [f"- canary: {md_cell(c.text())}" for c in v.canary]
    return [*lines, ""] if v.canary else lines


def _change_chart_md(report: Report, stem: str, theme: str,
                     files: dict[str, str]) -> list[str]:
    """The change chart beside the Markdown, and its intervals as text under it."""
    v = report.verdicts
    if v is None or not v.bars:
        return []
    svg = ch.change_svg(v.bars, v.chart_title(), theme, simulated=report.simulated)
    if svg is None:
        return []
    name = f"{stem}-{CHANGE_CHART.replace('_', '-')}.svg"
    files[name] = svg
    return [f"![{md_cell(v.chart_title())}]({quote(name)})", "",
            *[f"- {md_cell(b.label)} {md_cell(b.load_text)}: {md_cell(b.text())}"
              for b in v.bars], ""]


def to_markdown(report: Report, stem: str, theme: str = "light"
                ) -> tuple[str, dict[str, str]]:
    """``(markdown, {file name: svg})``: the charts are files beside the Markdown, named
    ``STEM-<metric>.svg`` and linked relatively."""
    cmp = report.comparison
    files: dict[str, str] = {}
    lines = [f"# {md_cell(report.title)}", "",
             f"written {when(report.generated_at)} by dsv4tui {__version__}"
             + (" · **SIMULATED**: numbers from the built-in simulator, not a real server"
                if report.simulated else ""), ""]
    for note in report.notes:
        lines += [f"> {md_cell(note)}", ""]
    if report.campaign:
        c = report.campaign
        lines += ["## Campaign", "",
                  f"campaign **{md_cell(c.get('name'))}** (id {md_cell(c.get('id'))}) on "
                  f"{md_cell(c.get('host'))}: **{md_cell(c.get('state'))}**"
                  + (f" — {md_cell(c.get('reason'))}" if c.get("reason") else "")
                  + f"; started {when(c.get('created_at'))}, ended {when(c.get('ended_at'))}",
                  ""]
        lines += _md_table(VARIANTS_HEAD, report.variants_rows())
    if report.facts:
        base = report.comparison.baseline_id
        rows = report.runs_rows()
        for f, row in zip(report.facts, rows, strict=True):
            row[1] += (" (SIMULATED)" if f.run.simulated else "") + (
                " (baseline)" if f.run.id == base and f.has_levels else "")
        lines += ["## Runs", "", *_md_table(RUNS_HEAD, rows)]
    if report.measured:
        lines += ["## Comparison", "", md_cell(report.compare_note()), ""]
        lines += _md_table(compare_header(cmp), [[t for t, _, _ in cells]
                                                 for _, cells in compare_cells(report)])
        lines += _verdicts_md(report)
        lines += ["## Charts", "", *_change_chart_md(report, stem, theme, files)]
        for spec, svg in ch.charts(cmp, theme):
            if svg is None:
                lines += [f"{md_cell(spec.title)}: not drawn — "
                          f"{md_cell(spec.empty or 'no run has this number')}", ""]
            else:
                name = chart_file(stem, spec)
                files[name] = svg
                lines += [f"![{md_cell(spec.title)}]({quote(name)})", ""]
    if report.startup:
        lines += ["## Startup per phase", "", md_cell(STARTUP_NOTE), ""]
        lines += _md_table(startup_phases.HEAD, report.startup)
    if report.kernels:
        head, rows = report.kernels_table()
        lines += ["## Kernel families per variant", "", md_cell(KERNELS_NOTE), ""]
        lines += _md_table(head, rows)
    if report.facts:
        lines += ["## What differs between the runs", ""]
        workload = cmp.differences()
        for d in workload:
            lines.append(f"- workload: {md_cell(d)}")
        if workload:
            lines += ["", "the workloads differ, so a % change mixes two things.", ""]
        any_diff = bool(workload)
        for title, diffs in (("Launch flags", argv_differences(report.facts)),
                             ("Server arguments (as the servers reported them)",
                              server_arg_differences(report.facts))):
            if not diffs:
                continue
            any_diff = True
            runs = [f.run.id for f in report.facts if any(f.run.id in d.values for d in diffs)]
            lines += [f"### {title}", ""]
            lines += _md_table(["", *(report.fact(i).name for i in runs)],
                               [[d.key, *(d.values.get(i) if d.values.get(i) is not None
                                          else "(not given)" for i in runs)] for d in diffs])
        missing = [f"#{f.run.id}" for f in report.facts if not f.argv]
        if missing and len(report.facts) > 1:
            lines += [f"launch command line {NOT_RECORDED} for {', '.join(missing)}", ""]
        if not any_diff:
            lines += ["nothing recorded differs between these runs' workloads, launch flags or "
                      "server arguments.", ""]
        lines += ["## Launch command lines", ""]
        for f in report.facts:
            lines += [f"### {md_cell(f.name)}", ""]
            if f.argv:
                src = {"run": "what the server ran", "launch": "its launch"}.get(
                    f.argv_from or "", "")
                lines += ["```", safe_text(shlex.join(f.argv)).replace("```", "'''"), "```",
                          ""] + ([f"from {src}", ""] if src else [])
            else:
                lines += [f"{NOT_RECORDED} (the server was not started by dsv4tui, or the run "
                          "predates recording it)", ""]
        lines += ["## Sanity", ""]
        for f in report.facts:
            lines += [f"### {md_cell(f.name)}", ""]
            if not f.sanity:
                lines += ["no sanity answers stored", ""]
                continue
            lines += _md_table(SANITY_HEAD, sanity_rows(f))
        lines += ["## GPUs and server versions", "", *_md_table(VERSIONS_HEAD,
                                                                report.versions_rows())]
        kern = [f for f in report.facts if f.kernels]
        if kern:
            lines += ["## Kernels: what leaves the GPU idle", ""]
            for f in kern:
                lines += [f"### {md_cell(f.name)}", ""]
                lines += [f"- {md_cell(line)}" for line in f.kernels or []] + [""]
    return "\n".join(lines).rstrip() + "\n", files


__all__ = ["chart_file", "to_markdown"]
