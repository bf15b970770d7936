"""A launch as one Slurm job: render, submit, status, stop, on the host's login node.

A host with a ``[hosts.NAME.slurm]`` table (core.config.SlurmConfig) is a Slurm host: ``ssh``
names its login node (none or ``local``: this machine). ``server start`` there writes one
sbatch script and submits it with ``sbatch --parsable``; the script runs one SGLang rank per
allocated node with ``srun --kill-on-bad-exit=1`` (one rank dying ends the job), each rank's
argv rendered by the same launch model as the SSH fan-out (nodes.group.rank_launches: ``--nnodes
N --node-rank R --dist-init-addr A``), the rank picked by ``SLURM_NODEID`` and the address being
the first allocated node's (its ``NodeAddr``) and the profile's ``dist_init_port``. Every value in
the script is quoted with shlex.quote; the only text expanded by the shell is ours.

Status reads the queue the way a cluster user does: ``squeue`` (PENDING with its reason,
RUNNING with the node list), then ``scontrol show job`` once the job has left the queue (its
final state and exit code, kept ``MinJobAge`` seconds), and the job's output for the node whose
task failed; ready when node 0 answers HTTP ``/health``. Stop is ``scancel``, confirmed by the
job leaving the queue. Every command is an argv list run on the login node by its session.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from dsv4tui.core import paths
from dsv4tui.core.config import HostConfig, SlurmConfig
from dsv4tui.core.errors import EXIT_FAILED, ConfigError, UserError
from dsv4tui.core.nodes.group import DEFAULT_DIST_PORT, rank_launches
from dsv4tui.core.server.launch import LaunchPlan
from dsv4tui.core.server.startup import (
    DEFAULT_TIMEOUT_S,
    StartResult,
    StartupFailed,
    StartupStep,
)

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host
    from dsv4tui.core.store import RunStore

HEAD_VAR = "DSV4TUI_HEAD_ADDR"  # node 0's address, set by the script at run time
ADDR_PLACEHOLDER = "$" + HEAD_VAR  # shown in a rank's argv where node 0's address goes
REMOTE_DIR = ".cache/dsv4tui/slurm"  # on an ssh login node: relative to the home
POLL_S = 1.0
STOP_WAIT_S = 120.0
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "RESIZING", "SIGNALING", "STAGE_OUT")


class SlurmError(UserError):
    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class SlurmPlan:
    """One launch as a Slurm job: each rank's LaunchPlan and the sbatch script that runs them."""

    host: str
    profile_name: str
    slurm: SlurmConfig
    job_name: str
    ranks: list[LaunchPlan]
    dist_port: int
    dist_addr: str | None  # the profile's own --dist-init-addr, else node 0's at run time
    log_dir: str
    script: str

    @property
    def launch(self) -> LaunchPlan:
        return self.ranks[0]

    def rank_logs(self, job_id: str) -> list[str]:
        return [self.rank_log(job_id, r) for r in range(len(self.ranks))]

    def rank_log(self, job_id: str | int, rank: int) -> str:
        return f"{self.log_dir}/{_stem(self.launch.log_file)}-{job_id}-node{rank}.log"

    def output(self, job_id: str | int) -> str:
        return f"{self.log_dir}/{self.job_name}-{job_id}.out"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile_name, "job_name": self.job_name,
                "nodes": len(self.ranks), "slurm": self.slurm.model_dump(),
                "dist_init_addr": self.dist_addr or f"(node 0's address):{self.dist_port}",
                "ranks": [{"rank": r, "argv": launch.argv, "env": launch.env}
                          for r, launch in enumerate(self.ranks)],
                "script": self.script}


def _stem(log_file: str) -> str:
    name = PurePosixPath(log_file).name
    return name[:-4] if name.endswith(".log") else name


def log_dir(local: bool) -> str:
    """Where the job's script, output and rank logs go on the login node."""
    if local:
        return str(paths.local_agent_state_dir() / "slurm")
    return REMOTE_DIR


def job_name(host: str, slurm: SlurmConfig) -> str:
    return slurm.job_name or re.sub(r"[^A-Za-z0-9_.-]", "_", f"dsv4tui-{host}")


def plan(config: HostConfig, host: str, profile_name: str | None = None,
         backend: str | None = None, *, overrides: Mapping[str, Any] | None = None,
         sglang_version: str | None = None, local: bool = True) -> SlurmPlan:
    """The Slurm host's profile as one job (ConfigError: one line); no connection."""
    if config.slurm is None:
        raise ConfigError(f"{host} is not a Slurm host (no [hosts.{host}.slurm] table)")
    slurm = config.slurm
    name, profile = config.profile(profile_name)
    n = slurm.nodes
    port = profile.dist_init_port or DEFAULT_DIST_PORT
    addr = profile.dist_init_addr or f"{ADDR_PLACEHOLDER}:{port}"
    nodes = [f"SLURM_NODEID={r}" for r in range(n)]
    ranks = rank_launches(profile, name, nodes, addr, backend, overrides=overrides,
                          sglang_version=sglang_version)
    where = log_dir(local)
    jname = job_name(host, slurm)
    draft = SlurmPlan(host, name, slurm, jname, ranks, port, profile.dist_init_addr, where, "")
    return SlurmPlan(host, name, slurm, jname, ranks, port, profile.dist_init_addr, where,
                     render_script(draft))


def _rank_command(launch: LaunchPlan, dynamic_addr: bool) -> str:
    """One rank's command line for the script: every word quoted, node 0's address the one
    variable (``"$DSV4TUI_HEAD_ADDR":PORT``) where the profile does not name its own."""
    words = []
    for arg in launch.argv:
        if dynamic_addr and arg.startswith(ADDR_PLACEHOLDER + ":"):
            words.append(f'"${HEAD_VAR}"' + shlex.quote(arg[len(ADDR_PLACEHOLDER):]))
        else:
            words.append(shlex.quote(arg))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
    cmd = ("env " + env + " " if env else "") + " ".join(words)
    if launch.workdir:
        cmd = f"cd {shlex.quote(launch.workdir)} && {cmd}"
    return cmd


def _rank_case(rank: int, launch: LaunchPlan, dynamic_addr: bool) -> str:
    """The rank's command, then a line in its log saying how it ended (status, when):
    which rank died first is read from there once the job has ended (no accounting needed)."""
    return (f"{rank}) {_rank_command(launch, dynamic_addr)}; rc=$?; echo \"dsv4tui: rank "
            f"{rank} on $SLURMD_NODENAME exited with status $rc at $(date +%s.%N)\"; "
            "exit $rc ;;")


def sbatch_options(slurm: SlurmConfig, nodes: int, name: str, output: str) -> list[str]:
    """The job's sbatch options (one word each): what the host's ``slurm`` table asks for."""
    opts = [f"--job-name={name}", f"--nodes={nodes}", "--ntasks-per-node=1",
            f"--output={output}"]
    if slurm.partition:
        opts.append(f"--partition={slurm.partition}")
    if slurm.time:
        opts.append(f"--time={slurm.time}")
    if slurm.account:
        opts.append(f"--account={slurm.account}")
    if slurm.gpus_per_node:
        opts.append(f"--gpus-per-node={slurm.gpus_per_node}")
    return opts + list(slurm.sbatch)


def step_body(ranks: list[LaunchPlan], dynamic_addr: bool) -> str:
    """What every task of the SGLang step runs (``bash -c`` of srun): the rank's command,
    picked by ``SLURM_NODEID``, every word quoted; node 0's address is ``$DSV4TUI_HEAD_ADDR``
    where the profile names none. One text for a job's script and a campaign's steps."""
    cases = " ".join(_rank_case(r, launch, dynamic_addr) for r, launch in enumerate(ranks))
    return (f'case "$SLURM_NODEID" in {cases} *) echo "no rank for node $SLURM_NODEID" >&2; '
            "exit 2 ;; esac")


def rank_log_pattern(log_dir: str, launch: LaunchPlan, job: str = "%j") -> str:
    """Each node's rank log, srun's ``--output`` (``%n``: the node's index in the step)."""
    return f"{log_dir}/{_stem(launch.log_file)}-{job}-node%n.log"


HEAD_ADDR_LINES = [  # the script's lines that find node 0's address (its NodeAddr)
    'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
    'head_addr=$(scontrol show node "$head_node" -o 2>/dev/null | tr " " "\\n" '
    '| sed -n "s/^NodeAddr=//p")',
    f'export {HEAD_VAR}="${{head_addr:-$head_node}}"']


def render_script(p: SlurmPlan) -> str:
    s = p.slurm
    n = len(p.ranks)
    opts = sbatch_options(s, n, p.job_name, p.output("%j"))
    lines = ["#!/bin/bash"] + [f"#SBATCH {o}" for o in opts]
    lines += [f"# written by dsv4tui: host {p.host}, profile {p.profile_name}; one SGLang rank "
              "per node, the rank is SLURM_NODEID", "set -u"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in s.env.items()]
    dynamic = p.dist_addr is None
    if dynamic:
        lines += [*HEAD_ADDR_LINES,
                  f'echo "dsv4tui: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, dist init address '
                  f'${HEAD_VAR}:{p.dist_port}"']
    body = step_body(p.ranks, dynamic)
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={n}", "--ntasks-per-node=1",
            f"--output={rank_log_pattern(p.log_dir, p.launch)}", "bash", "-c", body]
    lines.append("exec " + " ".join(shlex.quote(a) for a in srun))
    return "\n".join(lines) + "\n"


def campaign_script(slurm: SlurmConfig, nodes: int, name: str) -> str:
    """A campaign's sbatch script but its last line: the allocation every variant runs in
    (each variant's server one job step of it), node 0's address exported for the steps. The
    agent appends the line that runs its campaign runner there (agent/campaign/slurm_job.py)
    and names the output (the campaign's runner.log) on sbatch's command line."""
    opts = [o for o in sbatch_options(slurm, nodes, name, "") if not o.startswith("--output=")]
    lines = ["#!/bin/bash"] + [f"#SBATCH {o}" for o in opts]
    lines += ["# written by dsv4tui: a campaign; the runner runs here (node 0), each variant's "
              "SGLang ranks are a job step on every node", "set -u"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in slurm.env.items()]
    lines += HEAD_ADDR_LINES
    return "\n".join(lines) + "\n"


def campaign_step(ranks: list[LaunchPlan], dist_addr: str | None) -> dict[str, Any]:
    """One variant's server as a job step of the campaign's allocation, for the runner:
    ``srun``'s task body (:func:`step_body`), node 0's port, the rank logs' name (the runner
    writes them into the campaign's directory, one per node and step)."""
    return {"nodes": len(ranks), "body": step_body(ranks, dist_addr is None),
            "port": ranks[0].port, "host": ranks[0].host, "log_stem": _stem(ranks[0].log_file),
            "head_var": HEAD_VAR, "dist_init_addr": dist_addr}


# -- talking to Slurm on the login node -------------------------------------------------------

async def _run(host: Host, argv: list[str], timeout: float = 30.0) -> tuple[int | None, str, str]:
    res = await host.session.run(argv, timeout=timeout)
    return res.exit_code, res.stdout, res.stderr


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


async def submit(host: Host, p: SlurmPlan) -> str:
    """Upload the script and ``sbatch --parsable`` it; the job id."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    remote = f"{p.log_dir}/{p.job_name}-{stamp}.sbatch"
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "job.sbatch"
        local.write_text(p.script)
        await host.session.upload(local, remote)
    code, out, err = await _run(host, ["sbatch", "--parsable", remote], timeout=60.0)
    if code != 0:
        raise SlurmError(f"{host.name}: sbatch refused the job: {_one_line(err or out)}")
    job = out.strip().split(";")[0]
    if not job.isdigit():
        raise SlurmError(f"{host.name}: sbatch did not print a job id ({_one_line(out)!r})")
    return job


def parse_fields(text: str) -> dict[str, str]:
    """``scontrol show ... -o``'s Key=Value words."""
    out = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if eq and key not in out:
            out[key] = value
    return out


async def hostnames(host: Host, node_list: str) -> list[str]:
    if not node_list or node_list.startswith("("):
        return []
    code, out, _ = await _run(host, ["scontrol", "show", "hostnames", node_list])
    return out.split() if code == 0 else [node_list]


async def node_addr(host: Host, node: str) -> str:
    code, out, _ = await _run(host, ["scontrol", "show", "node", node, "-o"])
    return parse_fields(out).get("NodeAddr") or node if code == 0 else node


@dataclass
class JobState:
    job_id: str
    state: str  # Slurm's: PENDING, RUNNING, FAILED, CANCELLED, COMPLETED, TIMEOUT, ... GONE
    reason: str | None = None
    node_list: str | None = None
    nodes: list[str] = field(default_factory=list)
    exit_code: str | None = None
    in_queue: bool = False

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


async def job_state(host: Host, job_id: str) -> JobState:
    """The job as squeue shows it, else as scontrol remembers it, else GONE."""
    code, out, _ = await _run(host, ["squeue", "-h", "-j", job_id, "-o", "%T|%r|%N"])
    line = out.strip().splitlines()[0] if code == 0 and out.strip() else ""
    if line:
        state, reason, node_list = [*line.split("|"), "", ""][:3]
        js = JobState(job_id, state, reason if reason and reason != "None" else None,
                      node_list or None, in_queue=True)
        if state in ("RUNNING", "COMPLETING") and node_list:
            js.nodes = await hostnames(host, node_list)
        return js
    code, out, _ = await _run(host, ["scontrol", "show", "job", job_id, "-o"])
    f = parse_fields(out) if code == 0 else {}
    if not f.get("JobState"):
        return JobState(job_id, "GONE")
    why = f.get("Reason")
    listed = f.get("NodeList")
    js = JobState(job_id, f["JobState"], why if why and why != "None" else None,
                  listed if listed and listed != "(null)" else None,
                  exit_code=f.get("ExitCode"), in_queue=f["JobState"] in ACTIVE)
    if js.node_list:
        js.nodes = await hostnames(host, js.node_list)
    return js


_SRUN_ERROR = re.compile(r"srun: error: (\S+): task (\d+): (.+)")
_RANK_END = re.compile(r"dsv4tui: rank (\d+) on (\S+) exited with status (\d+) at ([\d.]+)")


async def output_tail(host: Host, path: str, lines: int = 40) -> list[str]:
    code, out, _ = await _run(host, ["tail", "-n", str(lines), path])
    return out.splitlines() if code == 0 else []


def _status_text(code: int) -> str:
    if code > 128:
        import signal

        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"killed by {name} (status {code})"
    return f"exit code {code}"


def failed_task(output: list[str], rank_logs: list[list[str]] | None = None
                ) -> dict[str, Any] | None:
    """The rank that failed first. srun reports each task's end in the order it saw them
    (``srun: error: node1: task 1: Killed``), and with --kill-on-bad-exit the others are only
    killed after the first, so its first error line names the first failure; the line each
    rank's log ends with gives that rank's status. Without an srun line, the earliest non-zero
    status in the rank logs (a rank killed with the step may never write its end line, and
    the order of two end lines is only as good as the clocks of two nodes)."""
    ends: dict[int, tuple[float, str, int]] = {}
    silent = []  # ranks whose log has no end line: killed together with their wrapper
    for rank, lines in enumerate(rank_logs or []):
        said = [m for m in map(_RANK_END.search, lines) if m]
        if not said:
            silent.append(rank)
        for m in said:
            if int(m.group(3)) != 0:
                ends[int(m.group(1))] = (float(m.group(4)), m.group(2), int(m.group(3)))
    for line in output:
        err = _SRUN_ERROR.search(line)
        if err:
            node, task = err.group(1), int(err.group(2))
            if task in ends:
                code = ends[task][2]
                return {"node": node, "task": task, "status": code, "what": _status_text(code)}
            return {"node": node, "task": task, "what": err.group(3).strip()}
    if ends:
        rank, (_, node, code) = min(ends.items(), key=lambda kv: kv[1][0])
        return {"node": node, "task": rank, "status": code, "what": _status_text(code)}
    if silent and len(silent) < len(rank_logs or []):
        return {"node": f"SLURM_NODEID={silent[0]}", "task": silent[0], "status": None,
                "what": "ended without an exit status (killed with its step)"}
    return None


async def _failure(host: Host, output: str, rank_logs: list[str]
                   ) -> tuple[list[str], list[list[str]], dict[str, Any] | None]:
    tail = await output_tail(host, output)
    logs = [await output_tail(host, log, 40) for log in rank_logs]
    return tail, logs, failed_task(tail, logs)


async def _health(host: Host, addr: str, port: int) -> int | None:
    """Node 0's ``/health`` as seen from the login node (its agent probes it)."""
    from dsv4tui.core.errors import AgentFailed

    try:
        events = await host.agent.call("server", "status", "--port", str(port), "--host", addr)
    except (AgentFailed, UserError):
        return None
    ev = next((e for e in events if e.get("type") == "status"), {})
    health = ev.get("health")
    return health if isinstance(health, int) else None


def last_job(host_name: str, store: RunStore | None = None) -> tuple[int, dict[str, Any]] | None:
    """The newest stored launch of ``host_name`` that was a Slurm job: (launch id, profile)."""
    from dsv4tui.core.store import RunStore, StoreError

    try:
        own = store is None
        st = RunStore() if own else store
        assert st is not None
        try:
            for launch in st.launches(host_name, limit=50):
                if launch.profile and launch.profile.get("slurm_job_id"):
                    return launch.id, launch.profile
        finally:
            if own:
                st.close()
    except StoreError:
        return None
    return None


def _url(addr: str, port: int) -> str:
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"


async def status(host: Host, profile_name: str | None = None,
                 store: RunStore | None = None) -> dict[str, Any]:
    """The job of the host's newest launch, the way a cluster user reads it:
    ``state`` (ours: pending / starting / ready / ended / stopped), ``job_state`` (Slurm's),
    ``reason``, ``nodes``, ``exit_code``, ``failed`` (the node whose task failed), ``url``."""
    found = last_job(host.name, store)
    if found is None:
        return {"state": "stopped", "slurm": True, "job_id": None,
                "note": "no Slurm job launched from here"}
    launch_id, prof = found
    job_id = str(prof["slurm_job_id"])
    port = int(prof.get("port") or 30000)
    js = await job_state(host, job_id)
    out: dict[str, Any] = {"slurm": True, "job_id": job_id, "launch_id": launch_id,
                           "job_state": js.state, "reason": js.reason,
                           "node_list": js.node_list, "nodes": js.nodes, "port": port,
                           "exit_code": js.exit_code, "profile": prof,
                           "output": prof.get("slurm_output")}
    if js.state == "PENDING":
        out["state"] = "pending"
    elif js.state == "RUNNING" and js.nodes:
        addr = await node_addr(host, js.nodes[0])
        out["node0_addr"] = addr
        health = await _health(host, addr, port)
        out["health"] = health
        out["state"] = "ready" if health == 200 else "starting"
        if health == 200:
            out["url"] = _url(addr, port)
    elif js.active:
        out["state"] = "starting" if js.state != "COMPLETING" else "ending"
    elif js.state == "CANCELLED":
        out["state"] = "stopped"
    else:
        out["state"] = "ended" if js.state != "GONE" else "stopped"
    if not js.active and js.state not in ("GONE",) and prof.get("slurm_output"):
        tail, _, failed = await _failure(host, str(prof["slurm_output"]),
                                         [str(x) for x in prof.get("slurm_rank_logs") or []])
        if js.state != "CANCELLED":  # a stop: every task was terminated, none failed
            out["failed"] = failed
            if failed is not None:
                await _classify(host, out, failed, prof)
        out["output_tail"] = tail[-10:]
    return out


async def diagnose_rank(host: Host, failed: Mapping[str, Any], rank_logs: list[str]
                        ) -> dict[str, Any] | None:
    """The failed rank's log, read on the login node (the shared home), classified as a
    one-host start's is (agent/host/failure.diagnose, with the status the rank ended with)."""
    from dsv4tui.agent.host.failure import diagnose
    from dsv4tui.agent.host.logparse import LogParser

    rank = failed.get("task")
    if not isinstance(rank, int) or not 0 <= rank < len(rank_logs):
        return None
    parser = LogParser()
    events = []
    for line in await output_tail(host, rank_logs[rank], 400):
        events.extend(parser.feed(line))
    events.extend(parser.close())
    status = failed.get("status")
    return diagnose(events, parser, status if isinstance(status, int) and status < 128 else None,
                    status - 128 if isinstance(status, int) and status > 128 else None)


async def _classify(host: Host, out: dict[str, Any], failed: dict[str, Any],
                    prof: Mapping[str, Any]) -> None:
    """``failure`` (:func:`diagnose_rank`) and ``next_move`` (for that rank's argv) of the
    status of a job that failed."""
    from dsv4tui.core.server.next_move import suggest

    diag = await diagnose_rank(host, failed, [str(x) for x in prof.get("slurm_rank_logs") or []])
    if diag is None:
        return
    out["failure"] = diag
    rank = int(failed["task"])
    ranks = prof.get("slurm_ranks") or []
    argv = [str(a) for a in ranks[rank]] if rank < len(ranks) else []
    move = suggest(diag, argv, prof)
    if move is not None:
        out["next_move"] = move.to_json(host.name, prof.get("profile_name"))


def status_text(host: str, ev: Mapping[str, Any]) -> str:
    """``server status`` of a Slurm host, in a cluster user's words."""
    job = ev.get("job_id")
    if not job:
        return f"{host}: stopped (no Slurm job launched from here)"
    state = ev.get("state")
    head = f"{host}: Slurm job {job} {ev.get('job_state')}"
    if state == "pending":
        return f"{head} ({ev.get('reason') or 'waiting'}) - waiting in the queue"
    if state in ("ready", "starting"):
        nodes = ", ".join(ev.get("nodes") or []) or ev.get("node_list") or "?"
        what = (f"ready - node 0 answers on {ev.get('url')}" if state == "ready"
                else "starting - node 0 does not answer HTTP yet")
        return f"{head} on {nodes}: {what}"
    lines = [head + (f", exit code {ev['exit_code']}" if ev.get("exit_code") else "")
             + (f" ({ev['reason']})" if ev.get("reason") else "")]
    failed = ev.get("failed")
    if failed:
        lines.append(f"  failed first: node {failed['node']} (rank {failed['task']}): "
                     f"{failed['what']}")
    diag, move = ev.get("failure"), ev.get("next_move")
    if diag:
        lines.append(f"  class {diag['class']}: {diag['cause']}")
    if move:
        lines.append(f"  next: {move['command'] or move['why']}")
    if ev.get("job_state") == "TIMEOUT":
        lines.append("  the job hit its time limit (slurm.time)")
    lines += [f"  | {line}" for line in (ev.get("output_tail") or [])[-5:]]
    return "\n".join(lines)


async def cancel(host: Host, job_id: str, wait_s: float = STOP_WAIT_S) -> dict[str, Any]:
    """``scancel`` the job; confirmed once it has left the queue."""
    t0 = time.monotonic()
    before = await job_state(host, job_id)
    if not before.active:
        return {"how": "not_running", "job_id": job_id, "job_state": before.state,
                "note": f"Slurm job {job_id} is not in the queue ({before.state})"}
    code, out, err = await _run(host, ["scancel", job_id])
    if code != 0:
        raise SlurmError(f"{host.name}: scancel {job_id} failed: {_one_line(err or out)}")
    while True:
        js = await job_state(host, job_id)
        if not js.active:
            return {"how": "scancelled", "job_id": job_id, "job_state": js.state,
                    "stop_s": round(time.monotonic() - t0, 2)}
        if time.monotonic() - t0 > wait_s:
            return {"how": "scancelled", "job_id": job_id, "job_state": js.state,
                    "errors": [f"Slurm job {job_id} is still {js.state} {wait_s:g} s after "
                               "scancel"]}
        await asyncio.sleep(POLL_S / 2)


async def stop(host: Host, grace: float | None = None) -> dict[str, Any]:
    found = last_job(host.name)
    if found is None:
        return {"how": "not_running", "note": "no Slurm job launched from here"}
    return await cancel(host, str(found[1]["slurm_job_id"]))


def stop_text(host: str, ev: Mapping[str, Any]) -> str:
    if ev.get("how") == "not_running":
        return f"{host}: nothing to stop - {ev.get('note')}"
    text = f"{host}: scancel {ev['job_id']}: the job left the queue ({ev.get('job_state')})"
    if ev.get("stop_s") is not None:
        text += f" after {ev['stop_s']:.1f} s"
    for e in ev.get("errors") or []:
        text += f"; {e}"
    return text


# -- server start ---------------------------------------------------------------------------

async def start(host: Host, profile_name: str | None = None, backend: str | None = None, *,
                replace: bool = False, wait: bool = True, timeout: float = DEFAULT_TIMEOUT_S,
                on_step: Callable[[StartupStep], None] | None = None,
                store: RunStore | None = None,
                overrides: Mapping[str, Any] | None = None) -> StartResult:
    """Submit the profile as one job; with ``wait``: follow it (queue, nodes, node 0's HTTP)
    until ready. A job that ends first, or is not ready in ``timeout`` (it is cancelled then),
    raises StartupFailed naming the node and Slurm's state."""
    def step(text: str, **kw: Any) -> None:
        if on_step is not None:
            on_step(StartupStep(kw.pop("kind", "slurm"), text=text, **kw))

    if replace:
        found = last_job(host.name, store)
        if found is not None:
            ev = await cancel(host, str(found[1]["slurm_job_id"]))
            if ev["how"] != "not_running":
                step(stop_text(host.name, ev).split(": ", 1)[1])
    else:
        found = last_job(host.name, store)
        if found is not None:
            js = await job_state(host, str(found[1]["slurm_job_id"]))
            if js.active:
                from dsv4tui.core.errors import AgentFailed

                raise AgentFailed("already_running", f"{host.name}: Slurm job {js.job_id} is "
                                  f"{js.state}; `dsv4tui server stop {host.name}` cancels it, "
                                  "`server restart` replaces it")
    p = plan(host.config, host.name, profile_name, backend, overrides=overrides,
             local=host.session.is_local)
    job = await submit(host, p)
    t0 = time.monotonic()
    result = StartResult(host.name, p.profile_name, p.launch)
    result.started_at = time.time()
    result.slurm = {"job_id": job, "job_name": p.job_name, "output": p.output(job),
                    "rank_logs": p.rank_logs(job)}
    result.nodes = [{"node": None, "rank": r, "argv": launch.argv}
                    for r, launch in enumerate(p.ranks)]
    step(f"submitted Slurm job {job} ({len(p.ranks)} nodes); output {p.output(job)}")
    if store is not None:
        from dsv4tui.core.store import StoreError

        try:
            result.launch_id = store.record_launch(
                host.name, p.profile_name,
                {**p.launch.profile, "profile_name": p.profile_name, "argv": p.launch.argv,
                 "slurm_job_id": job,
                 "slurm_output": p.output(job), "slurm_rank_logs": p.rank_logs(job),
                 "slurm_ranks": [launch.argv for launch in p.ranks],
                 "started_at": result.started_at},
                p.launch.backend, p.launch.checkpoint, p.launch.changes, None, not wait,
                None if not wait else "waiting for the job")
        except StoreError as exc:
            result.store_error = str(exc)
    if not wait:
        return result
    try:
        await _follow(host, p, job, result, t0, timeout, step)
    except BaseException as exc:
        if not isinstance(exc, StartupFailed):
            with_cancel = await cancel(host, job)
            del with_cancel
        _end(store, result, False, str(exc) if isinstance(exc, UserError) else
             "interrupted while starting")
        raise
    _end(store, result, True, None)
    return result


def _end(store: RunStore | None, result: StartResult, ok: bool, error: str | None) -> None:
    if store is None or result.launch_id is None:
        return
    from dsv4tui.core.store import StoreError
    from dsv4tui.core.store import campaigns as cstore

    try:
        cstore.end_launch(store, result.launch_id, ok=ok, startup_s=result.startup_s,
                          error=error, pid=None)
    except StoreError as exc:
        result.store_error = str(exc)


async def _follow(host: Host, p: SlurmPlan, job: str, result: StartResult, t0: float,
                  timeout: float, step: Callable[..., None]) -> None:
    said: tuple[str, str | None] | None = None
    running_at: float | None = None
    port = p.launch.port
    addr: str | None = None
    while True:
        js = await job_state(host, job)
        now = time.monotonic()
        if (js.state, js.reason) != said and js.state == "PENDING":
            step(f"PENDING ({js.reason or 'waiting'})")
        said = (js.state, js.reason)
        if js.state == "RUNNING" and running_at is None and js.nodes:
            running_at = now
            addr = await node_addr(host, js.nodes[0])
            for n, name in enumerate(js.nodes):
                if result.nodes and n < len(result.nodes):
                    result.nodes[n]["node"] = name
            step("", kind="phase", name="queue_wait", duration_s=round(now - t0, 2),
                 elapsed_s=round(now - t0, 2))
            step(f"RUNNING on {', '.join(js.nodes)}; node 0 ({js.nodes[0]}) serves "
                 f"{_url(addr, port)}")
        if not js.active:
            tail, rank_tails, failed = await _failure(host, p.output(job), p.rank_logs(job))
            where = (f"node {failed['node']} (rank {failed['task']}): {failed['what']}; "
                     if failed else "")
            logs = [f"[rank {r}] {line}" for r, lines in enumerate(rank_tails)
                    for line in lines[-8:]]
            diag = await diagnose_rank(host, failed, p.rank_logs(job)) if failed else None
            raise StartupFailed(f"{host.name}: Slurm job {job} ended {js.state} before ready "
                                f"({where}exit code {js.exit_code or '?'})", kind="crashed",
                                excerpt=tail[-10:] + logs, result=result, failure=diag)
        if running_at is not None and addr is not None and \
                await _health(host, addr, port) == 200:
                result.ready = True
                result.startup_s = round(time.monotonic() - running_at, 2)
                result.slurm = {**(result.slurm or {}), "nodes": js.nodes,
                                "queue_wait_s": round(running_at - t0, 2),
                                "url": _url(addr, port)}
                step(f"ready: node 0 answers on {_url(addr, port)}", kind="slurm")
                return
        if now - t0 > timeout:
            await cancel(host, job)
            raise StartupFailed(f"{host.name}: Slurm job {job} not ready after {timeout:g} s "
                                f"({js.state}{', ' + js.reason if js.reason else ''}); "
                                "cancelled", kind="timeout", excerpt=[], result=result)
        await asyncio.sleep(POLL_S)
