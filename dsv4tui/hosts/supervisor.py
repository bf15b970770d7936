"""HostSupervisor: keeps one host connected and its long-lived agent streams running.

States: connecting -> connected -> lost -> reconnecting (capped exponential backoff) -> ...;
failed when retrying cannot help (auth, host key, config, no usable python). Streams added
with :meth:`add_stream` run while connected and are restarted after every reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsv4tui.errors import (
    EXIT_NO_DRIVER,
    AgentFailed,
    AuthError,
    ConfigError,
    ConnectError,
    HostKeyError,
    RemoteError,
    UserError,
)
from dsv4tui.hosts import resolve
from dsv4tui.hosts.resolve import Host, HostSpec
from dsv4tui.hosts.session import ConnectionState

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
                 backoff_base: float = 1.0, backoff_cap: float = 30.0) -> None:
        self.spec = spec
        self.state = ConnectionState.CONNECTING
        self.detail: str | None = None
        self.retry_at: float | None = None  # time.monotonic() of the next attempt
        self.attempts = 0
        self.host: Host | None = None
        self._on_state = on_state
        self._on_stream_error = on_stream_error
        self._base = backoff_base
        self._cap = backoff_cap
        self._streams: dict[str, _Stream] = {}
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
        attempt = 0
        first = True
        while not self._stopping:
            self.retry_at = None
            self._set(ConnectionState.CONNECTING if first else ConnectionState.RECONNECTING,
                      self.detail)
            try:
                host = await resolve.connect(self.spec)
            except _FINAL as exc:
                self._set(ConnectionState.FAILED, exc.message)
                return
            except (ConnectError, OSError) as exc:
                delay = self.backoff(attempt)
                attempt += 1
                self.attempts = attempt
                self.retry_at = time.monotonic() + delay
                self._set(ConnectionState.LOST if first else ConnectionState.RECONNECTING, str(exc))
                first = False
                await asyncio.sleep(delay)
                continue
            attempt, first = 0, False
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
            delay = self.backoff(0)
            self.retry_at = time.monotonic() + delay
            self._set(ConnectionState.LOST, f"{self.name}: connection lost")
            attempt = 1
            await asyncio.sleep(delay)

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
                if self._on_stream_error:
                    self._on_stream_error(stream.name, exc)
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
