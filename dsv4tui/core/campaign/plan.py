"""A campaign's plan: each variant's launch validated into its exact argv, before anything runs.

``resolve`` turns a ``[campaigns.NAME]`` table (or a campaign file) into a :class:`CampaignPlan`
with the existing launch code (:func:`dsv4tui.core.server.launch.build_launch`), so a backend, flag or
profile that would not launch is refused here, with the file and key path, not after a
multi-minute restart. ``CampaignPlan.agent_spec()`` is the JSON the host-side runner gets.

A single sweep is a one-variant campaign without a restart: :func:`sweep_spec`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsv4tui.core.config import (
    CampaignConfig,
    CampaignKernels,
    CanaryConfig,
    HostConfig,
    SanityCase,
    ServerProfile,
    Settings,
    SlurmConfig,
    SweepPlan,
)
from dsv4tui.core.errors import ConfigError, UserError
from dsv4tui.core.server.launch import LaunchPlan, build_launch

SPEC_VERSION = 1  # dsv4tui.agent.campaign.command.SPEC_VERSION
GRACE_S = 60.0
STARTUP_TIMEOUT_S = 1800.0


@dataclass
class VariantPlan:
    index: int
    name: str
    label: str
    profile_name: str
    profile: ServerProfile
    launch: LaunchPlan
    warnings: list[str] = field(default_factory=list)
    ranks: list[LaunchPlan] = field(default_factory=list)  # on a Slurm host: one per node

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "profile": self.profile_name,
                "backend": self.launch.backend, "checkpoint": self.launch.checkpoint,
                "argv": self.launch.argv, "command_line": self.launch.command_line(),
                "env": self.launch.env, "port": self.launch.port, "warnings": self.warnings}


@dataclass
class CampaignPlan:
    name: str
    host: str
    variants: list[VariantPlan]
    sweep: SweepPlan
    cases: list[SanityCase]
    repeats: int = 1
    order: str = "interleaved"
    seed: int = 0
    on_failure: str = "skip"
    stop_server: bool = False
    source: str | None = None  # where it was defined
    canary: CanaryConfig | None = None
    kernels: CampaignKernels | None = None  # a kernel capture per variant at one level
    slurm: SlurmConfig | None = None  # a Slurm host: every variant a job step of one job

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "repeats": self.repeats,
                "order": self.order, "schedule": [list(x) for x in self.schedule()],
                "on_failure": self.on_failure, "stop_server": self.stop_server,
                "sweep": self.sweep.model_dump(mode="json"),
                "sanity": [c.model_dump() for c in self.cases],
                "variants": [v.to_json() for v in self.variants], "source": self.source,
                "canary": self.canary.agent_spec() if self.canary else None,
                "kernels": self.kernels.agent_spec() if self.kernels else None}

    def agent_spec(self) -> dict[str, Any]:
        """What ``agent campaign start`` gets."""
        variants = []
        for v in self.variants:
            la = v.launch
            launch: dict[str, Any] = {
                "profile_name": v.profile_name, "backend": la.backend,
                "checkpoint": la.checkpoint, "changes": la.changes, "argv": la.argv,
                "profile": {"name": v.profile_name, **la.profile}}
            if self.slurm is not None:  # the ranks as one step of the campaign's job
                from dsv4tui.core.launchers import slurm

                launch.update(slurm_step=slurm.campaign_step(v.ranks, v.profile.dist_init_addr),
                              argv=v.ranks[0].argv, timeout=STARTUP_TIMEOUT_S)
                launch["profile"]["nnodes"] = len(v.ranks)
            else:
                launch["spec"] = la.launch_spec(replace=True, wait_ready=True, grace=GRACE_S,
                                                timeout=STARTUP_TIMEOUT_S)
            variants.append({"name": v.name, "label": v.label, "launch": launch,
                             "target": {"mode": "ours"}})
        out = {"v": SPEC_VERSION, "name": self.name, "kind": "campaign", "host": self.host,
                "repeats": self.repeats, "on_failure": self.on_failure,
                "stop_server": self.stop_server, "plan": self.sweep.model_dump(mode="json"),
                "cases": [c.model_dump() for c in self.cases] or None, "variants": variants}
        if self.canary is not None:
            out["canary"] = self.canary.agent_spec()
        if self.kernels is not None:  # the runner's agent/campaign/variant_kernels.py
            out["kernels"] = self.kernels.agent_spec()
        if self.slurm is not None:
            from dsv4tui.core.launchers import slurm

            name = slurm.job_name(self.host, self.slurm)
            out["slurm"] = {"job_name": name, "nodes": self.slurm.nodes,
                            "script": slurm.campaign_script(self.slurm, self.slurm.nodes, name)}
        if self.repeats > 1:  # a restart per repeat, in this order (the runner's _scheduled)
            out.update(order=self.order, schedule=[list(x) for x in self.schedule()])
        return out

    def schedule(self) -> list[tuple[int, int]]:
        """(variant, repeat) in the order they run: :func:`schedule`."""
        return schedule(len(self.variants), self.repeats, self.order, self.seed)


def schedule(variants: int, repeats: int, order: str = "interleaved",
             seed: int = 0) -> list[tuple[int, int]]:
    """The order of a campaign's repeats, so that drift (a GPU warming up, another job on the
    host) falls on every variant alike: ``interleaved`` A1 B1 A2 B2 ...; ``blocked`` A1 A2
    B1 B2 ...; ``random``: each round of the variants in a shuffled order (randomized blocks,
    ``seed``)."""
    import random

    if order == "blocked":
        return [(v, r) for v in range(variants) for r in range(repeats)]
    rng = random.Random(seed)
    out = []
    for r in range(repeats):
        round_ = list(range(variants))
        if order == "random":
            rng.shuffle(round_)
        out += [(v, r) for v in round_]
    return out


def available(settings: Settings, host: str | None = None) -> dict[str, CampaignConfig]:
    """The campaigns one can start: the config's, and the demo's built-in ones (a config
    campaign of the same name wins); only those on ``host`` when given."""
    from dsv4tui.core.hosts.demo import demo_campaigns

    out = {**demo_campaigns(), **settings.campaigns}
    return {k: v for k, v in out.items() if host is None or v.host == host}


def _where(source: str | None) -> str:
    return f" in {source}" if source else ""


def load_file(path: Path, name: str | None = None) -> tuple[str, CampaignConfig]:
    """A campaign from its own TOML file: either the campaign's keys at the top level (named
    after the file) or ``[campaigns.NAME]`` tables (``name`` picks one when there are
    several)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read campaign file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"campaign file {path}: not valid TOML: {exc}") from None
    prefix = ""
    if isinstance(raw.get("campaigns"), dict):
        tables = raw["campaigns"]
        if name is None and len(tables) == 1:
            name = next(iter(tables))
        if name not in tables:
            raise ConfigError(f"campaign file {path}: "
                              + (f"no campaign {name!r}; it has: {', '.join(tables)}" if name
                                 else f"several campaigns ({', '.join(tables)}): name one"))
        raw, prefix = tables[name], f"campaigns.{name}."
    else:
        name = name or path.stem
    assert name is not None
    try:
        return name, CampaignConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"campaign file {path}: {prefix}{loc}: "
                          f"{err['msg'].removeprefix('Value error, ')}") from None


def resolve(settings: Settings, name: str | None = None, *, file: Path | None = None,
            config_path: Path | None = None,
            host_config: HostConfig | None = None) -> CampaignPlan:
    """Validate a campaign into its plan (no connection). ConfigError names the key path.
    ``host_config``: the host's config as the caller already holds it (the dashboard's)."""
    from dsv4tui.core.hosts.resolve import host_spec

    if file is not None:
        name, camp = load_file(file, name)
        source: str | None = str(file)
        prefix = ""
    else:
        if not name:
            raise ConfigError("name a campaign ([campaigns.NAME] in the config) or give --file")
        campaigns = available(settings)
        if name not in campaigns:
            known = ", ".join(campaigns) or "(none)"
            raise ConfigError(f"no campaign {name!r} in the config{_where(str(config_path))}; "
                              f"defined: {known}")
        camp = campaigns[name]
        builtin = name not in settings.campaigns
        source = "the demo's built-in campaigns" if builtin else (
            str(config_path) if config_path else None)
        prefix = f"campaigns.{name}."
    assert name is not None
    config = host_config if host_config is not None else host_spec(camp.host, settings).config
    if config.nodes and config.slurm is None:  # an SSH node group: no scheduler to run in
        raise ConfigError(f"campaign {name}: {camp.host} is a host made of nodes (SSH "
                          "fan-out); campaigns run on one host or in one Slurm allocation "
                          "(docs/campaigns.md), not across SSH nodes: `dsv4tui server restart "
                          f"{camp.host}` then `dsv4tui sweep {camp.host}` per variant, or make "
                          "it a Slurm host")
    try:
        plan = camp.plan(settings.sweep)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"campaign {name}{_where(source)}: {prefix}sweep."
                          f"{'.'.join(str(p) for p in err['loc'])}: "
                          f"{err['msg'].removeprefix('Value error, ')}") from None
    problem = camp.kernels.problem(plan) if camp.kernels is not None else None
    if problem is not None:
        raise ConfigError(f"campaign {name}{_where(source)}: {prefix}{problem}")
    variants = [_variant(config, camp, i, source, prefix) for i in range(len(camp.variants))]
    if config.slurm is not None:
        for v in variants:
            v.ranks = _ranks(config, v, source, prefix)
    cases = list(camp.sanity) if camp.sanity is not None else settings.sanity.suite()
    return CampaignPlan(name=name, host=camp.host, variants=variants, sweep=plan, cases=cases,
                        repeats=camp.repeats, order=camp.order, seed=camp.seed,
                        on_failure=camp.on_failure, canary=camp.canary, kernels=camp.kernels,
                        stop_server=camp.stop_server or config.slurm is not None,
                        source=source, slurm=config.slurm)


def _variant(config: HostConfig, camp: CampaignConfig, i: int, source: str | None,
             prefix: str) -> VariantPlan:
    from dsv4tui.core.campaign.labels import check_label

    v = camp.variants[i]
    where = f"{prefix}variants[{i}] ({v.name})"
    try:
        label = check_label(v.label or v.name)
    except UserError as exc:
        raise ConfigError(f"campaign{_where(source)}: {where}: {exc.message}") from None
    base_name = v.profile or camp.profile
    try:
        pname, base = config.profile(base_name)
    except ConfigError as exc:
        raise ConfigError(f"campaign{_where(source)}: {where}: {exc.message}") from None
    try:
        profile = ServerProfile.model_validate({**base.model_dump(), **v.overrides})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"campaign{_where(source)}: {where}.{'.'.join(str(p) for p in err['loc'])}"
                          f": {err['msg'].removeprefix('Value error, ')}") from None
    try:
        launch = build_launch(profile, None, pname)
    except ConfigError as exc:
        raise ConfigError(f"campaign{_where(source)}: {where}: {exc.message}") from None
    warnings = list(launch.warnings)
    misfit = _misfit(profile)
    if misfit:
        if not v.force:
            raise ConfigError(f"campaign{_where(source)}: {where}: {misfit} (set force = true "
                              "on the variant to launch it anyway)")
        warnings.append(f"forced: {misfit}")
    changes = {k: {"from": getattr(base, k), "to": val} for k, val in v.overrides.items()
               if getattr(base, k) != val}
    launch = replace(launch, changes=changes)
    return VariantPlan(i, v.name, label, pname, profile, launch, warnings)


def _ranks(config: HostConfig, v: VariantPlan, source: str | None, prefix: str
           ) -> list[LaunchPlan]:
    """A Slurm host's variant as one launch per node (``--nnodes``, ``--node-rank``, node 0's
    address), the same rendering a ``server start`` job's ranks get."""
    from dsv4tui.core.launchers.slurm import ADDR_PLACEHOLDER
    from dsv4tui.core.nodes.group import DEFAULT_DIST_PORT, rank_launches

    assert config.slurm is not None
    prof = v.profile
    port = prof.dist_init_port or DEFAULT_DIST_PORT
    addr = prof.dist_init_addr or f"{ADDR_PLACEHOLDER}:{port}"
    nodes = [f"SLURM_NODEID={r}" for r in range(config.slurm.nodes)]
    try:
        ranks = rank_launches(prof, v.profile_name, nodes, addr)
    except ConfigError as exc:
        raise ConfigError(f"campaign{_where(source)}: {prefix}variants[{v.index}] ({v.name}): "
                          f"{exc.message}") from None
    return [replace(r, changes=v.launch.changes) for r in ranks]


def _misfit(profile: ServerProfile) -> str | None:
    """Why the profile's MoE backend cannot run its checkpoint (the one table, backends.py)."""
    from dsv4tui.core.server.backends import backend_misfit

    return backend_misfit(profile, profile.backend_label)


def sweep_spec(*, label: str, plan: SweepPlan, cases: list[SanityCase] | None,
               target: dict[str, Any], host: str, repeats: int = 1) -> dict[str, Any]:
    """A single sweep as a one-variant campaign (no restart) for ``agent campaign start``;
    ``repeats``: the sweep that many times on the same server, a run each."""
    return {"v": SPEC_VERSION, "name": label, "kind": "sweep", "host": host,
            "repeats": repeats,
            "on_failure": "stop", "plan": plan.model_dump(mode="json"),
            "cases": [c.model_dump() for c in cases] if cases else None,
            "variants": [{"name": label, "label": label, "target": target}]}


def bench_target(config: HostConfig, profile: str | None = None) -> dict[str, Any]:
    """Where a sweep/sanity on a host aims: with ``profile``, that profile's server; without,
    the server dsv4tui started there (whichever profile), else whatever answers on the default
    profile's port (reported as not ours). Either way the host checks that the server answering
    is the one described (``dsv4tui.agent.host.target.identity_problem``): the profile's model, and
    for a profile that launches the simulator (the demo), only a server dsv4tui started."""
    if profile is not None:
        _, prof = config.profile(profile)
        return {"mode": "url", "url": _profile_url(prof),
                "model": prof.served_model_name or prof.model_path,
                "api_key_env": prof.api_key_env, "expect": _expect(prof)}
    out: dict[str, Any] = {"mode": "ours"}
    if config.profiles:
        _, prof = config.profile(None)
        out["fallback"] = _expect(prof)
    return out


def _expect(prof: ServerProfile) -> dict[str, Any]:
    """What the server a profile describes answers as (``agent.target``'s fallback)."""
    from dsv4tui.core.server.sglang_version import SIM_MODULE

    return {"host": prof.host, "port": prof.port,
            "model": prof.served_model_name or prof.model_path, "model_path": prof.model_path,
            "api_key_env": prof.api_key_env, "ours_only": prof.module.startswith(SIM_MODULE)}


def _profile_url(prof: ServerProfile) -> str:
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(prof.host, prof.host)
    return f"http://[{host}]:{prof.port}" if ":" in host else f"http://{host}:{prof.port}"
