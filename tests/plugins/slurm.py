"""A real two-node Slurm on this machine: munged, slurmctld and two slurmd (``-N node0``,
``-N node1``), Debian's packages (slurmctld slurmd slurm-client munge), all in a temp dir with
free ports, started once per session and stopped by their pids at the end (never by name).

``slurm_cluster`` (session) starts it and waits until ``sinfo`` shows both nodes idle;
``slurm`` (per test) hands it to a test with ``SLURM_CONF`` set, and after the test cancels
whatever that test left in the queue. Without the packages the tests skip, unless
``DSV4TUI_REQUIRE_SLURM=1`` (CI), where they fail. A daemon that does not come up fails with
the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REQUIRE_ENV = "DSV4TUI_REQUIRE_SLURM"
NODES = ("node0", "node1")
PARTITION = "gpu"
START_WAIT_S = 90.0  # generous: a loaded CI box may take a while to register both nodes
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel",
            "sinfo", "srun")


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} not written)"
    return "\n".join(lines[-n:]) or f"({path} is empty)"


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def run(self, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def logs_text(self) -> str:
        return "\n".join(f"--- {name}: {path}\n{_tail(path)}" for name, path in self.logs.items())

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t")
        states = {}
        for line in out.stdout.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state.strip()
        return states

    def queue(self) -> list[str]:
        """The job ids in the queue (any state)."""
        out = self.run("squeue", "-h", "-o", "%i")
        return [j for j in out.stdout.split() if j]

    def cancel_all(self, timeout: float = 60.0) -> None:
        jobs = self.queue()
        if jobs:
            self.run("scancel", *jobs)
        deadline = time.monotonic() + timeout
        while self.queue() and time.monotonic() < deadline:
            time.sleep(0.3)
        # the nodes return to idle (a cancelled job's nodes pass through "completing")
        while time.monotonic() < deadline and \
                any(s != "idle" for s in self.node_states().values()):
            time.sleep(0.3)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(5)


def _write_conf(root: Path, munge_socket: Path) -> Path:
    ctld, slurmd = _free_port(), _free_port()
    node_ports = [_free_port() for _ in NODES]
    conf = root / "slurm.conf"
    nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} "
                      "CPUs=1 State=UNKNOWN" for n, p in zip(NODES, node_ports, strict=True))
    conf.write_text(f"""ClusterName=dsv4tuitest
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=300
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def _start(cluster: SlurmCluster, name: str, argv: list[str], log: Path) -> None:
    cluster.logs[name] = log
    out = open(cluster.root / "log" / f"{name}.stderr", "wb")  # noqa: SIM115 -- kept by Popen
    cluster.logs[f"{name} (stderr)"] = cluster.root / "log" / f"{name}.stderr"
    cluster.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=subprocess.STDOUT, env=cluster.env,
                                           start_new_session=True)
    out.close()


def _wait(cluster: SlurmCluster, what: str, ok: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            raise RuntimeError(f"slurm test cluster: {', '.join(dead)} exited while waiting "
                               f"for {what}\n{cluster.logs_text()}")
        if callable(ok) and ok():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"slurm test cluster: no {what} after {timeout:g} s\n"
                               f"{cluster.logs_text()}")
        time.sleep(0.3)


def start_cluster(root: Path) -> SlurmCluster:
    for sub in ("state", "log", "munge", *(f"spool/{n}" for n in NODES)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    munge_dir = root / "munge"
    os.chmod(munge_dir, 0o700)
    key = munge_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = munge_dir / "munge.socket"
    conf = _write_conf(root, sock)
    env = dict(os.environ, SLURM_CONF=str(conf))
    cluster = SlurmCluster(root, conf, env)
    try:
        munged = _which("munged")
        assert munged is not None
        _start(cluster, "munged", [munged, "--foreground", "--force", f"--socket={sock}",
                                   f"--key-file={key}", f"--pid-file={munge_dir}/munged.pid",
                                   f"--log-file={root}/log/munged.log",
                                   f"--seed-file={munge_dir}/munged.seed"],
               root / "log" / "munged.log")
        _wait(cluster, "munge socket", sock.exists, 30)
        _start(cluster, "slurmctld", [str(_which("slurmctld")), "-D", "-c", "-f", str(conf)],
               root / "log" / "slurmctld.log")
        _wait(cluster, "slurmctld answering",
              lambda: cluster.run("scontrol", "ping", timeout=10).stdout.count("UP") > 0, 60)
        for node in NODES:
            _start(cluster, f"slurmd {node}",
                   [str(_which("slurmd")), "-D", "-f", str(conf), "-N", node],
                   root / "log" / f"slurmd-{node}.log")
        _wait(cluster, "both nodes idle in sinfo",
              lambda: all(cluster.node_states().get(n) == "idle" for n in NODES), START_WAIT_S)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _missing() -> list[str]:
    return [b for b in BINARIES if _which(b) is None]


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    missing = _missing()
    if missing or os.geteuid() != 0:
        why = (f"Slurm is not installed ({', '.join(missing)} missing; apt-get install "
               "slurmctld slurmd slurm-client munge)" if missing else
               "the test cluster runs its daemons as root")
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why}, and {REQUIRE_ENV}=1")
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="dsv4tui-slurm-"))
    try:
        cluster = start_cluster(root)
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmCluster]:
    """The session's cluster with ``SLURM_CONF`` set for this test; the queue emptied after."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    try:
        yield slurm_cluster
    finally:
        slurm_cluster.cancel_all()
