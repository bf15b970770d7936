"""HostSupervisor: keeps one host connected and its long-lived agent streams running.

States: connecting -> connected -> lost -> reconnecting (capped exponential backoff) -> ...;
failed when retrying cannot help (auth, host key, config, no usable python). Streams added
with :meth:`add_stream` run while connected and are restarted after every reconnect.

Reconnecting is two things at two rates. The expensive step (the full SSH connect through every
hop plus the agent's preparation) backs off exponentially, and that schedule is what
``attempts`` and ``retry_at`` describe. Between two of its attempts a cheap probe (a TCP
connect to the first hop that waits for the SSH banner; :func:`resolve.link_probe`) runs about
once a second, and the moment it sees the link come back after seeing it down, the expensive
step runs at once, whatever the backoff has grown to. An attempt that falls due while the probe
still fails counts as failed without the expensive step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsv4tui.core.errors import (
    EXIT_NO_DRIVER,
    AgentFailed,
    AuthError,
    ConfigError,
    ConnectError,
    HostKeyError,
    RemoteError,
    UserError,
)
from dsv4tui.core.hosts import resolve
from dsv4tui.core.hosts.resolve import Host, HostSpec, Probe
from dsv4tui.core.hosts.session import ConnectionState

StateCallback = Callable[["HostSupervisor"], None]
EventCallback = Callable[[dict[str, Any]], None]
ErrorCallback = Callable[[str, UserError], None]

_FINAL = (AuthError, HostKeyError, ConfigError, RemoteError)
_FINAL_STREAM_EXIT = {EXIT_NO_DRIVER, 2}  # a restart cannot fix these


@dataclass
class _Stream:
    name: str
    args: tuple[str, ...]
    on_event: EventCallback
    task: asyncio.Task[None] | None = None
    restarts: int = 0


class HostSupervisor:
    def __init__(self, spec: HostSpec, *, on_state: StateCallback | None = None,
                 on_stream_error: ErrorCallback | None = None,
                 backoff_base: float = 1.0, backoff_cap: float = 30.0,
                 probe_interval: float = 1.0, probe: Probe | bool | None = True) -> None:
        """``probe``: True derives the link probe from ``spec``; None or False: no probe (the
        backoff alone decides); or any ``async () -> reason | None``."""
        self.spec = spec
        self.state = ConnectionState.CONNECTING
        self.detail: str | None = None
        self.retry_at: float | None = None  # time.monotonic() of the next attempt
        # failed attempts since the outage began (or since the first connect began); 0 when
        # connected
        self.attempts = 0
        self.link_up: bool | None = None  # what the last probe saw (None: not probed yet)
        self.host: Host | None = None
        self._probe: Probe | None = (resolve.link_probe(spec) if probe is True
                                     else probe or None)
        self._probe_interval = probe_interval
        self._on_state = on_state
        self._on_stream_error = on_stream_error
        self._base = backoff_base
        self._cap = backoff_cap
        self._streams: dict[str, _Stream] = {}
        self._watchers: list[tuple[StateCallback | None, ErrorCallback | None]] = []
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._stopping = False

    @property
    def name(self) -> str:
        return self.spec.name

    def retry_in(self) -> float | None:
        """Seconds until the next reconnect attempt (for a countdown), or None."""
        if self.retry_at is None:
            return None
        return max(0.0, self.retry_at - time.monotonic())

    def _set(self, state: ConnectionState, detail: str | None = None) -> None:
        self.state, self.detail = state, detail
        if self._on_state:
            self._on_state(self)
        for on_state, _ in list(self._watchers):
            if on_state:
                on_state(self)

    def watch(self, on_state: StateCallback | None = None,
              on_stream_error: ErrorCallback | None = None) -> Callable[[], None]:
        """Also tell ``on_state`` / ``on_stream_error`` (a second owner of this supervisor:
        a host's dashboard opened from the fleet); returns the function that stops it."""
        entry = (on_state, on_stream_error)
        self._watchers.append(entry)

        def unwatch() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(entry)
        return unwatch

    def _stream_error(self, name: str, error: UserError) -> None:
        if self._on_stream_error:
            self._on_stream_error(name, error)
        for _, on_error in list(self._watchers):
            if on_error:
                on_error(name, error)

    def backoff(self, attempt: int) -> float:
        return float(min(self._cap, self._base * (2 ** max(0, attempt))))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"supervisor:{self.name}")

    async def wait_connected(self, timeout: float | None = None) -> Host:
        """The connected Host; raises the final error if the supervisor failed."""
        self.start()
        waiter = asyncio.create_task(self._connected.wait())
        assert self._task is not None
        await asyncio.wait({waiter, self._task}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self.host is not None and self._connected.is_set():
            return self.host
        if self.state is ConnectionState.FAILED:
            raise ConnectError(self.detail or f"{self.name}: connection failed")
        raise ConnectError(f"{self.name}: not connected ({self.detail or self.state.value})")

    async def stop(self) -> None:
        self._stopping = True
        for stream in self._streams.values():
            await _cancel_task(stream.task)
        await _cancel_task(self._task)
        if self.host is not None:
            await self.host.session.close()
            self.host = None
        self._set(ConnectionState.CLOSED)

    def add_stream(self, name: str, args: list[str], on_event: EventCallback) -> None:
        """Run ``agent ARGS`` while connected; restarted after reconnects and failures."""
        old = self._streams.pop(name, None)
        if old and old.task:
            old.task.cancel()
        stream = _Stream(name, tuple(args), on_event)
        self._streams[name] = stream
        if self.host is not None and self.state is ConnectionState.CONNECTED:
            stream.task = asyncio.create_task(self._pump(stream, self.host))

    def remove_stream(self, name: str) -> None:
        stream = self._streams.pop(name, None)
        if stream and stream.task:
            stream.task.cancel()

    async def _run(self) -> None:
        first = True
        delay: float | None = None  # None: attempt now
        link_seen_down = False
        while not self._stopping:
            if delay is not None:
                reason = await self._wait(delay, link_seen_down)
                if reason is not None:  # due, and the link still does not answer: failed
                    self.attempts += 1
                    delay, link_seen_down = self.backoff(self.attempts - 1), True
                    self.retry_at = time.monotonic() + delay
                    self._set(ConnectionState.LOST if first else ConnectionState.RECONNECTING,
                              f"{self.name}: {reason}")
                    continue
            self.retry_at = None
            self._set(ConnectionState.CONNECTING if first else ConnectionState.RECONNECTING,
                      self.detail)
            t0 = time.monotonic()
            try:
                host = await resolve.connect(self.spec)
            except _FINAL as exc:
                self._set(ConnectionState.FAILED, exc.message)
                return
            except (ConnectError, OSError) as exc:
                self.attempts += 1
                delay = self.backoff(self.attempts - 1)
                # an attempt that took a while may have outlived the outage: the first probe
                # that answers is then the link coming back
                link_seen_down = time.monotonic() - t0 >= self._probe_interval
                self.retry_at = time.monotonic() + delay
                self._set(ConnectionState.LOST if first else ConnectionState.RECONNECTING, str(exc))
                first = False
                continue
            first = False
            self.attempts = 0
            self.link_up = True
            self.host = host
            self._connected.set()
            self._set(ConnectionState.CONNECTED)
            for stream in self._streams.values():
                stream.task = asyncio.create_task(self._pump(stream, host))
            await host.session.wait_closed()
            self._connected.clear()
            for stream in self._streams.values():
                await _cancel_task(stream.task)
                stream.task = None
            self.host = None
            if self._stopping:
                return
            delay, link_seen_down = self.backoff(0), False
            self.retry_at = time.monotonic() + delay
            self._set(ConnectionState.LOST, f"{self.name}: connection lost")

    async def _wait(self, delay: float, link_seen_down: bool) -> str | None:
        """Wait until the next expensive attempt: ``delay`` from now, or sooner when the probe
        sees the link come back after it was seen down. None: attempt now; a reason: the
        attempt fell due while the link does not answer."""
        deadline = time.monotonic() + delay
        self.retry_at = deadline
        if self._probe is None:
            await asyncio.sleep(delay)
            return None
        while True:
            started = time.monotonic()
            reason = await self._probe()
            self.link_up = reason is None
            now = time.monotonic()
            if reason is None and (link_seen_down or now >= deadline):
                return None
            if reason is not None:
                link_seen_down = True
                if now >= deadline:
                    return reason
            wake = started + self._probe_interval
            if wake > deadline > now:
                wake = deadline  # probe again exactly when the attempt falls due
            await asyncio.sleep(max(0.0, wake - now))

    async def _pump(self, stream: _Stream, host: Host) -> None:
        failures = 0
        while not self._stopping and not host.session.closed:
            try:
                async for event in host.agent.events(*stream.args):
                    failures = 0
                    stream.on_event(event)
            except ConnectError:
                return  # the run loop sees the link drop and restarts us after reconnecting
            except AgentFailed as exc:
                self._stream_error(stream.name, exc)
                if exc.exit_code in _FINAL_STREAM_EXIT:
                    return
                failures += 1
            stream.restarts += 1
            await asyncio.sleep(self.backoff(failures))


async def _cancel_task(task: asyncio.Task[Any] | None) -> None:
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
