"""A report of stored runs people can send: one HTML file (charts inline as SVG) or Markdown
with its SVG charts beside it. Written for ``dsv4tui runs report``, ``dsv4tui campaign
report`` (and at a campaign's end), and the dashboard's Runs/compare view.

The report is one model built from the store once (:mod:`~dsv4tui.core.campaign.report_model`:
what it holds), rendered by :mod:`~dsv4tui.core.campaign.report_html` and
:mod:`~dsv4tui.core.campaign.report_md`; this module names the files and writes them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from dsv4tui.core import paths
from dsv4tui.core.campaign import charts as ch
from dsv4tui.core.campaign.labels import safe_text
from dsv4tui.core.campaign.report_html import to_html
from dsv4tui.core.campaign.report_md import chart_file, to_markdown
from dsv4tui.core.campaign.report_model import Report, argv_options, build, build_campaign
from dsv4tui.core.errors import EXIT_CONFIG, UserError

FORMATS = ("html", "md")


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


__all__ = ["FORMATS", "SUFFIXES", "Report", "argv_options", "build", "build_campaign",
           "chart_file", "default_path", "format_of", "reports_dir", "runs_stem", "to_html",
           "to_markdown", "write"]
