"""Reconnecting through a TCP relay that cuts the link (tests/plugins/relay.py) in front of a
real SSH server (asyncssh's, in-process; the agent deployed for real): the cheap probe brings
the connection back soon after the link returns, however far the backoff has grown, and
``attempts`` counts the current outage only. Precise timings: benchmarks/reconnect.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from plugins.relay import Relay
from plugins.ssh_server import SshHost

from dsv4tui.core.config import HostConfig
from dsv4tui.core.hosts import resolve
from dsv4tui.core.hosts.resolve import HostSpec
from dsv4tui.core.hosts.session import ConnectionState
from dsv4tui.core.hosts.supervisor import HostSupervisor

pytestmark = pytest.mark.timeout(120)


async def until(cond: Callable[[], bool], timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


def spec(**cfg: float) -> HostSpec:
    return HostSpec("testbox", HostConfig(ssh="testbox", **cfg), "ssh", target="testbox")


async def test_reconnects_soon_after_the_link_returns_at_any_attempt(
        ssh_server: SshHost, relay: Callable[[int], Relay]) -> None:
    r = relay(ssh_server.port)
    ssh_server.route_through(r.port)
    seen: list[tuple[str, int]] = []
    sup = HostSupervisor(spec(), backoff_base=1.0,
                         on_state=lambda s: seen.append((s.state.value, s.attempts)))
    try:
        await sup.wait_connected(timeout=30)
        assert sup.attempts == 0
        r.cut(reset=True)
        # 5 failed attempts: the old backoff would now wait 16 s before the next one
        await until(lambda: sup.attempts >= 5, 40, "5 failed attempts")
        assert sup.state is ConnectionState.RECONNECTING and sup.link_up is False
        assert sup.retry_in() is not None and sup.retry_in() > 8  # type: ignore[operator]
        counts = [a for state, a in seen if state in ("lost", "reconnecting")]
        assert counts[0] == 0 and set(range(1, 6)) <= set(counts)  # from the outage's start
        r.restore()
        took = await until(lambda: sup.state is ConnectionState.CONNECTED, 10, "reconnected")
        assert took < 8, f"reconnected {took:.1f} s after the link returned"
        assert sup.attempts == 0 and sup.link_up is True

        seen.clear()  # a second outage counts from 1 again
        r.cut(reset=True)
        await until(lambda: sup.attempts >= 1, 10, "the first failed attempt")
        assert [a for state, a in seen if state != "connected"][:2] == [0, 1]
        r.restore()
        await until(lambda: sup.state is ConnectionState.CONNECTED, 10, "reconnected again")
        assert (await sup.host.agent.call("hello"))[0]["type"] == "hello"  # type: ignore[union-attr]
    finally:
        await sup.stop()


async def test_silent_cut_then_return(ssh_server: SshHost, relay: Callable[[int], Relay]) -> None:
    """Swallowed packets: keepalives notice, probes time out, the return is seen at once."""
    r = relay(ssh_server.port)
    ssh_server.route_through(r.port)
    sup = HostSupervisor(spec(keepalive_s=0.5, connect_timeout_s=3.0), backoff_base=1.0)
    try:
        await sup.wait_connected(timeout=30)
        r.cut()
        await until(lambda: sup.attempts >= 3, 60, "3 failed attempts")
        assert sup.link_up is False and "no answer from 127.0.0.1" in (sup.detail or "")
        r.restore()
        took = await until(lambda: sup.state is ConnectionState.CONNECTED, 15, "reconnected")
        assert took < 8, f"reconnected {took:.1f} s after the link returned"
    finally:
        await sup.stop()


async def test_probe_sees_an_ssh_banner(ssh_server: SshHost) -> None:
    probe = resolve.link_probe(spec())
    assert probe is not None and await probe() is None
    srv = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        from dsv4tui.core.hosts.ssh import probe_ssh

        assert "without an SSH banner" in (await probe_ssh("127.0.0.1", port) or "")
    finally:
        srv.close()
    assert resolve.link_probe(HostSpec("local", HostConfig(), "local")) is None
