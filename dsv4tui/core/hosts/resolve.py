"""Turn a host name into a connected Host: session + agent runner + its config.

Names: ``local`` (this machine), ``demo`` (this machine + the simulator), names from
``[hosts.NAME]``, and anything ``ssh`` takes: an alias in ~/.ssh/config, a bare host name or
IP, ``user@host[:port]``. A name that is none of ours is tried as a host name, as ``ssh`` would;
if it does not resolve, the error lists the known names (and the close ones: a typo).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dsv4tui.core import paths
from dsv4tui.core.config import DEMO, DEMO_NODES, DEMO_PAIR, LOCAL, HostConfig, Settings
from dsv4tui.core.errors import ConfigError, UserError
from dsv4tui.core.hosts import deploy, ssh, ssh_target
from dsv4tui.core.hosts.agent_runner import AgentRunner
from dsv4tui.core.hosts.local import LocalSession
from dsv4tui.core.hosts.session import HostSession
from dsv4tui.core.hosts.ssh import SshSession

DEMO_GPUS = 8
DEMO_GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
DEMO_GPU_MEM_MIB = 97887
DEMO_PAIR_GPU_NAME = "NVIDIA H200"
DEMO_PAIR_GPU_MEM_MIB = 143771


@dataclass(frozen=True)
class HostSpec:
    """Everything needed to (re)connect to a host, without connecting."""

    name: str
    config: HostConfig
    kind: str  # "local" | "demo" | "ssh"
    target: str | None = None
    accept_new: bool = False
    env: dict[str, str] = field(default_factory=dict)
    # a bare name that is none of ours: the known names, for the error if it does not resolve
    known: tuple[str, ...] = ()
    # a host made of nodes: every node's spec in rank order (this spec connects to node 0)
    group: tuple[HostSpec, ...] = ()

    @property
    def simulated(self) -> bool:
        return self.kind == "demo"


@dataclass
class Host:
    spec: HostSpec
    session: HostSession
    agent: AgentRunner
    python_version: str | None = None
    uploaded: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def config(self) -> HostConfig:
        return self.spec.config

    @property
    def simulated(self) -> bool:
        return self.spec.simulated


def demo_env(node: str | None = None) -> dict[str, str]:
    """The demo host's environment; ``node``: one of the two-node demo's nodes (its own
    agent home and simulated H200s on this machine)."""
    base = paths.data_dir() / "demo"
    if node is not None:
        base = base / node
    base.mkdir(parents=True, exist_ok=True)
    name, mem = (DEMO_GPU_NAME, DEMO_GPU_MEM_MIB) if node is None else \
        (DEMO_PAIR_GPU_NAME, DEMO_PAIR_GPU_MEM_MIB)
    return {"DSV4TUI_SIM_STATE": str(base / "sim-state.json"),
            "DSV4TUI_SIM_GPUS": str(DEMO_GPUS),
            # the campaign's box, also before the simulated server has started
            "DSV4TUI_SIM_GPU_NAME": name,
            "DSV4TUI_SIM_GPU_MEM_MIB": str(mem),
            "DSV4TUI_AGENT_HOME": str(base / "agent")}


def _demo_runs_on(port: int) -> bool:
    """Does the server a demo started (its agent's launch record) run on ``port``?"""
    import json

    from dsv4tui.agent.host import procs

    for node in (None, DEMO_NODES[0]):
        try:
            rec = json.loads((Path(demo_env(node)["DSV4TUI_AGENT_HOME"]) / "server.json")
                             .read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and not rec.get("stopped_at") and rec.get("port") == port \
                and procs.alive(rec.get("pid"), rec.get("proc_start")):
            return True
    return False


def claim_demo_port() -> tuple[int, str]:
    """The demo's port before ``dsv4tui demo`` starts its server, and a line saying which:
    the kept one while it is free (or the demo's own server runs there), else another free
    one (kept from now on) -- never a port a server the demo did not start listens on, which
    it would measure. ``$DSV4TUI_DEMO_PORT`` is taken as given (a server there that the demo
    did not start is refused by the sweep's check, never measured)."""
    from dsv4tui.agent.host import health
    from dsv4tui.core.hosts import demo

    port = demo.demo_port()
    if os.environ.get(demo.PORT_ENV):
        return port, f"the simulated server uses port {port} (${demo.PORT_ENV})"
    owner = None if _demo_runs_on(port) else health.port_owner(port)
    if owner is None:
        return port, f"the simulated server uses port {port} (${demo.PORT_ENV} sets another)"
    new = demo.free_port()
    demo.keep_port(new)
    return new, (f"port {port} is taken by {health.owner_text(owner)}: the simulated server "
                 f"uses port {new} instead")


def host_spec(name: str, settings: Settings, *, accept_new: bool = False) -> HostSpec:
    """Resolve a name without connecting (a name that is none of ours is an SSH target, as for
    ``ssh``); ConfigError only for text that cannot be one."""
    if name == DEMO:
        from dsv4tui.core.hosts.demo import demo_host_config

        return HostSpec(DEMO, demo_host_config(), "demo", env=demo_env())
    if name in DEMO_NODES:
        return HostSpec(name, HostConfig(), "demo", env=demo_env(name))
    if name == DEMO_PAIR:
        from dsv4tui.core.hosts.demo import demo_pair_config

        # built in: its names are reserved, so it is not a validated [hosts] entry
        return group_spec(name, Settings.model_construct(hosts={DEMO_PAIR: demo_pair_config()}))
    if name == LOCAL:
        cfg = settings.hosts.get(LOCAL, HostConfig())
        return HostSpec(LOCAL, cfg, "local",
                        env={"DSV4TUI_AGENT_HOME": str(paths.local_agent_state_dir())})
    if name in settings.hosts and settings.hosts[name].nodes:
        return group_spec(name, settings, accept_new=accept_new)
    if name in settings.hosts and settings.hosts[name].slurm is not None \
            and settings.hosts[name].ssh in (None, LOCAL):
        # a Slurm host whose login node is this machine
        return HostSpec(name, settings.hosts[name], "local",
                        env={"DSV4TUI_AGENT_HOME": str(paths.local_agent_state_dir())})
    if name in settings.hosts:
        cfg = settings.hosts[name]
        return HostSpec(name, cfg, "ssh", target=cfg.ssh or name, accept_new=accept_new)
    try:
        ssh_target.SshTarget.parse(name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    aliases = ssh_target.ssh_config_aliases()
    known: tuple[str, ...] = ()
    if name not in aliases and "@" not in name:
        known = tuple(dict.fromkeys(("local", "demo", *settings.hosts, *aliases)))
    return HostSpec(name, HostConfig(), "ssh", target=name, accept_new=accept_new, known=known)


def group_spec(name: str, settings: Settings, *, accept_new: bool = False) -> HostSpec:
    """A host made of nodes: node 0's connection (what sweeps, sanity and logs reach: rank 0
    serves the HTTP API) with the group's profiles, and every node's spec in ``group``."""
    cfg = settings.hosts[name]
    assert cfg.nodes
    nodes = tuple(host_spec(node, settings, accept_new=accept_new) for node in cfg.nodes)
    first = nodes[0]
    config = cfg.model_copy(update={"python": cfg.python or first.config.python,
                                    "connect_timeout_s": first.config.connect_timeout_s,
                                    "keepalive_s": first.config.keepalive_s})
    return dataclasses.replace(first, name=name, config=config, group=nodes, known=())


def explain_dns(spec: HostSpec, err: ssh.DnsError) -> ssh.DnsError:
    """The DNS error of a bare name, with the names it might have meant."""
    if not spec.known or spec.target is None:
        return err
    typed = ssh_target.SshTarget.parse(spec.target).alias
    if err.hostname != typed:
        return err
    close = difflib.get_close_matches(typed, spec.known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return ssh.DnsError(f"{err.message}: unknown host, not in the config's [hosts] nor an "
                        f"alias in ~/.ssh/config (known: {', '.join(spec.known)}){hint}",
                        err.hostname)


async def connect_session(spec: HostSpec) -> HostSession:
    if spec.kind in ("local", "demo"):
        return LocalSession(spec.name, base_env=spec.env)
    assert spec.target is not None
    try:
        return await SshSession.connect(spec.name, spec.target, accept_new=spec.accept_new,
                                        connect_timeout=spec.config.connect_timeout_s,
                                        keepalive_s=spec.config.keepalive_s)
    except ssh.DnsError as err:
        raise explain_dns(spec, err) from None


Probe = Callable[[], Awaitable["str | None"]]


def link_probe(spec: HostSpec, timeout: float = 2.0) -> Probe | None:
    """A cheap reachability check for ``spec`` (the first hop's TCP port and SSH banner),
    or None where there is nothing to probe (local, demo, a ProxyCommand, a bad target)."""
    if spec.kind != "ssh" or spec.target is None:
        return None
    try:
        first = ssh.parse_path(spec.target)[0]
    except UserError:
        return None
    if first.proxy_command:
        return None
    return functools.partial(ssh.probe_ssh, first.hostname, first.port, timeout)


async def prepare_agent(spec: HostSpec, session: HostSession) -> Host:
    """Check the host's python, upload the agent bundle if needed, return the Host."""
    if session.is_local:
        runner = AgentRunner(session, [sys.executable, "-m", "dsv4tui.agent"], env=spec.env)
        return Host(spec, session, runner, python_version=sys.version.split()[0])
    python = spec.config.python or "python3"
    version = await deploy.check_python(session, python)
    bundle = deploy.build_bundle()
    uploaded = await deploy.ensure_uploaded(session, bundle)
    runner = AgentRunner(session, [python, bundle.remote_path], env=spec.env)
    return Host(spec, session, runner, python_version=version, uploaded=uploaded)


async def connect(spec: HostSpec) -> Host:
    session = await connect_session(spec)
    try:
        return await prepare_agent(spec, session)
    except BaseException:
        await session.close()
        raise


@asynccontextmanager
async def open_host(name: str, settings: Settings, *, accept_new: bool = False
                    ) -> AsyncIterator[Host]:
    host = await connect(host_spec(name, settings, accept_new=accept_new))
    try:
        yield host
    finally:
        await host.session.close()
