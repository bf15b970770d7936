"""The dashboard's visit to a host: what it does first when it arrives (watch what runs there,
show the last campaign, start the server, check the running one) and what it leaves behind
when it goes (work on the host goes on without it; the demo takes its simulated server and
its own sweep with it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dsv4tui.core.errors import UserError
from dsv4tui.core.view.notice import Notice


@dataclass(frozen=True)
class Arrival:
    """What to do right after connecting."""

    attach: dict[str, Any] | None = None  # a sweep or campaign runs there: watch it
    show_last: dict[str, Any] | None = None  # else the last campaign, for the Campaign screen
    restart: bool = False  # start the server (the demo's first look)
    sanity: bool = False  # the server we started is ready: is it still sane?


def arrival(status: dict[str, Any], found: Sequence[dict[str, Any]], *, autostart: bool,
            ours: bool) -> Arrival:
    """``status``: the server's; ``found``: the host's campaigns (``session.listing``);
    ``autostart``: start a stopped server; ``ours``: the server runs a profile of ours."""
    running = [c for c in found if c.get("state") == "running"]
    campaigns = [c for c in found if c.get("kind") == "campaign"]
    last = campaigns[-1] if campaigns and not running else None
    state = status.get("state")
    if running:
        return Arrival(attach=running[-1])
    if autostart and state in ("stopped", "crashed", "unknown"):
        return Arrival(show_last=last, restart=True)
    return Arrival(show_last=last, sanity=state == "ready" and ours)


def quit_warning(busy: str, *, simulated: bool, watched: str | None, own: str | None) -> str:
    """What quitting while ``busy`` ('campaign', 'sweep', 'restart') leaves behind: the demo
    cancels what it started itself (its simulated server goes with it); anything else runs on
    the host without this console."""
    if busy == "restart":
        return "a restart is running: the server keeps starting on the host"
    if demo_owns(simulated=simulated, watched=watched, own=own):
        return (f"a {busy} is running: quitting cancels it with the simulated server "
                "(finished requests stay stored)")
    return (f"a {busy} is running on the host" + ("" if watched == own else " (started elsewhere)")
            + ": it goes on without this console; reconnect (or dsv4tui campaign attach HOST) "
            "to collect it")


def demo_owns(*, simulated: bool, watched: str | None, own: str | None) -> bool:
    """The watched sweep or campaign is the demo's own (cancelled when the demo quits)."""
    return simulated and watched is not None and watched == own


async def leave(host: Callable[[], Any], model: Any, *, watched: str | None, own: str | None,
                started_server: bool, end_workers: Callable[[], Awaitable[None]],
                say: Callable[[Notice], None]) -> None:
    """Quitting: the demo's own sweep is cancelled on the host, then what runs here ends
    (``end_workers``: finished requests are stored as they unwind), then the simulated server
    this session started is stopped. ``host()``: the connected host (``model``'s)."""
    if watched is not None and model.conn.connected and demo_owns(
            simulated=model.simulated, watched=watched, own=own):
        with contextlib.suppress(UserError):
            await cancel_own(host(), watched)
    await end_workers()
    if model.simulated and started_server and model.conn.connected:
        say(Notice("stopping the simulated server …", timeout=5))
        with contextlib.suppress(UserError):
            await stop_simulated_server(host())


async def cancel_own(host: Any, cid: str) -> None:
    """The demo's sweep is cancelled, not orphaned (what finished stays stored)."""
    from dsv4tui.core.campaign import session

    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.cancel(host, None, cid, wait=10), 20)


async def stop_simulated_server(host: Any) -> None:
    """The demo cleans up after itself: the simulated server it started goes with it."""
    from dsv4tui.core.server import control as server_control

    with contextlib.suppress(Exception):
        await asyncio.wait_for(server_control.stop(host, grace=5), 15)


async def demo_server_state(settings: Any, *, stop: bool = False) -> str | None:
    """The demo host's simulated server state (``serve demo`` asks before its tabs start);
    ``stop``: stop it unless it is stopped already (a tab started it: it goes with serve)."""
    from dsv4tui.core.config import DEMO
    from dsv4tui.core.hosts.resolve import open_host
    from dsv4tui.core.server import control as server_control

    async with open_host(DEMO, settings) as host:
        state = (await server_control.status(host)).get("state")
        if stop and state not in ("stopped", "crashed", None):
            await server_control.stop(host, grace=5)
    return state if isinstance(state, str) else None
