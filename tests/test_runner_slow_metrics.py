"""A slow /metrics and the campaign runner's server-side view of a level.

The runner reads the server's /metrics when a level starts (after its warm-up) and when it
ends (agent/campaign/runner.py, RunSink), from the sweep's own loop. Both reads come when no
request of the sweep is in flight, and each must be answered before the next traffic: the
one at the start before the level's first request, or the server's counters would take in
the level's first finishes; the one at the end before the next level's idle probe, or they
would take in the probe. So a /metrics that takes 2 s makes the sweep wait, and changes no
timestamp of a request.

The server here streams at a known pace (TTFT 50 ms, a token every 20 ms) and answers
/metrics (SGLang's names, counters that move as requests finish) after 2 s; the sweep runs
the real way (CLI -> agent -> detached runner -> journal -> store).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator

import pytest

from dsv4tui.core.store import RunStore
from dsv4tui.main import main

TTFT_S, ITL_S, METRICS_DELAY_S = 0.05, 0.02, 2.0


class PacedServer:
    """OpenAI-style streaming at a fixed pace on loopback, and a /metrics that answers late."""

    def __init__(self) -> None:
        self.running = self.tokens = 0
        self.e2e: list[float] = []
        self.metrics_reads = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def metrics(self) -> str:
        lines = ["# TYPE sglang:num_running_reqs gauge",
                 f"sglang:num_running_reqs {self.running}",
                 "# TYPE sglang:num_queue_reqs gauge", "sglang:num_queue_reqs 0",
                 "# TYPE sglang:generation_tokens counter",
                 f"sglang:generation_tokens_total {self.tokens}",
                 "# TYPE sglang:e2e_request_latency_seconds histogram"]
        for le in ("0.1", "0.5", "1", "5", "+Inf"):
            n = sum(1 for x in self.e2e if le == "+Inf" or x <= float(le))
            lines.append(f'sglang:e2e_request_latency_seconds_bucket{{le="{le}"}} {n}')
        lines += [f"sglang:e2e_request_latency_seconds_sum {sum(self.e2e)}",
                  f"sglang:e2e_request_latency_seconds_count {len(self.e2e)}"]
        return "\n".join(lines) + "\n"

    async def _stream(self, writer: asyncio.StreamWriter, tokens: int) -> None:
        def chunk(obj: object) -> bytes:
            data = b"data: " + json.dumps(obj).encode() + b"\n\n"
            return b"%x\r\n%s\r\n" % (len(data), data)

        def delta(d: dict[str, str], finish: str | None = None) -> dict[str, object]:
            return {"id": "x", "object": "chat.completion.chunk", "model": "m",
                    "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}

        t0 = time.monotonic()
        self.running += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        await asyncio.sleep(TTFT_S)
        for i in range(tokens):
            if i:
                await asyncio.sleep(ITL_S)
            writer.write(chunk(delta({"content": "w "})))
            await writer.drain()
        writer.write(chunk(delta({}, "length")))
        writer.write(chunk({"id": "x", "object": "chat.completion.chunk", "model": "m",
                            "choices": [], "usage": {"prompt_tokens": 5,
                                                     "completion_tokens": tokens,
                                                     "total_tokens": 5 + tokens}}))
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        await writer.drain()
        self.running -= 1  # counted when it finishes, as SGLang does
        self.tokens += tokens
        self.e2e.append(time.monotonic() - t0)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = next((int(v) for k, _, v in (ln.partition(":") for ln in lines[1:])
                               if k.strip().lower() == "content-length"), 0)
                body = await reader.readexactly(length) if length else b""
                if method == "POST":
                    await self._stream(writer, int(json.loads(body).get("max_tokens") or 8))
                    continue
                status, data = 404, b"{}"
                if path == "/metrics":
                    self.metrics_reads += 1
                    await asyncio.sleep(METRICS_DELAY_S)
                    status, data = 200, self.metrics().encode()
                elif path == "/v1/models":
                    status, data = 200, json.dumps({"data": [{"id": "m"}]}).encode()
                writer.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, len(data), data))
                await writer.drain()
        finally:
            writer.close()

    def start(self) -> None:
        ready = threading.Event()

        def main_() -> None:
            loop = self._loop = asyncio.new_event_loop()
            srv = loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
            self.port = srv.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        threading.Thread(target=main_, daemon=True).start()
        assert ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


@pytest.fixture
def paced() -> Iterator[PacedServer]:
    srv = PacedServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    from plugins.sim import REPO

    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def test_a_slow_metrics_delays_no_request_and_the_level_keeps_the_servers_view(
        paced: PacedServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{paced.port}"
    assert main(["sweep", "--url", url, "--label", "pace", "--levels", "2:4,2:4",
                 "--output-len", "20", "--input-len", "8", "--warmup", "1", "--no-sanity",
                 "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    with RunStore() as store:
        levels = [lv.stats for lv in store.levels(run_id)]
        requests = store.requests(run_id)
    assert len(levels) == 2 and len(requests) == 8 and all(r["ok"] for r in requests)
    assert paced.metrics_reads >= 4  # a start and an end read per level, at least
    # the client's timestamps keep the server's pace: a read that held the loop while a
    # request streamed would show as a gap of 2 s (generous bounds: half of that)
    for r in requests:
        assert r["ttft_s"] < METRICS_DELAY_S / 2, r
        assert len(r["chunk_gaps_ms"]) == 19, r
        assert max(r["chunk_gaps_ms"]) < METRICS_DELAY_S * 1000 / 2, r
    for lv in levels:
        assert lv["ttft_ms"]["p50"] >= TTFT_S * 1000 and lv["itl_ms"]["p50"] >= ITL_S * 1000
        # the server's view is the level's own requests: not its warm-up, not the next
        # level's idle probe, none of its first requests missed
        srv = lv["server"]
        assert srv is not None and srv["source"] == "metrics", lv.get("server")
        assert (srv["requests"], srv["output_tokens"]) == (4, 80) == (
            lv["completed"], lv["output_tokens"])
        assert srv["e2e_ms"]["mean"] >= (TTFT_S + 19 * ITL_S) * 1000
