"""A lean OpenAI-compatible streaming server whose timing is known (benchmarks and tests).

Every streamed request: the role-only chunk at once, the first token TTFT after the request
arrived, then one token every ITL (absolute schedule, so lag never accumulates), then a
finish chunk, a usage-only chunk (``choices: []``) and ``data: [DONE]``, like SGLang. It is
a raw asyncio Protocol with pre-encoded chunks, so its own CPU cost stays small and its clock
is the truth: ``GET /stats`` returns what it measured itself (``?min_tokens=N``: only requests
of at least N tokens; ``POST /stats/reset`` clears).

    python benchmarks/known_timing_server.py --port 0 --ttft-ms 100 --itl-ms 10 --tokens 64

prints ``{"port": P}`` on stdout once listening.

``--procs N`` spreads it over N processes for loads one Python process cannot write on time
(C = 512 at 10 ms per token is 51,200 chunks/s): each process listens on the same port
(SO_REUSEPORT: the kernel spreads the connections) and on a private control port of its own,
and the line says ``{"port": P, "control_ports": [...]}``. Every process keeps its own
records; ``/stats/records`` on each control port, merged, is the truth (``perf_counter`` is
CLOCK_MONOTONIC, one clock for all processes on Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import re
import selectors
import sys
import time

perf = time.perf_counter


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _sse(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ttft = args.ttft_ms / 1000.0
        self.itl = args.itl_ms / 1000.0
        self.records: list[tuple[float, float, float, int]] = []  # recv, first, last, tokens
        self.active = 0
        self.clock = perf  # the request's arrival: the poll's wake time when serve() sets it

    def stats(self, min_tokens: int = 0) -> dict:
        recs = [r for r in self.records if r[3] >= min_tokens]
        if not recs:
            return {"requests": 0}
        tokens = sum(r[3] for r in recs)
        span = max(r[2] for r in recs) - min(r[0] for r in recs)
        gaps = sum(r[2] - r[1] for r in recs if r[3] > 1)
        ngaps = sum(r[3] - 1 for r in recs if r[3] > 1)
        return {"requests": len(recs), "tokens": tokens,
                "ttft_ms_mean": 1000.0 * sum(r[1] - r[0] for r in recs) / len(recs),
                "itl_ms_mean": 1000.0 * gaps / ngaps if ngaps else None,
                "tok_s": tokens / span if span > 0 else None, "span_s": span}


@functools.lru_cache(maxsize=4096)
def _token_chunk(kind: str, model: str, text: str, reasoning: bool = False) -> bytes:
    if kind == "chat":
        delta = {"role": None, "content": None if reasoning else text,
                 "reasoning_content": text if reasoning else None}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return _sse({"id": "k", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [choice], "usage": None})
    return _sse({"id": "k", "object": "text_completion", "created": 0, "model": model,
                 "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None}],
                 "usage": None})


_FIELD = re.compile(rb'"(max_tokens|ignore_eos|model)"\s*:\s*("(?:[^"\\]|\\.)*"|true|false|\d+)')


def _fields(body: bytes) -> dict | None:
    """The three request fields the server needs, without parsing the whole body (the
    prompt can be long); None when the body is not a JSON object."""
    if not body.lstrip().startswith(b"{"):
        return None
    out: dict = {}
    for key, value in _FIELD.findall(body):
        out.setdefault(key.decode(), json.loads(value))
    return out


@functools.lru_cache(maxsize=256)
def _response_bytes(kind: str, model: str, max_tokens: int, ignore_eos: bool, answer: str | None,
                    reasoning: int, no_usage: bool, no_done: bool, truncate: int | None = None
                    ) -> tuple[tuple[bytes, ...], bytes, bytes]:
    """(token chunks, head + role chunk, finish + usage + [DONE] + last chunk), cached per
    request shape so that a request costs the server next to nothing. ``truncate``: only that
    many tokens, then the body ends cleanly (last chunk) with no finish, usage or [DONE]."""
    if ignore_eos or not answer:
        texts = [" tok"] * max_tokens
    else:
        texts = [w + " " for w in answer.split()][:max_tokens]
    if truncate is not None:
        texts = texts[:truncate]
    n = len(texts)
    chunks = tuple(_token_chunk(kind, model, text, i < reasoning) for i, text in enumerate(texts))
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    if kind == "chat":
        head += _sse({"id": "k", "object": "chat.completion.chunk", "created": 0, "model": model,
                      "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                   "finish_reason": None}], "usage": None})
    if truncate is not None:
        return chunks, head, b"0\r\n\r\n"
    tail = [_sse({"id": "k", "object": "chat.completion.chunk", "created": 0, "model": model,
                  "choices": [{"index": 0, "delta": {},
                               "finish_reason": "length" if ignore_eos else "stop"}],
                  "usage": None})]
    if not no_usage:
        tail.append(_sse({"id": "k", "object": "chat.completion.chunk", "model": model,
                          "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": n,
                                                   "total_tokens": 10 + n}}))
    if not no_done:
        tail.append(_chunk(b"data: [DONE]\n\n"))
    tail.append(b"0\r\n\r\n")
    return chunks, head, b"".join(tail)


class StampingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Notes when each poll returns: a request read in that loop iteration had arrived by
    then, however many other sockets the loop served first. (dsv4tui.agent.bench.openai_stream
    has the same, for the client side.)"""

    woke = 0.0

    def select(self, timeout: float | None = None) -> list:
        ready = super().select(timeout)
        self.woke = perf()
        return ready


class Handler(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.busy = False
        self.tr: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        t = self.server.clock()
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length") or 0)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            method, path = lines[0].split(" ")[:2]
            self.handle(method, path, body, t)

    def reply(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        assert self.tr is not None
        self.tr.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d"
                      b"\r\n\r\n%s" % (status, len(body), body))

    def handle(self, method: str, path: str, body: bytes, t_recv: float) -> None:
        srv = self.server
        if path == "/v1/models":
            if srv.args.models_status != 200:
                self.reply(srv.args.models_status, {"error": {"message": "models broken"}})
            else:
                self.reply(200, {"object": "list", "data": [{"id": srv.args.model}]})
        elif path in ("/health", "/health_generate"):
            self.reply(200, {})
        elif path.split("?")[0] == "/stats":
            # ?min_tokens=N: only requests of N tokens or more (a sweep's 1-token idle probe
            # is not one of the level's requests)
            query = dict(p.partition("=")[::2] for p in path.partition("?")[2].split("&") if p)
            try:
                self.reply(200, srv.stats(int(query.get("min_tokens") or 0)))
            except ValueError:
                self.reply(400, {"error": {"message": "min_tokens must be an integer"}})
        elif path == "/stats/records":
            self.reply(200, srv.records)
        elif path == "/stats/reset":
            srv.records = []
            self.reply(200, {})
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            req = _fields(body)
            if req is None:
                self.reply(400, {"error": {"message": "bad json"}})
                return
            self.stream("chat" if "chat" in path else "completions", req, t_recv)
        else:
            self.reply(404, {"error": {"message": "no route " + path}})

    def stream(self, kind: str, req: dict, t_recv: float) -> None:
        srv, args = self.server, self.server.args
        assert self.tr is not None
        tr = self.tr
        ignore_eos = bool(req.get("ignore_eos"))
        chunks, head, end = _response_bytes(kind, str(req.get("model") or args.model),
                                            int(req.get("max_tokens") or args.tokens), ignore_eos,
                                            args.answer, args.reasoning, args.no_usage,
                                            args.no_done, args.truncate_after)
        n = len(chunks)
        tr.write(head)
        self.busy = True
        srv.active += 1
        loop = asyncio.get_running_loop()
        base = loop.time() - (perf() - t_recv)
        state = {"i": 0, "first": 0.0}

        def tick() -> None:
            i = state["i"]
            if tr.is_closing():
                srv.active -= 1
                return
            tr.write(chunks[i])
            now = perf()
            if i == 0:
                state["first"] = now
            i += 1
            state["i"] = i
            if i < n:
                loop.call_at(base + srv.ttft + i * srv.itl, tick)
                return
            tr.write(end)
            srv.records.append((t_recv, state["first"], now, n))
            srv.active -= 1
            self.busy = False
            if self.buf:
                self.data_received(b"")

        if n:
            loop.call_at(base + srv.ttft, tick)
        else:
            tr.write(end)
            self.busy = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=100.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--tokens", type=int, default=64, help="tokens when max_tokens is absent")
    p.add_argument("--model", default="known-timing")
    p.add_argument("--answer", help="answer text (word per token) when ignore_eos is not set")
    p.add_argument("--reasoning", type=int, default=0, help="first N tokens as reasoning_content")
    p.add_argument("--models-status", type=int, default=200, help="HTTP status of /v1/models")
    p.add_argument("--no-done", action="store_true", help="end streams without data: [DONE]")
    p.add_argument("--no-usage", action="store_true", help="send no usage chunk")
    p.add_argument("--procs", type=int, default=1, help="serve from N processes (SO_REUSEPORT)")
    p.add_argument("--truncate-after", type=int, metavar="N",
                   help="end every stream cleanly after N tokens, with no finish_reason, usage "
                   "or [DONE] (a stream cut short by a proxy or a dying server)")
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    server = Server(args)
    loop = asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)
    if isinstance(selector, StampingSelector):
        server.clock = lambda: selector.woke
    srv = await loop.create_server(lambda: Handler(server), args.host, args.port, backlog=1024)
    port = srv.sockets[0].getsockname()[1]
    sys.stdout.write(json.dumps({"port": port}) + "\n")
    sys.stdout.flush()
    async with srv:
        await srv.serve_forever()


async def serve_shared(args: argparse.Namespace, port: int, report_fd: int) -> None:
    """One of --procs processes: the shared port (SO_REUSEPORT) and a private control port."""
    import os
    import socket

    server = Server(args)
    loop = asyncio.get_running_loop()
    selector = getattr(loop, "_selector", None)
    if isinstance(selector, StampingSelector):
        server.clock = lambda: selector.woke
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say TCP (Nagle would
    # hold a small chunk behind an unacked one until the client's delayed ACK, ~40 ms)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((args.host, port))
    shared = await loop.create_server(lambda: Handler(server), sock=sock, backlog=1024)
    control = await loop.create_server(lambda: Handler(server), args.host, 0)
    os.write(report_fd, b"%d\n" % control.sockets[0].getsockname()[1])
    os.close(report_fd)
    async with shared, control:
        await asyncio.gather(shared.serve_forever(), control.serve_forever())


def serve_many(args: argparse.Namespace) -> None:
    import os
    import signal
    import socket

    hold = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # the port, until all listen
    hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    hold.bind((args.host, args.port))
    port = hold.getsockname()[1]
    r, w = os.pipe()
    kids = []
    for _ in range(args.procs):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            hold.close()
            loop = asyncio.SelectorEventLoop(StampingSelector())
            try:
                loop.run_until_complete(serve_shared(args, port, w))
            except KeyboardInterrupt:
                pass
            finally:
                os._exit(0)
        kids.append(pid)
    os.close(w)
    with os.fdopen(r) as fh:
        controls = [int(fh.readline()) for _ in kids]
    hold.close()
    sys.stdout.write(json.dumps({"port": port, "control_ports": controls}) + "\n")
    sys.stdout.flush()

    def stop(*_: object) -> None:
        for pid in kids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        signal.pause()


def main() -> None:
    args = parse_args()
    if args.procs > 1:
        serve_many(args)
        return
    loop = asyncio.SelectorEventLoop(StampingSelector())
    try:
        loop.run_until_complete(serve(args))
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()


if __name__ == "__main__":
    main()
