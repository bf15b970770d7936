"""The dashboard's run store keys and their workers: the run list, compare (``c``), export
(``e``), reports (``R``), screenshots (``ctrl+s``), and the kernel captures the Kernels
screen asks for. The rows, names and files are the core's (``dsv4tui.core.view.runs``,
``dsv4tui.core.outputs``). Mixed into :class:`dsv4tui.tui.app.Dsv4App`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual import work

from dsv4tui.core import outputs
from dsv4tui.core.errors import UserError
from dsv4tui.core.view import model as m
from dsv4tui.core.view import navigation
from dsv4tui.core.view.parts import COMPARE, RUNS
from dsv4tui.core.view.runs import baseline_of, latest_runs, run_rows
from dsv4tui.tui.screens.kernels import KernelsBody
from dsv4tui.tui.screens.runs import CompareScreen

if TYPE_CHECKING:
    from dsv4tui.tui.app import Dsv4App


STORE_LOOK_S = 2.0  # how often the Runs list looks for runs other processes stored


def _app(obj: object) -> Dsv4App:
    """This mixin's methods run on the App (typed as what they are)."""
    return cast("Dsv4App", obj)


class RunsKeys:
    """The App's half that reads the run store and writes files and kernel captures."""

    def _run_store(self) -> Any:
        app = _app(self)
        if app._store is None:
            from dsv4tui.core.store import RunStore

            app._store = RunStore()
        return app._store

    @work(group="store", thread=True, exit_on_error=False)
    def open_store(self) -> None:
        app = _app(self)
        app._run_store()
        app._load_runs_now()
        app.call_from_thread(app.set_interval, STORE_LOOK_S, app._look_at_store)

    def _look_at_store(self) -> None:
        """While the Runs list is shown: what other processes stored appears in it without
        ctrl+r (a look is one tiny read; the list is read again only after a change)."""
        app = _app(self)
        if app.view == "runs" and app._store is not None and not app._stopping:
            app.run_worker(app._reload_if_changed, group="store-look", thread=True,
                           exclusive=True, exit_on_error=False)

    def _reload_if_changed(self) -> None:
        app = _app(self)
        if app._store is not None and app._store_changes.changed(app._store):
            app._load_runs_now()  # (it looks again: a commit since is seen next time)

    @work(group="store", thread=True, exit_on_error=False)
    def load_runs(self) -> None:
        app = _app(self)
        app._load_runs_now()

    def _load_runs_now(self) -> None:
        app = _app(self)
        if app._store is not None:
            ticket = app._runs_reads.ask()
            app._store_changes.changed(app._store)  # the list below reflects this version
            app.call_from_thread(app._set_runs, run_rows(app._store), ticket)

    def _set_runs(self, rows: list[m.RunRow], ticket: int = 0) -> None:
        app = _app(self)
        if app._runs_reads.show(ticket):
            app.model.runs.set_rows(rows)
            app.mark(RUNS)

    @work(group="store", thread=True, exit_on_error=False)
    def load_compare(self, ids: list[Any], since: int | None = None) -> None:
        """The comparison of ``ids``, shown once loaded unless the user chose a screen since
        ``since`` (the ``nav.token()`` of the key that asked for it)."""
        app = _app(self)
        from dsv4tui.core.campaign.compare import compare_runs

        if app._store is None:
            raise UserError("the run store is not open")
        cmp = compare_runs(app._store, [str(i) for i in ids], baseline_of(app.model.runs, ids))
        app.call_from_thread(app.show_compare, cmp, since)

    def show_compare(self, view: m.CompareView, since: int | None = None) -> None:
        """``view`` (a ``campaign.compare.Comparison``) on the Compare screen, over Runs."""
        app = _app(self)
        app.model.runs.compare = view
        if since is not None and not app.nav.may_move(since):
            app.tell(navigation.stayed("the comparison is ready", "Runs",
                                       app.key_of("compare")))
        elif not isinstance(app.screen, CompareScreen):
            over = "campaign" if app.view == "campaign" else "runs"
            app.show_body(over)
            app.push_screen(CompareScreen(app.model, over))
        app.mark(COMPARE)

    @work(group="export", thread=True, exit_on_error=False)
    def export_compare(self) -> None:
        app = _app(self)
        app.call_from_thread(app.tell, outputs.export_compare(app.model.runs.compare))

    @work(group="export", thread=True, exit_on_error=False)
    def write_screenshot(self, svg: str, name: str) -> None:
        app = _app(self)
        app.call_from_thread(app.tell, outputs.write_screenshot(svg, name))

    @work(group="report", thread=True, exit_on_error=False)
    def write_report(self, ids: list[int], baseline: int | None) -> None:
        app = _app(self)
        app.call_from_thread(app.tell, outputs.write_report(app._store, ids, baseline))

    def action_compare(self) -> None:
        app = _app(self)
        if app.view == "campaign" and app.screen is app.main:
            ids = latest_runs(app.model.campaign)
            if len(ids) < 2:
                app.notify("two variants with runs are needed to compare", timeout=4)
                return
            app.load_runs()
            app.load_compare(ids, app.nav.token())
            return
        marked = list(app.model.runs.marked)
        if len(marked) >= 2:
            app.load_compare(marked, app.nav.token())
            return
        app.show_body("runs")
        app.notify("mark 2 or more runs with space, then c", timeout=4)

    def action_export(self) -> None:
        app = _app(self)
        app.export_compare()

    def action_reload_runs(self) -> None:
        app = _app(self)
        app.load_runs()

    def action_save_screen(self) -> None:
        """The screen as SVG (Textual's own screenshot), into the data dir's screenshots."""
        app = _app(self)
        app.write_screenshot(app.export_screenshot(), outputs.screenshot_name(app.view))

    def action_report_runs(self) -> None:
        app = _app(self)
        marked = list(app.model.runs.marked)
        if not marked:
            app.notify("mark the runs for the report with space, then R", timeout=4)
            return
        app.write_report(marked, baseline_of(app.model.runs, marked))

    def action_report_compare(self) -> None:
        app = _app(self)
        view = app.model.runs.compare
        if view is None or not view.runs:
            app.notify("nothing to report: compare 2+ runs first (Runs: space, c)", timeout=4)
            return
        app.write_report([r.id for r in view.runs], view.baseline_id)

    def on_kernels_body_reload(self, message: KernelsBody.Reload) -> None:
        app = _app(self)
        app.load_captures(message.screen)

    def on_kernels_body_run_requested(self, message: Any) -> None:
        app = _app(self)
        app.take_capture(int(message.steps), int(message.concurrency))

    def _on_kernels(self, show: Callable[[KernelsBody], None],
                    screen: KernelsBody | None = None) -> None:
        """``show`` on the Kernels body ``screen`` (default: the main screen's)."""
        app = _app(self)
        body = app.main.bodies.get("kernels") if app.main is not None else None
        screen = screen or (body if isinstance(body, KernelsBody) else None)
        if screen is not None and screen.is_mounted:
            show(screen)

    @work(group="kernels-load", thread=True, exit_on_error=False)
    def load_captures(self, screen: KernelsBody | None = None) -> None:
        app = _app(self)
        from dsv4tui.core.store import kernels as kernel_store

        items = kernel_store.captures(app._run_store(),
                                      host=app.spec.name if app.spec else None)
        app.call_from_thread(app._on_kernels, lambda s: s.set_captures(items), screen)

    @work(group="kernels", exclusive=True, exit_on_error=False)
    async def take_capture(self, steps: int, concurrency: int) -> None:
        """A kernel capture of the running server (``core.campaign.kernels.take``)."""
        app = _app(self)
        from dsv4tui.core.campaign import kernels

        host = app.host()
        name, prof = app._profile(app.model.server.profile or app.model.active_profile)

        def progress(ev: dict[str, Any]) -> None:
            if (text := kernels.progress_text(ev)) is not None:
                app._on_kernels(lambda screen: screen.set_progress(text))
        try:
            taken = await kernels.take(host, app._run_store(), name, prof, steps=steps,
                                       concurrency=concurrency, on_event=progress)
        except UserError as err:
            message = err.message
            app._on_kernels(lambda screen: screen.set_error(message))
            raise
        app._on_kernels(lambda screen: screen.set_progress(taken.text()))
        app.load_captures()
