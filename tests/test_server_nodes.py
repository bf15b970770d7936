"""A host made of two nodes on this machine -- OpenSSH sshd on 127.0.0.1 (node rank 0) and
``local`` (node rank 1) -- with the simulator as the server, through the CLI: both ranks start,
ready only once both joined; a killed rank 1 gets the whole group stopped with its error shown;
stop leaves no process of either group; every node's GPUs are freed."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, TEST_DECODE_SPEED, TEST_SPEED, free_port, group_alive, reap_server
from plugins.ssh_server import SshHost

from dsv4tui import main as cli
from dsv4tui.core import paths
from dsv4tui.core.nodes import watch as group_watch

pytestmark = pytest.mark.sshd


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))
    # the local node's simulated GPUs (the sshd node has its own: sshd_sim_server)
    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "local-sim-state.json"))
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "8")


def write_config(port: int, init_port: int, *extra: str) -> None:
    args = ["--sim-speed", f"{TEST_SPEED:g}", "--sim-decode-speed", f"{TEST_DECODE_SPEED:g}",
            "--sim-gpu", "H200", "--dist-timeout", "20", *extra]
    paths.config_file().write_text(
        '[hosts.pair]\nnodes = ["sshdbox", "local"]\ngpus = 8\n'
        '[hosts.pair.profiles.sim]\n'
        f'python = {json.dumps(sys.executable)}\nmodule = "dsv4tui.sim.sglang"\n'
        'model_path = "/models/DeepSeek-V4-Flash"\nserved_model_name = "dsv4-sim"\n'
        f'port = {port}\ntp_size = 16\nmoe_runner_backend = "triton"\n'
        f'dist_init_port = {init_port}\n'
        f'extra_args = {json.dumps(args)}\n'
        f'env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}\n')


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "server", "status", "pair", "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def pair(sshd_sim_server: SshHost) -> Iterator[SshHost]:
    yield sshd_sim_server
    group_watch.end("pair")
    assert sshd_sim_server.agent_home is not None
    reap_server(sshd_sim_server.agent_home)
    reap_server(paths.local_agent_state_dir())


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_two_nodes_start_fail_together_and_stop(pair: SshHost,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    port, init = free_port(), free_port()
    write_config(port, init, "--sim-fault", "nccl-hang")

    # --dry-run: every node's argv, the ranks from the positions, node 0's address
    code, out, err = run_cli(capsys, "server", "start", "pair", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert [(n["node"], n["rank"]) for n in plan["nodes"]] == [("sshdbox", 0), ("local", 1)]
    for n in plan["nodes"]:
        argv = n["argv"]
        assert argv[argv.index("--nnodes") + 1] == "2"
        assert argv[argv.index("--node-rank") + 1] == str(n["rank"])
        assert argv[argv.index("--dist-init-addr") + 1] == f"127.0.0.1:{init}"
    code, out, _ = run_cli(capsys, "server", "start", "pair", "--dry-run")
    assert "node sshdbox (rank 0) would run:" in out and "node local (rank 1) would run:" in out

    # start: both ranks, each node's phases, ready once rank 0 answers (after both joined)
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "server", "start", "pair")
    startup = time.monotonic() - t0
    assert code == 0, out + err
    assert "[sshdbox] load_weights" in out and "[local] load_weights" in out
    assert "ready: startup" in out and "every node ready" in out
    st = status(capsys)
    assert st["state"] == "ready" and st["health"] == 200
    nodes = {n["node"]: n for n in st["nodes"]}
    assert [(n["node"], n["rank"], n["state"]) for n in st["nodes"]] == [
        ("sshdbox", 0, "ready"), ("local", 1, "ready")]
    assert all(isinstance(n["pid"], int) for n in st["nodes"])
    log0 = Path(st["log"]).read_text()
    assert log0.index("Node rank 1 joined the rendezvous") < \
        log0.index("The server is fired up and ready to roll!")
    # each node publishes its own simulated GPUs
    for path in (pair.agent_home.parent / "sshd-sim-state.json",  # type: ignore[union-attr]
                 Path(os.environ["DSV4TUI_SIM_STATE"])):
        sim = json.loads(path.read_text())
        assert sim["gpu_ids"] == list(range(8)) and sim["phase"] == "ready"

    # kill rank 1: the watcher stops rank 0 (which waits in NCCL) and says what rank 1 did
    t_kill = time.monotonic()
    os.kill(nodes["local"]["pid"], signal.SIGKILL)
    failure = _wait(lambda: (group_watch.last_failure("pair") or {}).get("stopped"), 20,
                    "the watcher did not stop the group")
    stopped_in = time.monotonic() - t_kill
    rec = group_watch.last_failure("pair")
    assert rec is not None and rec["node"] == "local" and rec["rank"] == 1
    assert rec["signal"] == 9 and "crashed (signal 9)" in rec["what"]
    assert failure["nodes"][0]["node"] == "sshdbox"
    st = status(capsys)
    assert st["state"] in ("stopped", "crashed") and st["failure"]["node"] == "local"
    assert not group_alive(nodes["sshdbox"]["pid"]) and not group_alive(nodes["local"]["pid"])
    code, out, _ = run_cli(capsys, "server", "status", "pair")
    assert "node local (rank 1) crashed (signal 9)" in out
    with capsys.disabled():
        print(f"\nstartup {startup:.1f} s; group stopped {stopped_in:.1f} s after rank 1 died")
    assert stopped_in < 15

    # restart, then stop: no process of either group left, GPU memory freed on both nodes
    code, out, err = run_cli(capsys, "server", "restart", "pair")
    assert code == 0, out + err
    st = status(capsys)
    pgids = [n["pid"] for n in st["nodes"]]
    code, out, err = run_cli(capsys, "server", "stop", "pair", "--json", "--grace", "10")
    assert code == 0, err
    res = json.loads(out)
    assert [n["node"] for n in res["nodes"]] == ["sshdbox", "local"]
    for n in res["nodes"]:
        assert n["how"] == "sigterm" and n["leftover_pids"] == []
        assert n["gpu_mem_source"] == "simulated" and n["gpu_mem_freed_mib"] > 100_000
    assert not any(group_alive(p) for p in pgids)
    assert status(capsys)["state"] == "stopped"


def test_a_rank_that_fails_to_start_stops_the_group(pair: SshHost,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """tp 16 over 2 nodes of 8 GPUs, but the local node's simulated host has 4: its rank dies
    at init; node 0 is stopped at once (not left waiting) and node 1's error is shown."""
    port, init = free_port(), free_port()
    write_config(port, init)
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "4")
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "server", "start", "pair")
    took = time.monotonic() - t0
    with capsys.disabled():
        print(f"\na rank failing at init: the start failed and the group stopped in {took:.1f} s")
    assert code == 1, out + err
    assert "FAILED: node local (rank 1):" in out and "every node was stopped" in out
    assert "[local]" in out and "invalid device ordinal" in out
    assert "cause: a Python exception" in out  # the failing node's log, classified (#27)
    st = status(capsys)
    assert st["nodes"][0]["state"] == "stopped"
    assert took < 30


def test_group_config_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        '[hosts.pair]\nnodes = ["local", "nowhere"]\n':
            "hosts.pair.nodes: unknown node 'nowhere': not a [hosts] name, local or an alias",
        '[hosts.pair]\nnodes = ["local", "local"]\n': "listed twice",
        '[hosts.pair]\nnodes = ["local", "b"]\n[hosts.b]\nssh = "b"\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\ntp_size = 12\nnnodes = 2\n'
        '[hosts.pair2]\nnodes = ["local", "b"]\n': "",
        '[hosts.pair]\nnodes = ["local", "b"]\n[hosts.b]\nssh = "b"\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\ntp_size = 15\n':
            "profiles.p.tp_size = 15 does not divide over the 2 nodes",
        '[hosts.pair]\nnodes = ["local", "b"]\n[hosts.b]\nssh = "b"\ngpus = 4\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\ntp_size = 16\n':
            "profiles.p.tp_size = 16 needs 8 GPUs on each node; b has 4",
        '[hosts.pair]\nnodes = ["local", "b"]\n[hosts.b]\nssh = "b"\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\nnnodes = 3\n':
            "profiles.p.nnodes = 3 does not match the 2 nodes (local, b)",
        '[hosts.pair]\nnodes = ["local", "b"]\n[hosts.b]\nssh = "b"\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\nnode_rank = 1\n':
            "profiles.p.node_rank: each node's rank is its position in nodes",
    }
    for text, want in cases.items():
        paths.config_file().write_text(text)
        code, _, err = run_cli(capsys, "server", "start", "pair", "--dry-run")
        if not want:
            assert code == 0, err
            continue
        assert code == 2 and want in err, (text, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


async def test_the_dashboard_shows_every_node(pair: SshHost,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """16 GPUs grouped by node at 160x48 (one summary row per node at 80x24), both nodes' logs
    in one view with a node column (filtered by node), a node's error in the host bar."""
    import asyncio

    from plugins.pilot import until

    from dsv4tui.core import config
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.widgets.gpu_panel import GpuPanel
    from dsv4tui.tui.widgets.log_view import LogView

    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = await asyncio.to_thread(run_cli, capsys, "server", "start", "pair")
    assert code == 0, out + err
    st = await asyncio.to_thread(status, capsys)
    settings, _ = config.load()
    settings.telemetry.interval_s = 0.5
    app = Dsv4App(host_spec("pair", settings), settings=settings)
    async with app.run_test(size=(160, 48)) as pilot:
        m = app.model
        await until(pilot, lambda: m.telemetry.gpu_count() == 16 and m.telemetry.node_groups
                    and len(m.telemetry.node_groups[1][1]) == 8, 30, "16 GPUs of two nodes")
        def nodes_seen() -> set[str | None]:
            return {ln.node for s in range(m.logs.first, m.logs.next)
                    if (ln := m.logs.get(s)) is not None and ln.tp is not None}

        await until(pilot, lambda: {"sshdbox", "local"} <= nodes_seen(), 30, "both logs")
        panel = app.screen.query_one(GpuPanel)
        text = [line.plain for line in panel.lines(150)]
        heads = [t for t in text if t.startswith("── ")]
        assert heads[0].startswith("── sshdbox · rank 0 · 8 GPUs")
        assert heads[1].startswith("── local · rank 1 · 8 GPUs")
        rows = [t for t in text if t[:4].strip().isdigit()]
        assert [int(r[:4]) for r in rows] == list(range(8)) * 2  # numbered on each node
        assert panel.line_count() == len(text) == 1 + 1 + 2 + 16
        await pilot.pause(0.5)
        box = app.screen.query_one("#gpu-box")
        assert box.border_subtitle == ""  # all 16 GPUs and both headers fit at 160x48
        # the log: both nodes, a node column, TP ranks 0-15, filter by node
        lines = [m.logs.get(s) for s in range(m.logs.first, m.logs.next)]
        assert any(ln and ln.node == "local" and ln.tp == 8 for ln in lines)
        assert any(ln and ln.node == "sshdbox" and ln.tp == 0 for ln in lines)
        assert any(ln and ln.text.startswith("local   │ [") for ln in lines)
        view = app.body.query_one(LogView)
        view.cycle_node()
        assert view.node == "sshdbox"
        view.cycle_node()
        assert view.node == "local" and "node: local" in view.status_text()
        seqs = [view.seq_at(r) for r in range(view.row_count)]
        assert seqs and all(m.logs.get(s).node == "local" for s in seqs if s is not None)
        # 80x24: one summary row per node
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        text = [line.plain for line in panel.lines(76)]
        assert len(text) == 1 + 2, text
        assert text[1].startswith("sshdbox r0 util") and text[2].startswith("local   r1 util")
        # rank 1 dies: its node's error reaches the host bar
        os.kill(next(n["pid"] for n in st["nodes"] if n["node"] == "local"), signal.SIGKILL)
        await until(pilot, lambda: m.server.node_error is not None, 30, "the node's error")
        app.exit()


def test_stopping_the_group_after_a_crash_and_pid_reuse_spares_the_bystander(
        pair: SshHost, capsys: pytest.CaptureFixture[str]) -> None:
    """``server stop pair`` goes through every node's agent ``server stop``: a node whose
    server crashed and whose recorded PID is an unrelated process now leaves it alone and says
    so (issue 23, point 1, through the fan-out)."""
    import subprocess

    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = run_cli(capsys, "server", "start", "pair")
    assert code == 0, out + err
    group_watch.end("pair")  # else the watcher stops the group when rank 1 goes
    local = paths.local_agent_state_dir() / "server.json"
    rec = json.loads(local.read_text())
    os.killpg(rec["pgid"], signal.SIGKILL)  # rank 1 crashes ...
    _wait(lambda: not group_alive(rec["pgid"]), 10, "rank 1 outlived SIGKILL")
    bystander = subprocess.Popen(["setsid", "sleep", "600"])  # ... and its PID is reused
    try:
        rec.update(pid=bystander.pid, pgid=bystander.pid)
        local.write_text(json.dumps(rec))
        code, out, err = run_cli(capsys, "server", "stop", "pair", "--grace", "10")
        assert code == 0, out + err
        assert f"node local (rank 1): no server started by dsv4tui is running; pid " \
               f"{bystander.pid} is another process now" in out, out
        assert "node sshdbox (rank 0): " in out
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
