"""Agent ``telemetry``: the NVML source, the sampling loop, source fallback, the no-driver path.

No NVIDIA GPU exists where these tests run. The NVML tests use a FAKE libnvidia-ml
(tests/data/telemetry/fake_nvml.py) placed under the real pynvml, so pynvml's own wrappers,
ctypes structs, error classes and GPM structs run for real and only the C library is
simulated; its workload numbers are the H200 measurements of the reference, fed in -- these
tests check parsing and bookkeeping, not hardware. Real H200 frames are checked by
tests/test_telemetry_captures.py once benchmarks/gpu_validation.py has recorded them.
"""

from __future__ import annotations

import ctypes.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4tui.agent import protocol
from dsv4tui.agent.host import telemetry as agent_telemetry
from dsv4tui.agent.host.gpu_source import (
    GPM_FIELDS,
    GPU_FIELDS,
    Source,
    SourceUnavailable,
    clock_event_names,
)
from dsv4tui.agent.host.nvml_source import GPM_METRICS, NvmlSource
from dsv4tui.agent.host.telemetry import open_source, stream

sys.path.insert(0, str(Path(__file__).parent / "data" / "telemetry"))
import loaders

fk = loaders.fake_nvml()
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def clock() -> Any:
    return fk.FakeClock()


@pytest.fixture
def lib(clock: Any) -> Any:
    return fk.FakeNvmlLib(clock=clock)


def open_nvml(lib: Any) -> tuple[NvmlSource, Any]:
    ctx = fk.installed(lib)
    nv = ctx.__enter__()
    source = NvmlSource(nv)
    source.open(1.0)
    return source, ctx


@pytest.fixture
def nvml(lib: Any) -> Any:
    source, ctx = open_nvml(lib)
    yield source
    source.close()
    ctx.__exit__(None, None, None)


def test_frame_has_every_field_and_the_reference_workloads(nvml: NvmlSource, lib: Any,
                                                           clock: Any) -> None:
    for i, workload in enumerate(["bf16_matmul", "fp32_elementwise", "fp32_matmul_no_tf32",
                                  "idle"]):
        lib.set_workload(i, workload)
    clock.advance(1.0)
    gpus = nvml.sample()
    assert gpus is not None and len(gpus) == 8
    assert all(set(g) == set(GPU_FIELDS) for g in gpus)
    bf16, elementwise, fp32mm, idle = gpus[:4]
    # the three workloads that all read ~100 % utilisation are told apart by GPM only
    assert bf16["util_gpu"] == 99 and bf16["tensor_active"] == 93.2
    assert bf16["hmma_active"] == 93.2 and bf16["sm_active"] == 96.0
    assert elementwise["util_gpu"] == 99 and elementwise["tensor_active"] == 0.0
    assert elementwise["dram_active"] == 87.2 and elementwise["sm_occupancy"] == 84.2
    assert fp32mm["util_gpu"] == 100 and fp32mm["tensor_active"] == 0.0
    assert fp32mm["fp32_active"] == 76.3
    assert idle["util_gpu"] == 0 and idle["tensor_active"] == 0.0 and idle["gpm"] is True
    assert bf16["name"] == "NVIDIA H200" and bf16["uuid"].startswith("GPU-")
    assert bf16["mem_total_mib"] == 143771 and bf16["power_limit_w"] == 700.0
    assert bf16["power_w"] == 690.0 and bf16["pstate"] == "P0"
    assert bf16["sm_clock_mhz"] == 1980 and bf16["sm_clock_max_mhz"] == 1980
    assert bf16["mem_clock_mhz"] == 3201 and isinstance(bf16["temp_c"], int)
    assert idle["clock_event_reasons"] == ["gpu_idle"] and bf16["clock_event_reasons"] == []
    json.dumps(gpus, allow_nan=False)


def test_gpm_unsupported_is_null_never_zero(clock: Any) -> None:
    lib = fk.FakeNvmlLib(gpus=fk.h200_gpus(2), clock=clock)
    lib.gpus[1].gpm_supported = False  # e.g. an Ampere part: no GPM
    source, ctx = open_nvml(lib)
    try:
        clock.advance(1.0)
        gpus = source.sample()
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert gpus is not None
    assert gpus[0]["gpm"] is True and gpus[0]["tensor_active"] == 0.0
    assert gpus[1]["gpm"] is False
    assert all(gpus[1][f] is None for f in GPM_FIELDS)
    assert gpus[1]["util_gpu"] == 0  # basic NVML still works
    assert lib.calls["nvmlGpmSampleGet"] == 2  # baseline + one tick, only for GPU 0


def test_one_unsupported_gpm_metric_is_null_alone(lib: Any, clock: Any) -> None:
    lib.gpus[0].gpm_unsupported = {fk.M.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
                                   fk.M.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC}
    source, ctx = open_nvml(lib)
    try:
        clock.advance(1.0)
        g = source.sample()[0]  # type: ignore[index]
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert g["nvlink_rx_mib_s"] is None and g["nvlink_tx_mib_s"] is None
    assert g["pcie_rx_mib_s"] == 5.0 and g["tensor_active"] == 0.0


def test_nan_metric_becomes_null(lib: Any, clock: Any) -> None:
    lib.gpus[0].gpm_rates[fk.M.NVML_GPM_METRIC_FP16_UTIL] = float("nan")
    source, ctx = open_nvml(lib)
    try:
        clock.advance(1.0)
        g = source.sample()[0]  # type: ignore[index]
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert g["fp16_active"] is None
    json.dumps(g, allow_nan=False)


def test_gpm_buffers_allocated_once_swapped_each_tick_and_freed(lib: Any, clock: Any) -> None:
    assert lib.initialised == 0  # nothing touched NVML before open(): lazy
    source, ctx = open_nvml(lib)
    try:
        assert lib.initialised == 1
        assert lib.samples_allocated == 16  # two per GPU, once
        readings = []
        for workload in ("idle", "bf16_matmul", "idle", "fp32_elementwise"):
            lib.set_workload(0, workload)
            clock.advance(1.0)
            readings.append(source.sample()[0])  # type: ignore[index]
        assert lib.samples_allocated == 16  # no allocation per tick
        assert lib.calls["nvmlGpmSampleGet"] == 8 * (1 + 4)  # baseline + one per tick
        # each tick measures only its own window (prev/cur swapped), not since the start
        assert [r["tensor_active"] for r in readings] == [0.0, 93.2, 0.0, 0.0]
        assert [r["dram_active"] for r in readings] == [0.0, 17.2, 0.0, 87.2]
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert lib.samples_freed == 16 and lib.initialised == 0


def test_not_supported_call_is_not_asked_again(lib: Any, clock: Any) -> None:
    lib.fail["nvmlDeviceGetPowerUsage"] = fk.NOT_SUPPORTED
    source, ctx = open_nvml(lib)
    try:
        for _ in range(3):
            clock.advance(1.0)
            gpus = source.sample()
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert gpus is not None and all(g["power_w"] is None for g in gpus)
    assert lib.calls["nvmlDeviceGetPowerUsage"] == 8  # once per GPU, then remembered


def test_lost_gpu_reports_an_error_and_the_others_continue(lib: Any, clock: Any) -> None:
    source, ctx = open_nvml(lib)
    try:
        lib.gpus[3].lost = True
        clock.advance(1.0)
        gpus = source.sample()
        clock.advance(1.0)
        again = source.sample()
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert gpus is not None and again is not None
    assert gpus[3]["error"] == "GPU is lost" and gpus[3]["util_gpu"] is None
    assert gpus[3]["tensor_active"] is None and gpus[3]["name"] == "NVIDIA H200"
    assert again[3]["error"] == "GPU is lost"
    assert gpus[2].get("error") is None and gpus[2]["util_gpu"] == 0


def test_a_gpu_without_a_handle_is_reported_not_fatal(lib: Any, clock: Any) -> None:
    lib.handle_errors[6] = fk.M.NVML_ERROR_UNKNOWN  # "Unable to determine the device handle"
    source, ctx = open_nvml(lib)
    try:
        clock.advance(1.0)
        gpus = source.sample()
        procs = source.processes()
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert gpus is not None and len(gpus) == 8
    assert gpus[6]["error"] == "Unknown Error" and gpus[6]["util_gpu"] is None
    assert gpus[7].get("error") is None and gpus[7]["tensor_active"] == 0.0
    assert procs == []
    assert lib.samples_freed == lib.samples_allocated == 14


def test_processes_per_gpu(lib: Any, clock: Any) -> None:
    lib.gpus[0].processes = [(4242, 130112 * fk.MIB), (4243, None)]
    lib.gpus[5].processes = [(4244, 512 * fk.MIB)]
    lib.process_names[4244] = "/opt/venv/bin/python3"
    source, ctx = open_nvml(lib)
    try:
        procs = source.processes()
    finally:
        source.close()
        ctx.__exit__(None, None, None)
    assert procs is not None
    by_pid = {p["pid"]: p for p in procs}
    assert by_pid[4242]["gpu"] == 0 and by_pid[4242]["mem_mib"] == 130112
    assert by_pid[4243]["mem_mib"] is None  # NVML_VALUE_NOT_AVAILABLE -> null, not a number
    assert by_pid[4244]["gpu"] == 5 and by_pid[4244]["mem_mib"] == 512
    assert all(isinstance(p["name"], str) and p["name"] for p in procs)


@pytest.mark.parametrize(("code", "no_driver"), [
    (fk.DRIVER_NOT_LOADED, True), (fk.LIBRARY_NOT_FOUND, True),
    (fk.M.NVML_ERROR_LIB_RM_VERSION_MISMATCH, False), (fk.M.NVML_ERROR_NO_PERMISSION, False),
])
def test_nvml_init_failure(code: int, no_driver: bool, clock: Any) -> None:
    lib = fk.FakeNvmlLib(clock=clock, init_error=code)
    with fk.installed(lib) as nv:
        source = NvmlSource(nv)
        with pytest.raises(SourceUnavailable) as err:
            source.open(1.0)
    assert err.value.no_driver is no_driver
    assert "nvmlInit" in err.value.reason


def test_no_gpu_is_its_own_failure(clock: Any) -> None:
    lib = fk.FakeNvmlLib(gpus=[], clock=clock)
    with fk.installed(lib) as nv, pytest.raises(SourceUnavailable) as err:
        NvmlSource(nv).open(1.0)
    assert err.value.no_gpu and lib.initialised == 0  # shut down again


def test_clock_event_names() -> None:
    assert clock_event_names(None) is None
    assert clock_event_names(0) == []
    assert clock_event_names(0x1 | 0x4) == ["gpu_idle", "sw_power_cap"]
    assert clock_event_names(0x40 | 0x8000) == ["hw_thermal", "0x8000"]


def test_gpm_metric_table_matches_the_frame_fields() -> None:
    assert tuple(f for f, _c, _n in GPM_METRICS) == GPM_FIELDS


# -- the loop --------------------------------------------------------------------------------

class ListSource(Source):
    name = "test"

    def __init__(self, paced: bool = False) -> None:
        self.ticks = 0
        self.paced = paced
        self.driver = "1.0"

    def open(self, interval: float) -> None:
        pass

    def sample(self) -> list[dict[str, Any]] | None:
        self.ticks += 1
        if self.paced and self.ticks % 2 == 0:
            return None  # nothing new this time
        return [{"index": 0, "util_gpu": self.ticks}]

    def processes(self) -> list[dict[str, Any]] | None:
        return [{"gpu": 0, "pid": 1, "name": "x", "mem_mib": 1}]


def test_stream_paces_frames_and_samples_processes_slower(clock: Any) -> None:
    events: list[dict[str, Any]] = []
    sleeps: list[float] = []

    def sleep(dt: float) -> None:
        sleeps.append(round(dt, 3))
        clock.advance(dt)

    def emit(type_: str, **fields: Any) -> None:
        events.append({"type": type_, **fields})

    sent = stream(ListSource(), 1.0, count=12, processes_every=5.0, emit=emit, clock=clock,
                  sleep=sleep)
    assert sent == 12 and [e["seq"] for e in events] == list(range(12))
    assert sleeps[0] == agent_telemetry.FIRST_TICK_S and set(sleeps[1:]) == {1.0}
    with_procs = [e["seq"] for e in events if "processes" in e]
    assert with_procs == [0, 5, 10]
    assert all(e["source"] == "test" and e["driver"] == "1.0" and e["interval"] == 1.0
               for e in events)


def test_stream_skips_missed_ticks_instead_of_bursting(clock: Any) -> None:
    at: list[float] = []

    class Slow(ListSource):
        def sample(self) -> list[dict[str, Any]] | None:
            if self.ticks == 1:
                clock.advance(3.5)  # one stuck NVML call
            return super().sample()

    stream(Slow(), 1.0, count=5, processes_every=0, emit=lambda t, **f: at.append(clock()),
           clock=clock, sleep=clock.advance)
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(at)]
    assert gaps[0] == 4.5  # the stall
    assert gaps[1:] == [1.0, 1.0, 1.0]  # then the normal pace again, no burst of catch-up frames


def test_stream_paced_source_skips_empty_ticks(clock: Any) -> None:
    events: list[dict[str, Any]] = []
    stream(ListSource(paced=True), 1.0, count=3, processes_every=0,
           emit=lambda t, **f: events.append(f), clock=clock, sleep=clock.advance)
    assert [e["gpus"][0]["util_gpu"] for e in events] == [1, 3, 5]


# -- source selection ------------------------------------------------------------------------

class Failing(Source):
    def __init__(self, name: str, exc: SourceUnavailable | None) -> None:
        self.name = name
        self.exc = exc

    def open(self, interval: float) -> None:
        if self.exc:
            raise self.exc

    def sample(self) -> list[dict[str, Any]] | None:
        return []


def test_auto_falls_back_to_nvidia_smi_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSV4TUI_SIM_STATE", raising=False)
    made = {"nvml": Failing("nvml", SourceUnavailable("nvmlInit: NVML Shared Library Not Found",
                                                      no_driver=True)),
            "nvidia-smi": Failing("nvidia-smi", None)}
    source = open_source("auto", 1.0, make=made.__getitem__)
    assert source.name == "nvidia-smi"
    assert source.note is not None and "NVML Shared Library Not Found" in source.note


def test_auto_uses_the_simulator_when_its_state_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSV4TUI_SIM_STATE", "/nonexistent/state.json")
    asked: list[str] = []

    def make(name: str) -> Source:
        asked.append(name)
        return Failing(name, None)

    assert open_source("auto", 1.0, make=make).name == "simulated"
    assert asked == ["simulated"]


@pytest.mark.parametrize(("failures", "kind"), [
    ([SourceUnavailable("a", no_driver=True), SourceUnavailable("b", no_driver=True)],
     "no_driver"),
    ([SourceUnavailable("a", no_gpu=True), SourceUnavailable("b", no_driver=True)], "no_gpu"),
    ([SourceUnavailable("mismatch"), SourceUnavailable("b", no_driver=True)], "driver_error"),
])
def test_no_source_is_exit_3(monkeypatch: pytest.MonkeyPatch,
                             failures: list[SourceUnavailable], kind: str) -> None:
    monkeypatch.delenv("DSV4TUI_SIM_STATE", raising=False)
    made = dict(zip(["nvml", "nvidia-smi"], failures, strict=True))
    with pytest.raises(protocol.AgentError) as err:
        open_source("auto", 1.0, make=lambda n: Failing(n, made[n]))
    assert err.value.kind == kind and err.value.exit_code == 3
    if kind == "no_driver":
        assert err.value.message == f"no NVIDIA driver on {agent_telemetry.hostname()}"


# -- the real command, in a subprocess --------------------------------------------------------

def agent(*args: str, env: dict[str, str] | None = None,
          timeout: float = 30) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], capture_output=True,
                          text=True, timeout=timeout, env=full, cwd=REPO)


def _has_nvidia_driver() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or bool(ctypes.util.find_library(
        "nvidia-ml"))


@pytest.mark.skipif(_has_nvidia_driver(), reason="this machine has an NVIDIA driver")
@pytest.mark.e2e
def test_no_driver_error_event_and_exit_3(tmp_path: Path) -> None:
    """The real path on this driver-less machine: NVML absent, no nvidia-smi on PATH."""
    env = {"PATH": str(tmp_path), "DSV4TUI_SIM_STATE": ""}
    out = agent("telemetry", "--count", "1", env=env)
    assert out.returncode == 3
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(events) == 1 and events[0]["type"] == "error"
    assert events[0]["kind"] == "no_driver"
    assert events[0]["message"].startswith("no NVIDIA driver on ")
    assert "Traceback" not in out.stderr


@pytest.mark.e2e
def test_interval_below_minimum_is_a_usage_error() -> None:
    out = agent("telemetry", "--interval", "0.1")
    assert out.returncode == 2
    ev = json.loads(out.stdout.splitlines()[-1])
    assert ev["type"] == "error" and "0.2" in ev["message"]


@pytest.mark.e2e
def test_simulated_frames_from_the_real_command() -> None:
    out = agent("telemetry", "--interval", "0.2", "--count", "2", "--source", "simulated",
                env={"DSV4TUI_SIM_GPUS": "8"})
    assert out.returncode == 0, out.stderr
    frames = [json.loads(line) for line in out.stdout.splitlines()]
    assert [f["seq"] for f in frames] == [0, 1]
    assert all(f["type"] == "frame" and f["source"] == "simulated" for f in frames)
    assert len(frames[0]["gpus"]) == 8 and "processes" in frames[0]
