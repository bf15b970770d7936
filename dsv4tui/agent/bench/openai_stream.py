"""Streaming OpenAI client for the agent: one transport, one SSE parser.

How a request is measured (docs/metrics.md):

- The hot path only records ``(time.perf_counter(), bytes)`` for every read of the response
  body, the moment the bytes arrive. Nothing is parsed while other streams are running
  except the HTTP framing; SSE lines and JSON are parsed after the response has ended
  (:func:`parse_stream`), so parsing cost never shifts a timestamp.
- Connections are HTTP/1.1 keep-alive, opened before a level starts (:meth:`warm`) and
  reused; the pool is as large as the concurrency.

The transport (``raw``): an asyncio ``Protocol`` per connection with an incremental HTTP/1.1
response parser (chunked, content-length or close-delimited bodies). About 5 µs of Python
per streamed chunk; an httpx client measured +1,300 % TTFT error at C=64, so it is no longer
in the product (benchmarks/bench_accuracy.py keeps a plain httpx client for comparison).
httpx stays for the plain GETs (:func:`get_json`).

Python >= 3.9, stdlib + httpx only.
"""

from __future__ import annotations

import asyncio
import json
import selectors
import ssl
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

perf = time.perf_counter

TRANSPORTS = ("raw",)  # the httpx comparison lives in benchmarks/bench_accuracy.py (plain)
_MAX_HEAD = 64 * 1024
_ERROR_BODY = 2000
# Usage counts a server can mean: an int 0..MAX_USAGE_TOKENS, and completion_tokens at most
# USAGE_SLACK x max_tokens (+16) of what was asked. Anything else is a ``bad_usage`` error.
MAX_USAGE_TOKENS = 10_000_000
USAGE_SLACK = 2


class Endpoint:
    """The server's base URL; ``http://h:p``, ``http://h:p/v1`` and a path prefix all work."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http(s) URL: %r" % url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        self.prefix = path
        default_port = (self.scheme == "https" and self.port == 443) or self.port == 80
        host = "[%s]" % self.host if ":" in self.host else self.host
        self.netloc = host if default_port else "%s:%d" % (host, self.port)
        self.base = "%s://%s%s" % (self.scheme, self.netloc, self.prefix)

    def path(self, api: str) -> str:
        return self.prefix + api


class RawResponse:
    """What a transport hands back: status, headers and timestamped body pieces."""

    __slots__ = (
        "complete",
        "error",
        "error_kind",
        "headers",
        "pieces",
        "status",
        "t_end",
        "t_send",
    )

    def __init__(self, t_send: float) -> None:
        self.status = 0
        self.headers: Dict[str, str] = {}
        self.pieces: List[Tuple[float, bytes]] = []
        self.t_send = t_send
        self.t_end = t_send
        self.error_kind: Optional[str] = None
        self.error: Optional[str] = None
        self.complete = False  # the HTTP body ended as framed (not cut off)


OnSend = Callable[[RawResponse], None]


class StreamResult:
    """One parsed streaming response (times are perf_counter seconds)."""

    def __init__(self, raw: RawResponse) -> None:
        self.status = raw.status
        self.t_send = raw.t_send
        self.t_end = raw.t_end
        self.error_kind = raw.error_kind
        self.error = raw.error
        self.token_times: List[float] = []  # chunks carrying content or reasoning text
        self.first_answer_t: Optional[float] = None
        self.answer = ""
        self.reasoning = ""
        self.completion_tokens: Optional[int] = None
        self.prompt_tokens: Optional[int] = None
        self.finish_reason: Optional[str] = None
        self.done_marker = False
        self.usage_chunk = False  # the usage-only chunk (``choices: []``) that ends a stream
        self.bad_lines = 0
        self.bad_usage: Optional[str] = None  # a usage count out of range, in words

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def output_tokens(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.token_times)

    @property
    def token_source(self) -> str:
        return "usage" if self.completion_tokens is not None else "chunks"

    def fail(self, kind: str, message: str) -> None:
        if self.error_kind is None:
            self.error_kind, self.error = kind, message


# --- request bodies ----------------------------------------------------------------------


def chat_path(endpoint: str) -> str:
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


def build_body(endpoint: str, model: str, prompt: str, max_tokens: int, temperature: float,
               ignore_eos: bool = False) -> bytes:
    body: Dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "temperature": temperature, "stream": True,
                            "stream_options": {"include_usage": True}}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body, separators=(",", ":")).encode()


# --- parsing (after the stream ended) ----------------------------------------------------


def _error_message(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)[:_ERROR_BODY]
        return str(err)[:_ERROR_BODY]
    return str(obj)[:_ERROR_BODY]


def _body(raw: RawResponse) -> bytes:
    return b"".join(p for _, p in raw.pieces)


def parse_stream(raw: RawResponse, max_tokens: Optional[int] = None) -> StreamResult:
    """Turn a finished response into a StreamResult; never raises on bad input.
    ``max_tokens``: what the request asked for (a usage far above it is ``bad_usage``)."""
    res = StreamResult(raw)
    for _ in _parse_steps(res, raw, 1 << 30, max_tokens):
        pass
    return res


async def parse_stream_async(raw: RawResponse, every: int = 16,
                             max_tokens: Optional[int] = None) -> StreamResult:
    """:func:`parse_stream` that yields to the event loop every ``every`` body pieces, so
    parsing a finished response never holds up the reads of the streams still running."""
    res = StreamResult(raw)
    for _ in _parse_steps(res, raw, every, max_tokens):
        await asyncio.sleep(0)
    return res


def usage_count(value: Any) -> Tuple[Optional[int], Optional[str]]:
    """A usage token count as a server sent it -> (count, None), or (None, why it cannot be
    meant): negative, NaN/Inf, fractional, not a number, over MAX_USAGE_TOKENS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, "%r is not a number" % (value,)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None, "%r is not a finite number" % value
        if value != int(value):
            return None, "%r is not a whole number" % value
        value = int(value)
    if value < 0:
        return None, "%d is negative" % value
    if value > MAX_USAGE_TOKENS:
        return None, "%d is over %d" % (value, MAX_USAGE_TOKENS)
    return value, None


def _check_usage(res: StreamResult, max_tokens: Optional[int]) -> None:
    """A usage the server cannot mean fails the request (``bad_usage``): its number is never
    kept (the request's output_tokens fall back to the chunks counted)."""
    ct = res.completion_tokens
    if res.bad_usage is None and ct is not None and max_tokens is not None \
            and ct > USAGE_SLACK * max_tokens + 16:
        res.bad_usage = ("completion_tokens %d for a request of max_tokens %d"
                         % (ct, max_tokens))
    if res.bad_usage is not None:
        res.completion_tokens = None
        res.prompt_tokens = None
        res.fail("bad_usage", "the server reported an impossible usage: " + res.bad_usage)


def _parse_steps(res: StreamResult, raw: RawResponse, every: int,
                 max_tokens: Optional[int] = None) -> Iterator[None]:
    if raw.status >= 400:
        text = _body(raw)[:_ERROR_BODY].decode("utf-8", "replace")
        try:
            text = _error_message(json.loads(text))
        except ValueError:
            pass
        res.error_kind, res.error = "http_%d" % raw.status, text.strip() or "HTTP %d" % raw.status
        return
    ctype = raw.headers.get("content-type", "")
    if raw.status and "json" in ctype and "event-stream" not in ctype:
        _parse_json_reply(res, _body(raw))
        return
    yield from _parse_sse(res, raw.pieces, every)
    _check_usage(res, max_tokens)
    if res.ok and raw.status:
        if not res.token_times and res.completion_tokens is None:
            res.fail("empty", "the stream ended without any token")
        elif not (res.done_marker or res.finish_reason or res.usage_chunk):
            # A body that ended as framed is not a finished answer: a proxy or a dying server
            # can close a stream cleanly mid-answer. The server says it is done with [DONE]
            # (SGLang, vLLM), a finish_reason, or the final usage chunk (transformers serve
            # ends there, without [DONE]).
            res.fail("truncated", "the stream ended after %d token chunks without a "
                     "finish_reason, usage or [DONE]" % len(res.token_times))


def _parse_json_reply(res: StreamResult, body: bytes) -> None:
    try:
        obj = json.loads(body)
    except ValueError:
        res.fail("bad_json", "a non-JSON, non-SSE body: %r" % body[:200])
        return
    if isinstance(obj, dict) and ("error" in obj or obj.get("object") == "error"):
        res.fail("stream_error", _error_message(obj))
    else:
        res.fail("not_streaming", "the server answered with one JSON body, not an SSE stream")


def _parse_sse(res: StreamResult, pieces: List[Tuple[float, bytes]], every: int
               ) -> Iterator[None]:
    rest = b""
    data: List[bytes] = []
    t_event = 0.0
    t = 0.0
    for k, (t, chunk) in enumerate(pieces):
        if k and not k % every:
            yield
        lines = (rest + chunk if rest else chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    _on_event(res, b"\n".join(data), t_event)
                    data = []
            elif line.startswith(b"data:"):
                if not data:
                    t_event = t
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
            # comments (": keep-alive"), event:, id:, retry: and unknown fields are ignored
    if rest.strip():
        line = rest.rstrip(b"\r")
        if line.startswith(b"data:"):
            if not data:
                t_event = t
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        _on_event(res, b"\n".join(data), t_event)


def _on_event(res: StreamResult, payload: bytes, t: float) -> None:
    if payload.strip() == b"[DONE]":
        res.done_marker = True
        return
    try:
        obj = json.loads(payload)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        res.bad_lines += 1
        res.fail("bad_json", "a data line that is not a JSON object: %r" % payload[:200])
        return
    if "error" in obj or obj.get("object") == "error":
        res.fail("stream_error", _error_message(obj))
        return
    usage = obj.get("usage")
    choices = obj.get("choices")
    if isinstance(usage, dict):
        for key in ("completion_tokens", "prompt_tokens"):
            value = usage.get(key)
            if value is None:
                continue
            count, why = usage_count(value)
            if why is not None:
                if res.bad_usage is None:
                    res.bad_usage = "%s %s" % (key, why)
                continue
            setattr(res, key, count)
        if not choices:  # include_usage's last chunk (continuous usage rides on choices)
            res.usage_chunk = True
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return
    choice = choices[0]
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    else:
        content, reasoning = choice.get("text"), None
    if content and isinstance(content, str):
        if res.first_answer_t is None:
            res.first_answer_t = t
        res.answer += content
    if reasoning and isinstance(reasoning, str):
        res.reasoning += reasoning
    if (content and isinstance(content, str)) or (reasoning and isinstance(reasoning, str)):
        res.token_times.append(t)
    finish = choice.get("finish_reason")
    if finish:
        res.finish_reason = str(finish)


# --- the event loop: when did the bytes arrive? ------------------------------------------


class StampingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Notes when each poll returns. Every socket that poll reports already had its bytes
    then, so that moment is their arrival time, however long the loop then takes to work
    through a burst of ready sockets one by one."""

    def __init__(self) -> None:
        super().__init__()
        self.woke = perf()

    def select(self, timeout: Optional[float] = None) -> Any:
        ready = super().select(timeout)
        self.woke = perf()
        return ready


def arrival_clock() -> Any:
    """The clock for data callbacks on the running loop: the poll's wake time when the loop
    runs on a StampingSelector (see :func:`run`), else ``perf_counter``."""
    selector = getattr(asyncio.get_running_loop(), "_selector", None)
    if isinstance(selector, StampingSelector):
        return lambda: selector.woke
    return perf


def run(main: Any) -> Any:
    """``asyncio.run`` (Python >= 3.9) on a loop with a StampingSelector."""
    loop = asyncio.SelectorEventLoop(StampingSelector())
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


# --- raw asyncio transport ---------------------------------------------------------------


class _Pending:
    """One response being received on a raw connection (incremental HTTP/1.1 framing)."""

    __slots__ = (
        "buf",
        "fut",
        "got_bytes",
        "keep_alive",
        "last_t",
        "mode",
        "need",
        "raw",
        "timers",
    )

    def __init__(self, raw: RawResponse, fut: "asyncio.Future[None]") -> None:
        self.raw = raw
        self.fut = fut
        self.buf = b""
        self.mode = 0  # 0 head, 1 chunked, 2 content-length, 3 until EOF, 4 done
        self.need = 0  # chunked: >0 data bytes left, 0 size line, -2 CRLF, -3 trailer
        self.keep_alive = True
        self.got_bytes = False
        self.timers: List[asyncio.TimerHandle] = []
        self.last_t = raw.t_send

    def feed(self, t: float, data: bytes) -> None:
        self.last_t = t
        self.got_bytes = True
        mode = self.mode
        if mode == 1:
            self._chunked(t, data)
        elif mode == 2:
            self._length(t, data)
        elif mode == 3:
            self.raw.pieces.append((t, data))
        elif mode == 0:
            self._head(t, data)

    def _head(self, t: float, data: bytes) -> None:
        buf = self.buf + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                self.finish(t, "bad_http", "response headers over 64 KiB")
            self.buf = buf
            return
        lines = buf[:end].decode("latin-1").split("\r\n")
        rest = buf[end + 4:]
        self.buf = b""
        try:
            version, code = lines[0].split(" ", 2)[:2]
            status = int(code)
        except ValueError:
            self.finish(t, "bad_http", "not an HTTP response: %r" % lines[0][:80])
            return
        if 100 <= status < 200:  # interim response: the real one follows
            if rest:
                self._head(t, rest)
            return
        headers = self.raw.headers
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.raw.status = status
        conn = headers.get("connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in conn
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.mode = 1
        elif "content-length" in headers:
            try:
                self.need = int(headers["content-length"])
            except ValueError:
                self.finish(t, "bad_http", "bad Content-Length")
                return
            self.mode = 2
            if self.need == 0:
                self.finish(t)
                return
        elif status in (204, 304):
            self.finish(t)
            return
        else:
            self.mode = 3
            self.keep_alive = False
        if rest:
            self.feed(t, rest)

    def _length(self, t: float, data: bytes) -> None:
        if len(data) >= self.need:
            data = data[:self.need]
            self.need = 0
            self.raw.pieces.append((t, data))
            self.finish(t)
        else:
            self.need -= len(data)
            self.raw.pieces.append((t, data))

    def _chunked(self, t: float, data: bytes) -> None:
        if self.buf:
            data = self.buf + data
            self.buf = b""
        pos, n, pieces = 0, len(data), self.raw.pieces
        while pos < n:
            need = self.need
            if need > 0:
                end = pos + need
                if end <= n:
                    pieces.append((t, data[pos:end]))
                    pos, self.need = end, -2
                else:
                    pieces.append((t, data[pos:]))
                    self.need = need - (n - pos)
                    return
            elif need == -2:
                if n - pos < 2:
                    self.buf = data[pos:]
                    return
                if data[pos:pos + 2] != b"\r\n":
                    self.finish(t, "bad_http", "chunked body: missing CRLF after a chunk")
                    return
                pos, self.need = pos + 2, 0
            elif need == 0:
                i = data.find(b"\r\n", pos)
                if i < 0:
                    self.buf = data[pos:]
                    if len(self.buf) > 1024:
                        self.finish(t, "bad_http", "chunked body: chunk-size line too long")
                    return
                try:
                    size = int(data[pos:i].split(b";", 1)[0], 16)
                except ValueError:
                    self.finish(t, "bad_http", "chunked body: bad chunk size %r" % data[pos:i][:20])
                    return
                pos = i + 2
                self.need = size if size else -3
            else:  # -3: after the last chunk, optional trailers, then CRLF
                tail = data[pos:]
                if tail.startswith(b"\r\n") or b"\r\n\r\n" in tail:
                    self.finish(t)
                else:
                    self.buf = tail
                return

    def on_eof(self, exc: Optional[BaseException]) -> None:
        t = perf()
        if self.mode == 3:
            self.finish(t)
        elif not self.got_bytes:
            self.finish(t, "disconnected", "the server closed the connection before answering")
        else:
            why = "the connection closed mid-response"
            self.finish(t, "disconnected", why + (": %s" % exc if exc else ""))

    def finish(self, t: float, kind: Optional[str] = None, message: str = "") -> None:
        if self.mode == 4:
            return
        self.mode = 4
        raw = self.raw
        raw.t_end = t
        if kind is None:
            raw.complete = True
        else:
            raw.error_kind, raw.error = kind, message
            self.keep_alive = False
        for timer in self.timers:
            timer.cancel()
        if not self.fut.done():
            self.fut.set_result(None)


class _Conn(asyncio.Protocol):
    def __init__(self, clock: Any = perf) -> None:
        self.clock = clock
        self.transport: Optional[asyncio.Transport] = None
        self.closed = False
        self.pending: Optional[_Pending] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        t = self.clock()
        p = self.pending
        if p is None:  # bytes nobody asked for: this connection is unusable
            self.close()
            return
        p.feed(t, data)

    def eof_received(self) -> bool:
        self.closed = True
        if self.pending is not None:
            self.pending.on_eof(None)
        return False

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.closed = True
        if self.pending is not None:
            self.pending.on_eof(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class RawClient:
    """Keep-alive HTTP/1.1 streaming client on raw asyncio sockets."""

    def __init__(self, endpoint: Endpoint, api_key: Optional[str] = None,
                 connect_timeout: float = 10.0) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self._idle: List[_Conn] = []
        self._all: List[_Conn] = []
        self._ssl: Optional[ssl.SSLContext] = (ssl.create_default_context()
                                               if endpoint.scheme == "https" else None)
        auth = "Authorization: Bearer %s\r\n" % api_key if api_key else ""
        self._head = ("POST %%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: dsv4tui-agent\r\n"
                      "Accept: text/event-stream\r\nContent-Type: application/json\r\n%s"
                      "Content-Length: %%d\r\n\r\n" % (endpoint.netloc, auth))

    def request_bytes(self, path: str, body: bytes) -> bytes:
        return (self._head % (path, len(body))).encode("latin-1") + body

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        clock = arrival_clock()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: _Conn(clock), self.endpoint.host, self.endpoint.port,
                                   ssl=self._ssl),
            self.connect_timeout)
        self._all.append(conn)
        return conn

    async def warm(self, n: int) -> None:
        """Open connections until ``n`` are idle (connection errors propagate)."""
        self._idle = [c for c in self._idle if not c.closed]
        missing = n - len(self._idle)
        if missing > 0:
            self._idle.extend(await asyncio.gather(*(self._connect() for _ in range(missing))))

    async def _acquire(self) -> _Conn:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await self._connect()

    async def request(self, path: str, body: bytes, timeout: float, stall: float,
                      data: Optional[bytes] = None, on_send: Optional[OnSend] = None
                      ) -> RawResponse:
        """POST and receive one response. ``data``: prebuilt request bytes (hot path);
        ``on_send``: called with the response being received, as it is sent (a caller that
        watches the streams in flight, e.g. how many have their first bytes)."""
        data = data or self.request_bytes(path, body)
        for attempt in (0, 1):
            try:
                conn = await self._acquire()
            except (OSError, asyncio.TimeoutError) as exc:
                raw = RawResponse(perf())
                raw.error_kind = "connect"
                raw.error = "cannot connect to %s: %s" % (self.endpoint.base, _why(exc))
                return raw
            raw, pending = await self._exchange(conn, data, timeout, stall, on_send)
            # A kept-alive connection the server closed just now: retry once on a new one.
            if attempt == 0 and raw.error_kind == "disconnected" and not pending.got_bytes:
                continue
            return raw
        return raw

    async def _exchange(self, conn: _Conn, data: bytes, timeout: float, stall: float,
                        on_send: Optional[OnSend] = None) -> Tuple[RawResponse, _Pending]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        raw = RawResponse(perf())
        if on_send is not None:
            on_send(raw)
        pending = _Pending(raw, fut)
        conn.pending = pending

        def on_timeout() -> None:
            pending.finish(perf(), "timeout", "no complete answer after %.1f s" % timeout)

        def check_stall() -> None:
            idle = perf() - pending.last_t
            if idle >= stall:
                pending.finish(perf(), "stall", "no bytes for %.1f s" % stall)
            elif pending.mode != 4:
                pending.timers.append(loop.call_later(stall - idle, check_stall))

        pending.timers = [loop.call_later(timeout, on_timeout), loop.call_later(stall, check_stall)]
        assert conn.transport is not None
        raw.t_send = perf()
        pending.last_t = raw.t_send
        conn.transport.write(data)
        try:
            await fut
        finally:
            for timer in pending.timers:
                timer.cancel()
            conn.pending = None
            if not fut.done():  # cancelled: the connection is mid-response
                conn.close()
        if pending.keep_alive and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()
        return raw, pending

    async def aclose(self) -> None:
        for conn in self._all:
            conn.close()
        self._all, self._idle = [], []


def _why(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def make_client(transport: str, endpoint: Endpoint, api_key: Optional[str] = None,
                pool_size: int = 100, connect_timeout: float = 10.0) -> Any:
    if transport not in TRANSPORTS:
        raise ValueError("unknown transport %r (only %s)" % (transport, ", ".join(TRANSPORTS)))
    return RawClient(endpoint, api_key, connect_timeout)


async def get_json(endpoint: Endpoint, api: str, api_key: Optional[str] = None,
                   timeout: float = 10.0) -> Any:
    """A plain GET (model discovery, server info) through httpx; raises on any failure."""
    import httpx

    headers = {"Authorization": "Bearer " + api_key} if api_key else {}
    async with httpx.AsyncClient(timeout=timeout, headers=headers, trust_env=False) as client:
        resp = await client.get(endpoint.base + api)
        resp.raise_for_status()
        return resp.json()
