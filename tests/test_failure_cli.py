"""After a failed start, ``dsv4tui server start|restart|status`` on host ``local`` (the
simulator, real processes) say the cause in one line and the exact ``server restart`` to try;
the move really fixes the simulator's fault (``--sim-fault graph-oom:32`` etc.)."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from plugins.sim import free_port, reap_server, sim_profile

from dsv4tui import main as cli
from dsv4tui.core import paths

pytestmark = pytest.mark.e2e


def write_config(port: int, *extra: str) -> None:
    prof = sim_profile(port, *extra)
    lines = ["[hosts.local]", 'default_profile = "sim"', "[hosts.local.profiles.sim]"]
    for key in ("python", "module", "model_path", "served_model_name", "port", "tp_size",
                "moe_runner_backend", "checkpoint"):
        lines.append(f"{key} = {json.dumps(getattr(prof, key))}")
    lines.append(f"extra_args = {json.dumps(prof.extra_args)}")
    lines.append(f"env = {{ PYTHONPATH = {json.dumps(prof.env['PYTHONPATH'])} }}")
    paths.config_file().write_text("\n".join(lines) + "\n")


@pytest.fixture
def port() -> Any:
    yield free_port()
    reap_server(paths.local_agent_state_dir())


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def try_line(out: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith("try: "))
    return shlex.split(line.removeprefix("try: "))


@pytest.mark.parametrize(("fault", "cause", "flag", "move"), [
    ("graph-oom:32", "CUDA out of memory while capturing CUDA graphs (batch sizes up to 64), "
     "phase cuda_graph", "--cuda-graph-max-bs-decode", ("64", "32")),
    ("prefill-oom:4096", "CUDA out of memory running a batch (prefill), phase warmup",
     "--chunked-prefill-size", ("8192", "4096")),
    ("slow-rank:400", "distributed init timed out (a rank never joined) after 300 s "
     "(7 of 8 joined), phase init", "--dist-timeout", ("300", "600")),
])
def test_a_failed_start_says_why_and_the_restart_it_suggests_starts(
        port: int, capsys: pytest.CaptureFixture[str], fault: str, cause: str, flag: str,
        move: tuple[str, str]) -> None:
    write_config(port, "--sim-fault", fault)
    code, out = run_cli(capsys, "server", "start", "local")
    assert code == 1, out
    assert f"cause: {cause}" in out
    argv = try_line(out)
    assert argv == ["dsv4tui", "server", "restart", "local", "--profile", "sim", "--set",
                    f"{flag.removeprefix('--')}={move[1]}"]
    assert f"({flag} {move[0]} -> {move[1]}: " in out
    code, out = run_cli(capsys, "server", "status", "local", "--json")
    st = json.loads(out)
    assert st["state"] == "crashed" and st["cause"] == cause
    assert st["suggestion"]["flag"] == flag and st["suggestion"]["to"] == move[1]
    assert shlex.split(st["suggestion"]["command"]) == argv
    code, out = run_cli(capsys, "server", "status", "local")
    assert f"cause: {cause}" in out and "try: dsv4tui server restart local" in out
    code, out = run_cli(capsys, *argv[1:])  # the suggestion, as printed
    assert code == 0 and "ready: startup" in out, out
    code, out = run_cli(capsys, "server", "status", "local", "--json")
    st = json.loads(out)
    assert st["state"] == "ready" and [flag, move[1]] == st["argv"][-2:]


def test_the_json_of_a_failed_start_and_a_hint_when_no_flag_helps(
        port: int, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(port, "--sim-fault", "fail-startup")
    code, out = run_cli(capsys, "server", "start", "local", "--json")
    got = json.loads(out)
    assert code == 1 and got["ok"] is False
    assert got["cause"].startswith("the warm-up request failed: requests.exceptions.HTTPError")
    assert got["failure"]["class"] == "warmup_failed" and got["failure"]["phase"] == "warmup"
    assert got["suggestion"]["command"] is None and got["suggestion"]["why"]
    code, out = run_cli(capsys, "server", "start", "local")
    assert "next: the server came up but its first request failed" in out


def test_an_sm100_backend_on_sm120_suggests_one_that_runs_there(
        port: int, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(port)
    code, out = run_cli(capsys, "server", "start", "local", "--backend",
                        "flashinfer_trtllm_routed", "--force")
    assert code == 1 and "cause: no kernel image for this GPU" in out, out
    argv = try_line(out)
    assert argv[-2:] == ["--backend", "triton"]
    assert "flashinfer_trtllm_routed's kernels are" in out


def test_set_is_validated_before_anything_runs(port: int,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_config(port)
    for bad, says in (("cuda-graph-max-bs=8", "--cuda-graph-max-bs: use "
                       "--cuda-graph-max-bs-decode"),
                      ("nonsense", "write FLAG=VALUE"),
                      ("mem-fraction-static=lots", "mem_fraction_static"),
                      ("moe-runner-backend=triton", "use --backend NAME")):
        code, out = run_cli(capsys, "server", "restart", "local", "--set", bad)
        assert code == 2 and says in out and "Traceback" not in out, out
    code, out = run_cli(capsys, "server", "restart", "local", "--dry-run", "--set",
                        "mem-fraction-static=0.8", "--set", "chunked-prefill-size=2048")
    assert code == 0 and "--mem-fraction-static 0.8" in out
    assert "--chunked-prefill-size 2048" in out


def test_a_server_killed_while_starting_says_the_signal(
        port: int, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import signal
    import time

    write_config(port)
    code, out = run_cli(capsys, "server", "start", "local", "--no-wait", "--json")
    assert code == 0, out
    os.killpg(json.loads(out)["pid"], signal.SIGKILL)  # its own process group: the server's
    deadline = time.monotonic() + 30
    while True:
        code, out = run_cli(capsys, "server", "status", "local", "--json")
        st = json.loads(out)
        if st["state"] == "crashed" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert st["state"] == "crashed" and st["failure"]["class"] == "killed", st
    assert st["cause"].startswith("killed by SIGKILL")
    assert st["suggestion"]["command"] is None
