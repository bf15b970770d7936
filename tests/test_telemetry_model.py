"""Console-side telemetry: frame parsing, the CLI JSON shape, history rings, stale detection."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.core import telemetry as tm
from dsv4tui.core.telemetry import (
    CLI_GPU_KEYS,
    Frame,
    FrameError,
    GpuSample,
    HostTelemetry,
    Ring,
    TelemetryHistory,
)

sys.path.insert(0, str(Path(__file__).parent / "data" / "telemetry"))
import loaders

FIXTURE = "fake_nvml_h200x8.jsonl"  # NVML-fake frames (no GPU here), see the fixture README


def frame_event(t: float, gpus: list[dict[str, Any]] | None = None, interval: float = 1.0,
                **extra: Any) -> dict[str, Any]:
    ev = {"type": "frame", "v": 1, "seq": 0, "time": t, "interval": interval,
          "source": "nvml", "driver": "580.159",
          "gpus": gpus if gpus is not None else [{"index": i, "util_gpu": 50, "name": "NVIDIA H200",
                                                  "tensor_active": 1.0 * i} for i in range(2)]}
    ev.update(extra)
    return ev


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_parses_agent_frames() -> None:
    events = loaders.frames(FIXTURE)
    frames = [Frame.from_event(e) for e in events]
    assert len(frames) == 60
    f = frames[-1]
    assert f.source == "nvml" and f.driver == "580.159" and f.interval == 1.0
    assert [g.index for g in f.gpus] == list(range(8))
    g0 = f.gpus[0]
    assert g0.name == "NVIDIA H200" and g0.gpm is True and g0.mem_total_mib == 143771
    assert g0.clock_event_reasons == () and g0.pstate == "P0"
    assert frames[0].processes is not None and frames[1].processes is None
    assert frames[0].processes[0].pid == 41200


def test_tolerant_parsing() -> None:
    ev = frame_event(5.0, gpus=[{"index": 1, "util_gpu": "99", "power_w": float("nan"),
                                 "gpm": "yes", "clock_event_reasons": "gpu_idle",
                                 "temp_c": True, "future_field": 1},
                                {"index": 0, "util_gpu": 3.5}, "garbage"],
                     processes=[{"pid": "x"}, {"pid": 7, "gpu": 0, "mem_mib": 12}],
                     interval=-1, seq=True)
    f = Frame.from_event(ev)
    assert [g.index for g in f.gpus] == [0, 1]  # sorted
    g1 = f.gpus[1]
    assert g1.util_gpu is None and g1.power_w is None and g1.temp_c is None
    assert g1.gpm is False and g1.clock_event_reasons is None
    assert f.gpus[0].util_gpu == 3.5
    assert f.interval == 1.0 and f.seq is None
    assert f.processes == (tm.GpuProcess(gpu=0, pid=7, name="?", mem_mib=12),)


@pytest.mark.parametrize("ev", [
    {"type": "hello"}, {"type": "frame"}, {"type": "frame", "gpus": [{"name": "x"}]},
    {"type": "frame", "gpus": [{"index": -1}]},
])
def test_bad_frames(ev: dict[str, Any]) -> None:
    with pytest.raises(FrameError):
        Frame.from_event(ev)


def test_cli_json_shape_is_exact() -> None:
    f = Frame.from_event(loaders.frames(FIXTURE)[-1])
    out = f.to_cli_json("ct200")
    assert list(out) == ["host", "time", "gpus", "source"]
    assert out["host"] == "ct200" and out["source"] == "nvml" and out["time"] == f.time
    assert list(CLI_GPU_KEYS) == ["index", "name", "util_gpu", "mem_used_mib", "mem_total_mib",
                                  "power_w", "power_limit_w", "temp_c", "sm_clock_mhz",
                                  "tensor_active", "sm_active", "dram_active"]
    assert all(list(g) == list(CLI_GPU_KEYS) for g in out["gpus"])
    assert out["gpus"][4]["tensor_active"] == 93.2


def test_null_stays_null_in_json() -> None:
    f = Frame.from_event(frame_event(1.0, gpus=[{"index": 0, "name": "A100"}], source="nvidia-smi"))
    g = f.to_cli_json("h")["gpus"][0]
    assert g["tensor_active"] is None and g["util_gpu"] is None and g["name"] == "A100"


def test_gpu_sample_round_trip_and_helpers() -> None:
    g = GpuSample.from_dict({"index": 2, "util_gpu": 99, "tensor_active": 0.8,
                             "mem_used_mib": 50, "mem_total_mib": 100, "power_w": 350.0,
                             "power_limit_w": 700.0, "clock_event_reasons": ["sw_power_cap"]})
    assert GpuSample.from_dict(g.to_dict()) == g
    assert g.mem_frac == 0.5 and g.power_frac == 0.5 and g.cuda_core_bound
    assert not GpuSample(index=0, util_gpu=99).cuda_core_bound  # tensor unknown: no verdict
    assert g.value("name") is None and g.value("util_gpu") == 99


def test_ring_wraps_and_keeps_none() -> None:
    r = Ring(3)
    assert r.values() == [] and r.latest() is None
    for v in (1, None, 3, 4):
        r.append(v)
    assert r.values() == [None, 3.0, 4.0] and len(r) == 3 and r.latest() == 4.0
    assert r.values(2) == [3.0, 4.0] and r.values(0) == [] and r.values(99) == [None, 3.0, 4.0]
    r.resize(5)
    r.append(5)
    assert r.values() == [None, 3.0, 4.0, 5.0] and r.capacity == 5
    r.resize(2)
    assert r.values() == [4.0, 5.0]
    with pytest.raises(ValueError):
        Ring(0)


def test_history_holds_ten_minutes_at_one_hertz() -> None:
    h = TelemetryHistory()
    assert h.capacity >= 600
    for i in range(h.capacity + 100):
        h.add(Frame.from_event(frame_event(1000.0 + i)))
    s = h.series(1, "tensor_active")
    assert len(s) == h.capacity and all(v == 1.0 for v in s)
    times = h.times(0)
    assert times[0] == 1100.0 and times[-1] == 1000.0 + h.capacity + 99
    assert h.series(0, "util_gpu", 3) == [50.0, 50.0, 50.0]
    assert h.series(9, "util_gpu") == [] and h.series(0, "nope") == []
    assert h.gpus() == [0, 1]


def test_history_marks_gaps_and_missing_gpus() -> None:
    h = TelemetryHistory(seconds=60)
    h.add(Frame.from_event(frame_event(10.0)))
    h.add(Frame.from_event(frame_event(13.0)))  # two ticks never came
    assert h.series(0, "util_gpu") == [50.0, None, None, 50.0]
    h.add(Frame.from_event(frame_event(14.0, gpus=[{"index": 0, "util_gpu": 7}])))
    assert h.series(1, "util_gpu")[-1] is None  # GPU 1 absent from that frame
    assert h.series(0, "util_gpu")[-1] == 7.0


def test_history_keeps_its_span_at_faster_intervals() -> None:
    h = TelemetryHistory(seconds=600, interval=1.0)
    h.add(Frame.from_event(frame_event(1.0, interval=0.5)))
    assert h.capacity == 1200


def test_stale_after_three_intervals_per_gpu() -> None:
    clock = Clock(100.0)
    t = HostTelemetry("ct200", clock=clock)
    assert t.gpus() == [] and t.age() is None and not t.is_stale()
    t.add(Frame.from_event(frame_event(1.0)))
    clock.t = 102.9
    assert not t.is_stale() and [s.stale for s in t.gpus()] == [False, False]
    # GPU 1 drops out of the frames; GPU 0 keeps coming
    t.add(Frame.from_event(frame_event(2.0, gpus=[{"index": 0, "util_gpu": 1}])))
    clock.t = 103.5
    st = t.gpus()
    assert [s.stale for s in st] == [False, True]
    assert st[1].age_s == pytest.approx(3.5) and st[1].sample.util_gpu == 50  # last known
    assert not t.is_stale() and t.is_stale(1)
    clock.t = 110.0
    assert t.is_stale() and t.age() == pytest.approx(7.1)


def test_stale_threshold_follows_the_frame_interval() -> None:
    clock = Clock(0.0)
    t = HostTelemetry("h", interval=1.0, clock=clock)
    t.add(Frame.from_event(frame_event(1.0, interval=0.2)), received=0.0)
    clock.t = 0.7
    assert t.is_stale() and t.stale_after_s == pytest.approx(0.6)


def test_host_telemetry_events_processes_and_errors() -> None:
    t = HostTelemetry("h", clock=Clock(5.0))
    assert t.add_event({"type": "cancelled"}) is None
    t.set_error("no NVIDIA driver on h")
    f = t.add_event(frame_event(1.0, processes=[{"gpu": 1, "pid": 9, "name": "sglang", "mem_mib": 3}]))
    assert f is not None and t.error is None and t.frames == 1
    assert [(p.gpu, p.pid) for p in t.processes or ()] == [(1, 9)]
    t.add_event(frame_event(2.0))  # no processes this time: the last sample is kept
    assert t.processes is not None and len(t.processes) == 1
    assert t.summary() == "2× NVIDIA H200"  # noqa: RUF001
    assert t.source == "nvml" and not t.simulated


def test_model_summary_mixed() -> None:
    gpus = [GpuSample(0, name="A"), GpuSample(1, name="A"), GpuSample(2, name="B"), GpuSample(3)]
    assert tm.model_summary(gpus) == "2× A + 1× B + 1× GPU"  # noqa: RUF001
    assert tm.model_summary([]) == "no GPU"


def test_formatting_never_turns_null_into_zero() -> None:
    assert tm.fmt_pct(None) == "n/a" and tm.fmt_reading(None) == "n/a"
    assert tm.fmt_pct(0) == "0%" and tm.fmt_pct(0.8) == "0.8%" and tm.fmt_pct(93.2) == "93%"
    assert tm.fmt_mem(None, None) == "n/a" and tm.fmt_mem(None, 1024) == "n/a/1G"
    assert tm.fmt_mem(126400, 143771) == "123.4/140G"
    assert tm.fmt_age(7.9) == "7s" and tm.fmt_age(192) == "3m12s" and tm.fmt_age(7500) == "2h05m"
    assert not math.isnan(tm.HISTORY_S)
