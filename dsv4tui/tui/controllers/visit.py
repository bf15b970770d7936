"""The visit to the host, from arriving to leaving: connect (or watch a fleet's connection),
look around (``core.hosts.visit.arrival``: attach to what runs, restart, check), poll the
server's status, come back after a dropped link, and quit (``visit.leave``: what quitting
leaves on the host), also on a signal. The dashboard's side is :class:`VisitControl`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from dsv4tui.core import signals
from dsv4tui.core.config import Settings
from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.hosts import visit
from dsv4tui.core.view import model as m
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.parts import LOGS
from dsv4tui.tui.controllers.runs import RunsControl
from dsv4tui.tui.controllers.server import ServerControl
from dsv4tui.tui.controllers.sweeps import SweepsControl
from dsv4tui.tui.controllers.ui import Ui, start
from dsv4tui.tui.screens import dialogs

STATUS_POLL_S = 15.0
WORKERS_TO_END = ("sweep", "sanity", "server", "status", "connect")  # cancelled by a quit


class VisitControl:
    """Connects ``link`` to the host and leaves it; the server, sweeps and runs controllers
    do what arriving asks."""

    def __init__(self, ui: Ui, model: m.UiModel, link: HostLink, *, settings: Settings,
                 autostart: bool, server: ServerControl, sweeps: SweepsControl,
                 runs: RunsControl, shared: Callable[[], Any]) -> None:
        self.ui, self.model, self.link, self.settings = ui, model, link, settings
        self.autostart, self.server, self.sweeps, self.runs = autostart, server, sweeps, runs
        self.shared = shared  # the fleet's supervisor to watch (None: connect)
        self.stopping = False  # leaving: nothing new starts
        self._hangup = False  # the terminal closed (SIGHUP): end the process once clean

    def arrive(self) -> None:
        """Open the store, connect, and quit cleanly on the quit signals."""
        self.runs.open_store()
        start(self.ui, self._connect(), "connect_host", "connect", exclusive=True)
        signals.on_quit_signals(self._on_signal)

    async def _connect(self) -> None:
        self.link.start(self.settings.telemetry.interval_s, self.shared())
        self.server.follow_metrics()
        host = await self.link.wait_connected()
        self.server.load_host_facts()
        self.ui.set_timer(STATUS_POLL_S, self._poll_status)
        try:
            await self._look_around(host)
        except ConnectError as exc:
            # the link dropped while we looked around: the banner says so, and the reconnect
            # refreshes the status and attaches to whatever runs; no dialog over the banner
            self.model.logs.append(f"[dsv4tui] {exc.message}")
            self.ui.mark(LOGS)

    async def _look_around(self, host: Any) -> None:
        """Right after connecting: what the core's ``visit.arrival`` says to do."""
        from dsv4tui.core.campaign import session

        status = await self.server.refresh_status()
        step = visit.arrival(status, await session.listing(host), autostart=self.autostart,
                             ours=bool(self.model.server.profile))
        if step.show_last is not None:
            self.sweeps.show_last_campaign(step.show_last)  # the Campaign body shows it
        if step.attach is not None:
            self.sweeps.attach_running(step.attach)  # someone's sweep or campaign runs
        elif step.restart:
            if self.ui.view == "dashboard":  # a first look: the startup phases, then sanity
                self.ui.auto_show("launch", 0, "the server is starting")
            self.server.restart_server(self.model.active_profile, None)
        elif step.sanity:
            self.server.run_sanity()  # attached to a running server we started: still sane?

    def link_back(self) -> None:
        """The link is back after a drop."""
        self.server.refresh_later()
        if self.sweeps.watch.watched is None and not self.stopping:
            self.sweeps.attach_running()  # started while we were away (another console)

    def _poll_status(self) -> None:
        """Timer-chained: the next poll is armed only after this one finished."""
        async def poll() -> None:
            try:
                if not self.model.startup.active and self.model.conn.connected:
                    with contextlib.suppress(UserError):
                        await self.server.refresh_status()
            finally:
                if not self.stopping:
                    self.ui.set_timer(STATUS_POLL_S, self._poll_status)
        start(self.ui, poll(), "poll", "status", exclusive=True)

    # -- leaving -----------------------------------------------------------------------------
    def quit(self) -> None:
        """q: quit, after a yes while a sweep, campaign or restart runs (what it leaves)."""
        busy = self.model.busy
        if busy is None:
            self.quit_cleanly()
            return
        watch = self.sweeps.watch
        what = visit.quit_warning(busy, simulated=self.model.simulated, watched=watch.watched,
                                  own=watch.own)

        def answer(yes: bool | None) -> None:
            if yes:
                self.quit_cleanly()
        self.ui.push_screen(dialogs.quit_confirm(what), answer)

    def _on_signal(self, sig: int) -> None:
        if sig == signals.HANGUP:  # also when a quit is already under way: it must not wait
            self._hangup = True    # on the terminal that is gone
        if not self.stopping:
            self.quit_cleanly()

    def quit_cleanly(self) -> None:
        start(self.ui, self._quit_cleanly(), "", "quit")

    def _stop(self) -> None:
        self.stopping = True
        self.runs.looking = False

    async def _quit_cleanly(self) -> None:
        """What quitting leaves on the host is ``visit.leave``'s; then the agent streams
        close and the App exits (after a hangup: the process ends once clean)."""
        self._stop()
        watch = self.sweeps.watch
        await visit.leave(self.link.host, self.model, watched=watch.watched, own=watch.own,
                          started_server=self.server.started_server,
                          end_workers=self._end_workers, say=self.ui.tell)
        await self.link.release(10)
        if self._hangup:
            self.runs.close()
            signals.end_after_hangup()
        self.ui.exit(0)

    async def back_to(self, result: str) -> None:
        """Give the link back (a fleet's: its streams of this dashboard removed) and exit
        with ``result``."""
        self._stop()
        await self.link.release(5)
        self.ui.exit(result)

    async def _end_workers(self) -> None:
        ending = [worker for worker in list(self.ui.workers) if worker.group in WORKERS_TO_END]
        for worker in ending:
            worker.cancel()
        for worker in ending:  # they store what finished as they unwind
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.wait(), 5)

    async def leave(self) -> None:
        """The App unmounts: the streams close, the store too."""
        self._stop()
        await self.link.close(5)
        self.runs.close()
