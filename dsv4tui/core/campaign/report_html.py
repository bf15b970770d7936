"""The campaign report (:mod:`~dsv4tui.core.campaign.report_model`) as one self-contained
HTML file: styles inline, charts inline SVG, the comparison embedded as JSON, nothing fetched.
Every text is escaped (control characters, then HTML)."""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Sequence
from typing import Any

from dsv4tui import __version__
from dsv4tui.core.campaign import charts as ch
from dsv4tui.core.campaign import startup_phases
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
    for f, cells in zip(report.facts, report.runs_rows(), strict=True):
        r = f.run
        label = _e(r.label) + (' <span class="sim">SIMULATED</span>' if r.simulated else "")
        if r.id == base and f.has_levels:
            label += ' <span class="muted">(baseline)</span>'
        sanity = {True: '<span class="pass">pass</span>',
                  False: '<span class="fail">FAIL</span>', None: "-"}[r.sanity_passed]
        rows.append([_e(cells[0]), label, *(_e(c) for c in cells[2:9]), sanity,
                     *(_e(c) for c in cells[10:])])
    return _table(RUNS_HEAD, rows, raw=True)


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
        head = f"<h3>{_e(f.name)}</h3>"
        if not f.sanity:
            out.append(head + '<p class="muted">no sanity answers stored</p>')
            continue
        rows = [[f'<span class="{"pass" if c[0] == "PASS" else "fail"}">{c[0]}</span>',
                 *(_e(x) for x in c[1:])] for c in sanity_rows(f)]
        out.append(head + _table(SANITY_HEAD, rows, raw=True))
    return "".join(out)


def _versions_html(report: Report) -> str:
    return _table(VERSIONS_HEAD, report.versions_rows())


def _campaign_html(report: Report) -> str:
    camp = report.campaign or {}
    head = (f"<p>campaign <b>{_e(camp.get('name'))}</b> (id {_e(camp.get('id'))}) on "
            f"{_e(camp.get('host'))}: <b>{_e(camp.get('state'))}</b>"
            + (f" &mdash; {_e(camp.get('reason'))}" if camp.get("reason") else "")
            + f'<br><span class="muted">started {_e(when(camp.get("created_at")))}, ended '
              f'{_e(when(camp.get("ended_at")))}</span></p>')
    rows = report.variants_rows()
    return head + (_table(VARIANTS_HEAD, rows) if rows else "")


def _json_script(data: Any) -> str:
    text = json.dumps(data, indent=1, default=str).replace("<", "\\u003c").replace(
        ">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="dsv4tui-compare">{text}</script>'


def _verdicts_html(report: Report) -> list[str]:
    v = report.verdicts
    if v is None:
        return []
    out = ["<h2>Verdicts</h2>", f'<p class="muted">{_e(v.note)}</p>']
    if v.rows:
        out.append('<table id="verdicts"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in v.head)
                   + "</tr>")
        out += ["<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                for row in v.table]
        out.append("</table>")
    if v.canary:
        out.append('<ul id="canary">' + "".join(f"<li>{_e(c.text())}</li>" for c in v.canary)
                   + "</ul>")
    return out


def _change_figure(report: Report, theme: str) -> list[str]:
    """The verdicts' chart: each variant's change with its interval as an error bar."""
    v = report.verdicts
    if v is None or not v.bars:
        return []
    svg = ch.change_svg(v.bars, v.chart_title(), theme, simulated=report.simulated)
    if svg is None:
        return []
    data = json.dumps([{"label": b.label, "load": b.load_text, "change_pct": b.change_pct,
                        "ci_low": b.ci_low, "ci_high": b.ci_high} for b in v.bars])
    caption = "; ".join(f"{b.label} {b.load_text}: {b.text()}" for b in v.bars)
    return [f'<figure id="chart-output_tok_s_change" data-bars="{_e(data)}">'
            f'{ch.inline_svg(svg, "output_tok_s_change-")}'
            f'<figcaption class="muted">{_e(caption)}</figcaption></figure>']


def _kernels_html(report: Report) -> list[str]:
    if not report.kernels:
        return []
    head, rows = report.kernels_table()
    return ["<h2>Kernel families per variant</h2>", f'<p class="muted">{_e(KERNELS_NOTE)}</p>',
            _table(head, rows, cls="kernels")]


def to_html(report: Report, theme: str = "light") -> str:
    """One self-contained HTML file: styles inline, charts inline SVG, nothing fetched."""
    cmp = report.comparison
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(report.title)}</title>", f"<style>{_style(theme)}</style>",
             "</head><body>", f"<h1>{_e(report.title)}</h1>",
             f'<p class="meta">written {_e(when(report.generated_at))} by dsv4tui '
             f"{_e(__version__)}"
             + (' &middot; <span class="sim">SIMULATED</span> numbers from the built-in '
                "simulator, not a real server" if report.simulated else "") + "</p>"]
    for note in report.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    if report.campaign:
        parts += ["<h2>Campaign</h2>", _campaign_html(report)]
    if report.facts:
        parts += ["<h2>Runs</h2>", _runs_table_html(report)]
    if report.measured:
        parts += ["<h2>Comparison</h2>", f'<p class="muted">{_e(report.compare_note())}</p>',
                  _compare_html(report), *_verdicts_html(report), "<h2>Charts</h2>"]
        drawn, missing = _change_figure(report, theme), []
        for spec, svg in ch.charts(cmp, theme):
            if svg is None:
                missing.append(f'<p class="muted">{_e(spec.title)}: not drawn &mdash; '
                               f'{_e(spec.empty or "no run has this number")}</p>')
            else:
                drawn.append(f'<figure id="chart-{spec.key}">'
                             f'{ch.inline_svg(svg, f"{spec.key}-")}</figure>')
        parts += ['<div class="charts">', *drawn, "</div>", *missing]
    if report.startup:
        parts += ["<h2>Startup per phase</h2>", f'<p class="muted">{_e(STARTUP_NOTE)}</p>',
                  _table(startup_phases.HEAD, report.startup, cls="startup")]
    parts += _kernels_html(report)
    if report.facts:
        parts += ["<h2>What differs between the runs</h2>", _differences_html(report),
                  "<h2>Launch command lines</h2>", _argv_html(report),
                  "<h2>Sanity</h2>", _sanity_html(report),
                  "<h2>GPUs and server versions</h2>", _versions_html(report)]
        kern = [f for f in report.facts if f.kernels]
        if kern:
            parts.append("<h2>Kernels: what leaves the GPU idle</h2>")
            parts += [f"<h3>{_e(f.name)}</h3><ul>"
                      + "".join(f"<li>{_e(line)}</li>" for line in f.kernels or []) + "</ul>"
                      for f in kern]
    parts += [_json_script(cmp.to_json()), "</body></html>"]
    return "\n".join(parts) + "\n"


__all__ = ["to_html"]
