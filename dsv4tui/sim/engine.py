"""The simulated scheduler: continuous batching on asyncio, paced by the speed model.

Waiting requests are admitted in a prefill batch (its time grows with the prompt tokens), then
every decode step gives each running request one token; the step time grows with the batch, so
per-request speed falls and aggregate throughput rises sub-linearly as concurrency grows.
Prefill and decode lines are logged in SGLang's format (hybrid-SWA form for DeepSeek-V4).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dsv4tui.sim import answers
from dsv4tui.sim.log import SimLog
from dsv4tui.sim.speed import SpeedModel

SWA_WINDOW = 4096
_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class EngineClosed(Exception):
    """The server is draining or stopped: no new requests."""


@dataclass
class Request:
    prompt: str
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool = False
    wrong: bool = False
    stall: bool = False
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.monotonic)
    out: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    produced: int = 0
    finish_reason: str | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    _tokens: list[str] = field(default_factory=list)
    _natural: int = 0

    def __post_init__(self) -> None:
        self._tokens = answers.answer_tokens(self.prompt, wrong=self.wrong)
        self._natural = len(self._tokens)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def next_token(self) -> str:
        if self.produced >= len(self._tokens):
            self._tokens += answers.continuation(self.prompt, len(self._tokens), 64)
        tok = self._tokens[self.produced]
        self.produced += 1
        if self.produced >= self.max_tokens:
            self.finish_reason = "length"
        elif not self.ignore_eos and self.produced >= self._natural:
            self.finish_reason = "stop"
        return tok


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(_BUCKETS)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for i, bound in enumerate(_BUCKETS):
            if value <= bound:
                self.counts[i] += 1

    def prometheus(self, name: str, labels: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        for bound, count in zip(_BUCKETS, self.counts, strict=True):
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {count}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.total}')
        lines.append(f"{name}_sum{{{labels}}} {self.sum:.6f}")
        lines.append(f"{name}_count{{{labels}}} {self.total}")
        return lines


@dataclass
class Counters:
    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    ttft: Histogram = field(default_factory=Histogram)
    itl: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)


class Engine:
    def __init__(self, speed: SpeedModel, log: SimLog, *, hybrid_swa: bool,
                 max_running: int, max_total_tokens: int, decode_log_interval: int,
                 on_admit: Callable[[int], None] | None = None) -> None:
        self.speed = speed
        self.log = log
        self.hybrid_swa = hybrid_swa
        self.max_running = max_running
        self.max_total_tokens = max(max_total_tokens, 1)
        self.decode_log_interval = max(decode_log_interval, 1)
        self.on_admit = on_admit
        self.running: list[Request] = []
        self.prefilling: list[Request] = []  # taken from the queue, in the prefill step now
        self.waiting: deque[Request] = deque()
        self.counters = Counters()
        self.closed = False
        self.last_gen_throughput = 0.0
        self.steps = 0
        self._wake = asyncio.Event()
        self._recent: deque[tuple[float, int]] = deque()
        self._log_tic = time.monotonic()
        self._log_tokens = 0
        self._admitted = itertools.count(1)

    # -- requests ----------------------------------------------------------------------------

    def submit(self, req: Request, *, external: bool = True) -> None:
        """Queue a request; ``external=False`` for the server's own warmup/health probes."""
        if self.closed:
            raise EngineClosed("the server is shutting down")
        if external:
            n = next(self._admitted)
            if self.on_admit is not None:
                self.on_admit(n)
        self.counters.requests += 1
        self.counters.prompt_tokens += req.prompt_tokens
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        if req in self.running:
            self.running.remove(req)
        if req in self.waiting:
            self.waiting.remove(req)
        if not req.done:
            req.finish_reason = "abort"

    @property
    def num_running(self) -> int:
        """Requests being served now: decoding, or in the prefill step under way (what a
        client sees as running; /metrics and /server_info report this)."""
        return len(self.running) + sum(1 for r in self.prefilling if not r.done)

    @property
    def num_requests(self) -> int:
        return self.num_running + len(self.waiting)

    def gen_tok_s(self) -> float:
        """Output tokens per second over the last two seconds."""
        now = time.monotonic()
        while self._recent and now - self._recent[0][0] > 2.0:
            self._recent.popleft()
        if not self._recent:
            return 0.0
        return sum(n for _, n in self._recent) / 2.0

    def token_usage(self) -> tuple[int, float, int, float]:
        full = sum(r.prompt_tokens + r.produced for r in self.running)
        swa = sum(min(r.prompt_tokens + r.produced, SWA_WINDOW) for r in self.running)
        return full, full / self.max_total_tokens, swa, swa / self.max_total_tokens

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if not self.waiting and not any(not r.stall or r.produced < 2 for r in self.running):
                self._wake.clear()
                await self._wake.wait()
                continue
            if self.waiting and len(self.running) < self.max_running:
                await self._prefill()
            if self.running:
                await self._decode_step()

    def _emit(self, req: Request, now: float) -> None:
        tok = req.next_token()
        if req.first_token_at is None:
            req.first_token_at = now
            self.counters.ttft.observe(now - req.created)
        elif req.last_token_at is not None:
            self.counters.itl.observe(now - req.last_token_at)
        req.last_token_at = now
        self.counters.generation_tokens += 1
        req.out.put_nowait(tok)
        if req.done:
            self.counters.e2e.observe(now - req.created)
            req.out.put_nowait(None)

    async def _prefill(self) -> None:
        batch: list[Request] = []
        tokens = 0
        while self.waiting and len(self.running) + len(batch) < self.max_running:
            req = self.waiting[0]
            if batch and tokens + req.prompt_tokens > 16384:
                break
            batch.append(self.waiting.popleft())
            tokens += req.prompt_tokens
        running_before = len(self.running)
        self.prefilling = batch
        try:
            await asyncio.sleep(self.speed.prefill_s(tokens))
        finally:
            self.prefilling = []
        batch = [r for r in batch if not r.done]  # aborted while prefilling
        self._log_prefill(len(batch), tokens, running_before)
        now = time.monotonic()
        for req in batch:
            self._emit(req, now)
            if not req.done:
                self.running.append(req)
        self._count(len(batch))

    async def _decode_step(self) -> None:
        active = [r for r in self.running if not (r.stall and r.produced >= 2)]
        if not active:
            return
        await asyncio.sleep(self.speed.step_s(len(self.running)))
        now = time.monotonic()
        for req in active:
            if req.done or req not in self.running:
                continue
            self._emit(req, now)
            if req.done:
                self.running.remove(req)
        self._count(len(active))
        self.steps += 1
        if self.steps % self.decode_log_interval == 0:
            self._log_decode()

    def _count(self, n: int) -> None:
        self._recent.append((time.monotonic(), n))
        self._log_tokens += n

    def _usage_msg(self, decode: bool) -> str:
        full, full_u, swa, swa_u = self.token_usage()
        if not self.hybrid_swa:
            return (f"#token: {full}, token usage: {full_u:.2f}, " if decode
                    else f"token usage: {full_u:.2f}, ")
        if decode:
            return (f"#full token: {full}, full token usage: {full_u:.2f}, "
                    f"#swa token: {swa}, swa token usage: {swa_u:.2f}, ")
        return f"full token usage: {full_u:.2f}, swa token usage: {swa_u:.2f}, "

    def _log_prefill(self, seqs: int, tokens: int, running_before: int) -> None:
        self.log.info(f"Prefill batch, #new-seq: {seqs}, #new-token: {tokens}, #cached-token: 0, "
                      f"{self._usage_msg(False)}#running-req: {running_before}, "
                      f"#queue-req: {len(self.waiting)}, ")

    def _log_decode(self) -> None:
        now = time.monotonic()
        gap = max(now - self._log_tic, 1e-6)
        self.last_gen_throughput = self._log_tokens / gap
        self._log_tic, self._log_tokens = now, 0
        self.log.info(f"Decode batch, #running-req: {len(self.running)}, {self._usage_msg(True)}"
                      f"cuda graph: True, gen throughput (token/s): "
                      f"{self.last_gen_throughput:.2f}, #queue-req: {len(self.waiting)}, ")
