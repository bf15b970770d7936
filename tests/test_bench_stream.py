"""The agent's streaming client and SSE parser against a scripted server on 127.0.0.1.

Every malformed-stream case gives a classified error and never raises.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from plugins.bench_server import ScriptServer, delta, http_json, normal_stream, sse, usage
from plugins.sim import free_port

from dsv4tui.agent.bench.openai_stream import (
    Endpoint,
    RawResponse,
    StreamResult,
    _Pending,
    build_body,
    make_client,
    parse_stream,
)

TRANSPORTS = ["raw"]  # the one transport (httpx left the product: issue 24)
PATH = "/v1/chat/completions"


async def ask(srv: ScriptServer | str, transport: str, timeout: float = 5.0, stall: float = 5.0,
              n: int = 1) -> list[StreamResult]:
    url = srv if isinstance(srv, str) else srv.url
    client = make_client(transport, Endpoint(url), pool_size=2)
    body = build_body("chat", "m", "hi", 8, 0.0, ignore_eos=True)
    try:
        return [parse_stream(await client.request(PATH, body, timeout, stall)) for _ in range(n)]
    finally:
        await client.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_sglang_stream_role_reasoning_usage(script_server: ScriptServer, transport: str
                                                  ) -> None:
    script_server.responses = [_sse_with_gaps(
        delta(role="assistant", content=""),          # role-only: not a token
        0.05, delta(reasoning="think"),                  # reasoning: TTFT, not TTFAT
        0.05, delta("391"), delta(" "), delta(finish="stop"),
        usage(7),                                        # usage-only last chunk, choices []
    )]
    [res] = await ask(script_server, transport)
    assert res.ok, res.error
    assert res.answer == "391 " and res.reasoning == "think"
    assert res.output_tokens == 7 and res.token_source == "usage"
    assert len(res.token_times) == 3
    ttft = res.token_times[0] - res.t_send
    assert 0.04 < ttft < 1.0
    assert res.first_answer_t is not None and res.first_answer_t - res.token_times[0] >= 0.04
    assert res.done_marker and res.finish_reason == "stop"
    sent = script_server.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["ignore_eos"] is True and sent["messages"][0]["content"] == "hi"


def _sse_with_gaps(*events: Any, **kw: Any) -> list[Any]:
    """sse() with a float in the event list meaning a pause."""
    steps: list[Any] = []
    parts = sse(*[e for e in events if not isinstance(e, float)], **kw)
    steps.append(parts[0])
    body = iter(parts[1:])
    for e in events:
        if isinstance(e, float):
            steps.append(e)
        else:
            steps.append(next(body))
    steps.extend(body)
    return steps


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_stream_without_done_and_without_usage(script_server: ScriptServer,
                                                     transport: str) -> None:
    script_server.responses = [sse(delta("a"), delta("b"), delta(finish="length"), done=False)]
    [res] = await ask(script_server, transport)
    assert res.ok, res.error
    assert not res.done_marker
    assert res.output_tokens == 2 and res.token_source == "chunks"


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_clean_end_before_the_answer_finished_is_truncated(
        script_server: ScriptServer, transport: str, framing: str) -> None:
    """The body ends as framed (last chunk, full length, or a close-delimited EOF) but the
    server never said it was done: no finish_reason, no usage, no [DONE]. Counted a success
    before (the sweep reported 16/16 done from 4 of 16 tokens)."""
    script_server.responses = [sse(delta(role="assistant", content=""),
                                   *[delta(f"t{i} ") for i in range(4)], done=False,
                                   framing=framing)]
    [res] = await ask(script_server, transport)
    assert res.error_kind == "truncated", res.error
    assert "after 4 token chunks" in (res.error or "") and res.answer == "t0 t1 t2 t3 "


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_usage_chunk_without_done_is_a_clean_finish(script_server: ScriptServer,
                                                          transport: str) -> None:
    """transformers serve (the GPU test server) ends after the usage chunk, with no [DONE]."""
    script_server.responses = [sse(delta(role="assistant", content=""), delta("a"), delta("b"),
                                   usage(2), done=False)]
    [res] = await ask(script_server, transport)
    assert res.ok, res.error
    assert res.output_tokens == 2 and res.token_source == "usage" and not res.done_marker


async def test_continuous_usage_is_not_an_end(script_server: ScriptServer) -> None:
    """Usage on every chunk (vLLM's continuous_usage_stats) says nothing about the end."""
    chunks = []
    for i in range(3):
        ev = delta(f"t{i}")
        ev["usage"] = {"prompt_tokens": 5, "completion_tokens": i + 1, "total_tokens": 6 + i}
        chunks.append(ev)
    script_server.responses = [sse(*chunks, done=False)]
    [res] = await ask(script_server, "raw")
    assert res.error_kind == "truncated"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_keepalive_comments_and_other_fields_are_ignored(script_server: ScriptServer,
                                                               transport: str) -> None:
    script_server.responses = [sse(": keep-alive", "", "event: message", "id: 3", "retry: 10",
                                   delta("x"), ": ping", "", delta("y"), usage(2))]
    [res] = await ask(script_server, transport)
    assert res.ok, res.error
    assert res.answer == "xy" and res.output_tokens == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_error_object_mid_stream(script_server: ScriptServer, transport: str) -> None:
    script_server.responses = [sse(delta("a"), {"error": {"message": "out of KV cache",
                                                          "type": "server"}}, done=False)]
    [res] = await ask(script_server, transport)
    assert res.error_kind == "stream_error" and "KV cache" in (res.error or "")
    script_server.responses = [sse({"object": "error", "message": "bad request"})]
    [res] = await ask(script_server, transport)
    assert res.error_kind == "stream_error" and res.error == "bad request"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_non_json_data_line(script_server: ScriptServer, transport: str) -> None:
    script_server.responses = [sse(delta("a"), "data: {not json", "", delta("b"))]
    [res] = await ask(script_server, transport)
    assert res.error_kind == "bad_json" and res.bad_lines == 1
    assert res.answer == "ab"  # what came is still kept


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_http_500_and_429(script_server: ScriptServer, transport: str) -> None:
    script_server.responses = [http_json(500, {"error": {"message": "boom"}}),
                               [b"HTTP/1.1 429 Too Many\r\nContent-Length: 4\r\n\r\nslow"]]
    first, second = await ask(script_server, transport, n=2)
    assert first.error_kind == "http_500" and first.error == "boom"
    assert second.error_kind == "http_429" and second.error == "slow"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_connection_refused(transport: str) -> None:
    [res] = await ask(f"http://127.0.0.1:{free_port()}", transport)
    assert res.error_kind == "connect" and "cannot connect" in (res.error or "")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_stall_timeout(script_server: ScriptServer, transport: str) -> None:
    steps = normal_stream(2)
    script_server.responses = [[steps[0], steps[1], "hang"]]
    [res] = await ask(script_server, transport, stall=0.3)
    assert res.error_kind == "stall"
    assert 0.25 < res.t_end - res.t_send < 3.0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_total_timeout_while_bytes_keep_coming(script_server: ScriptServer,
                                                     transport: str) -> None:
    script_server.responses = [normal_stream(40, gap=0.05)]
    [res] = await ask(script_server, transport, timeout=0.4, stall=5.0)
    assert res.error_kind == "timeout"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_connection_closed_mid_stream(script_server: ScriptServer, transport: str) -> None:
    steps = normal_stream(3)
    script_server.responses = [[*steps[:3], "close"], normal_stream(3)]
    first, second = await ask(script_server, transport, n=2)
    assert first.error_kind == "disconnected", first.error
    assert second.ok, second.error  # the next request gets a fresh connection


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_empty_and_not_streaming(script_server: ScriptServer, transport: str) -> None:
    script_server.responses = [sse(delta(role="assistant", content="")),
                               http_json(200, {"choices": [{"message": {"content": "391"}}]})]
    empty, plain = await ask(script_server, transport, n=2)
    assert empty.error_kind == "empty"
    assert plain.error_kind == "not_streaming"


@pytest.mark.parametrize("framing", ["length", "close"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_other_body_framings(script_server: ScriptServer, transport: str,
                                   framing: str) -> None:
    script_server.responses = [sse(delta("a"), delta("b"), usage(2), framing=framing)]
    [res] = await ask(script_server, transport)
    assert res.ok, res.error
    assert res.answer == "ab" and res.output_tokens == 2


async def test_raw_keepalive_reuses_one_connection_and_retries_stale(
        script_server: ScriptServer) -> None:
    script_server.responses = [normal_stream(2)]
    results = await ask(script_server, "raw", n=3)
    assert all(r.ok for r in results)
    assert script_server.connections == 1
    # the server drops idle connections: the next request retries on a new one
    script_server.close_idle_after = 0.1
    client = make_client("raw", Endpoint(script_server.url))
    body = build_body("chat", "m", "hi", 8, 0.0)
    try:
        await client.warm(1)
        await asyncio.sleep(0.3)
        res = parse_stream(await client.request(PATH, body, 5.0, 5.0))
    finally:
        await client.aclose()
    assert res.ok, res.error


async def test_raw_warm_opens_c_connections(script_server: ScriptServer) -> None:
    client = make_client("raw", Endpoint(script_server.url))
    try:
        await client.warm(4)
        await asyncio.sleep(0.1)
        assert script_server.connections == 4
        await client.warm(4)  # already there
        await asyncio.sleep(0.05)
        assert script_server.connections == 4
    finally:
        await client.aclose()


def _feed(pieces: list[bytes]) -> RawResponse:
    loop = asyncio.new_event_loop()
    try:
        raw = RawResponse(0.0)
        pending = _Pending(raw, loop.create_future())
        for i, p in enumerate(pieces):
            pending.feed(float(i), p)
        return raw
    finally:
        loop.close()


def test_raw_framing_byte_by_byte_equals_whole() -> None:
    wire = b"".join(s for s in normal_stream(4) if isinstance(s, bytes))
    whole = parse_stream(_feed([wire]))
    split = parse_stream(_feed([wire[i:i + 1] for i in range(len(wire))]))
    assert whole.ok and split.ok
    assert split.answer == whole.answer == "t0 t1 t2 t3 "
    assert split.output_tokens == whole.output_tokens == 4
    assert split.done_marker


def test_raw_framing_rejects_garbage() -> None:
    raw = _feed([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx"])
    assert raw.error_kind == "bad_http"
    raw = _feed([b"SSH-2.0-OpenSSH\r\n\r\n"])
    assert raw.error_kind == "bad_http"


def test_completions_text_chunks() -> None:
    events = [{"choices": [{"index": 0, "text": "39", "finish_reason": None}]},
              {"choices": [{"index": 0, "text": "1", "finish_reason": "stop"}]}]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    raw = RawResponse(0.0)
    raw.status, raw.headers, raw.complete = 200, {"content-type": "text/event-stream"}, True
    raw.pieces = [(1.0, body)]
    res = parse_stream(raw)
    assert res.ok and res.answer == "391" and res.output_tokens == 2


def test_endpoint_forms() -> None:
    assert Endpoint("http://h:8000/v1").base == "http://h:8000"
    assert Endpoint("127.0.0.1:30000").path("/v1/models") == "/v1/models"
    assert Endpoint("https://api.example.com/proxy/v1/").path("/v1/x") == "/proxy/v1/x"
    with pytest.raises(ValueError):
        Endpoint("ftp://h")


def test_stamping_loop_times_reads_at_poll_return(script_server: ScriptServer) -> None:
    from dsv4tui.agent.bench import openai_stream

    script_server.responses = [normal_stream(3)]

    async def go() -> tuple[StreamResult, bool]:
        client = make_client("raw", Endpoint(script_server.url))
        try:
            await client.warm(1)
            stamped = client._idle[0].clock is not openai_stream.perf
            raw = await client.request(PATH, build_body("chat", "m", "hi", 3, 0.0), 5.0, 5.0)
            return parse_stream(raw), stamped
        finally:
            await client.aclose()

    res, stamped = openai_stream.run(go())
    assert stamped and res.ok and res.output_tokens == 3
    assert all(res.t_send <= t <= res.t_end for t in res.token_times)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_agents_connections_never_wait_for_nagle(script_server: ScriptServer,
                                                           transport: str) -> None:
    """A request's headers and body may go as two writes; with Nagle on, the body would
    wait for the server's delayed ACK of the headers (~40 ms) on a kept-alive connection.
    The transport's sockets have TCP_NODELAY."""
    import socket

    script_server.responses = [normal_stream(2), normal_stream(2)]
    client = make_client(transport, Endpoint(script_server.url), pool_size=2)
    body = build_body("chat", "m", "hi", 2, 0.0)
    try:
        for _ in range(2):
            assert parse_stream(await client.request(PATH, body, 5.0, 5.0)).ok
        socks = [c.transport.get_extra_info("socket") for c in client._all]
        assert socks
        assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in socks)
    finally:
        await client.aclose()


@pytest.mark.e2e
def test_the_httpx_transport_is_gone_from_the_agent() -> None:
    """One HTTP transport in the product: asking for httpx is refused, by the client factory and
    by the agent's command line (one usage error, exit 2)."""
    import subprocess
    import sys

    with pytest.raises(ValueError, match="unknown transport 'httpx'"):
        make_client("httpx", Endpoint("http://127.0.0.1:9"))
    proc = subprocess.run([sys.executable, "-m", "dsv4tui.agent", "bench", "sweep", "--url",
                           "http://127.0.0.1:9", "--transport", "httpx"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    out = proc.stdout + proc.stderr  # the agent speaks JSON lines: a usage error event
    assert "invalid choice: 'httpx'" in out and "Traceback" not in out
