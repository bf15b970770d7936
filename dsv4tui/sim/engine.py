"""The simulated scheduler: continuous batching on asyncio, paced by the speed model.

Waiting requests are admitted in a prefill batch (its time grows with the prompt tokens), then
every decode step gives each running request one token; the step time grows with the batch, so
per-request speed falls and aggregate throughput rises sub-linearly as concurrency grows.
Prefill and decode lines are logged in SGLang's format (hybrid-SWA form for DeepSeek-V4).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dsv4tui.sim import answers
from dsv4tui.sim.log import SimLog
from dsv4tui.sim.speed import SpeedModel

SWA_WINDOW = 4096
SPEC_ACCEPT_P = 0.7  # the chance that each next draft token is accepted (simulated)
# SGLang's default bucket bounds (seconds; sglang/srt/metrics/collector.py, 0.5.x), so that a
# quantile read from the simulator is as coarse as one read from the real server.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
QUEUE_BUCKETS = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90,
                 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800,
                 2000, 2500, 3000)


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
    off_by_one: bool = False  # --sim-wrong-rate: the answer + 1
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
        self._tokens = answers.answer_tokens(self.prompt, wrong=self.wrong,
                                              off_by_one=self.off_by_one)
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
    def __init__(self, buckets: tuple[float, ...] = TTFT_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """``n`` observations of ``value`` (SGLang's ITL: a step's interval split over the
        tokens it produced)."""
        self.total += n
        self.sum += value * n
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += n

    def prometheus(self, name: str, labels: str) -> list[str]:
        lines = [f"# TYPE {name} histogram"]
        for bound, count in zip(self.buckets, self.counts, strict=True):
            lines.append(f'{name}_bucket{{{labels},le="{float(bound)}"}} {count}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.total}')
        lines.append(f"{name}_sum{{{labels}}} {self.sum:.6f}")
        lines.append(f"{name}_count{{{labels}}} {self.total}")
        return lines


@dataclass
class Counters:
    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    aborted: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(QUEUE_BUCKETS))  # before prefill


class Engine:
    def __init__(self, speed: SpeedModel, log: SimLog, *, hybrid_swa: bool,
                 max_running: int, max_total_tokens: int, decode_log_interval: int,
                 on_admit: Callable[[int], None] | None = None,
                 spec_draft_tokens: int | None = None) -> None:
        self.speed = speed
        # Speculative decoding: each decode step a request takes 1 + the draft tokens accepted
        # (each accepted with SPEC_ACCEPT_P, in order); /metrics' spec_accept_length and the
        # decode line's "accept len" are the mean over the last log interval.
        self.spec_draft_tokens = spec_draft_tokens
        self._spec_rng = random.Random(23)
        self._spec_steps = self._spec_tokens = 0
        self.last_spec_accept_length: float | None = None
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
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        if req in self.running:
            self.running.remove(req)
        if req in self.waiting:
            self.waiting.remove(req)
        if not req.done:
            req.finish_reason = "abort"
            self.counters.aborted += 1

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

    def _emit(self, req: Request, now: float, itl: bool = True) -> None:
        tok = req.next_token()
        if req.first_token_at is None:
            req.first_token_at = now
            self.counters.ttft.observe(now - req.created)
        elif itl and req.last_token_at is not None:
            self.counters.itl.observe(now - req.last_token_at)
        req.last_token_at = now
        req.out.put_nowait(tok)
        if req.done:
            # like SGLang (observe_one_finished_request): the request counters move when a
            # request finishes, so their difference over a window is what finished in it
            c = self.counters
            c.requests += 1
            c.prompt_tokens += req.prompt_tokens
            c.generation_tokens += req.produced
            c.e2e.observe(now - req.created)
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
        started = time.monotonic()
        for req in batch:
            self.counters.queue.observe(started - req.created)
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
        emitted = 0
        for req in active:
            if req.done or req not in self.running:
                continue
            take, before, last = self._accepted(), req.produced, req.last_token_at
            for _ in range(take):
                self._emit(req, now, itl=take == 1)
                if req.done:
                    break
            got = req.produced - before
            emitted += got
            if take > 1 and last is not None and got:  # the step's interval over its tokens
                self.counters.itl.observe((now - last) / got, got)
            if req.done:
                self.running.remove(req)
        self._count(emitted)
        self.steps += 1
        if self.steps % self.decode_log_interval == 0:
            self._log_decode()

    def _accepted(self) -> int:
        """Tokens one request takes this step: 1, or with speculation 1 + accepted drafts."""
        if not self.spec_draft_tokens:
            return 1
        n = 1
        while n < self.spec_draft_tokens and self._spec_rng.random() < SPEC_ACCEPT_P:
            n += 1
        self._spec_steps += 1
        self._spec_tokens += n
        return n

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
        accept = ""
        if self._spec_steps:
            self.last_spec_accept_length = self._spec_tokens / self._spec_steps
            self._spec_steps = self._spec_tokens = 0
            accept = f"accept len: {self.last_spec_accept_length:.2f}, "
        self.log.info(f"Decode batch, #running-req: {len(self.running)}, {self._usage_msg(True)}"
                      f"{accept}cuda graph: True, gen throughput (token/s): "
                      f"{self.last_gen_throughput:.2f}, #queue-req: {len(self.waiting)}, ")
