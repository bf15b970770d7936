"""``dsv4tui fleet``: several real hosts at once -- ``local`` (the agent as a subprocess), the
in-process asyncssh server (the agent uploaded as a zipapp over SFTP, run in a real
subprocess), both with simulated GPUs -- and hosts that cannot be reached (a closed port, a
name that does not resolve, a port that accepts but never speaks SSH). The CLI runs as a real
process; its exit code is 4 when a host could not be reached, and every host is in the output.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from plugins.ssh_server import SshHost

from dsv4tui.core import paths
from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.fleet.model import Fleet, HostSummary
from dsv4tui.core.fleet.rows import cells, problems
from dsv4tui.core.hosts.resolve import host_spec
from dsv4tui.core.store import RunStore
from dsv4tui.main import main

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parent.parent
CLOSED = "nobody@127.0.0.1:1"  # nothing listens on port 1: refused at once


@pytest.fixture
def sim_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated GPUs for every agent this test starts (``local``'s, and the SSH server's
    commands, which inherit this environment): 8 idle simulated H200."""
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "no-server-yet.json"))
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "8")
    monkeypatch.setenv("PYTHONPATH", str(REPO))


async def fleet_cli(*args: str, timeout: float = 90) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dsv4tui", "fleet", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_fleet_json_real_hosts_and_one_unreachable(sim_gpus: None,
                                                         ssh_server: SshHost) -> None:
    with RunStore() as store:  # the last run of local: its best tok/s is in the row
        run_id = store.start_run(label="NVFP4_marlin", host="local", backend="marlin")
        for i, (c, tok_s) in enumerate(((1, 40.5), (16, 371.25))):
            store.add_level(run_id, {"level": i, "concurrency": c, "requests": 4,
                                     "completed": 4, "errors": 0, "output_tok_s": tok_s})
        store.finish_run(run_id, "done")

    code, out, err = await fleet_cli("local", "testbox", CLOSED, "--json")
    assert code == 4, err  # one host could not be reached
    assert err == ""
    hosts = json.loads(out)["hosts"]
    assert [h["host"] for h in hosts] == ["local", "testbox", CLOSED]
    for h in hosts[:2]:
        assert h["state"] == "connected" and "error" not in h
        assert h["gpu_count"] == 8 and h["gpu_model"] == "8× NVIDIA H200"  # noqa: RUF001
        assert h["simulated"] is True
        assert h["util_pct"] is not None and h["mem_total_mib"] > 8 * 100_000
        assert h["power_w"] is not None and h["server"] == "stopped"
    assert hosts[0]["best_tok_s"] == 371.25 and hosts[0]["last_run"] == run_id
    assert hosts[1]["best_tok_s"] is None
    bad = hosts[2]
    assert set(bad) == {"host", "state", "error"}
    assert "refused" in bad["error"] and "\n" not in bad["error"]


async def test_fleet_all_reachable_exit_0_and_table(sim_gpus: None, ssh_server: SshHost) -> None:
    code, out, err = await fleet_cli("testbox", "local")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["HOST", "STATE", "GPUS"]
    assert lines[2].startswith("testbox") and "connected" in lines[2]
    assert "H200 SIMULATED" in lines[2] and "stopped" in lines[2]
    assert lines[3].startswith("local")
    assert not any(line.startswith("✗") for line in lines)


@pytest.mark.e2e
async def test_unknown_host_one_line_reason(sim_gpus: None) -> None:
    code, out, err = await fleet_cli("local", "no-such-host.invalid")
    assert code == 4 and err == ""
    reason = [line for line in out.splitlines() if line.startswith("✗")]
    assert len(reason) == 1 and reason[0].startswith("✗ no-such-host.invalid:")
    assert "local" in out and "connected" in out.splitlines()[2]


def test_bad_usage_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--json"]) == 2  # no hosts configured, none named
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no hosts" in err and "Traceback" not in err
    assert main(["fleet", "local", "--interval", "0.01"]) == 2
    assert "--interval" in capsys.readouterr().err
    assert main(["fleet", "bad host name!"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_configured_hosts_are_the_default(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """No HOST: every [hosts.NAME] of the config, in its order."""
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        '[hosts.alpha]\nssh = "nobody@127.0.0.1:1"\n[hosts.beta]\nssh = "nobody@127.0.0.1:1"\n')
    assert main(["fleet", "--json", "--timeout", "10"]) == 4
    hosts = json.loads(capsys.readouterr().out)["hosts"]
    assert [h["host"] for h in hosts] == ["alpha", "beta"]
    assert all("refused" in h["error"] for h in hosts)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never sends an SSH banner: a host that hangs."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


@pytest.fixture
async def fleet_of(sim_gpus: None) -> AsyncIterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        await fleet.stop()


@pytest.mark.e2e
async def test_a_hanging_host_never_delays_the_others(fleet_of: list[Fleet],
                                                      silent_port: int) -> None:
    settings = Settings()
    settings.hosts["hangs"] = HostConfig(ssh=f"nobody@127.0.0.1:{silent_port}",
                                         connect_timeout_s=30)
    fleet = Fleet([host_spec("hangs", settings), host_spec("local", settings)], interval=0.5)
    fleet_of.append(fleet)
    t0 = time.monotonic()
    fleet.start()
    local = fleet.summary("local")
    while local.frames < 3:
        assert time.monotonic() - t0 < 30, "no frames from local"
        await asyncio.sleep(0.05)
    assert fleet.summary("hangs").state == "connecting"  # still waiting on its banner
    assert local.connected and local.gpu_count == 8
    await fleet.settled(timeout=1.0)  # the CLI's deadline: the silent host says so
    row = fleet.summary("hangs")
    assert row.error == "hangs: no answer within 1 s (connecting)"
    assert problems(fleet.summaries()) == [row.error]


def test_cells_say_n_a_and_dash_never_a_fake_zero() -> None:
    s = HostSummary("h200a")
    c = cells(s)
    assert c["util"] == "—" and c["gpus"] == "—" and c["best"] == "—"
    s = HostSummary("h200a", state="connected", frames=1, gpu_count=8,
                    gpu_model="8× NVIDIA H200", util_pct=97.0, tensor_pct=None,  # noqa: RUF001
                    mem_used_mib=8 * 120_000, mem_total_mib=8 * 143_771, power_w=5120.0,
                    server="ready", profile="nvfp4", backend="marlin", best_tok_s=1234.4)
    c = cells(s)
    assert c["model"] == "H200" and c["tensor"] == "n/a" and c["util"] == "97%"
    assert c["power"] == "5.12 kW" and c["best"] == "1,234" and c["mem"].startswith("83%")
    assert s.to_json()["mem_pct"] == pytest.approx(83.47, abs=0.01)


@pytest.mark.parametrize("argv", [["connect", "local", "demo"], ["demo", "--fleet"]])
def test_no_fleet_view_without_a_terminal(argv: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2  # pytest's stdin/stdout are not terminals
    captured = capsys.readouterr()
    assert captured.out == "" and "needs a terminal" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_fleet_usage_errors_name_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--hosts", "3"]) == 2
    assert "--hosts goes with --fleet" in capsys.readouterr().err
    assert main(["fleet", "--demo", "local"]) == 2
    assert "--demo takes no HOST" in capsys.readouterr().err


@pytest.mark.e2e
async def test_demo_fleet_json() -> None:
    """``fleet --demo``: the demo fleet's simulated hosts (each its own GPUs) and the one
    that cannot be reached, on purpose: what the user asked for answered, so exit 0 (it was
    4 every time, the demo's own offline host counted as the user's connection problem)."""
    code, out, err = await fleet_cli("--demo", "--json")
    assert code == 0 and err == ""
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert hosts["offline"]["demo_offline"] is True
    assert not any("demo_offline" in h for n, h in hosts.items() if n != "offline")
    assert list(hosts) == ["sim-h200", "sim-b200", "sim-pro6000", "sim-h100", "offline"]
    assert hosts["sim-h100"]["gpu_count"] == 4
    assert hosts["sim-h100"]["gpu_model"] == "4× NVIDIA H100 80GB HBM3"  # noqa: RUF001
    assert hosts["sim-b200"]["gpu_model"] == "8× NVIDIA B200"  # noqa: RUF001
    assert all(h["simulated"] for n, h in hosts.items() if n != "offline")
    assert "refused" in hosts["offline"]["error"]
    code, out, _ = await fleet_cli("--demo")
    assert code == 0 and "unreachable on purpose" in out


async def test_unknown_host_key_is_refused_in_the_fleet_too(sim_gpus: None,
                                                            ssh_server: SshHost) -> None:
    """The fleet checks host keys as every command does: an unknown key is that host's
    one-line error (with its fingerprint), the other hosts answer."""
    ssh_server.forget_known_hosts()
    code, out, err = await fleet_cli("testbox", "local", "--json")
    assert code == 4 and err == ""
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert hosts["testbox"]["state"] == "failed"
    assert "host key" in hosts["testbox"]["error"] and "SHA256:" in hosts["testbox"]["error"]
    assert hosts["local"]["gpu_count"] == 8


def test_a_lost_host_shows_no_figures_as_current() -> None:
    s = HostSummary("h200a", state="reconnecting", retry_in=3.0, frames=9, gpu_count=8,
                    gpu_model="8× NVIDIA H200", util_pct=97.0, power_w=5120.0,  # noqa: RUF001
                    mem_used_mib=1.0, mem_total_mib=2.0, server="ready", best_tok_s=10.0,
                    error="h200a: connection lost")
    c = cells(s)
    assert (c["util"], c["power"], c["mem"], c["server"]) == ("—", "—", "—", "—")
    assert c["gpus"] == "8" and c["model"] == "H200" and c["best"] == "10"  # facts, the store
    assert c["state"] == "reconnecting · retry 3s"
    assert s.to_json() == {"host": "h200a", "state": "reconnecting",
                           "error": "h200a: connection lost"}


def test_the_compact_table_still_marks_a_simulated_host() -> None:
    """Under 115 columns the table has no MODEL column, where "SIMULATED" is said: the GPU
    count says it there (the Fleet title promises "SIMULATED hosts marked")."""
    sim = HostSummary("sim-h200", state="connected", frames=1, gpu_count=8, simulated=True,
                      gpu_model="8× NVIDIA H200")  # noqa: RUF001
    assert cells(sim, compact=True)["gpus"] == "8 SIM"
    assert cells(sim)["gpus"] == "8" and cells(sim)["model"] == "H200 SIMULATED"
    real = HostSummary("h200a", state="connected", frames=1, gpu_count=8)
    assert cells(real, compact=True)["gpus"] == "8"


def test_one_shot_fleet_says_unreachable_not_retry(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --watch nothing retries after the command: a host that did not connect is
    "unreachable" (it said "lost · retry 0s"), and `known:` names each host once."""
    paths.config_file().write_text("[hosts.local]\n")
    code = main(["fleet", "nope", "--timeout", "5"])
    out = capsys.readouterr().out
    assert code == 4
    row = next(line for line in out.splitlines() if line.startswith("nope "))
    assert "unreachable" in row and "retry" not in row
    assert "(known: local, demo)" in out
