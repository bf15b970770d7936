"""Launches as Slurm jobs, against a real two-node Slurm on this machine (tests/plugins/slurm:
munged + slurmctld + slurmd -N node0 / -N node1): the simulator's ranks on both nodes as one
job, its state the way a cluster user reads it, a rank killed, stop = scancel, a PENDING job."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from plugins.sim import REPO, TEST_DECODE_SPEED, TEST_SPEED, free_port
from plugins.slurm import NODES, PARTITION, SlurmCluster

from dsv4tui import main as cli
from dsv4tui.core import paths
from dsv4tui.core.store import RunStore


def test_the_test_cluster_runs_one_task_per_node(slurm: SlurmCluster) -> None:
    out = slurm.run("srun", "-N2", "--ntasks-per-node=1", "bash", "-c",
                    'echo "$SLURMD_NODENAME $SLURM_NODEID"', timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split("\n")[:2]) == ["node0 0", "node1 1"]
    assert set(slurm.node_states()) == set(NODES)


# -- a Slurm host through the CLI ------------------------------------------------------------

def write_config(port: int, init_port: int, nodes: int = 2, tp: int = 16) -> None:
    args = ["--sim-speed", f"{TEST_SPEED:g}", "--sim-decode-speed", f"{TEST_DECODE_SPEED:g}",
            "--sim-gpu", "H200", "--dist-timeout", "30"]
    paths.config_file().write_text(
        '[hosts.cluster]\n'
        '[hosts.cluster.slurm]\n'
        f'partition = "{PARTITION}"\nnodes = {nodes}\ntime = "00:20:00"\n'
        'env = { DSV4TUI_TEST_NOTE = "it\'s two words" }\n'
        '[hosts.cluster.profiles.sim]\n'
        f'python = {json.dumps(sys.executable)}\nmodule = "dsv4tui.sim.sglang"\n'
        'model_path = "/models/DeepSeek-V4-Flash"\nserved_model_name = "dsv4-sim"\n'
        f'port = {port}\ntp_size = {tp}\nmoe_runner_backend = "triton"\n'
        f'dist_init_port = {init_port}\n'
        f'extra_args = {json.dumps(args)}\n'
        f'env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}\n')


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "server", "status", "cluster", "--json")
    assert code == 0, err
    return dict(json.loads(out))


def _cmdline(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [w.decode(errors="replace") for w in raw.split(b"\0") if w]


def _parent(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return "0"


def rank_pids(port: int, rank: int | None = None) -> list[int]:
    """The simulator processes of the job serving ``port`` (of one rank: its main process,
    the child of the rank's bash wrapper)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        argv = _cmdline(pid)
        if "dsv4tui.sim.sglang" not in argv or "--port" not in argv or \
                argv[argv.index("--port") + 1] != str(port):
            continue
        if rank is not None:
            if argv[argv.index("--node-rank") + 1] != str(rank):
                continue
            parent = _cmdline(_parent(pid))
            if not parent or not parent[0].endswith("bash"):
                continue
        found.append(int(pid))
    return found


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_dry_run_prints_the_sbatch_script_and_each_ranks_argv(
        capsys: pytest.CaptureFixture[str]) -> None:
    write_config(31990, 31991)
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--dry-run")
    assert code == 0, err
    assert "one Slurm job of 2 nodes" in out
    assert "rank 0 (SLURM_NODEID=0) would run:" in out and "--node-rank 0" in out
    assert "rank 1 (SLURM_NODEID=1) would run:" in out and "--node-rank 1" in out
    assert "#SBATCH --nodes=2" in out and "#SBATCH --partition=gpu" in out
    assert "#SBATCH --time=00:20:00" in out
    # a value with a quote and a space is one shell word, quoted
    assert "export DSV4TUI_TEST_NOTE='it'\"'\"'s two words'" in out
    code, out, _ = run_cli(capsys, "server", "start", "cluster", "--dry-run", "--json")
    plan = json.loads(out)
    ranks = plan["ranks"]
    assert [r["argv"][r["argv"].index("--node-rank") + 1] for r in ranks] == ["0", "1"]
    assert all(r["argv"][r["argv"].index("--nnodes") + 1] == "2" for r in ranks)
    srun = plan["script"].splitlines()[-1]
    words = shlex.split(srun)
    assert words[:3] == ["exec", "srun", "--kill-on-bad-exit=1"]
    assert words[-3:-1] == ["bash", "-c"]  # the rank body: one word, picked by SLURM_NODEID
    assert words[-1].startswith('case "$SLURM_NODEID" in 0) env PYTHONPATH=')


def test_a_slurm_host_with_nodes_listed_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file().write_text('[hosts.cluster]\nnodes = ["a", "b"]\n'
                                   '[hosts.cluster.slurm]\nnodes = 2\n')
    code, _, err = run_cli(capsys, "server", "status", "cluster")
    assert code == 2
    assert "a Slurm host gets its nodes from Slurm" in err and "Traceback" not in err


def test_submit_ready_sweep_with_the_job_id_then_stop_leaves_nothing(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--timeout", "120")
    assert code == 0, out + err
    assert "submitted Slurm job" in out and "RUNNING on node0, node1" in out
    assert "ready: startup" in out
    st = status(capsys)
    job = st["job_id"]
    assert st["state"] == "ready" and st["job_state"] == "RUNNING"
    assert st["nodes"] == ["node0", "node1"]
    assert slurm.queue() == [job]
    assert len(rank_pids(port, 0)) == 1 and len(rank_pids(port, 1)) == 1  # one rank a node
    code, out, _ = run_cli(capsys, "server", "status", "cluster")
    assert f"Slurm job {job} RUNNING on node0, node1: ready" in out

    code, out, err = run_cli(capsys, "sweep", "cluster", "--label", "on-slurm", "--levels",
                             "1:2", "--input-len", "16", "--output-len", "8", "--no-sanity",
                             "--yes")
    assert code == 0, out + err
    assert f"Slurm job {job}, node 0 at http://127.0.0.1:{port}" in out + err
    with RunStore() as store:
        run = store.runs(label="on-slurm")[0]
        assert run.launch_id is not None
        launch = next(la for la in store.launches("cluster") if la.id == run.launch_id)
    assert launch.profile is not None and launch.profile["slurm_job_id"] == job
    assert launch.ok and launch.startup_s is not None

    code, out, err = run_cli(capsys, "server", "stop", "cluster")
    assert code == 0, out + err
    assert f"scancel {job}: the job left the queue" in out
    assert slurm.queue() == []
    _wait(lambda: not rank_pids(port), 30, "a rank process outlived scancel")
    assert status(capsys)["job_state"] == "CANCELLED"


def test_a_rank_sigkilled_ends_the_job_and_status_names_its_node(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--timeout", "120")
    assert code == 0, out + err
    (pid,) = rank_pids(port, 1)
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: not slurm.queue(), 60, "the job outlived its killed rank")
    st = _wait(lambda: (s := status(capsys))["job_state"] != "RUNNING" and s, 30, "no end")
    assert st["job_state"] == "FAILED" and st["state"] == "ended"
    assert st["failed"]["node"] == "node1" and st["failed"]["task"] == 1
    assert st["failed"]["status"] == 137
    code, out, _ = run_cli(capsys, "server", "status", "cluster")
    assert f"Slurm job {st['job_id']} FAILED" in out
    assert "failed first: node node1 (rank 1): killed by SIGKILL (status 137)" in out
    # the failed rank's log classified as a one-host start's is, with the next move (#27)
    assert st["failure"]["class"] == "killed" and "killed by SIGKILL" in st["failure"]["cause"]
    assert "class killed: killed by SIGKILL" in out
    assert "next: SIGKILL without an error: the host's OOM killer (dmesg) or a kill" in out
    _wait(lambda: not rank_pids(port), 30, "rank 0 outlived the job")


def test_a_start_whose_ranks_fail_at_init_names_the_node_and_the_failure_class(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tp 16 over 2 nodes of 8 GPUs, but the simulated nodes have 4: the ranks die at init,
    the job ends before ready, and the start names the node that failed first, the class of
    its log (a Python exception) and what to look at next."""
    monkeypatch.setenv("DSV4TUI_SIM_GPUS", "4")
    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--timeout", "120")
    assert code == 1, out + err
    assert "FAILED: cluster: Slurm job" in out and "before ready (node node" in out, out
    assert "cause: a Python exception" in out and "invalid device ordinal" in out, out
    st = status(capsys)
    assert st["state"] == "ended" and st["failure"]["class"] == "python_exception"
    code, out, _ = run_cli(capsys, "server", "status", "cluster")
    assert "class python_exception: a Python exception" in out and "next: " in out, out


def test_a_pending_job_shows_its_reason_and_is_cancellable(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(free_port(), free_port(), nodes=3, tp=24)  # three nodes of two
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--no-wait")
    assert code == 0, out + err
    st = _wait(lambda: (s := status(capsys))["reason"] and s, 30, "no reason")
    assert st["state"] == "pending" and st["job_state"] == "PENDING"
    assert st["reason"] == "PartitionConfig"
    code, out, _ = run_cli(capsys, "server", "status", "cluster")
    assert f"Slurm job {st['job_id']} PENDING (PartitionConfig) - waiting in the queue" in out
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--no-wait")
    assert code != 0 and "PENDING" in err  # one job at a time: a second start is refused
    code, out, _ = run_cli(capsys, "server", "stop", "cluster")
    assert code == 0 and "the job left the queue (CANCELLED)" in out
    assert slurm.queue() == []


def test_the_first_failure_is_the_one_srun_reported_first() -> None:
    """Under load rank 1's end line can be lost (killed with its step) while rank 0, killed by
    --kill-on-bad-exit afterwards, writes its own: srun's first error line says who was first."""
    from dsv4tui.core.launchers.slurm import failed_task

    output = ["srun: error: node1: task 1: Killed", "srun: Terminating StepId=7.0",
              "srun: error: node0: task 0: Killed"]
    rank0 = ["dsv4tui: rank 0 on node0 exited with status 137 at 100.5"]
    assert failed_task(output, [rank0, []]) == {
        "node": "node1", "task": 1, "what": "Killed"}
    rank1 = ["dsv4tui: rank 1 on node1 exited with status 137 at 100.2"]
    assert failed_task(output, [rank0, rank1])["status"] == 137
    assert failed_task(output, [rank0, rank1])["node"] == "node1"
    # no srun line: the earliest non-zero status of the rank logs
    assert failed_task([], [rank0, rank1])["task"] == 1
    assert failed_task([], [rank0, []])["node"] == "node0"


def test_every_nodes_gpus_come_from_an_srun_step_on_that_node(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpus` on a Slurm host with a running job: each node's agent runs as an overlapping
    step of the job on that node (telemetry from the node itself), merged into one frame with
    node k's GPUs numbered after node k-1's. No GPU here: the steps' agents read the
    simulator's GPUs (DSV4TUI_SIM_STATE, which the job and the steps inherit)."""
    import subprocess

    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "sim-state.json"))
    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = run_cli(capsys, "server", "start", "cluster", "--timeout", "120")
    assert code == 0, out + err
    job = status(capsys)["job_id"]
    code, out, err = run_cli(capsys, "gpus", "cluster", "--once", "--json")
    assert code == 0, out + err
    frame = json.loads(out)
    assert frame["slurm_job_id"] == job
    assert [n["node"] for n in frame["nodes"]] == ["node0", "node1"]
    assert frame["nodes"][0]["gpus"] == list(range(8))
    assert frame["nodes"][1]["gpus"] == list(range(8, 16))
    assert [g["index"] for g in frame["gpus"]] == list(range(16))
    code, out, _ = run_cli(capsys, "gpus", "cluster", "--once")
    assert code == 0 and (f"Slurm job {job}, each node sampled by its own agent (an srun "
                          "step): node0 GPUs 0-7, node1 GPUs 8-15") in out
    # every rank's log, read on its node, each line behind the node's name
    code, out, err = run_cli(capsys, "logs", "cluster", "--lines", "50")
    assert code == 0, out + err
    tags = {ln.split(" │ ", 1)[0].strip() for ln in out.splitlines() if " │ " in ln}
    assert tags == {"node0", "node1"}, out
    code, out, err = run_cli(capsys, "logs", "cluster", "--node", "node1", "--json")
    assert code == 0, out + err
    events = [json.loads(ln) for ln in out.splitlines()]
    assert events and {e.get("node") for e in events} == {"node1"}
    assert run_cli(capsys, "logs", "cluster", "--node", "node7")[0] == 2
    # live: the two node agents are steps of the job, one on each node, while they stream
    live = subprocess.Popen([sys.executable, "-m", "dsv4tui", "gpus", "cluster", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert live.stdout is not None
        first = json.loads(live.stdout.readline())
        assert first["slurm_job_id"] == job

        def steps() -> list[str]:
            got = slurm.run("squeue", "-h", "-s", "-j", str(job), "-o", "%i %N %j")
            return [ln for ln in got.stdout.splitlines() if ln.split()[2:] != ["batch"]]

        seen = _wait(lambda: (s := steps()) and len({ln.split()[1] for ln in s
                                                    if "python" in ln}) == 2 and s,
                     30, "no agent step on each node")
        assert {ln.split()[1] for ln in seen if "python" in ln} == {"node0", "node1"}
    finally:
        live.terminate()
        live.wait(timeout=30)
    _wait(lambda: not [ln for ln in slurm.run("squeue", "-h", "-s", "-j", str(job), "-o",
                                              "%j").stdout.split() if "python" in ln],
          30, "an agent step outlived the live view")
    code, out, err = run_cli(capsys, "server", "stop", "cluster")
    assert code == 0, out + err


async def test_the_dashboards_link_follows_every_node_of_the_running_job(
        slurm: SlurmCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's HostLink on a Slurm host: once the status shows the job RUNNING, every
    node's GPUs (16, grouped node0 / node1) and every rank's log (behind its node's name, the
    node filter's nodes in rank order) come from the nodes' own agents; stopping the job
    stops the steps. No GPU here: the steps read the simulator's GPUs (DSV4TUI_SIM_STATE)."""
    import asyncio

    from dsv4tui.core.entry import load_settings
    from dsv4tui.core.hosts.resolve import host_spec
    from dsv4tui.core.view.host_link import HostLink
    from dsv4tui.core.view.profiles import model_for

    monkeypatch.setenv("DSV4TUI_SIM_STATE", str(tmp_path / "sim-state.json"))
    port, init = free_port(), free_port()
    write_config(port, init)
    code, out, err = await asyncio.to_thread(
        run_cli, capsys, "server", "start", "cluster", "--timeout", "120")
    assert code == 0, out + err
    settings, _ = load_settings(None)
    spec = host_spec("cluster", settings)
    model = model_for("cluster", spec.config, simulated=False)
    link = HostLink(spec, model, mark=lambda *a: None,
                    on_frame=lambda f: None, on_back=lambda: None)
    link.start(0.5)
    try:
        await asyncio.wait_for(link.wait_connected(), 30)
        status = await link.refresh_status()
        assert status["job_state"] == "RUNNING" and link.slurm.names == ["node0", "node1"]
        assert model.server.job == f"job {status['job_id']} RUNNING"  # the host bar's words

        async def until(pred: Any, what: str) -> None:
            for _ in range(120):
                if pred():
                    return
                await asyncio.sleep(0.25)
            raise AssertionError(what)

        await until(lambda: [n for n, g in model.telemetry.node_groups or [] if g] ==
                    ["node0", "node1"], "not every node's GPUs")
        assert [len(g) for _, g in model.telemetry.node_groups] == [8, 8]
        await until(lambda: {model.logs.get(i).node for i in range(model.logs.first,  # type: ignore[union-attr]
                                                                   model.logs.next)}
                    >= {"node0", "node1"}, "not every node's log")
        assert model.logs.nodes[:2] == ["node0", "node1"]
    finally:
        await link.release(10)
    code, out, err = await asyncio.to_thread(run_cli, capsys, "server", "stop", "cluster")
    assert code == 0, out + err


def test_the_host_bar_words_of_a_queued_job() -> None:
    from dsv4tui.core.view.model import slurm_job_text

    assert slurm_job_text({"slurm": True, "job_id": "42", "job_state": "PENDING",
                           "reason": "Resources"}) == "job 42 PENDING (Resources)"
    assert slurm_job_text({"slurm": True, "job_id": "42", "job_state": "RUNNING",
                           "reason": "None"}) == "job 42 RUNNING"
    assert slurm_job_text({"slurm": True, "job_id": None}) is None
    assert slurm_job_text({"state": "ready", "pid": 7}) is None


def test_the_launch_view_keeps_the_queue_wait_apart_from_the_startup() -> None:
    """The queue wait is a row of its own on the Launch screen, not a phase of the startup:
    the phases and 'other' still add up to the startup SGLang took once the job ran."""
    from types import SimpleNamespace

    from dsv4tui.core.view.model import StartupView, apply_step

    su = StartupView()
    su.reset("sim", "triton", "MXFP4", 0.0)
    apply_step(su, SimpleNamespace(kind="phase", name="queue_wait", duration_s=12.5, text=""),
               12.5)
    assert su.queue_wait_s == 12.5 and "queue_wait" not in su.phases
    su.startup_s = 30.0
    assert su.other_s(50.0) == 30.0  # no phase seen yet: all of the startup is 'other'
    su.reset("sim", "triton", "MXFP4", 60.0)
    assert su.queue_wait_s is None  # a new launch starts with no queue wait
