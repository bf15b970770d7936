"""``bench reach``: the agent's "does the server answer HTTP from here?" (what ``dsv4tui sweep
--url`` asks before it stores a run), against real sockets on loopback: any HTTP answer is a
server; silence, a hang-up and a non-HTTP greeting are not."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from plugins.bench_server import ScriptServer, agent_run, of_type
from plugins.sim import free_port


def reach(url: str, *flags: str) -> dict[str, Any]:
    code, events, err = agent_run("bench", "reach", "--url", url, *flags)
    assert code == 0, err
    [got] = of_type(events, "reach")
    return got


@pytest.fixture
def talker() -> Iterator[Any]:
    """``talker(greeting)``: a socket server that reads each request, answers ``greeting``
    and closes the connection (``b""``: hangs up without a word)."""
    socks: list[socket.socket] = []

    def start(greeting: bytes) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        socks.append(sock)

        def serve() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                with conn:  # read the request first: a clean close, not a reset
                    got = b""
                    while b"\r\n\r\n" not in got and (part := conn.recv(4096)):
                        got += part
                    if greeting:
                        conn.sendall(greeting)

        threading.Thread(target=serve, daemon=True).start()
        return int(sock.getsockname()[1])

    yield start
    for sock in socks:
        sock.close()


def test_any_http_answer_is_reachable_whatever_its_status(script_server: ScriptServer) -> None:
    """/v1/models answered 200 by an OpenAI-like server; a 404 from any other HTTP server."""
    got = reach(script_server.url + "/v1")
    assert (got["reachable"], got["connected"], got["answered"], got["status"]) == (
        True, True, True, 200)
    assert got["error"] is None and got["url"] == script_server.url
    del script_server.get_routes["/v1/models"]
    assert reach(script_server.url)["status"] == 404 and reach(script_server.url)["reachable"]


def test_a_refused_connection_is_not_reachable() -> None:
    got = reach(f"http://127.0.0.1:{free_port()}")
    assert not got["reachable"] and not got["connected"]
    assert "Connection refused" in got["error"]


def test_a_silent_server_is_connected_but_not_reachable() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)  # the kernel accepts; nobody ever reads or writes
    try:
        got = reach(f"http://127.0.0.1:{sock.getsockname()[1]}", "--answer-timeout", "0.5")
    finally:
        sock.close()
    assert got["connected"] and not got["answered"] and not got["reachable"]
    assert "accepted the connection but did not answer HTTP within 0.5 s" in got["error"]


def test_a_reset_is_a_hang_up() -> None:
    """A server that closes without reading the request resets the connection."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)

    def slam() -> None:
        conn, _ = sock.accept()
        conn.recv(1)  # the request has come (the rest of it is left unread)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # linger 0: an RST

    threading.Thread(target=slam, daemon=True).start()
    try:
        got = reach(f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        sock.close()
    assert got["connected"] and not got["reachable"]
    assert "closed it without an HTTP answer" in got["error"], got["error"]


@pytest.mark.parametrize(("greeting", "says"), [
    (b"", "closed it without an HTTP answer"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "its answer is not HTTP (it began 'SSH-2.0-OpenSSH_9.6??')"),
    (b"\x1b[2J\x00junk\n", "its answer is not HTTP (it began '?[2J?junk?')"),
])
def test_a_hang_up_or_a_non_http_greeting_is_not_reachable(talker: Any, greeting: bytes,
                                                           says: str) -> None:
    got = reach(f"http://127.0.0.1:{talker(greeting)}")
    assert got["connected"] and not got["reachable"] and got["status"] is None
    assert says in got["error"], got["error"]
