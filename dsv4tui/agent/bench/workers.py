"""A level's load spread over worker processes, when one process cannot time it honestly.

At C = 256 a big server streams tens of thousands of tokens a second: more than one Python
event loop reads and stamps without delaying its own clock (docs/metrics.md). The sweep then
forks ``W`` workers for the level (``fork`` works inside the zipapp: nothing is re-imported;
Linux). Each worker closes every inherited descriptor but its two pipes, resets the signal
state it inherited from the agent's loop, and runs its own event loop
(``openai_stream.run``: the stamping selector) with its own connection pool. They share:

- one **start barrier**: each worker opens its connections and says ``ready``; the agent
  then sends every worker the same start time ``t0`` (a little ahead), and each starts then;
- one **clock**: ``time.perf_counter`` is CLOCK_MONOTONIC, the same clock in every process on
  Linux, so start times, send lags and arrival stamps of all workers compare directly;
- one :class:`~dsv4tui.agent.bench.loadgen.Flow` in shared memory: closed-loop workers claim
  request indices from it (each index exactly once), stalls are judged across all of them;
  open-loop workers own every W-th request of the one precomputed timeline.

Workers parse their own responses and send the finished ``request`` events (pickled) to the
agent through a pipe, from a writer thread, so a slow reader never blocks their loop; the
agent merges them into the sweep's one stream of events. A worker that dies (its pipe ends
without its ``end`` message) is reported and the level is stopped and marked failed: the
others are told to stop, and killed if they do not end within a grace period. A worker
whose agent died sees its control pipe end and stops.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import pickle
import queue
import signal
import struct
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from dsv4tui.agent.bench.loadgen import HALT_STOP, Flow, LevelLoad
from dsv4tui.agent.bench.openai_stream import make_client, perf
from dsv4tui.agent.bench.openai_stream import run as run_loop

STREAMS_PER_WORKER = 64  # what one process times within ~2 % (benchmarks/bench_scale.py)
START_LEAD_S = 0.05  # t0 this far after the barrier: every worker is waiting by then
READY_TIMEOUT_S = 30.0
GRACE_S = 10.0  # after a stop: end within this, or be killed


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(os, "sched_getaffinity")


def choose(requested: Optional[int], streams: int, cores: Optional[int] = None) -> int:
    """Workers for a level of ``streams`` concurrent requests: ``requested`` when set (at
    most one per stream), else one per :data:`STREAMS_PER_WORKER` streams, at most half the
    host's cores (the server's own processes need the rest)."""
    streams = max(1, streams)
    if requested is not None:
        return max(1, min(int(requested), streams))
    cores = cores or host_cores()
    return max(1, min(math.ceil(streams / STREAMS_PER_WORKER), cores // 2 or 1))


def split(total: int, parts: int) -> List[int]:
    """``total`` as ``parts`` near-equal shares (the first ones one larger)."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


# --- the pipe: length-prefixed pickles --------------------------------------------------

def send_obj(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("!I", len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FrameReader:
    """Incremental reader of length-prefixed pickles from a non-blocking fd."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""
        self.eof = False

    def read(self) -> List[Any]:
        out: List[Any] = []
        try:
            while True:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    self.eof = True
                    break
                self.buf += chunk
                if len(chunk) < 1 << 20:
                    break
        except BlockingIOError:
            pass
        except OSError:
            self.eof = True
        while len(self.buf) >= 4:
            (size,) = struct.unpack("!I", self.buf[:4])
            if len(self.buf) < 4 + size:
                break
            out.append(pickle.loads(self.buf[4:4 + size]))
            self.buf = self.buf[4 + size:]
        return out


# --- one level's work -------------------------------------------------------------------

class Work:
    """What every worker of a level needs (inherited through fork, never pickled)."""

    def __init__(self, *, transport: str, endpoint: Any, api_key: Optional[str],
                 connect_timeout: float, path: str, bodies: Sequence[bytes],
                 datas: Sequence[Optional[bytes]], timeout: float, stall: float, level: int,
                 c: int, planned: Sequence[Optional[int]], n: int, streams: int,
                 schedule: Optional[Sequence[float]] = None, cap: Optional[int] = None,
                 asked: Optional[Sequence[int]] = None) -> None:
        self.transport = transport
        self.endpoint = endpoint
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.path = path
        self.bodies = bodies
        self.datas = datas
        self.timeout = timeout
        self.stall = stall
        self.level = level
        self.c = c
        self.planned = planned
        self.n = n
        self.streams = streams  # requests in flight at once (C, the cap, or an estimate)
        self.schedule = schedule
        self.cap = cap
        self.asked = asked  # each request's max_tokens


class Outcome:
    """How the spread level ended: the workers' CPU, the halt code of the shared flow, and the
    workers that died (``{worker, pid, exit, requests}``)."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.halt = 0
        self.halt_reason: Optional[str] = None
        self.dead: List[Dict[str, Any]] = []
        self.errors: List[str] = []  # a worker's own failure (an exception), in words
        self.workers = 0
        self.pids: List[int] = []
        self.t0: Optional[float] = None  # the start every worker was given (perf_counter)


def _exit_text(status: Optional[int]) -> str:
    if status is None:
        return "gone"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return "killed by %s" % name
    if os.WIFEXITED(status):
        return "exit code %d" % os.WEXITSTATUS(status)
    return "status %d" % status


def reap(pid: int, wait_s: float) -> Optional[int]:
    """The exit status of ``pid`` within ``wait_s`` (None: still running)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return status
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)


def level_flow(work: Work) -> Flow:
    """The level's one :class:`Flow` in shared memory, made before the fork: every worker
    claims from it, and the agent reads from it what is in flight (``claimed`` less the
    requests ended in any worker). OSError: no shared memory here."""
    return Flow(work.n, active=work.c if work.schedule is None else 0, shared=True)


async def run_spread(work: Work, workers: int, deliver: Callable[[Dict[str, Any]], None],
                     stop: asyncio.Event, flow: Optional[Flow] = None) -> Outcome:
    """Fork ``workers`` processes for one level, start them together, deliver their request
    events as they come, and return when every worker ended (or was ended). ``flow``: the
    level's (:func:`level_flow`; one is made when not given)."""
    out = Outcome()
    out.workers = workers
    closed = work.schedule is None
    shares = split(work.c if closed else work.streams, workers)
    if flow is None:
        flow = level_flow(work)
    caps = split(work.cap, workers) if (work.cap and not closed) else [None] * workers
    loop = asyncio.get_running_loop()
    kids: List[Dict[str, Any]] = []
    try:
        for k in range(workers):
            ctrl_r, ctrl_w = os.pipe()
            res_r, res_w = os.pipe()
            indices = None if closed else list(range(k, work.n, workers))
            with warnings.catch_warnings():  # 3.12: "multi-threaded, fork() may deadlock":
                warnings.simplefilter("ignore", DeprecationWarning)  # the child runs only
                pid = os.fork()  # our own code, never a lock another thread may hold
            if pid == 0:  # the worker
                code = 1
                try:
                    code = _child(work, flow, k, shares[k], indices, caps[k], ctrl_r, res_w)
                finally:
                    os._exit(code)
            os.close(ctrl_r)
            os.close(res_w)
            os.set_blocking(res_r, False)
            kids.append({"k": k, "pid": pid, "ctrl": ctrl_w, "reader": FrameReader(res_r),
                         "ready": False, "ended": False, "dead": False, "gone": False,
                         "requests": 0})
            out.pids.append(pid)
        await _drive(kids, flow, deliver, stop, out, loop)
    finally:
        for kid in kids:
            with _suppress():
                loop.remove_reader(kid["reader"].fd)
            for fd in (kid["ctrl"], kid["reader"].fd):
                with _suppress():
                    os.close(fd)
            if kid["pid"] and reap(kid["pid"], 0.0) is None and not kid.get("reaped"):
                with _suppress():
                    os.kill(kid["pid"], signal.SIGKILL)
                reap(kid["pid"], 2.0)
    out.halt = flow.halt_code
    out.halt_reason = flow.reason
    return out


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], (OSError, ValueError, RuntimeError))


async def _drive(kids: List[Dict[str, Any]], flow: Flow,
                 deliver: Callable[[Dict[str, Any]], None], stop: asyncio.Event, out: Outcome,
                 loop: asyncio.AbstractEventLoop) -> None:
    changed = asyncio.Event()

    def on_readable(kid: Dict[str, Any]) -> None:
        reader = kid["reader"]
        for msg in reader.read():
            kind = msg[0]
            if kind == "req":
                kid["requests"] += 1
                deliver(msg[1])
            elif kind == "ready":
                kid["ready"] = True
                kid["warm_error"] = msg[1]
                changed.set()
            elif kind == "end":
                kid["ended"] = True
                out.cpu_s += float(msg[1])
                changed.set()
            elif kind == "error":
                out.errors.append("worker %d: %s" % (kid["k"], msg[1]))
        if reader.eof:
            loop.remove_reader(reader.fd)
            if not kid["ended"]:
                kid["dead"] = True
            kid["gone"] = True
            changed.set()

    for kid in kids:
        loop.add_reader(kid["reader"].fd, on_readable, kid)

    def tell(kid: Dict[str, Any], msg: Any) -> None:
        if not kid.get("gone"):
            with _suppress():
                send_obj(kid["ctrl"], msg)

    def dead() -> List[Dict[str, Any]]:
        return [k for k in kids if k["dead"]]

    async def until(pred: Callable[[], bool], timeout: Optional[float]) -> bool:
        end = None if timeout is None else loop.time() + timeout
        while not pred():
            if stop.is_set():
                return False
            changed.clear()
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                return False
            waiter = asyncio.ensure_future(changed.wait())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait([waiter, stopper], timeout=min(left or 1.0, 1.0),
                               return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            stopper.cancel()
        return True

    # 1. the start barrier
    ok = await until(lambda: all(k["ready"] or k["gone"] for k in kids), READY_TIMEOUT_S)
    if not ok or dead() or not all(k["ready"] for k in kids):
        for kid in kids:
            tell(kid, ("stop",))
        if not ok and not stop.is_set():
            out.errors.append("the workers did not open their connections within %.0f s"
                              % READY_TIMEOUT_S)
        flow.halt(HALT_STOP, "the level did not start")
    else:
        t0 = out.t0 = perf() + START_LEAD_S
        for kid in kids:
            tell(kid, ("go", t0))
        # 2. until every worker ended, a worker died, or the level is stopped
        await until(lambda: all(k["gone"] for k in kids) or bool(dead()), None)
        if dead() or stop.is_set():
            flow.halt(HALT_STOP, "stopped")
            for kid in kids:
                tell(kid, ("stop",))
    # 3. everyone ends within the grace period (finished requests still come in)
    end = loop.time() + GRACE_S
    while not all(k["gone"] for k in kids) and loop.time() < end:
        changed.clear()
        with _suppress():
            await asyncio.wait_for(changed.wait(), timeout=0.2)
        await asyncio.sleep(0)
    for kid in kids:
        status = reap(kid["pid"], 0.5 if kid["gone"] else 0.0)
        if status is None and not kid["gone"]:
            with _suppress():
                os.kill(kid["pid"], signal.SIGKILL)
            status = reap(kid["pid"], 2.0)
            kid["dead"] = kid["dead"] or not kid["ended"]
        kid["reaped"] = status is not None
        if kid["dead"]:
            out.dead.append({"worker": kid["k"], "pid": kid["pid"], "exit": _exit_text(status),
                             "requests": kid["requests"]})


# --- the worker process -----------------------------------------------------------------

def after_fork(keep: Sequence[int]) -> None:
    """What a forked child of the agent does first: never collect what it inherited (an
    inherited object's finalizer would close a descriptor number that is now another one),
    drop the agent loop's signal wiring and running loop, close every inherited descriptor
    but stdio and ``keep``."""
    gc.freeze()
    with _suppress():
        signal.set_wakeup_fd(-1)  # the agent's loop's wake-up pipe is not ours
    with _suppress():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the agent: it stops us
    with _suppress():
        asyncio.events._set_running_loop(None)  # forked inside the agent's running loop
    asyncio.set_event_loop(None)
    _close_inherited(keep)


def _close_inherited(keep: Sequence[int]) -> None:
    """Close every descriptor but stdio and ``keep``: the agent's sockets, its loop's
    selector, other workers' pipes (whose ends must close when the agent's do)."""
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _child(work: Work, flow: Flow, k: int, share: int, indices: Optional[List[int]],
           cap: Optional[int], ctrl_fd: int, res_fd: int) -> int:
    """The worker's body (in the forked process); returns its exit code."""
    after_fork((ctrl_fd, res_fd))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    outq: "queue.SimpleQueue[Any]" = queue.SimpleQueue()

    def writer() -> None:
        while True:
            item = outq.get()
            if item is None:
                return
            try:
                send_obj(res_fd, item)
            except OSError:
                return  # the agent is gone

    thread = threading.Thread(target=writer, name="worker-events", daemon=True)
    thread.start()
    code = 0
    try:
        run_loop(_work(work, flow, k, share, indices, cap, ctrl_fd, outq))
    except BaseException as exc:  # the agent gets a line, never a traceback on our stderr
        outq.put(("error", "%s: %s" % (type(exc).__name__, exc)))
        code = 1
    outq.put(("end", time.process_time()))
    outq.put(None)
    thread.join(30)
    return code


async def _work(work: Work, flow: Flow, k: int, share: int, indices: Optional[List[int]],
                cap: Optional[int], ctrl_fd: int, outq: "queue.SimpleQueue[Any]") -> None:
    loop = asyncio.get_running_loop()
    client = make_client(work.transport, work.endpoint, work.api_key, max(1, share),
                         work.connect_timeout)
    go: "asyncio.Future[Any]" = loop.create_future()
    stop = asyncio.Event()
    os.set_blocking(ctrl_fd, False)
    reader = FrameReader(ctrl_fd)

    def on_ctrl() -> None:
        for msg in reader.read():
            if msg[0] == "go" and not go.done():
                go.set_result(msg[1])
            elif msg[0] == "stop":
                stop.set()
                if not go.done():
                    go.set_result(None)
        if reader.eof:  # the agent is gone (or closed our pipe): stop
            loop.remove_reader(ctrl_fd)
            stop.set()
            if not go.done():
                go.set_result(None)

    loop.add_reader(ctrl_fd, on_ctrl)
    try:
        warm = share if indices is None else min(len(indices), cap or share)  # open: streams/W
        warm_error = None
        try:
            await client.warm(max(1, warm))
        except Exception as exc:  # the requests then fail on their own, counted by kind
            warm_error = str(exc) or type(exc).__name__
        outq.put(("ready", warm_error))
        t0 = await go
        if t0 is None or stop.is_set():
            return
        load = LevelLoad(client, work.path, work.bodies, work.datas, work.timeout, work.stall,
                         flow, lambda ev: outq.put(("req", ev)), level=work.level, c=work.c,
                         planned=work.planned, senders=share, schedule=work.schedule,
                         indices=indices, cap=cap, t0=t0, asked=work.asked)
        delay = t0 - perf()
        if delay > 0:
            await asyncio.sleep(delay)
        await load.run(stop)
    finally:
        with _suppress():
            loop.remove_reader(ctrl_fd)
        await client.aclose()
