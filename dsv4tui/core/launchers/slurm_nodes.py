"""Every node of a running Slurm job as an agent of its own.

An agent command on node N runs as an overlapping step of the job, ``srun --jobid J --overlap
--nodelist N --nodes 1 --ntasks 1`` in front of the login node's agent command, so telemetry
and logs come from the node itself (an overlapping step takes no new resources and never
waits in the queue). The agent is the login node's: on a cluster the home directory it is
uploaded to is shared with the compute nodes (the layout Slurm's own defaults assume).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv4tui.core.errors import UserError
from dsv4tui.core.hosts.agent_runner import AgentRunner
from dsv4tui.core.launchers.slurm import JobState, job_state, last_job

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host


def step_prefix(job_id: str, node: str) -> list[str]:
    """The srun in front of a command that runs it once on ``node`` inside job ``job_id``."""
    return ["srun", f"--jobid={job_id}", "--overlap", f"--nodelist={node}", "--nodes=1",
            "--ntasks=1", "--quiet"]


def node_agent(host: Host, job_id: str, node: str) -> AgentRunner:
    """The agent of ``node``: the login node's agent command run as a step on that node."""
    return AgentRunner(host.session, [*step_prefix(job_id, node), *host.agent.prefix],
                       env=host.agent.env)


def is_slurm(host: Host) -> bool:
    return getattr(host.spec.config, "slurm", None) is not None


async def running_job(host: Host) -> JobState | None:
    """The host's newest dsv4tui job if it runs now; None if there is none. A job that is
    still queued is a UserError naming its state and reason (its nodes are not known yet)."""
    found = last_job(host.name)
    if found is None:
        return None
    job_id = str(found[1]["slurm_job_id"])
    js = await job_state(host, job_id)
    if js.state == "PENDING":
        why = f" ({js.reason})" if js.reason else ""
        raise UserError(f"{host.name}: Slurm job {job_id} is PENDING{why}: its nodes are not "
                        "allocated yet")
    if js.state not in ("RUNNING", "COMPLETING") or not js.nodes:
        return None
    return js


async def node_agents(host: Host) -> list[tuple[str, AgentRunner]] | None:
    """(node, its agent) for every node of the running job, node 0 first; None without one."""
    js = await running_job(host)
    if js is None:
        return None
    return [(node, node_agent(host, js.job_id, node)) for node in js.nodes]
