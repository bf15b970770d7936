"""The run store and the files: the run list (looked at while Runs is shown), compare (``c``),
export (``e``), reports (``R``), screenshots (``ctrl+s``), and the kernel captures the Kernels
body asks for. The rows, names and files are the core's (``dsv4tui.core.view.runs``,
``dsv4tui.core.outputs``); the dashboard's side is :class:`RunsControl`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

from dsv4tui.core import outputs
from dsv4tui.core.errors import UserError
from dsv4tui.core.view import model as m
from dsv4tui.core.view import navigation
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.navigation import Navigation
from dsv4tui.core.view.parts import CAMPAIGN, COMPARE, RUNS
from dsv4tui.core.view.runs import Newest, StoreChanges, baseline_of, latest_runs, run_rows
from dsv4tui.tui.controllers.server import profile_of
from dsv4tui.tui.controllers.ui import Ui, start
from dsv4tui.tui.screens.kernels import KernelsBody
from dsv4tui.tui.screens.runs import CompareScreen

STORE_LOOK_S = 2.0  # how often the Runs list looks for runs other processes stored


class RunsControl:
    """Reads the run store (``store``, else the default one, opened in a worker) and writes
    files and kernel captures."""

    def __init__(self, ui: Ui, model: m.UiModel, link: HostLink, spec: Any, *,
                 nav: Navigation, store: Any = None) -> None:
        self.ui, self.model, self.link, self.spec, self.nav = ui, model, link, spec, nav
        self.store: Any = store
        self.looking = True  # the Runs list looks for others' runs (False: the console leaves)
        self._reads = Newest()  # run-list reads: a slow older read never wins
        self._changes = StoreChanges()  # commits by other processes since the last look

    def run_store(self) -> Any:
        if self.store is None:
            from dsv4tui.core.store import RunStore

            self.store = RunStore()
        return self.store

    def close(self) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):  # closing at exit: nothing to say
                self.store.close()

    def load_campaign_kernels(self, cv: Any) -> None:
        """Campaign ``cv``'s kernel families lines (captures linked to its variants' runs),
        read from the store off the UI loop."""
        from dsv4tui.core.campaign.view import kernel_lines, set_kernel_lines

        store = self.store
        if store is None:
            return

        def read() -> None:
            lines = kernel_lines(cv, store)

            def show() -> None:
                if self.model.campaign is cv and set_kernel_lines(cv, lines):
                    self.ui.mark(CAMPAIGN)
            self.ui.call_from_thread(show)
        start(self.ui, read, "load_campaign_kernels", "campaign-kernels", exclusive=True,
              thread=True)

    # -- the run list ------------------------------------------------------------------------
    def open_store(self) -> None:
        def open_() -> None:
            self.run_store()
            self._load_now()
            self.ui.call_from_thread(self.ui.set_interval, STORE_LOOK_S, self._look)
        start(self.ui, open_, "open_store", "store", thread=True)

    def _look(self) -> None:
        """While the Runs list is shown: what other processes stored appears in it without
        ctrl+r (a look is one tiny read; the list is read again only after a change)."""
        if self.ui.view == "runs" and self.store is not None and self.looking:
            start(self.ui, self._reload_if_changed, "", "store-look",
                  exclusive=True, thread=True)

    def _reload_if_changed(self) -> None:
        if self.store is not None and self._changes.changed(self.store):
            self._load_now()  # (it looks again: a commit since is seen next time)

    def load_runs(self) -> None:
        start(self.ui, self._load_now, "load_runs", "store", thread=True)

    def _load_now(self) -> None:
        if self.store is not None:
            ticket = self._reads.ask()
            self._changes.changed(self.store)  # the list below reflects this version
            self.ui.call_from_thread(self._set_runs, run_rows(self.store), ticket)

    def _set_runs(self, rows: list[m.RunRow], ticket: int = 0) -> None:
        if self._reads.show(ticket):
            self.model.runs.set_rows(rows)
            self.ui.mark(RUNS)

    # -- compare, export, report, screenshot -------------------------------------------------
    def load_compare(self, ids: list[Any], since: int | None = None) -> None:
        """The comparison of ``ids``, shown once loaded unless the user chose a screen since
        ``since`` (the ``nav.token()`` of the key that asked for it)."""
        def load() -> None:
            from dsv4tui.core.campaign.compare import compare_runs

            if self.store is None:
                raise UserError("the run store is not open")
            cmp = compare_runs(self.store, [str(i) for i in ids],
                               baseline_of(self.model.runs, ids))
            self.ui.call_from_thread(self.show_compare, cmp, since)
        start(self.ui, load, "load_compare", "store", thread=True)

    def show_compare(self, view: m.CompareView, since: int | None = None) -> None:
        """``view`` (a ``campaign.compare.Comparison``) on the Compare screen, over Runs."""
        self.model.runs.compare = view
        if since is not None and not self.nav.may_move(since):
            self.ui.tell(navigation.stayed("the comparison is ready", "Runs",
                                           self.ui.key_of("compare")))
        elif not isinstance(self.ui.screen, CompareScreen):
            over = "campaign" if self.ui.view == "campaign" else "runs"
            self.ui.show_body(over)
            self.ui.push_screen(CompareScreen(self.model, over))
        self.ui.mark(COMPARE)

    def _write(self, name: str, group: str, make: Callable[[], Any]) -> None:
        """A file written in a thread; what was written (or why not) said as a notice."""
        start(self.ui, lambda: self.ui.call_from_thread(self.ui.tell, make()), name, group,
              thread=True)

    def compare(self) -> None:
        if self.ui.view == "kernels" and self.ui.screen is self.ui.main:
            self._on_kernels(lambda body: body.action_compare_marked())  # e.g. the palette
            return
        if self.ui.view == "campaign" and self.ui.screen is self.ui.main:
            ids = latest_runs(self.model.campaign)
            if len(ids) < 2:
                self.ui.notify("two variants with runs are needed to compare", timeout=4)
                return
            self.load_runs()
            self.load_compare(ids, self.nav.token())
            return
        marked = list(self.model.runs.marked)
        if len(marked) >= 2:
            self.load_compare(marked, self.nav.token())
            return
        self.ui.show_body("runs")
        self.ui.notify("mark 2 or more runs with space, then c", timeout=4)

    def export(self) -> None:
        self._write("export_compare", "export",
                    lambda: outputs.export_compare(self.model.runs.compare))

    def save_screen(self) -> None:
        """The screen as SVG (Textual's own screenshot), into the data dir's screenshots."""
        svg, name = self.ui.export_screenshot(), outputs.screenshot_name(self.ui.view)
        self._write("write_screenshot", "export", partial(outputs.write_screenshot, svg, name))

    def write_report(self, ids: list[int], baseline: int | None) -> None:
        self._write("write_report", "report",
                    lambda: outputs.write_report(self.store, ids, baseline))

    def report_runs(self) -> None:
        marked = list(self.model.runs.marked)
        if not marked:
            self.ui.notify("mark the runs for the report with space, then R", timeout=4)
            return
        self.write_report(marked, baseline_of(self.model.runs, marked))

    def report_compare(self) -> None:
        view = self.model.runs.compare
        if view is None or not view.runs:
            self.ui.notify("nothing to report: compare 2+ runs first (Runs: space, c)",
                           timeout=4)
            return
        self.write_report([r.id for r in view.runs], view.baseline_id)

    # -- kernel captures ---------------------------------------------------------------------
    def _on_kernels(self, show: Callable[[KernelsBody], None],
                    body: KernelsBody | None = None) -> None:
        """``show`` on the Kernels body ``body`` (default: the main screen's)."""
        main = self.ui.main
        found = main.bodies.get("kernels") if main is not None else None
        body = body or (found if isinstance(found, KernelsBody) else None)
        if body is not None and body.is_mounted:
            show(body)

    def load_captures(self, body: KernelsBody | None = None) -> None:
        def load() -> None:
            from dsv4tui.core.store import kernels as kernel_store

            items = kernel_store.captures(self.run_store(),
                                          host=self.spec.name if self.spec else None)
            self.ui.call_from_thread(self._on_kernels, lambda s: s.set_captures(items), body)
        start(self.ui, load, "load_captures", "kernels-load", thread=True)

    def take_capture(self, steps: int, concurrency: int) -> None:
        start(self.ui, self._capture(steps, concurrency), "take_capture", "kernels",
              exclusive=True)

    async def _capture(self, steps: int, concurrency: int) -> None:
        """A kernel capture of the running server (``core.campaign.kernels.take``)."""
        from dsv4tui.core.campaign import kernels

        host = self.link.host()
        name, prof = profile_of(self.spec, self.model,
                                self.model.server.profile or self.model.active_profile)

        def progress(ev: dict[str, Any]) -> None:
            if (text := kernels.progress_text(ev)) is not None:
                self._on_kernels(lambda body: body.set_progress(text))
        try:
            taken = await kernels.take(host, self.run_store(), name, prof, steps=steps,
                                       concurrency=concurrency, on_event=progress)
        except UserError as err:
            message = err.message
            self._on_kernels(lambda body: body.set_error(message))
            raise
        self._on_kernels(lambda body: body.set_progress(taken.text()))
        self.load_captures()
