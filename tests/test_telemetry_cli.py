"""``dsv4tui gpus HOST``: the JSON shape, the table, live redraw, Ctrl-C, and no driver.

The ``local`` host runs the real agent as a subprocess. With no GPU here, frames come from
the simulated source (``DSV4TUI_SIM_STATE`` set) -- or, for the no-driver test, from nothing.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsv4tui.cli.gpus import render_table
from dsv4tui.core.telemetry import CLI_GPU_KEYS, Frame, HostTelemetry
from dsv4tui.main import main

REPO = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path, sim: bool = True, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.pop("DSV4TUI_SIM_STATE", None)
    if sim:
        env["DSV4TUI_SIM_STATE"] = str(tmp_path / "no-server-yet.json")
        env["DSV4TUI_SIM_GPUS"] = "8"
    env.update(extra)
    return env


@pytest.fixture
def sim_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated source for the agent that `local` starts (no server: idle GPUs)."""
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "no-server-yet.json"))
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "8")
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI in this process (the agent still runs as a real subprocess)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_once_json_shape(sim_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "gpus", "local", "--once", "--json")
    assert code == 0, err
    obj = json.loads(out)
    assert list(obj) == ["host", "time", "gpus", "source"]
    assert obj["host"] == "local" and obj["source"] == "simulated"
    assert isinstance(obj["time"], float) and abs(obj["time"] - time.time()) < 60
    assert len(obj["gpus"]) == 8
    for i, g in enumerate(obj["gpus"]):
        assert list(g) == list(CLI_GPU_KEYS)
        assert g["index"] == i and g["mem_used_mib"] == 0 and g["mem_total_mib"] == 143771


def test_once_table(sim_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "gpus", "local", "--once")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("local · 8× NVIDIA H200 · driver simulated · simulated")  # noqa: RUF001
    assert "SIMULATED" in lines[0]
    assert lines[1].split()[:3] == ["GPU", "UTIL", "TENSOR"]
    assert len(lines) == 3 + 8


NO_DRIVER_HERE = pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version") or bool(ctypes.util.find_library("nvidia-ml")),
    reason="this machine has an NVIDIA driver")


@NO_DRIVER_HERE
def test_no_driver_one_line_exit_3(tmp_path: Path) -> None:
    """The whole command in a subprocess: one line on stderr, exit 3, no traceback."""
    out = subprocess.run([sys.executable, "-m", "dsv4tui", "gpus", "local", "--once", "--json"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=_env(tmp_path, sim=False, PATH=str(tmp_path)))
    assert out.returncode == 3
    assert out.stdout == ""
    assert out.stderr.startswith("dsv4tui: error: no NVIDIA driver on ")
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


@NO_DRIVER_HERE
@pytest.mark.parametrize("args", [["--once"], []])
def test_no_driver_table_and_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    monkeypatch.delenv("DSV4TUI_SIM_STATE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi either
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    code, out, err = run_cli(capsys, "gpus", "local", *args)
    assert code == 3 and out == ""
    assert err.startswith("dsv4tui: error: no NVIDIA driver on ") and err.count("\n") == 1


def test_interval_too_small(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "gpus", "local", "--interval", "0.1")
    assert code == 2 and err.count("\n") == 1 and "0.2" in err


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=20)


def test_live_json_lines_until_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dsv4tui", "gpus", "local", "--json",
                             "--interval", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(tmp_path), cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    code = _interrupt(proc)
    err = proc.stderr.read().decode()
    objs = [json.loads(line) for line in lines]
    assert all(list(o) == ["host", "time", "gpus", "source"] for o in objs)
    assert objs[0]["time"] < objs[2]["time"]
    assert code == 0 and "Traceback" not in err


def test_live_table_redraws_in_place_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dsv4tui", "gpus", "local", "--interval",
                             "0.2"], stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=_env(tmp_path, TERM="xterm"), cwd=REPO)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 20
    while seen.count(b"\x1b[H") < 3 and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
    code = _interrupt(proc)
    try:
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            seen += chunk
    except OSError:
        pass
    os.close(master)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    text = seen.decode("utf-8", "replace")
    assert text.startswith("\x1b[?25l\x1b[2J\x1b[H")  # hide cursor, clear, home
    assert text.count("\x1b[H") >= 3 and "\x1b[J" in text  # each frame: home ... clear below
    assert text.rstrip().endswith("\x1b[?25h")  # cursor back after Ctrl-C
    assert "GPU" in text and "TENSOR" in text
    assert code == 0 and "Traceback" not in err


def test_render_table_marks_stale_null_and_cuda_core_bound() -> None:
    class Clock:
        t = 100.0

        def __call__(self) -> float:
            return self.t

    clock = Clock()
    t = HostTelemetry("ct200", clock=clock)
    assert render_table(t) == "ct200: waiting for telemetry…"
    t.add(Frame.from_event({"type": "frame", "time": 1764460000.0, "source": "nvidia-smi",
                            "driver": "535.1", "interval": 1.0, "note": "nvml: not found",
                            "gpus": [{"index": 0, "name": "A100", "util_gpu": 99},
                                     {"index": 1, "name": "A100", "util_gpu": 99,
                                      "tensor_active": 0.7, "clock_event_reasons":
                                      ["gpu_idle", "sw_thermal"]}]}))
    clock.t = 104.0
    out = render_table(t)
    lines = out.splitlines()
    assert "no frame for 4s" in lines[0] and "nvidia-smi" in lines[0]
    row0, row1 = lines[3], lines[4]
    assert row0.split()[:3] == ["0", "99%", "n/a"] and "stale 4s" in row0
    assert "0.7%" in row1 and "busy, tensor pipe idle" in row1 and "clocks: sw_thermal" in row1
    assert lines[-1] == "(nvml: not found)"
