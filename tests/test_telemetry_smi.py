"""The nvidia-smi fallback: CSV parsing and the streaming source.

The CSV fixtures follow nvidia-smi's ``--format=csv,noheader,nounits`` output; the first
line of smi_h200x8_base.csv is the real H200 line from shared/reference/gpu-telemetry.md, the
others are modelled on it (tests/data/telemetry/README.md says which is which). The streaming
tests run a stand-in ``nvidia-smi`` script that prints those fixture lines the way
``-lms`` does; no NVIDIA hardware is involved.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4tui.agent import protocol
from dsv4tui.agent.host import smi_source
from dsv4tui.agent.host.gpu_source import GPM_FIELDS, SourceUnavailable
from dsv4tui.agent.host.smi_source import (
    BASE_FIELDS,
    FIELD_SETS,
    SmiSource,
    classify_failure,
    parse_apps,
    parse_query_line,
    parse_value,
    split_csv_line,
)

sys.path.insert(0, str(Path(__file__).parent / "data" / "telemetry"))
import loaders

REPO = Path(__file__).resolve().parent.parent
BASE = [f for f, _k, _p in BASE_FIELDS]


def test_reference_line() -> None:
    rec = parse_query_line(loaders.REFERENCE_SMI_LINE, BASE)
    assert rec is not None
    assert rec["index"] == 0 and rec["name"] == "NVIDIA H200"
    assert rec["uuid"] == "GPU-6a7f0c1e-0000-4000-8000-000000000000"
    assert (rec["util_gpu"], rec["util_mem"], rec["mem_used_mib"], rec["mem_total_mib"]) == (
        0, 0, 0, 143771)
    assert rec["temp_c"] == 36 and rec["power_w"] == 96.1 and rec["power_limit_w"] == 700.0
    assert rec["sm_clock_mhz"] == 435 and rec["mem_clock_mhz"] == 3201 and rec["pstate"] == "P0"
    # nvidia-smi has no tensor activity: null, never 0
    assert rec["gpm"] is False and all(rec[f] is None for f in GPM_FIELDS)


def test_base_fixture_has_eight_gpus() -> None:
    recs = [parse_query_line(line, BASE) for line in loaders.text("smi_h200x8_base.csv").splitlines()]
    assert [r["index"] for r in recs if r] == list(range(8))


def test_na_and_not_supported_become_null() -> None:
    recs = [parse_query_line(line, BASE) for line in loaders.text("smi_na_cases.csv").splitlines()]
    mig, laptop, broken, l4 = recs
    assert mig is not None and laptop is not None and broken is not None and l4 is not None
    assert mig["util_gpu"] is None and mig["util_mem"] is None  # [N/A] in MIG mode
    assert mig["mem_used_mib"] == 10240 and mig["power_w"] == 61.8
    assert laptop["power_w"] is None and laptop["power_limit_w"] is None  # [N/A], [Not Supported]
    assert laptop["pstate"] == "P8" and laptop["util_gpu"] == 3
    assert broken["util_gpu"] is None and broken["temp_c"] is None  # [Unknown Error]
    assert broken["power_limit_w"] == 700.0 and broken["pstate"] is None
    assert l4["pstate"] is None and l4["power_limit_w"] == 72.0


@pytest.mark.parametrize("cell", ["[N/A]", "[Not Supported]", "N/A", "", "  ", "[Unknown Error]",
                                  "[GPU requires reset]", "[Insufficient Permissions]", "abc"])
def test_parse_value_nulls(cell: str) -> None:
    assert parse_value(cell, float) is None


def test_extended_fields_and_reason_mask() -> None:
    line = loaders.text("smi_h200x8_loop.csv").splitlines()[0]
    rec = parse_query_line(line, FIELD_SETS[1])
    assert rec is not None
    assert rec["sm_clock_max_mhz"] == 1980 and rec["driver"] == "580.159"
    assert rec["clock_event_reasons"] == []
    rec = parse_query_line(line.replace("0x0000000000000000", "0x0000000000000005"),
                           FIELD_SETS[1])
    assert rec is not None and rec["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]


def test_split_keeps_a_comma_in_the_free_text_column() -> None:
    row = split_csv_line("3, Weird, Name GPU, GPU-x, 1", 4)
    assert row == ["3", "Weird, Name GPU", "GPU-x", "1"]
    assert split_csv_line("1, 2", 4) is None
    assert parse_query_line("", BASE) is None
    assert parse_query_line("No devices were found", BASE) is None


def test_parse_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smi_source, "process_title", lambda pid: None)
    uuids = {"GPU-6a7f0c1e-0000-4000-8000-000000000000": 0,
             "GPU-6a7f0c1e-0001-4000-8000-000000000001": 1}
    procs = parse_apps(loaders.text("smi_apps.csv"), uuids)
    assert procs == [
        {"gpu": 0, "pid": 41200, "name": "python3", "mem_mib": 130112},
        {"gpu": 1, "pid": 41201, "name": "python3", "mem_mib": 130112},
        {"gpu": None, "pid": 41202, "name": "?", "mem_mib": None},
    ]
    assert parse_apps("", uuids) == []


def test_classify_failures() -> None:
    assert classify_failure(loaders.text("smi_no_driver.txt")).no_driver
    assert classify_failure("No devices were found\n").no_gpu
    other = classify_failure("Failed to initialize NVML: Driver/library version mismatch\n")
    assert not other.no_driver and not other.no_gpu and "mismatch" in other.reason


# -- a stand-in nvidia-smi -------------------------------------------------------------------

FAKE_SMI = r'''#!{python}
import os, sys, time
DATA = {data!r}
MODE = os.environ.get("FAKE_SMI_MODE", "ok")
with open(os.environ["FAKE_SMI_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if MODE == "nodriver":
    sys.stdout.write(open(os.path.join(DATA, "smi_no_driver.txt")).read())
    sys.exit(9)
if any(a.startswith("--query-compute-apps=") for a in args):
    sys.stdout.write(open(os.path.join(DATA, "smi_apps.csv")).read())
    sys.exit(0)
fields = [a for a in args if a.startswith("--query-gpu=")][0].split("=", 1)[1]
if "clocks_event_reasons.active" in fields:  # an older driver: unknown field
    sys.stdout.write(open(os.path.join(DATA, "smi_bad_field.txt")).read())
    sys.exit(2)
lines = open(os.path.join(DATA, "smi_h200x8_loop.csv")).read().splitlines()
ticks = [lines[:8], lines[8:]]
if "-lms" not in args:
    print("\n".join(ticks[0]))
    sys.exit(0)
ms = int(args[args.index("-lms") + 1])
k = 0
while True:
    for line in ticks[k % 2]:
        print(line, flush=True)
    k += 1
    if MODE == "die" and k == 2:
        sys.stderr.write("Unable to determine the device handle for GPU0000:19:00.0: GPU is lost\n")
        sys.exit(15)
    time.sleep(ms / 1000.0)
'''


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text(FAKE_SMI.format(python=sys.executable, data=str(loaders.HERE)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_SMI_LOG", str(tmp_path / "smi.log"))
    monkeypatch.setattr(smi_source, "process_title", lambda pid: None)
    return path


@pytest.mark.e2e
def test_source_probes_streams_and_groups_ticks(fake_smi: Path, tmp_path: Path) -> None:
    source = SmiSource(str(fake_smi))
    source.open(0.2)
    try:
        assert source.driver == "580.159"
        ticks = [source.sample() for _ in range(3)]
        procs = source.processes()
    finally:
        source.close()
    calls = (tmp_path / "smi.log").read_text().splitlines()
    assert "clocks_event_reasons.active" in calls[0]  # newest field set tried first ...
    assert "clocks_throttle_reasons.active" in calls[1]  # ... then the older name
    assert "-lms 200" in calls[2]
    for gpus in ticks:
        assert gpus is not None and [g["index"] for g in gpus] == list(range(8))
        assert all("driver" not in g and g["gpm"] is False for g in gpus)
        assert all(g["tensor_active"] is None for g in gpus)
    assert {ticks[0][0]["power_w"], ticks[1][0]["power_w"]} == {452.4, 455.1}
    assert procs is not None and [p["gpu"] for p in procs] == [0, 1, 2]
    assert source._proc is None  # closed


@pytest.mark.e2e
def test_source_reports_when_nvidia_smi_dies(fake_smi: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMI_MODE", "die")
    source = SmiSource(str(fake_smi))
    source.open(0.2)
    try:
        with pytest.raises(protocol.AgentError) as err:
            for _ in range(5):
                source.sample()
    finally:
        source.close()
    assert err.value.kind == "nvidia_smi_exited" and "GPU is lost" in err.value.message


@pytest.mark.e2e
def test_source_no_driver(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMI_MODE", "nodriver")
    with pytest.raises(SourceUnavailable) as err:
        SmiSource(str(fake_smi)).open(1.0)
    assert err.value.no_driver


def _agent(args: list[str], path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(PYTHONPATH=str(REPO), PATH=f"{path}:/usr/bin:/bin", DSV4TUI_SIM_STATE="", **env)
    return subprocess.run([sys.executable, "-m", "dsv4tui.agent", *args], capture_output=True,
                          text=True, timeout=30, env=full, cwd=REPO)


@pytest.mark.skipif(bool(ctypes.util.find_library("nvidia-ml")),
                    reason="NVML loads here, so the agent would not fall back")
@pytest.mark.e2e
def test_agent_falls_back_to_nvidia_smi(fake_smi: Path) -> None:
    out = _agent(["telemetry", "--interval", "0.2", "--count", "2"], fake_smi.parent)
    assert out.returncode == 0, out.stderr
    frames = [json.loads(line) for line in out.stdout.splitlines()]
    assert [f["source"] for f in frames] == ["nvidia-smi", "nvidia-smi"]
    assert frames[0]["driver"] == "580.159" and "nvml" in frames[0]["note"]
    assert len(frames[0]["gpus"]) == 8 and frames[0]["gpus"][0]["tensor_active"] is None
    assert frames[0]["processes"][0]["pid"] == 41200


@pytest.mark.skipif(bool(ctypes.util.find_library("nvidia-ml")),
                    reason="NVML loads here")
@pytest.mark.e2e
def test_agent_nvidia_smi_without_driver_is_exit_3(fake_smi: Path) -> None:
    out = _agent(["telemetry", "--count", "1"], fake_smi.parent, FAKE_SMI_MODE="nodriver")
    assert out.returncode == 3, out.stderr
    (event,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert event["type"] == "error" and event["kind"] == "no_driver"
    assert event["message"].startswith("no NVIDIA driver on ")
    assert "Traceback" not in out.stderr
