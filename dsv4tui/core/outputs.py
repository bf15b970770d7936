"""Files the dashboard writes for the user, into the data dir: screenshots (SVG), compare
exports (CSV + JSON) and run reports (HTML) -- where each goes and how it is named (by when
it was written, so a new one never replaces an older one)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsv4tui.core import paths
from dsv4tui.core.errors import UserError
from dsv4tui.core.view.notice import Notice


def _folder(name: str) -> Path:
    out = paths.data_dir() / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def screenshot_name(screen: str) -> str:
    """The file name of a screenshot of ``screen`` taken now."""
    return time.strftime(f"dsv4tui-{screen}-%Y%m%d-%H%M%S.svg")


def write_screenshot(svg: str, name: str) -> Notice:
    """``svg`` into the screenshots folder as ``name``; a one-line error when it cannot."""
    path = _folder("screenshots") / name
    try:
        path.write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    return Notice(f"screen saved to {path}", "screenshot", timeout=8)


def export_compare(view: Any) -> Notice:
    """A comparison (``campaign.compare.Comparison``; None: nothing compared yet) as
    ``compare-<when>.csv`` and ``.json`` in the exports folder."""
    from dsv4tui.core.campaign.export import write_compare

    if view is None:
        raise UserError("nothing to export: compare 2+ runs first (Runs: space, c)")
    stem = _folder("exports") / time.strftime("compare-%Y%m%d-%H%M%S")
    csv_path, json_path = write_compare(view, stem)
    return Notice(f"wrote {csv_path} and {json_path.name}", "exported", timeout=8)


def write_report(store: Any, ids: Sequence[int], baseline: int | None) -> Notice:
    """The report of runs ``ids`` (``campaign.report``) in the reports folder, named after
    them. Its charts need matplotlib: without it, nothing is written and the notice says how
    to get it."""
    from dsv4tui.core.campaign import charts, report

    if not charts.available():
        return Notice(charts.INSTALL_HINT, "no report", "warning", 10)
    if store is None:
        raise UserError("the run store is not open")
    rep = report.build(store, ids, baseline)
    path = report.write(rep, report.default_path(report.runs_stem(ids)))[0]
    return Notice(f"report written to {path}", "report", timeout=10)
