"""What a server start takes: one :class:`LaunchSpec`, built from argv (``agent server start``,
for people and for the console over SSH) or from JSON (a campaign spec's ``launch.spec``), and
handed to :func:`dsv4tui.agent.host.server.start_launch` as an object: the campaign runner
starts a variant's server in-process, with no argv and no argparse in between.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

from dsv4tui.agent import protocol

DEFAULT_GRACE_S = 60.0
DEFAULT_GPU_WAIT_S = 30.0
DEFAULT_TIMEOUT_S = 1800.0


def _usage(message: str) -> protocol.AgentError:
    return protocol.AgentError("usage", message, protocol.EXIT_USAGE)


@dataclass
class LaunchSpec:
    """One ``server start``: the command line (a list, never a shell string), its environment,
    where it logs and serves, and how the start behaves (replace, wait until ready)."""

    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    log: Optional[str] = None  # relative: in the agent's cache dir
    workdir: Optional[str] = None
    port: int = 30000
    host: str = "127.0.0.1"
    profile: Optional[Dict[str, Any]] = None  # recorded in the state file
    api_key_env: Optional[str] = None
    node_rank: int = 0
    replace: bool = False
    wait_ready: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    grace: float = DEFAULT_GRACE_S
    gpu_wait: float = DEFAULT_GPU_WAIT_S

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> "LaunchSpec":
        """From a campaign spec's ``launch.spec`` (the console's LaunchPlan.launch_spec);
        an unknown key or a wrong type is a usage error naming it."""
        if not isinstance(data, dict):
            raise _usage("a launch spec must be a JSON object")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise _usage("launch spec: unknown key %s (update dsv4tui on both sides)" % extra[0])
        argv = data.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise _usage("launch spec: argv must be a non-empty list of strings")
        env = data.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in env.items()):
            raise _usage("launch spec: env must map strings to strings")
        profile = data.get("profile")
        if profile is not None and not isinstance(profile, dict):
            raise _usage("launch spec: profile must be a JSON object")
        try:
            return cls(argv=list(argv), env=dict(env), log=_opt_str(data, "log"),
                       workdir=_opt_str(data, "workdir"), port=int(data.get("port", 30000)),
                       host=str(data.get("host") or "127.0.0.1"), profile=profile,
                       api_key_env=_opt_str(data, "api_key_env"),
                       node_rank=int(data.get("node_rank") or 0),
                       replace=bool(data.get("replace")), wait_ready=bool(data.get("wait_ready")),
                       timeout=float(data.get("timeout", DEFAULT_TIMEOUT_S)),
                       grace=float(data.get("grace", DEFAULT_GRACE_S)),
                       gpu_wait=float(data.get("gpu_wait", DEFAULT_GPU_WAIT_S)))
        except (TypeError, ValueError) as exc:
            raise _usage("launch spec: %s" % exc) from None

    @classmethod
    def from_args(cls, args: Any) -> "LaunchSpec":
        """From ``agent server start``'s parsed argv (``--argv-json`` ...)."""
        argv = json_arg(args.argv_json, "--argv-json", list)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise _usage("--argv-json must be a non-empty list of strings")
        env = json_arg(args.env_json, "--env-json", dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise _usage("--env-json must map strings to strings")
        profile = json_arg(args.profile_json, "--profile-json", dict) \
            if args.profile_json else None
        return cls(argv=argv, env=env, log=args.log, workdir=args.workdir, port=args.port,
                   host=args.host, profile=profile, api_key_env=args.api_key_env,
                   node_rank=int(getattr(args, "node_rank", 0) or 0), replace=args.replace,
                   wait_ready=args.wait_ready, timeout=args.timeout, grace=args.grace,
                   gpu_wait=args.gpu_wait)


def _opt_str(data: Dict[str, Any], key: str) -> Optional[str]:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _usage("launch spec: %s must be a string" % key)
    return value


def json_arg(text: Optional[str], what: str, kind: type) -> Any:
    if text is None:
        return kind()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _usage("%s is not valid JSON: %s" % (what, exc)) from None
    if not isinstance(value, kind):
        raise _usage("%s must be a JSON %s" % (what, kind.__name__))
    return value
