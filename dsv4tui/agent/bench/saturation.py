"""Did the server keep up with a level? (docs/metrics.md, "Saturation")

**Open loop** (a rate level: requests due on a timeline whatever is in flight). ``offered``
is the timeline's rate, (n - 1) / (last - first due time); ``achieved`` is the level's
``request_throughput``: ok requests / ``duration_s`` (first send -> last finish), the one
number, so the two never disagree. The level is **saturated** when

- achieved < :data:`ACHIEVED_MIN` (90 %) of offered, **and**
- the shortfall is not just the level's drain (the last requests' own E2E after the last
  arrival): over the second half of the arrivals (by due time), fewer requests finished than
  fell due (< 90 % of them: requests piled up while the load went on). With fewer than
  :data:`PACE_MIN` arrivals in that half the pace cannot tell, and achieved alone decides.

or when the server's ``/metrics`` queue grew over the level (below). A server that keeps up
shows achieved under offered only by its drain, which a short level makes large: then the
pace says it kept up, and the detail says the shortfall is the drain. A level whose requests
take longer than half its arrival span cannot show a steady pace (the server has not filled
up yet); make levels several E2E long.

**Closed loop**, the first source that can tell:

- ``metrics``: the server's ``/metrics`` queue (``sglang:num_queue_reqs``, reduced by
  ``server_metrics.scrape``), sampled every :data:`INTERVAL_S` during the level by a small
  forked process, so scraping and parsing never take the measuring loop's CPU or GIL. The
  server did not keep up when its queue **grew** over the level (a least-squares slope whose
  rise over the level is at least ``max(2, 10 %`` of the requests in flight)), or when
  requests **waited** in its queue most of the time (median queued >= 1: it ran fewer than C
  at once);
- ``throughput``: output tok/s rose by less than 10 % over the previous closed-loop level
  although C grew by half or more.

``saturated`` is null when no source could tell (a first closed-loop level, no metrics).
Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

INTERVAL_S = 0.5
GROWTH_MIN = 2.0
ACHIEVED_MIN = 0.9
PACE_MIN = 4  # arrivals in the second half of a rate level for its pace to tell
TOK_S_GAIN_MIN = 0.10

Sample = Tuple[float, float, Optional[float]]  # (perf_counter time, queued, running)


class MetricsSampler:
    """Samples the server's queue in a forked process until :meth:`stop`."""

    def __init__(self, url: str, api_key: Optional[str] = None,
                 interval_s: float = INTERVAL_S) -> None:
        self.url = url
        self.api_key = api_key
        self.interval_s = interval_s
        self.pid = 0
        self._fd = -1

    def start(self) -> "MetricsSampler":
        from dsv4tui.agent.bench import workers  # noqa: F401 (imported before fork)

        r, w = os.pipe()
        parent = os.getpid()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _sample(self.url, self.api_key, self.interval_s, w, parent)
            finally:
                os._exit(code)
        os.close(w)
        try:  # room for hours of samples: the sampler never waits on its pipe
            import fcntl

            fcntl.fcntl(r, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except OSError:
            pass
        self.pid, self._fd = pid, r
        return self

    def stop(self) -> List[Sample]:
        """Stop the sampler; every sample it took (it is killed if it does not stop)."""
        from dsv4tui.agent.bench import workers

        if not self.pid:
            return []
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            pass
        status = workers.reap(self.pid, 3.0)
        if status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            workers.reap(self.pid, 2.0)
        reader = workers.FrameReader(self._fd)
        samples: List[Sample] = []
        while True:
            got = reader.read()
            samples.extend(tuple(s) for s in got)  # type: ignore[misc]
            if reader.eof or not got:
                break
        os.close(self._fd)
        self.pid = 0
        return samples


def _sample(url: str, api_key: Optional[str], interval: float, fd: int, parent: int) -> int:
    from dsv4tui.agent.bench import workers
    from dsv4tui.agent.host import server_metrics

    workers.after_fork((fd,))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    perf = time.perf_counter
    # the agent that forked us gone (killed, crashed): stop too. With its server gone as well
    # no sample is ever written, so a closed pipe would never tell us
    while not stopping and os.getppid() == parent:
        t = perf()
        got = server_metrics.scrape(url, api_key, timeout=max(1.0, interval * 4))
        if got.get("ok") and got.get("queued") is not None:
            try:
                workers.send_obj(fd, (t, float(got["queued"]), got.get("running")))
            except OSError:
                return 0
        left = interval - (perf() - t)
        if left > 0 and not stopping:
            time.sleep(left)
    return 0


def _slope(points: Sequence[Tuple[float, float]]) -> Optional[float]:
    if len(points) < 3:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var <= 0:
        return None
    return sum((xs[i] - mx) * (ys[i] - my) for i in range(len(xs))) / var


def pace(arrivals: Sequence[Tuple[float, Optional[float]]]) -> Optional[Dict[str, Any]]:
    """How completions kept up with arrivals over the second half of a rate level's arrivals.

    ``arrivals``: (due time, finish time or None for a request that did not finish ok), on one
    clock. {from_s, to_s, arrived, finished}: requests due in (from_s, to_s] (the midpoint of
    the due times -> the last due time) and ok requests that finished in it; None with fewer
    than two arrivals."""
    dues = sorted(d for d, _ in arrivals)
    if len(dues) < 2 or dues[-1] <= dues[0]:
        return None
    mid, last = (dues[0] + dues[-1]) / 2.0, dues[-1]
    arrived = sum(1 for d in dues if mid < d <= last)
    finished = sum(1 for _, f in arrivals if f is not None and mid < f <= last)
    return {"from_s": round(mid, 3), "to_s": round(last, 3), "arrived": arrived,
            "finished": finished}


def verdict(*, closed: bool, samples: Sequence[Sample], window: Optional[Tuple[float, float]],
            in_flight: int, offered_rate: Optional[float] = None,
            achieved_rate: Optional[float] = None, tok_s: Optional[float] = None,
            previous: Optional[Tuple[int, float]] = None, concurrency: int = 0,
            arrivals: Optional[Sequence[Tuple[float, Optional[float]]]] = None
            ) -> Dict[str, Any]:
    """The level's ``saturation``: {saturated (bool | None), source, detail, samples,
    queued_median, queued_max, queue_growth, offered_rate, achieved_rate, pace}.

    ``window``: perf_counter times the level's load ran (first send, last send for an open
    loop / last finish for a closed one); ``achieved_rate``: the level's request_throughput;
    ``arrivals``: an open loop's (due, ok finish or None) per request (:func:`pace`);
    ``previous``: (C, tok/s) of the previous closed-loop level."""
    out: Dict[str, Any] = {"saturated": None, "source": None, "detail": None, "samples": 0,
                           "queued_median": None, "queued_max": None, "queue_growth": None,
                           "offered_rate": _r(offered_rate),
                           "achieved_rate": achieved_rate}  # request_throughput, as it is
    queue = _queue(samples, window, in_flight, closed, concurrency)
    if queue is not None:
        out.update(queue)
    if not closed:
        out["pace"] = pace(arrivals) if arrivals else None
        rate = _rate_verdict(offered_rate, achieved_rate, out["pace"])
        if rate is not None and (rate[0] or queue is None or not queue["saturated"]):
            out.update(source="rate", saturated=rate[0], detail=rate[1])
            if queue is not None:
                out["detail"] += "; %s" % queue["detail"]
        return out
    if queue is not None:
        return out
    if previous is not None and tok_s is not None and previous[1]:
        c0, tok0 = previous
        if concurrency >= 1.5 * c0:
            gain = tok_s / tok0 - 1.0
            out.update(source="throughput", saturated=gain < TOK_S_GAIN_MIN,
                       detail="output tok/s %+.0f %% from C=%d to C=%d" % (100 * gain, c0,
                                                                          concurrency))
    return out


def _queue(samples: Sequence[Sample], window: Optional[Tuple[float, float]], in_flight: int,
           closed: bool, concurrency: int) -> Optional[Dict[str, Any]]:
    """The /metrics queue's verdict over the level's window; None with fewer than 3 samples."""
    pts = [(t, q) for t, q, _ in samples
           if window is None or window[0] <= t <= window[1]]
    if len(pts) < 3:
        return None
    qs = [q for _, q in pts]
    slope = _slope(pts)
    span = pts[-1][0] - pts[0][0]
    growth = (slope or 0.0) * span
    median = statistics.median(qs)
    out: Dict[str, Any] = {"source": "metrics", "samples": len(pts),
                           "queued_median": _r(median), "queued_max": _r(max(qs)),
                           "queue_growth": _r(growth)}
    need = max(GROWTH_MIN, 0.1 * max(1, in_flight))
    if growth >= need:
        out.update(saturated=True, detail="the server's queue grew by %.0f requests over "
                   "the level (from /metrics)" % growth)
    elif closed and median >= 1:
        out.update(saturated=True, detail="requests waited in the server's queue (median "
                   "%g queued: it ran fewer than C=%d at once; from /metrics)"
                   % (median, concurrency))
    else:
        out.update(saturated=False, detail="the server's queue stayed at median %g, max %g "
                   "(from /metrics)" % (median, max(qs)))
    return out


def _rate_verdict(offered: Optional[float], achieved: Optional[float],
                  level_pace: Optional[Dict[str, Any]]) -> Optional[Tuple[bool, str]]:
    """(saturated, detail) of an open-loop level by its rates (the module's rule)."""
    if not offered or achieved is None:
        return None
    ratio = achieved / offered
    said = ("requests completed at %.2f/s over the level (its request_throughput) against "
            "%.2f/s offered (%.0f %%)" % (achieved, offered, 100 * ratio))
    if ratio >= ACHIEVED_MIN:
        return False, said
    if level_pace is None or level_pace["arrived"] < PACE_MIN:
        return True, said + " (too few arrivals to tell a backlog from the drain)"
    kept = level_pace["finished"] / level_pace["arrived"]
    half = ("over the second half of the arrivals %d of the %d requests due finished"
            % (level_pace["finished"], level_pace["arrived"]))
    if kept >= ACHIEVED_MIN:
        return False, (said + "; %s: the server kept pace, the shortfall is the level's drain "
                       "(the last requests' E2E after the last arrival)" % half)
    return True, said + "; %s: requests piled up" % half


def _r(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(float(v), 3)
