"""Parse SGLang server logs: pure functions, no I/O (used by the agent and ``dsv4tui parse-log``).

A log line looks like ``[2025-11-30 12:00:00 TP0] message`` (the prefix names the rank:
``TP0``, ``DP0 TP3 EP3`` ...); tqdm progress bars and traceback lines carry no prefix. Older
SGLang wrote ``[gpu_id=0] message``; a logging config (``SGLANG_LOGGING_CONFIG_PATH``) can
write ``2025-10-29 02:27:35 INFO 8900 [ DP15 TP15 EP15 file.py:222] message``: both are read.
An error is an error however it reaches the log: a traceback, a named failure (OOM, NCCL, no
kernel image, warmup), or a bare exception line (``ValueError: ...`` with no traceback
header: a log captured mid-way, or a launcher that prints only the message). A traceback
whose header was cut (it starts at a ``File "...", line N`` frame) is still a traceback.
:func:`parse_line` classifies one line; :class:`LogParser` feeds lines in order, tracks the
startup phases and multi-line tracebacks, and emits event dicts (``kind`` + fields).
:func:`summarize` runs a whole log and returns the ``parse-log`` JSON. :class:`LineLevels`
gives each line its class for the log view (level, TP rank): the only place lines are classified.
"""

from __future__ import annotations

import re
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

Event = Dict[str, Any]

# Phases in startup order; each one is the span that ends at its milestone.
PHASES = ("load_weights", "kv_cache", "cuda_graph", "http_up", "ready")
ERROR_KINDS = ("traceback", "oom", "nccl_error", "no_kernel_image", "warmup_failed",
               "child_failed", "fatal", "exception")
# An error after ready that ends the server: a process of it "hit an exception" (the
# scheduler, the tokenizer manager: their traceback), a child died, or a named failure (OOM,
# NCCL, no kernel image). Other errors after ready (a request's traceback) leave it serving.
CRASH_KINDS = ("fatal", "child_failed", "oom", "nccl_error", "no_kernel_image")
PHASE_LABELS = {
    "init": "initialising", "load_weights": "loading weights", "kv_cache": "allocating KV cache",
    "cuda_graph": "capturing CUDA graphs", "http_up": "starting the HTTP server",
    "warmup": "warming up", "ready": "ready", "draining": "draining", "failed": "failed",
}

_PREFIX_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,]\d+)?"
    r"(?P<prefix>(?: [A-Z]{2,4}\d+)*)\] ?(?P<msg>.*)$")
_GPU_ID_PREFIX_RE = re.compile(r"^\[gpu_id=(?P<gpu>\d+)\] ?(?P<msg>.*)$")  # SGLang 0.2.x
_CONFIGURED_RE = re.compile(  # a logging config: "date time LEVEL pid [ RANKS file.py:N] msg"
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,]\d+)? [A-Z]+ \d+ "
    r"\[ ?(?P<prefix>(?:[A-Z]{2,4}\d+ )*)[\w.]+:\d+\] ?(?P<msg>.*)$")
_NUM = r"(-?\d+(?:\.\d+)?)"


def _f(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _i(value: Optional[str]) -> Optional[int]:
    num = _f(value)
    return None if num is None else int(num)


def _field(msg: str, name: str) -> Optional[str]:
    """The value of ``name: V`` or ``name=V`` in a comma-separated SGLang message."""
    m = re.search(r"(?:^|[\s,(])" + re.escape(name) + r"\s*[:=]\s*([^,\s\])]+)", msg)
    return m.group(1) if m else None


def split_prefix(line: str) -> Tuple[Optional[str], str, str]:
    """``(timestamp or None, prefix like 'TP0' or 'DP0 TP3 EP3' or '', message)``."""
    m = _PREFIX_RE.match(line)
    if m:
        return m.group("ts"), m.group("prefix").strip(), m.group("msg")
    m = _CONFIGURED_RE.match(line)
    if m:
        return m.group("ts"), m.group("prefix").strip(), m.group("msg")
    m = _GPU_ID_PREFIX_RE.match(line)
    if m:
        return None, "GPU%s" % m.group("gpu"), m.group("msg")
    return None, "", line


def ranks(prefix: str) -> Dict[str, int]:
    """``'DP0 TP3 EP3'`` -> ``{'DP': 0, 'TP': 3, 'EP': 3}``."""
    out: Dict[str, int] = {}
    for part in prefix.split():
        m = re.match(r"([A-Z]+)(\d+)$", part)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def ts_seconds(ts: Optional[str]) -> Optional[float]:
    """A log timestamp as epoch seconds (local time; only differences matter)."""
    if not ts:
        return None
    try:
        return time.mktime(time.strptime(ts, "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def _decode(msg: str) -> Event:
    ev: Event = {"kind": "decode", "running_req": _i(_field(msg, "#running-req")),
                 "queue_req": _i(_field(msg, "#queue-req")),
                 "gen_throughput": _f(_field(msg, "gen throughput (token/s)")),
                 "cuda_graph": _field(msg, "cuda graph") == "True"}
    if "#full token" in msg:  # hybrid SWA (DeepSeek-V4): full + swa pools
        ev.update(full_token=_i(_field(msg, "#full token")),
                  full_token_usage=_f(_field(msg, "full token usage")),
                  swa_token=_i(_field(msg, "#swa token")),
                  swa_token_usage=_f(_field(msg, "swa token usage")))
        if "mamba usage" in msg:  # hybrid SSM models (Qwen3-Next ...): the mamba pool too
            ev["mamba_usage"] = _f(_field(msg, "mamba usage"))
        usages = [u for u in (ev["full_token_usage"], ev["swa_token_usage"],
                              ev.get("mamba_usage")) if u is not None]
        ev["token_usage"] = max(usages) if usages else None
        ev["token"] = ev["full_token"]
    else:
        ev.update(token=_i(_field(msg, "#token")), token_usage=_f(_field(msg, "token usage")))
    if "accept len" in msg:
        ev.update(accept_len=_f(_field(msg, "accept len")),
                  accept_rate=_f(_field(msg, "accept rate")))
    return ev


def _prefill(msg: str) -> Event:
    ev: Event = {"kind": "prefill", "new_seq": _i(_field(msg, "#new-seq")),
                 "new_token": _i(_field(msg, "#new-token")),
                 "cached_token": _i(_field(msg, "#cached-token")),
                 "running_req": _i(_field(msg, "#running-req")),
                 "queue_req": _i(_field(msg, "#queue-req"))}
    if "full token usage" in msg:
        ev.update(full_token_usage=_f(_field(msg, "full token usage")),
                  swa_token_usage=_f(_field(msg, "swa token usage")))
        usages = [u for u in (ev["full_token_usage"], ev["swa_token_usage"]) if u is not None]
        ev["token_usage"] = max(usages) if usages else None
    else:
        ev["token_usage"] = _f(_field(msg, "token usage"))
    return ev


_TQDM_LOAD_RE = re.compile(r"(?:checkpoint shards|loading shards)\s*:\s*(\d+)%.*?(\d+)/(\d+)")
_TQDM_CAPTURE_RE = re.compile(r"Capturing batches \(([^)]*)\):\s*(\d+)%.*?(\d+)/(\d+)")
_CAPTURE_BEGIN_RE = re.compile(r"Capture (?:(\w+ \w+|\w+) )?[Cc][Uu][Dd][Aa] graph begin")
_CAPTURE_END_RE = re.compile(r"Capture (?:(\w+ \w+|\w+) )?[Cc][Uu][Dd][Aa] graph end")
# the numbers of the server_args line a failed start's next move starts from
_SERVER_ARGS = ("mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs_decode",
                "dist_timeout")
_BS_LIST_RE = re.compile(r"\bbs=\[([\d, ]*)\]")  # the batch sizes a capture takes
_UVICORN_RE = re.compile(r"Uvicorn running on (https?://(\S+?):(\d+))")
_OOM_RE = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|"
                     r"Not enough memory\. Please try to increase --mem-fraction-static")
_NCCL_RE = re.compile(r"NCCL error|nccl\w*Error|ncclUnhandledCudaError|ncclSystemError|"
                      r"ncclInternalError|ncclRemoteError|NCCL WARN|ProcessGroupNCCL|"
                      r"collective operation timeout")
_NO_KERNEL_RE = re.compile(r"no kernel image is available for execution on the device")
_EXC_LINE_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|"
                          r"[A-Za-z_][\w.]*\.[A-Z]\w*|AssertionError|KeyError|StopIteration)"
                          r"(?::\s?(.*))?$")
# An exception line outside a traceback: only names that say error (no warnings, no exits).
_BARE_EXC_RE = re.compile(r"^(?P<name>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))"
                          r"(?::\s*(?P<message>.*))?$")
_FRAME_RE = re.compile(r'^\s*File "[^"]+", line \d+')
_CHILD_FAILED_RE = re.compile(r"Received sigquit from a child proces")  # 0.4.x: "proces."
_HIT_EXCEPTION_RE = re.compile(r"\b\w+ hit an exception")


def classify(msg: str) -> Optional[Event]:
    """Classify one message (the text after the ``[ts prefix]``); None for ordinary lines.
    A message that is an exception line (``RuntimeError: ...``) is an error: its named
    failure when it is one (OOM, NCCL, no kernel image), else ``exception``; either way
    ``exception`` names the exception's type."""
    ev = _classify(msg)
    m = _BARE_EXC_RE.match(msg.strip())
    if m is None:
        return ev
    if ev is None:
        return {"kind": "exception", "exception": m.group("name"),
                "message": (m.group("message") or "").strip()}
    if ev["kind"] in ERROR_KINDS:
        ev.setdefault("exception", m.group("name"))
    return ev


def _classify(msg: str) -> Optional[Event]:
    if "Decode batch" in msg and "#running-req" in msg:
        return _decode(msg)
    if "Prefill batch" in msg and "#new-seq" in msg:
        return _prefill(msg)
    m = _TQDM_LOAD_RE.search(msg)
    if m:
        return {"kind": "load_weights_progress", "percent": int(m.group(1)),
                "done": int(m.group(2)), "total": int(m.group(3))}
    m = _TQDM_CAPTURE_RE.search(msg)
    if m:
        return {"kind": "cuda_graph_progress", "percent": int(m.group(2)),
                "done": int(m.group(3)), "total": int(m.group(4)), "detail": m.group(1),
                "bs": _i(_field(m.group(1), "bs"))}
    if "Load weight begin" in msg:
        return {"kind": "load_weights_begin", "avail_mem_gb": _f(_field(msg, "avail mem"))}
    if "Load weight end" in msg:
        return {"kind": "load_weights_end", "elapsed_s": _f(_field(msg, "elapsed")),
                "type": _field(msg, "type"), "avail_mem_gb": _f(_field(msg, "avail mem")),
                "mem_usage_gb": _f(_field(msg, "mem usage"))}
    if "KV Cache is allocated" in msg:
        size = re.search(r"KV size:\s*" + _NUM, msg)
        k_v = re.findall(r"\b[KV] size:\s*" + _NUM, msg)  # older: "K size: x GB, V size: y GB"
        size_gb = _f(size.group(1)) if size else (sum(float(x) for x in k_v) if k_v else None)
        return {"kind": "kv_cache", "dtype": _field(msg, "dtype"),
                "tokens": _i(_field(msg, "#tokens")), "size_gb": size_gb}
    if "Memory pool end" in msg:
        return {"kind": "memory_pool_end", "avail_mem_gb": _f(_field(msg, "avail mem"))}
    m = _CAPTURE_BEGIN_RE.search(msg)
    if m:
        sizes = _BS_LIST_RE.search(msg)
        return {"kind": "cuda_graph_begin", "stage": m.group(1) or None,
                "backend": _field(msg, "backend"),
                "bs": [int(b) for b in re.findall(r"\d+", sizes.group(1))] if sizes else None}
    m = _CAPTURE_END_RE.search(msg)
    if m:
        elapsed = _f(_field(msg, "elapsed"))
        if elapsed is None:  # older: "Capture cuda graph end. Time elapsed: 12.34 s"
            old = re.search(r"Time elapsed:\s*" + _NUM, msg)
            elapsed = _f(old.group(1)) if old else None
        return {"kind": "cuda_graph_end", "stage": m.group(1) or None, "elapsed_s": elapsed,
                "mem_usage_gb": _f(_field(msg, "mem usage"))}
    if msg.startswith("server_args=ServerArgs("):  # what the server was launched with
        backend = _field(msg, "moe_runner_backend")
        return {"kind": "server_args", **{k: _f(_field(msg, k)) for k in _SERVER_ARGS},
                "moe_runner_backend": backend.strip("'\"") if backend else None}
    if msg.startswith("max_total_num_tokens="):
        return {"kind": "server_limits",
                **{k: _f(_field(msg, k)) for k in (
                    "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                    "max_running_requests", "context_len", "available_gpu_mem")}}
    m = _UVICORN_RE.search(msg)
    if m:
        return {"kind": "http_up", "url": m.group(1), "host": m.group(2), "port": int(m.group(3))}
    if "The server is fired up and ready to roll" in msg:
        return {"kind": "ready"}
    if "Initialization failed" in msg and "warmup error" in msg:
        return {"kind": "warmup_failed", "message": msg.split("warmup error:", 1)[-1].strip()}
    if "SIGTERM received" in msg:
        return {"kind": "sigterm"}
    if "Gracefully exiting" in msg:
        return {"kind": "graceful_exit",
                "remaining": _i(_field(msg, "Remaining number of requests")
                                or (re.findall(r"(\d+)\s*$", msg) or [None])[0])}
    if _NO_KERNEL_RE.search(msg):
        return {"kind": "no_kernel_image", "message": msg.strip()}
    if _OOM_RE.search(msg):
        return {"kind": "oom", "message": msg.strip()}
    if _NCCL_RE.search(msg):
        return {"kind": "nccl_error", "message": msg.strip()}
    if _CHILD_FAILED_RE.search(msg):
        return {"kind": "child_failed", "message": msg.strip()}
    if _HIT_EXCEPTION_RE.search(msg):  # Scheduler, TokenizerManager, TpModelWorkerClient ...
        return {"kind": "fatal", "message": msg.strip()}
    return None


# -- each line's class, for the console's log view (level filter, TP-rank filter) -------------
# The one classifier of raw log lines: the agent runs it as it reads (the ``lines`` events carry
# ``levels`` and ``tps``), the console only for lines of its own or from an older agent.
LEVEL_INFO, LEVEL_WARNING, LEVEL_ERROR = 0, 1, 2
_LEVEL_ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|\bERROR\b|\bCRITICAL\b|\bFATAL\b|"
    r"^\s*[A-Za-z_][\w.]*(?:Error|Exception)\b|\b[A-Z]\w*(?:Error|Exception): |"
    r"CUDA out of memory|NCCL error|no kernel image|Killed|core dumped|"
    r"[Ff]ailed to|exited with code [1-9]|Received sigquit")
_LEVEL_WARNING_RE = re.compile(r"\bWARNING\b|\bWARN\b|\bWarning\b|\bdeprecated\b",
                               re.IGNORECASE)
_ERROR_HINTS = ("error", "exception", "traceback", "critical", "fatal", "out of memory", "nccl",
                "no kernel", "killed", "core dumped", "failed to", "exited with code", "sigquit")
_TRACE_CONT_RE = re.compile(r"^(?:\s+\S|File \"|During handling|The above exception)")


class LineLevels:
    """Feed lines in order; get each one's ``(level, TP rank or None)``. A traceback's
    unprefixed continuation lines (frames, source, the exception) are errors like its header."""

    def __init__(self) -> None:
        self._in_traceback = False

    def classify(self, text: str) -> Tuple[int, Optional[int]]:
        if "\r" in text:  # tqdm repaints: the class of what a terminal shows
            text = text.rsplit("\r", 1)[-1]
        ts, prefix, _ = split_prefix(text) if text[:1] == "[" or text[:1].isdigit() \
            else (None, "", text)
        tp = ranks(prefix).get("TP") if prefix else None
        if self._in_traceback and ts is None and _TRACE_CONT_RE.match(text):
            return LEVEL_ERROR, tp
        self._in_traceback = False
        low = text.lower()
        # cheap substring checks first: most lines are neither (a flood is 2,000 lines/s)
        if any(k in low for k in _ERROR_HINTS) and _LEVEL_ERROR_RE.search(text):
            self._in_traceback = "Traceback" in text
            return LEVEL_ERROR, tp
        if ("warn" in low or "deprecat" in low) and _LEVEL_WARNING_RE.search(text):
            return LEVEL_WARNING, tp
        return LEVEL_INFO, tp


def parse_line(line: str) -> Optional[Event]:
    """One line -> an event with ``time`` and ``prefix``, or None for an ordinary line."""
    ts, prefix, msg = split_prefix(line.rstrip("\n"))
    ev = classify(msg)
    if ev is None:
        return None
    ev["time"] = ts
    ev["prefix"] = prefix
    return ev


class LogParser:
    """Feed lines in order; get events, including derived ``phase`` and ``traceback`` events.

    ``phase`` events carry ``name`` (one of :data:`PHASES`) and ``duration_s``: load_weights
    uses the ``elapsed=`` SGLang reports, cuda_graph the capture's elapsed time (one event per
    captured stage), the others the timestamp difference to the previous milestone.
    ``current_phase`` is what the server is doing now (init, load_weights, kv_cache,
    cuda_graph, http_up, warmup, ready, draining, failed); ``failed_in``, the phase it was in
    when it failed. ``crash`` is the first error after
    ready that ends the server (:func:`is_crash`), with ``crash_after_ready_s``.
    """

    def __init__(self) -> None:
        self.line_no = 0
        self.first_ts: Optional[float] = None
        self.last_ts: Optional[float] = None
        self.current_phase = "init"
        self.load_percent: Optional[int] = None
        self.ready = False
        self.ready_ts: Optional[float] = None
        self._milestone_ts: Optional[float] = None
        self._done: Dict[str, bool] = {}
        self._stages_done: Dict[str, bool] = {}
        self._tb: Optional[List[str]] = None
        self._tb_start = 0
        self._tb_prefix = ""
        self._tb_context: Optional[str] = None
        self._tb_headerless = False
        self._tb_after_frame = False
        self.failed_in: Optional[str] = None  # the phase an error before ready came in
        self.crash: Optional[Event] = None
        self.crash_after_ready_s: Optional[float] = None

    @property
    def startup_s(self) -> Optional[float]:
        if self.ready_ts is None or self.first_ts is None:
            return None
        return round(self.ready_ts - self.first_ts, 3)

    def feed(self, line: str) -> List[Event]:
        """Parse one line (tqdm carriage returns split it); return its events."""
        events: List[Event] = []
        self.line_no += 1
        serving = self._serving()  # before this line: a SIGTERM on it does not hide a crash
        for part in line.rstrip("\n").split("\r"):
            if part.strip() or not events:
                events.extend(self._feed_one(part))
        return self._note_crash(events, serving)

    def feed_all(self, lines: Iterable[str]) -> List[Event]:
        out: List[Event] = []
        for line in lines:
            out.extend(self.feed(line))
        return out

    def close(self) -> List[Event]:
        """End of input: flush an unfinished traceback."""
        if self._tb is None:
            return []
        return self._note_crash(self._end_traceback(None), self._serving())

    def _serving(self) -> bool:
        return self.ready and self.current_phase == "ready"

    def _note_crash(self, events: List[Event], serving: bool) -> List[Event]:
        if self.crash is None and serving:
            crash = next((e for e in events if is_crash(e)), None)
            if crash is not None:
                self.crash = crash
                if self.last_ts is not None and self.ready_ts is not None \
                        and self.last_ts >= self.ready_ts:  # (not a log of clocks out of order)
                    self.crash_after_ready_s = round(self.last_ts - self.ready_ts, 3)
        return events

    # -- internals ---------------------------------------------------------------------------

    def _feed_one(self, text: str) -> List[Event]:
        events: List[Event] = []
        ts, prefix, msg = split_prefix(text)
        secs = ts_seconds(ts)
        if secs is not None:
            if self.first_ts is None:
                self.first_ts = secs
                self._milestone_ts = secs
            self.last_ts = secs
        if self._tb is not None:
            consumed, tb_events = self._traceback_line(text, ts)
            events.extend(tb_events)
            if consumed:
                return events
        if ts is None and _FRAME_RE.match(text):
            # a traceback without its header (the log was captured mid-way): still one
            self._start_traceback(text, prefix, None, headerless=True)
            return events
        if "Traceback (most recent call last)" in msg:
            head = msg.split("Traceback (most recent call last)")[0].strip().rstrip(":")
            self._start_traceback(text, prefix, head or None)
            ev = classify(head) if head else None
            if ev is not None and ev["kind"] != "fatal":  # fatal: the traceback says it all
                events.append(self._stamp(ev, ts, prefix, text))
                events.extend(self._advance(ev, secs))
            return events
        ev = classify(msg)
        if ev is None:
            return events
        events.append(self._stamp(ev, ts, prefix, text))
        events.extend(self._advance(ev, secs))
        return events

    def _start_traceback(self, text: str, prefix: str, context: Optional[str],
                         headerless: bool = False) -> None:
        self._tb = [text]
        self._tb_start = self.line_no
        self._tb_prefix = prefix
        self._tb_context = context
        self._tb_headerless = headerless
        self._tb_after_frame = headerless

    def _stamp(self, ev: Event, ts: Optional[str], prefix: str, text: str) -> Event:
        ev["time"] = ts
        ev["prefix"] = prefix
        ev["line"] = self.line_no
        if ev["kind"] in ERROR_KINDS:
            ev["text"] = text.strip()
        return ev

    def _traceback_line(self, text: str, ts: Optional[str]) -> Tuple[bool, List[Event]]:
        """Inside a traceback: (consumed?, events). Ends at the exception line."""
        assert self._tb is not None
        stripped = text.strip()
        after_frame, self._tb_after_frame = self._tb_after_frame, False
        if ts is None and _FRAME_RE.match(text):  # a frame, indented or not (a pasted log)
            self._tb.append(text)
            self._tb_after_frame = True
            return True, []
        if after_frame and ts is None and stripped and not _EXC_LINE_RE.match(stripped):
            self._tb.append(text)  # the frame's source line, whatever its indentation
            return True, []
        if text[:1] in (" ", "\t") or not stripped or stripped.startswith((
                "Traceback (most recent call last)", "During handling of the above exception",
                "The above exception was the direct cause")) or stripped.startswith("^"):
            self._tb.append(text)
            return True, []
        if ts is None and _EXC_LINE_RE.match(stripped):
            self._tb.append(text)
            return True, self._end_traceback(stripped)
        # A new timestamped line (or something unexpected): the traceback ended without an
        # exception line we recognise.
        return False, self._end_traceback(None)

    def _end_traceback(self, exc_line: Optional[str]) -> List[Event]:
        assert self._tb is not None
        lines, self._tb = self._tb, None
        exception, message = None, None
        if exc_line:
            m = _EXC_LINE_RE.match(exc_line)
            if m:
                exception, message = m.group(1), (m.group(2) or "").strip()
        ev: Event = {"kind": "traceback", "exception": exception, "message": message,
                     "context": self._tb_context, "headerless": self._tb_headerless,
                     "time": None, "prefix": self._tb_prefix, "line": self._tb_start,
                     "lines": lines[-40:], "text": exc_line or lines[-1].strip()}
        events = [ev]
        if exc_line:
            inner = classify(exc_line)  # a named failure; a plain exception is the traceback's
            if inner is not None and inner["kind"] in ERROR_KINDS and inner["kind"] != "exception":
                inner.update(time=None, prefix=self._tb_prefix, line=self.line_no,
                             text=exc_line)
                events.append(inner)
        self._fail()
        return events

    def _phase(self, name: str, duration: Optional[float], secs: Optional[float],
               **extra: Any) -> Event:
        self._done[name] = True
        if secs is not None:
            self._milestone_ts = secs
        return {"kind": "phase", "name": name,
                "duration_s": None if duration is None else round(max(duration, 0.0), 3),
                **extra}

    def _since_milestone(self, secs: Optional[float]) -> Optional[float]:
        if secs is None or self._milestone_ts is None:
            return None
        return secs - self._milestone_ts

    def _advance(self, ev: Event, secs: Optional[float]) -> List[Event]:
        kind = ev["kind"]
        out: List[Event] = []
        if kind == "load_weights_begin":
            if not self._done.get("load_weights"):
                self.current_phase = "load_weights"
                if secs is not None:
                    self._milestone_ts = secs
        elif kind == "load_weights_progress":
            self.load_percent = ev["percent"]
            if self.current_phase == "init":
                self.current_phase = "load_weights"
        elif kind == "load_weights_end":
            if not self._done.get("load_weights"):
                dur = ev.get("elapsed_s")
                out.append(self._phase("load_weights",
                                       dur if dur is not None else self._since_milestone(secs),
                                       secs))
                self.current_phase = "kv_cache"
        elif kind in ("kv_cache", "memory_pool_end"):
            if not self._done.get("kv_cache"):
                out.append(self._phase("kv_cache", self._since_milestone(secs), secs))
                self.current_phase = "cuda_graph"
        elif kind == "cuda_graph_begin":
            self.current_phase = "cuda_graph"
        elif kind == "cuda_graph_end":
            stage = ev.get("stage") or "decode"
            if not self._stages_done.get(stage):
                self._stages_done[stage] = True
                dur = ev.get("elapsed_s")
                out.append(self._phase("cuda_graph",
                                       dur if dur is not None else self._since_milestone(secs),
                                       secs, stage=stage))
            self.current_phase = "http_up"
        elif kind == "http_up":
            if not self._done.get("http_up"):
                out.append(self._phase("http_up", self._since_milestone(secs), secs))
                self.current_phase = "warmup"
        elif kind == "ready":
            if not self._done.get("ready"):
                out.append(self._phase("ready", self._since_milestone(secs), secs))
                self.ready = True
                self.ready_ts = secs
                self.current_phase = "ready"
        elif kind in ("sigterm", "graceful_exit"):
            self.current_phase = "draining"
        elif kind in ERROR_KINDS:
            self._fail()
        return out

    def _fail(self) -> None:
        """An error before ready: the server failed, in the phase it was in (``failed_in``)."""
        if self.current_phase not in ("ready", "draining", "failed"):
            self.failed_in = self.current_phase
            self.current_phase = "failed"


def is_crash(ev: Event) -> bool:
    """An error that ends the server: a :data:`CRASH_KINDS` event, or a traceback that a
    server process reported as its end (``Scheduler hit an exception: Traceback ...``)."""
    kind = ev.get("kind")
    if kind in CRASH_KINDS:
        return True
    return kind == "traceback" and bool(_HIT_EXCEPTION_RE.search(ev.get("context") or ""))


def phase_list(events: List[Event]) -> List[Event]:
    """The ``phase`` events among ``events``, per-stage cuda_graph phases merged into one
    entry (with ``stages``), in order: ``[{name, duration_s}]``."""
    events = [e for e in events if e.get("kind") == "phase"]
    out: List[Event] = []
    by_name: Dict[str, Event] = {}
    for ev in events:
        name = ev["name"]
        if name in by_name and name == "cuda_graph":
            entry = by_name[name]
            if ev["duration_s"] is not None:
                entry["duration_s"] = round((entry["duration_s"] or 0.0) + ev["duration_s"], 3)
            entry["stages"].append({"stage": ev.get("stage"), "duration_s": ev["duration_s"]})
            continue
        entry = {"name": name, "duration_s": ev["duration_s"]}
        if name == "cuda_graph":
            entry["stages"] = [{"stage": ev.get("stage"), "duration_s": ev["duration_s"]}]
        by_name[name] = entry
        out.append(entry)
    return out


def summarize(lines: Iterable[str]) -> Dict[str, Any]:
    """A whole log -> the ``parse-log`` JSON (state, ready, startup_s, crash, phases, errors,
    decode, ...). ``state``: crashed (an error after ready ended the server), failed (before
    ready), stopped (drained after a SIGTERM), ready, or starting (no end yet)."""
    parser = LogParser()
    events = parser.feed_all(lines)
    events.extend(parser.close())
    errors = [{"kind": e["kind"], "line": e["line"], "text": e.get("text", ""),
               "prefix": e.get("prefix", ""), **({"exception": e.get("exception")}
                                                 if e["kind"] == "traceback" or e.get("exception")
                                                 else {})}
              for e in events if e["kind"] in ERROR_KINDS]
    decode = [{k: v for k, v in e.items() if k not in ("kind", "line")}
              for e in events if e["kind"] == "decode"]
    prefill = [{k: v for k, v in e.items() if k not in ("kind", "line")}
               for e in events if e["kind"] == "prefill"]
    limits = next((e for e in events if e["kind"] == "server_limits"), None)
    http = next((e for e in events if e["kind"] == "http_up"), None)
    stop = [e for e in events if e["kind"] in ("sigterm", "graceful_exit")]
    crash = parser.crash
    if crash is not None:
        state = "crashed"
    elif parser.current_phase == "failed":
        state = "failed"
    elif parser.current_phase == "draining":
        state = "stopped"
    else:
        state = "ready" if parser.ready else "starting"
    return {
        "state": state,
        "ready": parser.ready,
        "startup_s": parser.startup_s,
        "phase": parser.current_phase,
        "failed_in": parser.failed_in,
        "crash": None if crash is None else {
            "kind": crash["kind"], "line": crash["line"], "text": crash.get("text", ""),
            "exception": crash.get("exception"), "prefix": crash.get("prefix", ""),
            "after_ready_s": parser.crash_after_ready_s},
        "phases": phase_list(events),
        "errors": errors,
        "decode": decode,
        "prefill": prefill,
        "http": {"url": http["url"], "port": http["port"]} if http else None,
        "limits": {k: v for k, v in limits.items() if k not in ("kind", "time", "prefix", "line")}
        if limits else None,
        "stop": [{"kind": e["kind"], "time": e["time"], "line": e["line"],
                  **({"remaining": e["remaining"]} if "remaining" in e else {})} for e in stop],
        "lines": parser.line_no,
    }


def summarize_text(text: str) -> Dict[str, Any]:
    """:func:`summarize` for a whole file's text (split on newlines only: tqdm uses ``\\r``)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return summarize(lines)


CAUSE_ORDER = ("oom", "no_kernel_image", "nccl_error", "warmup_failed", "traceback",
                "exception", "fatal", "child_failed")


def root_cause(events: Iterable[Event]) -> Optional[str]:
    """The most telling error line: a named failure (OOM, no kernel image, NCCL, warmup) over
    a traceback's exception over "a child failed"; the first of the most telling kind."""
    best: Optional[Tuple[int, str]] = None
    for e in events:
        kind = e.get("kind")
        if kind in CAUSE_ORDER:
            rank = CAUSE_ORDER.index(kind)
            if best is None or rank < best[0]:
                best = (rank, str(e.get("text", "")))
    return best[1] if best else None


def error_lines(events: Iterable[Event], limit: int = 8) -> List[str]:
    """The text of the last ``limit`` error events (for crash reports)."""
    texts = [str(e.get("text", "")) for e in events if e.get("kind") in ERROR_KINDS]
    return texts[-limit:]
