"""The load generator of one level on one event loop: closed-loop senders or an open-loop
timeline, the same code in the agent's own process and in each worker process
(``agent/bench/workers.py``).

- **Closed loop** (a ``C:n`` level): ``senders`` coroutines each take the next request index
  from the :class:`Flow` as soon as their previous request finished.
- **Open loop** (a ``rate:n`` level): request i is sent when its time on the precomputed
  timeline comes (``t0 + schedule[i]``, agent/bench/arrivals.py), whatever is still in flight, at
  most ``cap`` at once when ``max_concurrency`` is set (the rest wait for a slot, as
  bench_serving's semaphore does). Each request records how late the client sent it.

Finished responses are parsed by one post-processing task, 16 body pieces at a time (the
hot path only stamps bytes), and handed to ``deliver(event)`` as ``request`` events.

The :class:`Flow` says which request goes next and when the level stops (a stalled server,
a refused connection, a stop from outside); in one process it is plain numbers, across
worker processes a small shared-memory array under a lock, so every index is claimed exactly
once however many processes send. Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dsv4tui.agent.bench import stats
from dsv4tui.agent.bench.openai_stream import RawResponse, StreamResult, parse_stream_async, perf

# Flow slots
_NEXT, _ACTIVE, _PAUSED, _ANSWERED, _HALT, _ENDED = range(6)
_SLOTS = 6
HALT_STALLED, HALT_CONNECT, HALT_STOP = 1, 2, 3  # 0: not halted
_POLL_S = 0.02  # a sender paused on a stall looks again this often


class Flow:
    """Which request goes next and whether the level goes on, for every sender of a level.

    ``shared``: the numbers live in shared memory (fork-inherited), so worker processes see
    one count. Closed-loop rule (docs/metrics.md, "Stalls fail fast"): a sender whose request
    stalled sends nothing more until another request answered; when no sender is left
    sending but some wait on stalls, every request in flight stalled and the level halts.
    """

    def __init__(self, n: int, active: int, shared: bool = False) -> None:
        self.n = n
        self.shared = shared
        self.reason: Optional[str] = None  # why it halted (this process's view)
        if shared:
            import multiprocessing

            arr = multiprocessing.get_context("fork").Array("q", _SLOTS, lock=True)
            self._v: Any = arr
            self._lock: Any = arr.get_lock()
        else:
            self._v = [0] * _SLOTS
            self._lock = contextlib.nullcontext()
        self._v[_ACTIVE] = active

    # -- reading ----------------------------------------------------------------------
    @property
    def halt_code(self) -> int:
        return int(self._v[_HALT])

    @property
    def answered(self) -> int:
        return int(self._v[_ANSWERED])

    @property
    def claimed(self) -> int:
        return int(self._v[_NEXT])

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet ended, in every process of the level: not what the
        agent has still to receive (a busy agent reading the workers' pipes late would
        count their finished requests as in flight, above the level's C)."""
        v = self._v
        return max(0, int(v[_NEXT]) - int(v[_ENDED]))

    # -- changing ---------------------------------------------------------------------
    def claim(self) -> Optional[int]:
        """The next request index, or None when none is left or the level halted."""
        with self._lock:
            v = self._v
            if v[_HALT] or v[_NEXT] >= self.n:
                return None
            i = int(v[_NEXT])
            v[_NEXT] = i + 1
            return i

    def add_claimed(self, k: int = 1) -> None:
        """Open loop: ``k`` more requests were sent (their indices are the timeline's)."""
        with self._lock:
            self._v[_NEXT] += k

    def note_answered(self) -> None:
        with self._lock:
            self._v[_ANSWERED] += 1

    def note_ended(self) -> None:
        """A request ended (answered or not)."""
        with self._lock:
            self._v[_ENDED] += 1

    def halt(self, code: int, reason: Optional[str] = None) -> None:
        with self._lock:
            if not self._v[_HALT]:
                self._v[_HALT] = code
                self.reason = reason

    def _judge(self) -> None:
        v = self._v
        if v[_ACTIVE] == 0 and v[_PAUSED] and v[_NEXT] < self.n and not v[_HALT]:
            v[_HALT] = HALT_STALLED

    async def pause_on_stall(self) -> None:
        """A sender's request stalled: wait until another request answers, the level halts
        or no request is left, judging whether every sender is now waiting on a stall."""
        with self._lock:
            seen = self._v[_ANSWERED]
            self._v[_ACTIVE] -= 1
            self._v[_PAUSED] += 1
            self._judge()
        try:
            while True:
                v = self._v
                if v[_HALT] or v[_ANSWERED] > seen or v[_NEXT] >= self.n:
                    break
                await asyncio.sleep(_POLL_S)
        finally:
            with self._lock:
                self._v[_PAUSED] -= 1
                self._v[_ACTIVE] += 1

    def sender_done(self) -> None:
        with self._lock:
            self._v[_ACTIVE] -= 1
            self._judge()


def request_event(res: StreamResult, level: int, c: int, index: int, t0: float,
                  planned_tokens: Optional[int] = None) -> Dict[str, Any]:
    """The ``request`` event for one finished request (times in seconds). ``planned_tokens``:
    the fixed output length asked for (ignore_eos in force); an ok request with fewer output
    tokens is marked ``short_output``."""
    out_tokens = res.output_tokens
    event: Dict[str, Any] = {"level": level, "concurrency": c, "index": index, "ok": res.ok,
                             "start_s": round(res.t_send - t0, 6)}
    event.update(stats.request_metrics(res.t_send, res.token_times, res.first_answer_t,
                                       res.t_end, out_tokens))
    event.update(output_tokens=out_tokens, token_source=res.token_source,
                 prompt_tokens=res.prompt_tokens, finish_reason=res.finish_reason,
                 done_marker=res.done_marker, status=res.status, error_kind=res.error_kind,
                 error=res.error,
                 short_output=bool(planned_tokens is not None and res.ok
                                   and out_tokens < planned_tokens))
    return event


Item = Tuple[int, RawResponse, Optional[Dict[str, Any]]]


class LevelLoad:
    """One level's measured requests (or this process's share of them) on the running loop.

    ``bodies``/``datas``: request bodies and prebuilt request bytes by index; ``planned``:
    the output length each request must reach (ignore_eos) or None; ``asked``: each
    request's max_tokens (a usage far above it is a ``bad_usage`` error). Closed loop: ``senders``
    coroutines claim indices from ``flow``. Open loop: ``schedule`` (offsets from ``t0``) and
    ``indices`` (this process's requests, in time order), at most ``cap`` in flight.
    """

    def __init__(self, client: Any, path: str, bodies: Sequence[bytes],
                 datas: Sequence[Optional[bytes]], timeout: float, stall: float, flow: Flow,
                 deliver: Callable[[Dict[str, Any]], None], *, level: int, c: int,
                 planned: Sequence[Optional[int]], senders: int = 0,
                 schedule: Optional[Sequence[float]] = None,
                 indices: Optional[Sequence[int]] = None, cap: Optional[int] = None,
                 t0: Optional[float] = None, asked: Optional[Sequence[int]] = None) -> None:
        self.client = client
        self.path = path
        self.bodies = bodies
        self.datas = datas
        self.timeout = timeout
        self.stall = stall
        self.flow = flow
        self.deliver = deliver
        self.level = level
        self.c = c
        self.planned = planned
        self.asked = asked
        self.senders = senders
        self.schedule = schedule
        self.indices = list(indices) if indices is not None else None
        self.cap = cap
        self.t0 = t0
        self.sent = 0  # requests this process sent
        self._done: "asyncio.Queue[Optional[Item]]" = asyncio.Queue()

    async def run(self, stop: asyncio.Event) -> None:
        """Until every request finished, the flow halted, or ``stop`` was set (the requests
        in flight are then dropped; finished ones are still parsed and delivered)."""
        if self.t0 is None:
            self.t0 = perf()
        poster = asyncio.ensure_future(self._post())
        gc.disable()  # a full collection here takes tens of ms: never during a level
        try:
            if self.schedule is not None:
                main: "asyncio.Future[Any]" = asyncio.ensure_future(self._open())
            else:
                main = asyncio.gather(*(self._closed() for _ in range(self.senders)))
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait([main, stopper], return_when=asyncio.FIRST_COMPLETED)
            for fut in (main, stopper):
                fut.cancel()
            await asyncio.gather(main, stopper, return_exceptions=True)
            self._done.put_nowait(None)  # finished requests are still parsed and kept
            await poster
        finally:
            poster.cancel()
            gc.enable()

    def _request(self, i: int) -> "asyncio.Future[RawResponse]":
        return self.client.request(self.path, self.bodies[i], self.timeout, self.stall,
                                   self.datas[i])

    async def _closed(self) -> None:
        flow = self.flow
        try:
            while True:
                i = flow.claim()
                if i is None:
                    break
                self.sent += 1
                raw = await self._request(i)
                flow.note_ended()
                self._done.put_nowait((i, raw, None))
                if raw.error_kind is None:
                    flow.note_answered()
                elif raw.error_kind == "connect":
                    flow.halt(HALT_CONNECT, raw.error or "cannot connect")
                elif raw.error_kind == "stall":
                    await flow.pause_on_stall()
        finally:
            flow.sender_done()

    async def _open(self) -> None:
        assert self.schedule is not None and self.indices is not None and self.t0 is not None
        sem = asyncio.Semaphore(self.cap) if self.cap else None
        tasks: List["asyncio.Future[None]"] = []
        try:
            for i in self.indices:
                due = self.t0 + self.schedule[i]
                delay = due - perf()
                if delay > 0:
                    await asyncio.sleep(delay)
                if self.flow.halt_code:
                    break
                tasks.append(asyncio.ensure_future(self._one(i, due, perf(), sem)))
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, i: int, due: float, woke: float, sem: Optional[asyncio.Semaphore]
                   ) -> None:
        flow = self.flow
        got = woke
        if sem is not None:
            await sem.acquire()
            got = perf()
        try:
            if flow.halt_code:
                return
            flow.add_claimed()
            self.sent += 1
            seen = flow.answered
            raw = await self._request(i)
            flow.note_ended()
        finally:
            if sem is not None:
                sem.release()
        wait = got - woke
        assert self.schedule is not None
        extra = {"sched_s": round(self.schedule[i], 6),
                 "send_lag_ms": round((raw.t_send - due - wait) * 1000.0, 3),
                 "cap_wait_ms": round(wait * 1000.0, 3)}
        self._done.put_nowait((i, raw, extra))
        if raw.error_kind is None:
            flow.note_answered()
        elif raw.error_kind == "connect":
            flow.halt(HALT_CONNECT, raw.error or "cannot connect")
        elif raw.error_kind == "stall" and flow.answered == seen:
            # the server answered nothing at all while this request waited for bytes
            flow.halt(HALT_STALLED, raw.error)

    async def _post(self) -> None:
        """Parse finished responses one at a time, yielding between slices, and deliver."""
        assert self.t0 is not None
        while True:
            item = await self._done.get()
            if item is None:
                return
            i, raw, extra = item
            res = await parse_stream_async(
                raw, max_tokens=self.asked[i] if self.asked is not None else None)
            event = request_event(res, self.level, self.c, i, self.t0, self.planned[i])
            if extra:
                event.update(extra)
            self.deliver(event)
            await asyncio.sleep(0)
