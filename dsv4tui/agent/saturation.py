"""Did the server keep up with a level? (docs/metrics.md, "Saturation")

Per level, the first source that can tell:

- ``metrics``: the server's ``/metrics`` queue (``sglang:num_queue_reqs``, reduced by
  ``server_metrics.scrape``), sampled every :data:`INTERVAL_S` during the level by a small
  forked process, so scraping and parsing never take the measuring loop's CPU or GIL. The
  server did not keep up when its queue **grew** over the level (a least-squares slope whose
  rise over the level is at least ``max(2, 10 %`` of the requests in flight)), or, in a
  closed-loop level, when requests **waited** in its queue most of the time (median queued
  >= 1: it ran fewer than C at once);
- ``rate`` (open-loop levels without metrics): the rate requests completed at against the
  rate the timeline offered: completions spread over a longer time than the arrivals did
  (achieved < 90 % of offered) means requests piled up;
- ``throughput`` (closed-loop levels without metrics): output tok/s rose by less than 10 %
  over the previous closed-loop level although C grew by half or more.

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
        from dsv4tui.agent import server_metrics, workers  # noqa: F401 (imported before fork)

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
        from dsv4tui.agent import workers

        if not self.pid:
            return []
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            pass
        status = workers._reap(self.pid, 3.0)
        if status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            workers._reap(self.pid, 2.0)
        reader = workers._Reader(self._fd)
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
    from dsv4tui.agent import server_metrics, workers

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
                workers._send(fd, (t, float(got["queued"]), got.get("running")))
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


def verdict(*, closed: bool, samples: Sequence[Sample], window: Optional[Tuple[float, float]],
            in_flight: int, offered_rate: Optional[float] = None,
            achieved_rate: Optional[float] = None, tok_s: Optional[float] = None,
            previous: Optional[Tuple[int, float]] = None, concurrency: int = 0
            ) -> Dict[str, Any]:
    """The level's ``saturation``: {saturated (bool | None), source, detail, samples,
    queued_median, queued_max, queue_growth, offered_rate, achieved_rate}.

    ``window``: perf_counter times the level's load ran (first send, last send for an open
    loop / last finish for a closed one); ``previous``: (C, tok/s) of the previous
    closed-loop level."""
    out: Dict[str, Any] = {"saturated": None, "source": None, "detail": None, "samples": 0,
                           "queued_median": None, "queued_max": None, "queue_growth": None,
                           "offered_rate": _r(offered_rate), "achieved_rate": _r(achieved_rate)}
    pts = [(t, q) for t, q, _ in samples
           if window is None or window[0] <= t <= window[1]]
    if len(pts) >= 3:
        qs = [q for _, q in pts]
        slope = _slope(pts)
        span = pts[-1][0] - pts[0][0]
        growth = (slope or 0.0) * span
        median = statistics.median(qs)
        out.update(source="metrics", samples=len(pts), queued_median=_r(median),
                   queued_max=_r(max(qs)), queue_growth=_r(growth))
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
    if not closed:
        if offered_rate and achieved_rate is not None:
            ratio = achieved_rate / offered_rate
            out.update(source="rate", saturated=ratio < ACHIEVED_MIN,
                       detail="requests completed at %.2f/s against %.2f/s offered (%.0f %%)"
                       % (achieved_rate, offered_rate, 100 * ratio))
        return out
    if previous is not None and tok_s is not None and previous[1]:
        c0, tok0 = previous
        if concurrency >= 1.5 * c0:
            gain = tok_s / tok0 - 1.0
            out.update(source="throughput", saturated=gain < TOK_S_GAIN_MIN,
                       detail="output tok/s %+.0f %% from C=%d to C=%d" % (100 * gain, c0,
                                                                          concurrency))
    return out


def _r(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(float(v), 3)
