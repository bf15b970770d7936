"""One telemetry stream per host, over SSH (asyncssh's server in-process, commands run for
real): frames flow, a dropped link makes the GPUs stale, and the supervisor's reconnect
restarts the stream. The agent uses its simulated source (no GPU here)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from plugins.ssh_server import SshHost

from dsv4tui.core import config
from dsv4tui.core.hosts import resolve
from dsv4tui.core.hosts.session import ConnectionState
from dsv4tui.core.hosts.supervisor import HostSupervisor
from dsv4tui.core.telemetry import HostTelemetry

INTERVAL = 0.2


async def _until(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_reconnect_restarts_the_telemetry_stream(ssh_server: SshHost) -> None:
    telemetry = HostTelemetry("testbox", interval=INTERVAL)
    seqs: list[int] = []
    states: list[ConnectionState] = []

    def on_event(event: dict[str, Any]) -> None:
        frame = telemetry.add_event(event)
        if frame is not None and frame.seq is not None:
            seqs.append(frame.seq)

    spec = resolve.host_spec("testbox", config.Settings())
    # backoff_base 1 s: after the drop the supervisor waits >= 1 s (> 3 intervals) to retry
    sup = HostSupervisor(spec, on_state=lambda s: states.append(s.state), backoff_base=1.0)
    sup.add_stream("telemetry", ["telemetry", "--interval", str(INTERVAL), "--source",
                                 "simulated"], on_event)
    try:
        await sup.wait_connected(timeout=30)
        await _until(lambda: len(seqs) >= 3, 20, "the first frames")
        assert seqs[:3] == [0, 1, 2] and not telemetry.is_stale()
        assert telemetry.source == "simulated" and len(telemetry.gpus()) == 8

        ssh_server.drop_connections()
        await _until(telemetry.is_stale, 10, "the GPUs to go stale")
        statuses = telemetry.gpus()
        assert all(s.stale and s.age_s > 3 * INTERVAL for s in statuses)
        restarted_at = len(seqs)

        await _until(lambda: 0 in seqs[restarted_at:], 30, "a restarted stream (seq 0 again)")
        await _until(lambda: not telemetry.is_stale(), 5, "fresh frames")
        assert ConnectionState.LOST in states and sup.state is ConnectionState.CONNECTED
        assert not any(s.stale for s in telemetry.gpus())
    finally:
        await sup.stop()
