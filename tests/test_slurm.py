"""Launches as Slurm jobs, against a real two-node Slurm on this machine (tests/plugins/slurm:
munged + slurmctld + slurmd -N node0 / -N node1): the simulator's ranks on both nodes as one
job, its state the way a cluster user reads it, a rank killed, stop = scancel, a PENDING job."""

from __future__ import annotations

from plugins.slurm import NODES, SlurmCluster


def test_the_test_cluster_runs_one_task_per_node(slurm: SlurmCluster) -> None:
    out = slurm.run("srun", "-N2", "--ntasks-per-node=1", "bash", "-c",
                    'echo "$SLURMD_NODENAME $SLURM_NODEID"', timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split("\n")[:2]) == ["node0 0", "node1 1"]
    assert set(slurm.node_states()) == set(NODES)
