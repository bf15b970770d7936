"""nvidia-smi telemetry source, for hosts where NVML cannot be loaded from Python.

One long-lived ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms MS`` process
prints one line per GPU per tick; a reader thread groups the lines into ticks. Fields that
read ``[N/A]``, ``[Not Supported]`` (or any other ``[...]``) become null. nvidia-smi gives no
tensor-pipe activity through ``--query-gpu``, so the GPM fields stay null and ``gpm`` false.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dsv4tui.agent import protocol
from dsv4tui.agent.host.gpu_source import Source, SourceUnavailable, blank_gpu, clock_event_names
from dsv4tui.agent.host.procs import process_title


def _int(text: str) -> Optional[int]:
    return round(float(text))


def _float1(text: str) -> Optional[float]:
    return round(float(text), 1)


def _str(text: str) -> Optional[str]:
    return text


def _mask(text: str) -> Optional[List[str]]:
    return clock_event_names(int(text, 16) if text.lower().startswith("0x") else int(text))


# (nvidia-smi query field, frame field, parser). ``driver_version`` is a host field.
BASE_FIELDS: Tuple[Tuple[str, str, Callable[[str], Any]], ...] = (
    ("index", "index", _int),
    ("name", "name", _str),
    ("uuid", "uuid", _str),
    ("utilization.gpu", "util_gpu", _int),
    ("utilization.memory", "util_mem", _int),
    ("memory.used", "mem_used_mib", _int),
    ("memory.total", "mem_total_mib", _int),
    ("temperature.gpu", "temp_c", _int),
    ("power.draw", "power_w", _float1),
    ("power.limit", "power_limit_w", _float1),
    ("clocks.sm", "sm_clock_mhz", _int),
    ("clocks.mem", "mem_clock_mhz", _int),
    ("pstate", "pstate", _str),
)
_EXTRA = {
    "clocks.max.sm": ("sm_clock_max_mhz", _int),
    "driver_version": ("driver", _str),
    "clocks_event_reasons.active": ("clock_event_reasons", _mask),
    "clocks_throttle_reasons.active": ("clock_event_reasons", _mask),
}
# Query field lists tried in order: newer drivers know clocks_event_reasons, older ones only
# the throttle name; the base list is valid on every driver of the last decade.
_BASE = tuple(f for f, _, _ in BASE_FIELDS)
FIELD_SETS: Tuple[Tuple[str, ...], ...] = (
    (*_BASE, "clocks.max.sm", "driver_version", "clocks_event_reasons.active"),
    (*_BASE, "clocks.max.sm", "driver_version", "clocks_throttle_reasons.active"),
    (*_BASE, "driver_version"),
    _BASE,
)
_PARSERS: Dict[str, Tuple[str, Callable[[str], Any]]] = {f: (k, p) for f, k, p in BASE_FIELDS}
_PARSERS.update(_EXTRA)

APPS_QUERY = "gpu_uuid,pid,process_name,used_memory"
_NO_DRIVER_TEXT = "couldn't communicate with the nvidia driver"
_NO_DEVICE_TEXT = "no devices were found"


def parse_value(text: str, parser: Callable[[str], Any]) -> Any:
    """One CSV cell: ``[N/A]``, ``[Not Supported]``, ``N/A``, blanks and garbage -> None."""
    text = text.strip()
    if not text or text.startswith("[") or text.upper() == "N/A":
        return None
    try:
        return parser(text)
    except (TypeError, ValueError):
        return None


def split_csv_line(line: str, width: int, free: int = 1) -> Optional[List[str]]:
    """Split one ``--format=csv,noheader`` line into ``width`` cells (None if it cannot).

    nvidia-smi does not quote; should a free-text cell (column ``free``: the GPU name, a
    process path) ever hold a comma, the surplus cells are folded back into it.
    """
    row = next(csv.reader([line], skipinitialspace=True), [])
    if len(row) > width > free:
        extra = len(row) - width
        row = [*row[:free], ", ".join(row[free:free + 1 + extra]), *row[free + 1 + extra:]]
    if len(row) != width:
        return None
    return row


def parse_query_line(line: str, fields: Sequence[str]) -> Optional[Dict[str, Any]]:
    """One ``--query-gpu`` line -> (GPU record, host fields) merged; None for a non-data line."""
    row = split_csv_line(line, len(fields))
    if row is None:
        return None
    index = parse_value(row[0], _int)
    if index is None:
        return None
    rec = blank_gpu(index)
    for field, cell in zip(fields, row):  # noqa: B905 - same length, checked; no strict= on 3.9
        key, parser = _PARSERS[field]
        rec[key] = parse_value(cell, parser)
    return rec


def parse_apps(text: str, uuid_to_index: Dict[str, int]) -> List[Dict[str, Any]]:
    """``--query-compute-apps=gpu_uuid,pid,process_name,used_memory`` output -> processes."""
    out = []
    for line in text.splitlines():
        row = split_csv_line(line, 4, free=2)
        if row is None:
            continue
        pid = parse_value(row[1], _int)
        if pid is None:
            continue
        gpu = uuid_to_index.get(row[0].strip())
        path = parse_value(row[2], _str)
        name = process_title(pid) or (os.path.basename(path) if path else "?")
        out.append({"gpu": gpu, "pid": pid, "name": name,
                    "mem_mib": parse_value(row[3], _int)})
    return out


def classify_failure(output: str) -> SourceUnavailable:
    low = output.lower()
    tail = (output.strip().splitlines() or ["no output"])[-1].strip()
    if _NO_DRIVER_TEXT in low:
        return SourceUnavailable("nvidia-smi: %s" % tail, no_driver=True)
    if _NO_DEVICE_TEXT in low:
        return SourceUnavailable("nvidia-smi: no devices were found", no_gpu=True)
    return SourceUnavailable("nvidia-smi: %s" % tail)


class SmiSource(Source):
    name = "nvidia-smi"
    paced = True

    def __init__(self, smi: Optional[str] = None, timeout_s: float = 20.0) -> None:
        self._smi = smi
        self._timeout = timeout_s
        self._fields: Tuple[str, ...] = ()
        self._count = 0
        self._interval = 1.0
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._cond = threading.Condition()
        self._latest: Optional[List[Dict[str, Any]]] = None
        self._latest_seq = 0
        self._taken_seq = 0
        self._uuids: Dict[str, int] = {}
        self._stderr_tail = ""

    def _find(self) -> str:
        smi = self._smi or shutil.which("nvidia-smi")
        if not smi:
            raise SourceUnavailable("nvidia-smi not found",
                                    no_driver=not os.path.exists("/proc/driver/nvidia/version"))
        return smi

    def open(self, interval: float) -> None:
        self._interval = interval
        smi = self._smi = self._find()
        last: Optional[SourceUnavailable] = None
        for fields in FIELD_SETS:
            try:
                out = subprocess.run(
                    [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                    stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    timeout=self._timeout)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SourceUnavailable("nvidia-smi: %s" % exc) from None
            text = out.stdout + out.stderr
            if out.returncode == 0:
                rows = [r for r in (parse_query_line(line, fields)
                                    for line in out.stdout.splitlines()) if r is not None]
                if not rows:
                    raise SourceUnavailable("nvidia-smi: no devices were found", no_gpu=True)
                self._fields = fields
                self._count = len(rows)
                self.driver = rows[0].get("driver")
                self._uuids = {r["uuid"]: r["index"] for r in rows if r.get("uuid")}
                break
            last = classify_failure(text)
            if "not a valid field" not in text.lower():
                raise last
        else:
            raise last or SourceUnavailable("nvidia-smi: no usable query")
        self._start()

    def _start(self) -> None:
        ms = max(int(self._interval * 1000), 100)
        argv = [str(self._smi), "--query-gpu=" + ",".join(self._fields),
                "--format=csv,noheader,nounits", "-lms", str(ms)]
        stdbuf = shutil.which("stdbuf")
        if stdbuf:  # a tick's lines must not wait in a pipe buffer
            argv = [stdbuf, "-oL", *argv]
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name="nvidia-smi", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        group: List[Dict[str, Any]] = []
        for line in proc.stdout:
            rec = parse_query_line(line, self._fields)
            if rec is None:
                continue
            if group and any(g["index"] == rec["index"] for g in group):
                self._publish(group)  # a repeated index starts the next tick
                group = []
            group.append(rec)
            if len(group) >= self._count:
                self._publish(group)
                group = []
        if proc.stderr is not None:
            try:
                self._stderr_tail = proc.stderr.read()[-500:]
            except (OSError, ValueError):
                pass
        with self._cond:
            self._cond.notify_all()

    def _publish(self, group: List[Dict[str, Any]]) -> None:
        gpus = sorted(group, key=lambda g: g["index"])
        for g in gpus:
            g.pop("driver", None)
        with self._cond:
            self._latest = gpus
            self._latest_seq += 1
            self._cond.notify_all()

    def sample(self) -> Optional[List[Dict[str, Any]]]:
        """The next tick nvidia-smi prints; None when none came within three intervals."""
        deadline = time.monotonic() + max(3 * self._interval, 2.0)
        with self._cond:
            while self._latest_seq == self._taken_seq:
                if self._proc is not None and self._proc.poll() is not None and (
                        self._reader is None or not self._reader.is_alive()):
                    raise protocol.AgentError(
                        "nvidia_smi_exited", "nvidia-smi stopped (exit %s): %s" % (
                            self._proc.returncode, self._stderr_tail.strip() or "no output"))
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, 0.5))
            self._taken_seq = self._latest_seq
            return self._latest

    def processes(self) -> Optional[List[Dict[str, Any]]]:
        try:
            out = subprocess.run(
                [str(self._smi), "--query-compute-apps=" + APPS_QUERY,
                 "--format=csv,noheader,nounits"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=self._timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        return parse_apps(out.stdout, self._uuids)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
