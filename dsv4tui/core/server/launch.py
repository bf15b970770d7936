"""A validated ServerProfile becomes a LaunchPlan: the argv list, env and log file for the agent.

Never a shell string. Choices are checked against SGLang 0.5.2x (sglang_choices); known traps
are refused with the fix named; flags that belong to a profile field are refused in
``extra_args`` (so backend switching and port checks see the real value); the API key is
passed by the *name* of a host env var (``api_key_env``), never by value.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dsv4tui.core.config import ServerProfile
from dsv4tui.core.errors import ConfigError
from dsv4tui.core.server import sglang_choices

# Flags that a profile field owns -> that field.
FIELD_FLAGS: dict[str, str] = {
    "--model-path": "model_path", "--model": "model_path",
    "--served-model-name": "served_model_name", "--host": "host", "--port": "port",
    "--tp-size": "tp_size", "--tensor-parallel-size": "tp_size",
    "--dp-size": "dp_size", "--data-parallel-size": "dp_size",
    "--ep-size": "ep_size", "--ep": "ep_size", "--expert-parallel-size": "ep_size",
    "--quantization": "quantization", "--moe-runner-backend": "moe_runner_backend",
    "--attention-backend": "attention_backend", "--kv-cache-dtype": "kv_cache_dtype",
    "--dsv4-attn-backend": "dsv4_attn_backend", "--dsv4-prefill-backend": "dsv4_prefill_backend",
    "--mem-fraction-static": "mem_fraction_static",
    "--speculative-algorithm": "speculative_algorithm",
    "--speculative-num-steps": "speculative_num_steps",
    "--speculative-eagle-topk": "speculative_eagle_topk",
    "--speculative-num-draft-tokens": "speculative_num_draft_tokens",
    "--trust-remote-code": "trust_remote_code", "--enable-metrics": "enable_metrics",
    "--nnodes": "nnodes", "--node-rank": "node_rank", "--dist-init-addr": "dist_init_addr",
    "--nccl-init-addr": "dist_init_addr",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DSV4_SPEC = ("EAGLE", "NEXTN", "DSPARK")


@dataclass(frozen=True)
class LaunchPlan:
    """What the agent's ``server start`` gets. Relative paths live in the agent's cache dir."""

    argv: list[str]
    env: dict[str, str]
    log_file: str
    port: int
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    host: str = "127.0.0.1"
    workdir: str | None = None
    api_key_env: str | None = None
    profile_name: str | None = None
    backend: str = "auto"
    checkpoint: str = "default"
    warnings: list[str] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)
    sglang_version: str | None = None  # the host's SGLang, when known (validated against it)
    choices_version: str = sglang_choices.NEWEST.version  # whose choice lists it was checked by

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile_name, "argv": self.argv, "env": self.env,
                "log_file": self.log_file, "workdir": self.workdir, "bind_host": self.host,
                "port": self.port, "api_key_env": self.api_key_env, "backend": self.backend,
                "checkpoint": self.checkpoint, "changes": self.changes,
                "warnings": self.warnings, "sglang_version": self.sglang_version,
                "choices_version": self.choices_version}

    def command_line(self) -> str:
        """For reading only (the agent never runs a shell)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)

    def launch_spec(self, *, replace: bool = False, wait_ready: bool = False,
                    grace: float | None = None, timeout: float | None = None) -> dict[str, Any]:
        """This launch as the agent's ``LaunchSpec`` (JSON): what a campaign's runner hands
        its in-process server start (dsv4tui.agent.host.launch_spec)."""
        spec: dict[str, Any] = {
            "argv": list(self.argv), "env": dict(self.env), "log": self.log_file,
            "port": self.port, "host": self.host,
            "profile": {"name": self.profile_name, **self.profile, "changes": self.changes},
            "replace": replace, "wait_ready": wait_ready}
        if self.workdir:
            spec["workdir"] = self.workdir
        if self.profile.get("node_rank"):
            spec["node_rank"] = int(self.profile["node_rank"])
        if self.api_key_env:
            spec["api_key_env"] = self.api_key_env
        if grace is not None:
            spec["grace"] = grace
        if timeout is not None:
            spec["timeout"] = timeout
        return spec

    def agent_args(self, *, replace: bool = False, wait_ready: bool = False,
                   grace: float | None = None, timeout: float | None = None) -> list[str]:
        """The argv of the agent's ``server start`` for this launch (the same fields as
        :meth:`launch_spec`, as command-line flags)."""
        spec = self.launch_spec(replace=replace, wait_ready=wait_ready, grace=grace,
                                timeout=timeout)
        args = ["server", "start", "--argv-json", json.dumps(spec["argv"]),
                "--env-json", json.dumps(spec["env"]), "--log", spec["log"],
                "--port", str(spec["port"]), "--host", spec["host"],
                "--profile-json", json.dumps(spec["profile"])]
        if "workdir" in spec:
            args += ["--workdir", spec["workdir"]]
        if "node_rank" in spec:
            args += ["--node-rank", str(spec["node_rank"])]
        if "api_key_env" in spec:
            args += ["--api-key-env", spec["api_key_env"]]
        if replace:
            args.append("--replace")
        if wait_ready:
            args.append("--wait-ready")
        if grace is not None:
            args += ["--grace", f"{grace:g}"]
        if timeout is not None:
            args += ["--timeout", f"{timeout:g}"]
        return args


def _flag(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _check_extra_args(args: list[str]) -> list[str]:
    warnings = []
    for arg in args:
        if "\x00" in arg or "\n" in arg:
            raise ConfigError(f"extra_args: {arg!r} contains a NUL or newline")
        flag = arg.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        if flag in sglang_choices.TRAP_FLAGS:
            raise ConfigError(f"extra_args: {flag}: {sglang_choices.TRAP_FLAGS[flag]}")
        if flag == "--api-key":
            raise ConfigError("extra_args: never put the API key in the config; set "
                              "api_key_env to the name of an env var that holds it on the host")
        if flag in FIELD_FLAGS:
            raise ConfigError(f"extra_args sets {flag}; use the profile field "
                              f"{FIELD_FLAGS[flag]!r} instead")
        if flag in sglang_choices.DEPRECATED_FLAGS:
            warnings.append(f"{flag} is {sglang_choices.DEPRECATED_FLAGS[flag]}")
    return warnings


def _check_value(name: str, value: str | None) -> None:
    if value is None:
        return
    if value.startswith("-"):
        raise ConfigError(f"{name} {value!r} starts with '-': SGLang would read it as a flag")
    if "\x00" in value or "\n" in value:
        raise ConfigError(f"{name} {value!r} contains a NUL or newline")


def _revalidate(profile: ServerProfile, backend: str | None,
                overrides: Mapping[str, Any]) -> ServerProfile:
    data = profile.model_dump()
    data.update(overrides)
    if backend is not None:
        data["moe_runner_backend"] = backend
    try:
        return ServerProfile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"profile: {loc}: {err['msg'].removeprefix('Value error, ')}") from None


def _check_choices(p: ServerProfile, sglang_version: str | None
                   ) -> tuple[sglang_choices.ChoiceLists, str | None]:
    """Every choice flag against the lists of the host's SGLang (the newest when unknown)."""
    lists, note = sglang_choices.lists_for(sglang_version)
    for name in sglang_choices.CHOICE_FIELDS:
        why = sglang_choices.check_choice(name, getattr(p, name), lists)
        if why is not None:
            raise ConfigError(why)
    return lists, note


def build_launch(profile: ServerProfile, backend_override: str | None = None,
                 profile_name: str | None = None, *,
                 overrides: Mapping[str, Any] | None = None,
                 sglang_version: str | None = None) -> LaunchPlan:
    """Validate ``profile`` (with ``--moe-runner-backend`` switched, and any other profile
    field changed by ``overrides``, e.g. ``{"attention_backend": "triton"}``) into a LaunchPlan.
    Choice flags are checked against SGLang ``sglang_version``'s lists (the host's), the newest
    shipped when it is unknown; a version without its own lists adds a warning that says so.

    Raises ConfigError with one line naming the problem and the fix.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(ServerProfile.model_fields))
    if unknown:
        raise ConfigError(f"{unknown[0]!r} is not a launch profile field")
    lists0, _ = sglang_choices.lists_for(sglang_version)
    if backend_override is not None and backend_override not in lists0.moe_runner_backend:
        which = f" in SGLang {lists0.version}" if sglang_version else ""
        raise ConfigError(f"unknown MoE backend {backend_override!r}{which}; valid: "
                          f"{', '.join(lists0.moe_runner_backend)}")
    p = _revalidate(profile, backend_override, overrides)
    lists, version_note = _check_choices(p, sglang_version)
    _check_value("model_path", p.model_path)
    _check_value("served_model_name", p.served_model_name)
    _check_value("dist_init_addr", p.dist_init_addr)
    _check_value("python", p.python)
    if not re.match(r"^[A-Za-z_][\w.]*$", p.module):
        raise ConfigError(f"module {p.module!r} is not a Python module name")
    warnings = _check_extra_args(p.extra_args)
    if version_note:
        warnings.append(version_note)
    for key, value in p.env.items():
        if not _ENV_NAME.match(key):
            raise ConfigError(f"env: {key!r} is not a valid environment variable name")
        if "\x00" in value:
            raise ConfigError(f"env: {key} contains a NUL byte")
    if (p.nnodes or 1) > 1 and not p.dist_init_addr:
        raise ConfigError("nnodes > 1 needs dist_init_addr (host:port of node 0)")
    if p.node_rank is not None and p.node_rank >= (p.nnodes or 1):
        raise ConfigError(f"node_rank {p.node_rank} must be below nnodes {p.nnodes or 1}")
    is_dsv4 = "deepseek-v4" in p.model_path.lower()
    if is_dsv4 and p.speculative_algorithm and p.speculative_algorithm not in _DSV4_SPEC:
        warnings.append(f"DeepSeek-V4 supports only EAGLE (topk 1) or DSPARK speculation, not "
                        f"{p.speculative_algorithm}")
    if is_dsv4 and (p.speculative_eagle_topk or 1) > 1:
        warnings.append("DeepSeek-V4 supports EAGLE with topk 1 only")

    argv = [p.python, "-m", p.module, "--model-path", p.model_path]
    options: list[tuple[str, object]] = [
        ("--served-model-name", p.served_model_name), ("--host", p.host), ("--port", p.port),
        ("--tp-size", p.tp_size), ("--dp-size", p.dp_size), ("--ep-size", p.ep_size),
        ("--quantization", p.quantization), ("--moe-runner-backend", p.moe_runner_backend),
        ("--attention-backend", p.attention_backend),
        ("--dsv4-attn-backend", p.dsv4_attn_backend),
        ("--dsv4-prefill-backend", p.dsv4_prefill_backend), ("--kv-cache-dtype", p.kv_cache_dtype),
        ("--mem-fraction-static", p.mem_fraction_static),
        ("--speculative-algorithm", p.speculative_algorithm),
        ("--speculative-num-steps", p.speculative_num_steps),
        ("--speculative-eagle-topk", p.speculative_eagle_topk),
        ("--speculative-num-draft-tokens", p.speculative_num_draft_tokens),
        ("--nnodes", p.nnodes), ("--node-rank", p.node_rank),
        ("--dist-init-addr", p.dist_init_addr),
    ]
    for flag, option in options:
        if option is not None:
            argv += [flag, _flag(option)]
    if p.trust_remote_code:
        argv.append("--trust-remote-code")
    if p.enable_metrics:
        argv.append("--enable-metrics")
    argv += p.extra_args

    changes: dict[str, dict[str, Any]] = {}
    if backend_override is not None and backend_override != profile.moe_runner_backend:
        changes["moe_runner_backend"] = {"from": profile.moe_runner_backend or "auto",
                                         "to": backend_override}
    for name, value in overrides.items():
        before = getattr(profile, name)
        if name not in changes and value != before:
            changes[name] = {"from": _shown(name, before), "to": _shown(name, value)}
    log_file = p.log_file or f"sglang-{profile_name or 'server'}.log"
    return LaunchPlan(argv=argv, env=dict(p.env), log_file=log_file, port=p.port, changes=changes,
                  host=p.host, workdir=p.workdir, api_key_env=p.api_key_env,
                  profile_name=profile_name, backend=p.backend_label,
                  checkpoint=p.checkpoint_label, warnings=warnings,
                  profile=p.model_dump(exclude={"env"}) | {"env_keys": sorted(p.env)},
                  sglang_version=sglang_version, choices_version=lists.version)


def _shown(name: str, value: Any) -> Any:
    """A profile value as a change names it (an unset choice flag is SGLang's default)."""
    if value is None and name in sglang_choices.CHOICE_FIELDS:
        return "auto" if name in ("moe_runner_backend", "dsv4_attn_backend",
                                  "dsv4_prefill_backend") else "default"
    return value
