"""Taking over a server dsv4tui did not start (``dsv4tui server adopt``, the dashboard's
adopt step): read how it was launched, turn that into a launch profile, write the profile to
the config (the rest of the file kept), and record the server on its host as ours.

The launch comes from the process's command line on the host (the agent's ``server
inspect``): flags that a profile field owns (:data:`dsv4tui.core.server.launch.FIELD_FLAGS`, and the
unique abbreviations argparse accepted, ``--tp 8``) become those fields, every other argument
goes to ``extra_args`` in order, the interpreter is the one its shell ran (a venv's python
through the server's own PATH), its working directory, the environment a launch needs, and
its log file (its stdout) come along. ``/server_info`` adds the version and fills what the
command line leaves out (``--config file.yaml``). The API key is never written: a server
started with ``--api-key`` needs ``api_key_env``, the name of a host variable holding it.

Adopting never signals anything. From then on the host's agent treats the server as its own:
a restart stops exactly that process and what it started (checked by start time; its
process group only when it leads one), then launches the profile with the one change asked.
Both faces (the CLI, the dashboard) call these functions.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dsv4tui.core import config_edit
from dsv4tui.core.config import DEMO, HostConfig, ServerProfile, Settings
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_FAILED, AgentFailed, ConfigError, UserError
from dsv4tui.core.server import backends
from dsv4tui.core.server.launch import FIELD_FLAGS, LaunchPlan, build_launch

if TYPE_CHECKING:
    from dsv4tui.core.hosts.resolve import Host

DEFAULT_NAME = "adopted"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BOOL_FIELDS = ("trust_remote_code", "enable_metrics")
_SECRET_FLAGS = ("--api-key", "--admin-api-key")
# Profile fields shown first in a diff, then the rest in ServerProfile's order.
_ORDER = tuple(ServerProfile.model_fields)


class AdoptError(UserError):
    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class Foreign:
    """What the host's agent saw of the server on a port (``server inspect``)."""

    port: int
    host: str
    pid: int | None
    command: str | None
    user: str | None
    same_user: bool = False
    argv: list[str] | None = None
    secret_flags: list[str] = field(default_factory=list)
    python: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    log: str | None = None
    proc_start: int | None = None
    started_at: float | None = None
    group_leader: bool = False
    health: int | None = None
    server_info: dict[str, Any] | None = None
    model_info: dict[str, Any] | None = None

    @classmethod
    def from_event(cls, ev: dict[str, Any]) -> Foreign:
        owner = ev.get("owner") or {}
        proc = ev.get("process") or {}
        return cls(port=int(ev.get("port") or 0), host=str(ev.get("host") or "127.0.0.1"),
                   pid=owner.get("pid"), command=owner.get("command"),
                   user=owner.get("user") or proc.get("user"),
                   same_user=bool(proc.get("same_user")), argv=proc.get("argv"),
                   secret_flags=list(proc.get("secret_flags") or []),
                   python=proc.get("python"), cwd=proc.get("cwd"),
                   env=dict(proc.get("env") or {}), log=proc.get("log"),
                   proc_start=proc.get("proc_start"), started_at=proc.get("started_at"),
                   group_leader=bool(proc.get("group_leader")), health=ev.get("health"),
                   server_info=ev.get("server_info"), model_info=ev.get("model_info"))

    @property
    def version(self) -> str | None:
        return (self.server_info or {}).get("version")

    def who(self) -> str:
        who = f"pid {self.pid}" if self.pid else "a process we cannot see"
        return who + (f" of user {self.user}" if self.user else "")


# -- the command line -> a profile ------------------------------------------------------------

def split_launch(argv: list[str]) -> tuple[str, str, list[str], list[str]]:
    """``(python, module, SGLang arguments, notes)`` of a server's command line:
    ``python [-u ...] -m MODULE ARGS`` or ``python .../bin/sglang serve [MODEL] ARGS``."""
    if not argv:
        raise AdoptError("the server's command line is empty")
    python, i = argv[0], 1
    notes: list[str] = []
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] in ("-W", "-X") else 1  # interpreter options (-u, -O, -X dev ...)
    if i < len(argv) and argv[i] == "-m" and i + 1 < len(argv):
        return python, argv[i + 1], argv[i + 2:], notes
    script = os.path.basename(argv[i]) if i < len(argv) else ""
    if script == "sglang" and i + 1 < len(argv) and argv[i + 1] == "serve":
        args = argv[i + 2:]
        if args and not args[0].startswith("-"):
            args = ["--model-path", *args]  # `sglang serve MODEL ...`
        kept, j = [], 0
        while j < len(args):  # --model-type picks serve's backend (the LLM one: ours)
            if args[j] == "--model-type" and j + 1 < len(args):
                j += 2
                continue
            if args[j].startswith("--model-type="):
                j += 1
                continue
            kept.append(args[j])
            j += 1
        notes.append("started as `sglang serve`: relaunched as python -m sglang.launch_server "
                     "with the same arguments")
        return python, "sglang.launch_server", kept, notes
    if script == "launch_server.py":
        notes.append(f"started as the script {argv[i]}: relaunched as python -m "
                     "sglang.launch_server")
        return python, "sglang.launch_server", argv[i + 1:], notes
    raise AdoptError(f"not an SGLang launch: {' '.join(argv[:4])}{' ...' if len(argv) > 4 else ''}"
                     " (dsv4tui adopts `python -m sglang.launch_server ...` and "
                     "`sglang serve ...`)")


def _field_of(flag: str) -> tuple[str | None, str | None]:
    """The profile field a flag sets (also a unique abbreviation, as argparse reads it)."""
    if flag in FIELD_FLAGS:
        return FIELD_FLAGS[flag], None
    hits = {FIELD_FLAGS[f] for f in FIELD_FLAGS if f.startswith(flag)}
    if len(flag) > 3 and len(hits) == 1:
        full = next(f for f in FIELD_FLAGS if f.startswith(flag))
        return hits.pop(), f"{flag} read as {full} (argparse's abbreviation)"
    return None, None


def _convert(name: str, value: str) -> Any:
    annotation = str(ServerProfile.model_fields[name].annotation)
    try:
        if "int" in annotation:
            return int(value)
        if "float" in annotation:
            return float(value)
    except ValueError:
        raise AdoptError(f"the server's --{name.replace('_', '-')} {value!r} is not a number") \
            from None
    return value


def parse_args(args: list[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """SGLang arguments -> ``(profile fields, extra_args, notes)``."""
    fields: dict[str, Any] = {}
    extra: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            extra.append(arg)  # a value of an extra flag (or a positional SGLang takes)
            i += 1
            continue
        flag, eq, inline = arg.partition("=")
        if flag in _SECRET_FLAGS:
            i += 1 if eq else 2  # never copied; the caller decides (api_key_env)
            continue
        name, note = _field_of(flag)
        if name is None:
            extra.append(arg)
            i += 1
            continue
        if note:
            notes.append(note)
        if name in _BOOL_FIELDS:
            fields[name] = inline.lower() not in ("false", "0", "no") if eq else True
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(args):
            value, i = args[i + 1], i + 2
        else:
            raise AdoptError(f"the server's {flag} has no value")
        fields[name] = _convert(name, value)
    return fields, extra, notes


def profile_data(foreign: Foreign, api_key_env: str | None = None
                 ) -> tuple[dict[str, Any], list[str]]:
    """The launch profile that relaunches ``foreign`` as it runs now (as the config's TOML
    keys, ServerProfile's order) and notes on how it was read."""
    info = foreign.server_info or {}
    notes: list[str] = []
    if foreign.argv is None:
        raise AdoptError(f"cannot read the command line of {foreign.who()} (another user's "
                         "process?): dsv4tui adopts only servers it can read and stop")
    if "--admin-api-key" in foreign.secret_flags:
        raise AdoptError("the server was started with --admin-api-key, which a launch profile "
                         "cannot hold; restart it yourself without it to adopt it")
    if "--api-key" in foreign.secret_flags and not api_key_env:
        raise AdoptError("the server was started with --api-key: pass --api-key-env NAME, the "
                         "name of a variable that holds that key on the host (the key is "
                         "never written to the config)", EXIT_CONFIG)
    python, module, args, split_notes = split_launch(foreign.argv)
    notes += split_notes
    fields, extra, arg_notes = parse_args(args)
    notes += arg_notes
    if "model_path" not in fields:
        if not info.get("model_path"):
            raise AdoptError("the server's command line has no --model-path and /server_info "
                             "does not say it either")
        fields["model_path"] = info["model_path"]
        notes.append("model_path from /server_info (not on the command line)")
    data: dict[str, Any] = {"python": foreign.python or python}
    if module != ServerProfile.model_fields["module"].default:
        data["module"] = module
    data.update(fields)
    # SGLang's defaults are not ours: a flag the server was started without stays off
    data["enable_metrics"] = bool(fields.get("enable_metrics"))
    if not data.get("checkpoint") and fields.get("quantization"):
        data["checkpoint"] = backends.checkpoint_format(None, fields["quantization"])
    if extra:
        data["extra_args"] = extra
    if api_key_env:
        data["api_key_env"] = api_key_env
    if foreign.env:
        data["env"] = dict(foreign.env)
    if foreign.log:
        data["log_file"] = foreign.log
    if foreign.cwd:
        data["workdir"] = foreign.cwd
    ordered = {k: data[k] for k in _ORDER if k in data and data[k] is not None}
    return ordered, notes


def _validated(data: dict[str, Any], name: str) -> tuple[ServerProfile, LaunchPlan]:
    try:
        profile = ServerProfile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise AdoptError(f"the server's launch does not fit a profile: {loc}: "
                         f"{err['msg'].removeprefix('Value error, ')}") from None
    try:
        launch = build_launch(profile, None, name)
    except ConfigError as exc:
        raise AdoptError(f"the server's launch does not fit a profile: {exc.message}") from None
    return profile, launch


# -- the proposal: what would be written, against what is there ------------------------------

@dataclass
class Proposal:
    host: str
    name: str
    data: dict[str, Any]
    profile: ServerProfile
    launch: LaunchPlan
    foreign: Foreign
    notes: list[str]
    against: str | None  # the profile compared with: the one replaced, else the default
    replaces: bool
    changes: list[tuple[str, Any, Any]]  # (field, in the config, the server's)
    default_before: str | None
    make_default: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.name, "pid": self.foreign.pid,
                "port": self.foreign.port, "sglang_version": self.foreign.version,
                "log": self.foreign.log, "data": self.data, "notes": self.notes,
                "against": self.against, "replaces": self.replaces,
                "changes": [{"field": f, "config": a, "server": b} for f, a, b in self.changes],
                "default_profile": {"from": self.default_before, "to": self.name}
                if self.make_default and self.default_before != self.name else None}


def _comparable(p: ServerProfile | None) -> dict[str, Any]:
    if p is None:
        return {}
    out = {}
    for key, info in ServerProfile.model_fields.items():
        value = getattr(p, key, None)
        default = info.get_default(call_default_factory=True)
        if key != "model_path" and value == default:
            continue
        out[key] = value
    return out


def compare(old: ServerProfile | None, new: ServerProfile) -> list[tuple[str, Any, Any]]:
    """``[(field, old value, new value)]`` where two profiles differ (a field set in neither
    is not listed; a value left at its default is that default; no old profile: None)."""
    a, b = _comparable(old), _comparable(new)
    out = []
    for key in _ORDER:
        if key not in a and key not in b:
            continue
        va = getattr(old, key, None) if old is not None else None
        vb = getattr(new, key, None)
        if va != vb and not (va in (None, [], {}) and vb in (None, [], {})):
            out.append((key, va, vb))
    return out


def check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise UserError(f"profile name {name!r}: use letters, digits, '_', '-' or '.'",
                        EXIT_CONFIG)
    return name


def propose(host: str, config: HostConfig, foreign: Foreign, name: str | None = None,
            api_key_env: str | None = None, make_default: bool = True) -> Proposal:
    """The profile ``foreign`` becomes, and how it differs from the config's."""
    if host == DEMO:
        raise UserError("the demo host's profiles are built in: adopt servers on a configured "
                        "host, an ssh alias or local", EXIT_CONFIG)
    if not foreign.pid:
        raise AdoptError(f"port {foreign.port} is served by a process this user cannot see "
                         "(another user's?): dsv4tui adopts only servers it can stop")
    if not foreign.same_user:
        raise AdoptError(f"port {foreign.port} is served by {foreign.who()}: dsv4tui adopts "
                         "only servers of its own user (it could not stop this one)")
    name = check_name(name or DEFAULT_NAME)
    data, notes = profile_data(foreign, api_key_env)
    profile, launch = _validated(data, name)
    replaces = name in config.profiles
    against = name if replaces else (config.default_profile or next(iter(config.profiles), None))
    old = config.profiles.get(against) if against else None
    if foreign.version:
        from dsv4tui.core.server import sglang_choices

        lists, why = sglang_choices.lists_for(foreign.version)
        notes.append(f"SGLang {foreign.version} (its /server_info); launches are checked "
                     f"against {lists.version}'s choices" + (f": {why}" if why else ""))
    if not foreign.log:
        notes.append("its output is not a file: the log of this server cannot be followed; a "
                     "restart writes to the agent's cache")
    if not foreign.group_leader:
        notes.append("it shares its process group with whatever started it (a script?): a "
                     "stop signals only it and the processes it started")
    return Proposal(host, name, data, profile, launch, foreign, notes, against, replaces,
                    compare(old, profile), config.default_profile, make_default)


def _show(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) \
        else str(value)


def proposal_lines(p: Proposal) -> list[str]:
    """The proposal as the CLI prints it and the dashboard's dialog shows it."""
    f = p.foreign
    started = (time.strftime("%Y-%m-%d %H:%M", time.localtime(f.started_at))
               if f.started_at else "?")
    lines = [f"{p.host}: port {f.port} is served by {f.who()}, started {started}, which "
             "dsv4tui did not start",
             f"  command: {' '.join(f.argv or [])}"]
    if f.log:
        lines.append(f"  log:     {f.log} (its stdout)")
    verb = "replaces" if p.replaces else "adds"
    lines.append(f"adopting it {verb} profile {p.name!r} of {p.host}:")
    if p.against and not p.replaces:
        lines.append(f"  (compared with the host's profile {p.against!r})")
    if p.changes:
        for key, old, new in p.changes:
            if old in (None, [], {}):
                lines.append(f"  + {key} = {_show(new)}")
            elif new in (None, [], {}):
                lines.append(f"  - {key} = {_show(old)}")
            else:
                lines.append(f"  ~ {key}: {_show(old)} -> {_show(new)}")
    else:
        lines.append("  (the same launch as that profile)")
    if p.make_default and p.default_before != p.name:
        lines.append(f"  default_profile: {p.default_before or 'unset'} -> {p.name}")
    lines += [f"note: {n}" for n in p.notes]
    return lines


# -- the host and the config ------------------------------------------------------------------

async def inspect(host: Host, port: int, bind_host: str | None = None,
                  api_key_env: str | None = None) -> Foreign:
    """What runs on ``port`` of ``host`` (AgentFailed when nothing does, or it is ours)."""
    args = ["server", "inspect", "--port", str(port)]
    if bind_host:
        args += ["--host", bind_host]
    if api_key_env:
        args += ["--api-key-env", api_key_env]
    try:
        events = await host.agent.call(*args, timeout=60.0)
    except AgentFailed as exc:
        if exc.kind == "usage":  # e.g. --api-key-env naming a variable the host has not set
            raise UserError(f"server adopt: {host.name}: {exc.message}", EXIT_CONFIG) from None
        raise
    ev = next((e for e in events if e.get("type") == "foreign_server"), None)
    if ev is None:
        raise AdoptError(f"{host.name}: the agent did not say what runs on port {port}")
    return Foreign.from_event(ev)


async def record(host: Host, p: Proposal) -> dict[str, Any]:
    """Record the server as ours on its host (the agent checks it is still the process
    inspected); the ``adopted`` event."""
    f = p.foreign
    assert f.pid is not None
    profile = {"name": p.name, **p.launch.profile, "changes": {}}
    args = ["server", "adopt", "--port", str(f.port), "--host", f.host, "--pid", str(f.pid),
            "--profile-json", json.dumps(profile)]
    if f.proc_start is not None:
        args += ["--proc-start", str(f.proc_start)]
    if p.launch.api_key_env:
        args += ["--api-key-env", p.launch.api_key_env]
    events = await host.agent.call(*args, timeout=60.0)
    return next((e for e in events if e.get("type") == "adopted"), {})


def write(path: Path, p: Proposal, *, dry_run: bool = False) -> Settings:
    """Write the proposal's profile (and default_profile) into the config file at ``path``,
    keeping the rest of the file; the settings it now loads as."""
    when = time.strftime("%Y-%m-%d %H:%M")
    comment = f"adopted by dsv4tui {when}: pid {p.foreign.pid} on port {p.foreign.port}"
    _, settings = config_edit.set_profile(path, p.host, p.name, p.data,
                                          make_default=p.make_default, comment=comment,
                                          dry_run=dry_run)
    return settings


# -- the dashboard ------------------------------------------------------------------------------

def offer(status: dict[str, Any], offered: set[Any], *, simulated: bool,
          key: str) -> str | None:
    """A server on the profile's port that dsv4tui did not start, met for the first time
    (``offered``: the pids already met): what to say, that ``key`` adopts it. A simulated
    host's profiles are built in: nothing to adopt there."""
    pid = (status.get("foreign") or {}).get("pid")
    if status.get("state") != "foreign" or pid in offered:
        return None
    offered.add(pid)
    if not pid or simulated:
        return None
    return (f"port {status.get('port')} is served by pid {pid}, which dsv4tui did not start: "
            f"press {key} to adopt it (its launch becomes a profile, a restart can then "
            "change one flag)")


async def prepare(host: Host, name: str, config: HostConfig, profile: ServerProfile | None,
                  path: Path) -> Proposal:
    """What runs on ``profile``'s port (no profile: the default port) of host ``name``, as a
    proposal for its ``config``, checked to write cleanly into the config file at ``path``."""
    port, bind = (profile.port, profile.host) if profile is not None else (30000, None)
    foreign = await inspect(host, port, bind)
    proposal = propose(name, config, foreign)
    await asyncio.to_thread(write, path, proposal, dry_run=True)
    return proposal


async def commit(host: Host, proposal: Proposal, path: Path, config: HostConfig) -> None:
    """The proposal, confirmed: the server recorded as ours on the host, its profile written
    to ``path`` and taken into ``config``."""
    await record(host, proposal)
    take_profiles(config, await asyncio.to_thread(write, path, proposal), proposal.host)


def take_profiles(config: HostConfig, settings: Settings, host: str) -> None:
    """The profiles ``settings`` (the config just written) has for ``host``, into ``config``
    in place: the objects the host's session reads, so nothing reconnects."""
    new = settings.hosts.get(host)
    if new is not None:
        config.profiles.clear()
        config.profiles.update(new.profiles)
        config.default_profile = new.default_profile
