"""A TCP relay on 127.0.0.1 that can cut the link the way networks do.

``relay(target_port)`` starts a relay (its own thread and event loop, so sync and async tests
can both use it) forwarding ``127.0.0.1:relay.port`` to ``127.0.0.1:target_port``.

- ``cut()``: a *silent* drop, like a cable pulled or a NAT that forgot the flow: bytes in
  either direction are swallowed, nothing is closed (no RST, no FIN), and new connections are
  accepted but never answered. Only keepalives or timeouts notice.
- ``cut(reset=True)``: every connection is reset at once and new ones are refused.
- ``restore()``: new connections flow again; the connections that lived through a silent cut
  are reset (their byte streams lost data, as a real flow would after a long outage).
- ``connections``: how many client connections the relay accepted in total.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest


class Relay:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="relay", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = []
        self.down = False  # silent cut in force
        self.refusing = False  # reset cut in force
        self.connections = 0
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._thread.start()
        self._call(self._start())

    def _call(self, coro: object, timeout: float = 10.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.refusing:
            _reset(writer)
            return
        pair: list[asyncio.StreamWriter | None] = [writer, None]
        entry = (writer, None)
        self._pairs.append(entry)
        if self.down:  # accepted, never answered
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            return
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)
            return
        pair[1] = up_w
        self._pairs.remove(entry)
        self._pairs.append((writer, up_w))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    if self.down:
                        continue  # swallowed
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                if not self.down:
                    dst.close()

        await asyncio.gather(pump(reader, up_w), pump(up_r, writer))

    def cut(self, reset: bool = False) -> None:
        def do() -> None:
            if reset:
                self.refusing = True
                for a, b in self._pairs:
                    _reset(a)
                    if b is not None:
                        _reset(b)
                self._pairs.clear()
            else:
                self.down = True
        self.loop.call_soon_threadsafe(do)

    def restore(self) -> None:
        def do() -> None:
            if self.down:
                for a, b in self._pairs:
                    _reset(a)
                    if b is not None:
                        _reset(b)
                self._pairs.clear()
            self.down = False
            self.refusing = False
        self.loop.call_soon_threadsafe(do)

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for a, b in self._pairs:
                _reset(a)
                if b is not None:
                    _reset(b)
        with contextlib.suppress(Exception):
            self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a middlebox that gave up on the flow does."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(Exception):
        writer.transport.abort()


@pytest.fixture
def relay() -> Iterator[Callable[[int], Relay]]:
    made: list[Relay] = []

    def make(target_port: int) -> Relay:
        r = Relay(target_port)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()
