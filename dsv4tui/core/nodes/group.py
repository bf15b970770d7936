"""A host made of several nodes (``[hosts.pair] nodes = ["h200a", "h200b"]``): its nodes, and
one launch profile planned into one LaunchPlan per node.

Every node runs the same ``launch_server`` with ``--nnodes N --node-rank i --dist-init-addr
NODE0:PORT`` (the rank is the node's position in ``nodes``); the address defaults to node 0's
address as the others reach it (an ssh node's HostName, ``127.0.0.1`` when every node is this
machine, else this machine's host name) and ``dist_init_port`` (default 20000), or is the
profile's whole ``dist_init_addr``. Argv lists come from launch.build_launch, as for one host.
No connection is made here.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv4tui.core.config import HostConfig, ServerProfile
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.server.launch import LaunchPlan, build_launch

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import HostSpec

DEFAULT_DIST_PORT = 20000


@dataclass(frozen=True)
class NodeLaunch:
    """One node's part of a launch across nodes."""

    node: str  # the node's host name (a config host, an ssh alias or local)
    rank: int
    spec: HostSpec
    launch: LaunchPlan

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "rank": self.rank, **self.launch.to_json()}


def node_address(spec: HostSpec, every_node_here: bool) -> str:
    """How the other nodes reach ``spec`` (the default --dist-init-addr host)."""
    if spec.kind != "ssh" or spec.target is None:
        return "127.0.0.1" if every_node_here else socket.gethostname()
    from dsv4tui.core.hosts import ssh

    return ssh.parse_path(spec.target)[-1].hostname


def dist_init_addr(profile: ServerProfile, specs: list[HostSpec]) -> str:
    if profile.dist_init_addr:
        return profile.dist_init_addr
    here = all(s.kind != "ssh" for s in specs)
    host = node_address(specs[0], here)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{profile.dist_init_port or DEFAULT_DIST_PORT}"


def plan_nodes(config: HostConfig, specs: list[HostSpec], profile_name: str | None = None,
               backend: str | None = None, *, overrides: Mapping[str, Any] | None = None,
               sglang_version: str | None = None) -> list[NodeLaunch]:
    """The group host's profile as one validated LaunchPlan per node (ConfigError: one line)."""
    if not config.nodes or len(specs) != len(config.nodes):
        raise ConfigError("the rank list does not match the nodes")
    name, profile = config.profile(profile_name)
    addr = dist_init_addr(profile, specs)
    launches = rank_launches(profile, name, config.nodes, addr, backend, overrides=overrides,
                             sglang_version=sglang_version)
    return [NodeLaunch(node, rank, spec, launch) for rank, (node, spec, launch)
            in enumerate(zip(config.nodes, specs, launches, strict=True))]


def rank_launches(profile: ServerProfile, name: str, nodes: list[str], addr: str,
                  backend: str | None = None, *, overrides: Mapping[str, Any] | None = None,
                  sglang_version: str | None = None) -> list[LaunchPlan]:
    """One profile as one validated LaunchPlan per rank (``--nnodes len(nodes) --node-rank i
    --dist-init-addr addr``): what the SSH fan-out runs on each node, and what a Slurm job's
    ranks run (core/launchers/slurm) -- one launch model, two backends."""
    out = []
    for rank, node in enumerate(nodes):
        per_node = profile.model_copy(update={"nnodes": len(nodes), "node_rank": rank,
                                              "dist_init_addr": addr})
        try:
            out.append(build_launch(per_node, backend, name, overrides=overrides,
                                    sglang_version=sglang_version))
        except ConfigError as exc:
            raise ConfigError(f"node {node} (rank {rank}): {exc}") from None
    return out
