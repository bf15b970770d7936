"""Fixtures for the bench tests: real HTTP servers on 127.0.0.1.

- ``script_server``: a raw asyncio HTTP/1.1 server in a thread that answers each POST with the
  next scripted response, byte for byte (malformed streams, stalls, mid-stream closes);
  GETs are answered from ``get_routes``. Builders: ``sse(...)``, ``http_json(...)``.
- ``known_server(...)``: benchmarks/known_timing_server.py in its own process (TTFT, ITL and
  tokens as asked; ``--answer`` for sanity prompts).
- ``agent_run(*args)``: ``python -m dsv4tui.agent`` as a subprocess -> (exit code, events).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent.protocol import parse_event

REPO = Path(__file__).resolve().parents[2]
KNOWN_SERVER = REPO / "benchmarks" / "known_timing_server.py"

Step = bytes | float | str  # bytes: write; float: sleep; "close"; "hang"


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def delta(content: str | None = None, reasoning: str | None = None, role: str | None = None,
          finish: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"role": role, "content": content, "reasoning_content": reasoning}
    return {"id": "x", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}], "usage": None}


def usage(completion: int, prompt: int = 5) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


def sse(*events: dict[str, Any] | str | bytes, done: bool = True, gap: float = 0.0,
        framing: str = "chunked", status: int = 200) -> list[Step]:
    """An SSE response: dicts become ``data: JSON`` events, str are raw lines (comments,
    junk), bytes are sent as they are. framing: chunked | length | close."""
    bodies: list[bytes] = []
    for ev in events:
        if isinstance(ev, dict):
            bodies.append(b"data: " + json.dumps(ev).encode() + b"\n\n")
        elif isinstance(ev, str):
            bodies.append(ev.encode() + b"\n")
        else:
            bodies.append(ev)
    if done:
        bodies.append(b"data: [DONE]\n\n")
    head = f"HTTP/1.1 {status} OK\r\nContent-Type: text/event-stream\r\n"
    if framing == "chunked":
        steps: list[Step] = [(head + "Transfer-Encoding: chunked\r\n\r\n").encode()]
        for b in bodies:
            if gap:
                steps.append(gap)
            steps.append(chunk(b))
        steps.append(b"0\r\n\r\n")
        return steps
    body = b"".join(bodies)
    if framing == "length":
        return [(head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body]
    return [(head + "Connection: close\r\n\r\n").encode(), body, "close"]


def http_json(status: int, obj: Any) -> list[Step]:
    body = json.dumps(obj).encode()
    return [f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: "
            f"{len(body)}\r\n\r\n".encode() + body]


def normal_stream(n: int = 5, gap: float = 0.0) -> list[Step]:
    return sse(delta(role="assistant", content=""), *[delta(f"t{i} ") for i in range(n)],
               delta(finish="length"), usage(n), gap=gap)


@dataclass
class ScriptServer:
    responses: list[list[Step]] = field(default_factory=list)  # POSTs, in order (last repeats)
    get_routes: dict[str, list[Step]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    port: int = 0
    close_idle_after: float | None = None  # close kept-alive connections after this long
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _posts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.get_routes.setdefault("/v1/models", http_json(200, {"data": [{"id": "m"}]}))
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            server = loop.run_until_complete(
                asyncio.start_server(self._client, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            for task in asyncio.all_tasks(self._loop):
                self._loop.call_soon_threadsafe(task.cancel)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _next_post(self) -> list[Step]:
        script = self.responses[min(self._posts, len(self.responses) - 1)]
        self._posts += 1
        return script

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                                  self.close_idle_after)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                body = await reader.readexactly(length) if length else b""
                if method == "POST":
                    self.requests.append(json.loads(body or b"{}"))
                    script = self._next_post()
                else:
                    script = self.get_routes.get(path.split("?")[0], http_json(404, {}))
                for step in script:
                    if isinstance(step, bytes):
                        writer.write(step)
                        await writer.drain()
                    elif isinstance(step, float):
                        await asyncio.sleep(step)
                    elif step == "hang":
                        await asyncio.sleep(3600)
                    elif step == "close":
                        return
        finally:
            with contextlib.suppress(RuntimeError):  # the fixture's loop may be closed already
                writer.close()


@pytest.fixture
def script_server() -> Iterator[ScriptServer]:
    srv = ScriptServer()
    srv.start()
    yield srv
    srv.stop()


@dataclass
class KnownServer:
    proc: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def served(self, min_tokens: int = 0) -> int:
        """Streams the server finished sending (its own count, from ``/stats``), those of at
        least ``min_tokens`` tokens only when given (not the 1-token idle/ignore_eos probes)."""
        import httpx

        query = f"?min_tokens={min_tokens}" if min_tokens else ""
        return int(httpx.get(self.url + "/stats" + query, timeout=5).json()["requests"])


@pytest.fixture
def known_server() -> Iterator[Callable[..., KnownServer]]:
    """``known_server(ttft_ms=20, itl_ms=2, tokens=8, answer=None, *more_flags)``."""
    started: list[KnownServer] = []

    def start(*flags: str, ttft_ms: float = 20, itl_ms: float = 2, tokens: int = 8,
              answer: str | None = None) -> KnownServer:
        argv = [sys.executable, str(KNOWN_SERVER), "--port", "0", "--ttft-ms", str(ttft_ms),
                "--itl-ms", str(itl_ms), "--tokens", str(tokens), *flags]
        if answer:
            argv += ["--answer", answer]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        srv = KnownServer(proc, json.loads(proc.stdout.readline())["port"])
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.proc.kill()
        srv.proc.wait(5)


def agent_run(*args: str, timeout: float = 60.0, stdin: str | None = None
              ) -> tuple[int, list[dict[str, Any]], str]:
    """Run the agent to completion: (exit code, events, stderr)."""
    out = subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], capture_output=True,
                         text=True, timeout=timeout, input=stdin, cwd=REPO)
    events = [ev for line in out.stdout.splitlines() if (ev := parse_event(line))]
    return out.returncode, events, out.stderr


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]
