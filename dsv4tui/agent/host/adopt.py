"""``server inspect`` / ``server adopt``: a server on a port that this agent did not start.

- inspect (read-only): who listens on the port, and how it was launched: its command line
  (``/proc/PID/cmdline``; secret values redacted), the interpreter resolved as its shell did
  (``PATH`` of its environment, its working directory), its working directory, the part of
  its environment a launch needs (CUDA_*, NCCL_*, SGLANG_* ..., never a name that looks like a
  secret), where its stdout/stderr go (``/proc/PID/fd/1``, ``2``: its log when that is a file),
  its process group, and what the server says of itself (``/server_info``, ``/model_info``).
- adopt: record that server as ours in the state file, as if we had started it (pid, start
  time, log, the launch profile the console wrote for it), so ``server start --replace``
  stops it -- that pid and what it started, checked by start time, and its process group only
  when it leads one (a server started from a script shares the script's group: then only its
  own descendants) -- and ``status``/``logs``/benchmarks treat it as ours. Adopting never
  signals anything. Refused for another user's process (we could not stop it), when the
  process on the port is no longer the one inspected, or while a server we started runs.

Python >= 3.9, stdlib only.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Any, Dict, List, Optional, Tuple

from dsv4tui.agent import protocol
from dsv4tui.agent.host import health, procs, server_state

REDACTED = "***"
SECRET_FLAGS = ("--api-key", "--admin-api-key")
_ENV_PREFIXES = ("SGLANG_", "SGL_", "CUDA_", "NCCL_", "NVSHMEM_", "TORCH_", "PYTORCH_",
                 "FLASHINFER_", "TRITON_", "HF_", "TRANSFORMERS_", "OMP_", "MKL_",
                 "DSV4TUI_SIM_")
_ENV_NAMES = ("PYTHONPATH", "LD_LIBRARY_PATH", "TOKENIZERS_PARALLELISM")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


# -- one process, read from /proc -------------------------------------------------------------

def cmdline(pid: int) -> Optional[List[str]]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "surrogateescape") for p in parts] or None


def redact_argv(argv: List[str]) -> Tuple[List[str], List[str]]:
    """``(argv with secret values replaced, the secret flags that were set)``."""
    out, found = list(argv), []
    for i, arg in enumerate(out):
        for flag in SECRET_FLAGS:
            if arg == flag and i + 1 < len(out):
                out[i + 1] = REDACTED
                found.append(flag)
            elif arg.startswith(flag + "="):
                out[i] = flag + "=" + REDACTED
                found.append(flag)
    return out, found


def launch_env(env: Dict[str, str]) -> Dict[str, str]:
    """What of a server's environment its launch needs again (never a secret-looking name)."""
    return {k: v for k, v in sorted(env.items())
            if (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES) and not _SECRET_NAME.search(k)
            and "\n" not in v and "\x00" not in v}


def _readlink(path: str) -> Optional[str]:
    try:
        return os.readlink(path)
    except OSError:
        return None


def foreign_log(owner: Optional[Dict[str, Any]]) -> Optional[str]:
    """The log file of a server we did not start (its stdout/stderr), when it is one."""
    if not owner or not owner.get("pid"):
        return None
    return log_file(int(owner["pid"]))


def log_file(pid: int) -> Optional[str]:
    """Where the process writes its output when that is a regular file (stdout, else stderr):
    ``nohup python -m sglang.launch_server ... > server.log 2>&1 &`` -> that file."""
    for fd in (1, 2):
        target = _readlink("/proc/%d/fd/%d" % (pid, fd))
        if not target or not target.startswith("/") or target.endswith(" (deleted)"):
            continue
        if os.path.isfile(target):
            return target
    return None


def resolve_python(argv0: str, env: Dict[str, str], cwd: Optional[str],
                   pid: Optional[int] = None) -> str:
    """The interpreter as the server's shell found it: a bare name through the server's own
    PATH (a venv's bin first when it was activated), a relative path from its working
    directory; symlinks kept (a venv's python is a link to the base one)."""
    if os.sep in argv0:
        return os.path.normpath(os.path.join(cwd or "/", argv0))
    found = shutil.which(argv0, path=env.get("PATH") or os.environ.get("PATH"))
    if found:
        return os.path.abspath(found)
    exe = _readlink("/proc/%d/exe" % pid) if pid else None
    return exe or argv0


def _boot_time() -> Optional[float]:
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def process(pid: int) -> Dict[str, Any]:
    """Everything a launch profile and a later stop need to know of process ``pid``."""
    st = procs.stat_fields(pid) or []
    pgrp = int(st[2]) if len(st) > 2 else None
    sid = int(st[3]) if len(st) > 3 else None
    start = int(st[19]) if len(st) > 19 else None
    started_at = None
    boot = _boot_time()
    if boot is not None and start is not None:
        started_at = round(boot + start / float(os.sysconf("SC_CLK_TCK")), 3)
    try:
        uid: Optional[int] = os.stat("/proc/%d" % pid).st_uid
    except OSError:
        uid = None
    cwd = _readlink("/proc/%d/cwd" % pid)
    env = procs.environ(pid)
    argv = cmdline(pid)
    redacted, secrets = redact_argv(argv) if argv else (None, [])
    return {
        "pid": pid, "uid": uid, "user": health.describe_pid(pid).get("user"),
        "same_user": uid == os.getuid(), "argv": redacted, "secret_flags": secrets,
        "python": resolve_python(argv[0], env, cwd, pid) if argv else None,
        "cwd": cwd, "env": launch_env(env), "log": log_file(pid), "pgid": pgrp, "sid": sid,
        "group_leader": pgrp == pid, "proc_start": start, "started_at": started_at,
    }


# -- inspect ---------------------------------------------------------------------------------

def _redact_info(info: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not info:
        return info
    out = {k: v for k, v in info.items() if k != "internal_states"}
    for key in ("api_key", "admin_api_key"):
        if out.get(key):
            out[key] = REDACTED
    if isinstance(out.get("launch_command"), str):
        out["launch_command"] = health.redact_command(out["launch_command"])
    return out


def inspect(port: int, host: Optional[str], api_key: Optional[str]) -> Dict[str, Any]:
    """The ``foreign_server`` event's fields for the server on ``port``."""
    probe = health.probe_host(host)
    state = server_state.read_state()
    if server_state.ours_alive(state) and int((state or {}).get("port") or 0) == port:
        assert state is not None
        how = "adopted" if state.get("adopted") else "started"
        raise protocol.AgentError(
            "ours", "port %d is served by the server dsv4tui %s (pid %s): nothing to adopt"
            % (port, how, state.get("pid")), protocol.EXIT_FAILED, pid=state.get("pid"))
    owner = health.port_owner(port, probe)
    if owner is None:
        raise protocol.AgentError("not_found", "nothing listens on port %d of this host"
                                  % port, protocol.EXIT_FAILED)
    hl = health.health(port, probe)
    info = health.server_info(port, probe, api_key) if hl["status"] is not None else None
    model = health.model_info(port, probe, api_key) if hl["status"] is not None else None
    fields: Dict[str, Any] = {"port": port, "host": host or "127.0.0.1", "owner": owner,
                              "health": hl["status"], "server_info": _redact_info(info),
                              "model_info": model, "process": None}
    if owner.get("pid"):
        fields["process"] = process(int(owner["pid"]))
    return fields


# -- adopt -----------------------------------------------------------------------------------

def adopt(port: int, host: Optional[str], pid: int, proc_start: Optional[int],
          profile: Dict[str, Any], api_key_env: Optional[str]) -> Dict[str, Any]:
    """Record the server ``pid`` on ``port`` as ours; the ``adopted`` event's fields."""
    with server_state.ServerLock("adopt"):
        state = server_state.read_state()
        if server_state.ours_alive(state):
            assert state is not None
            if int(state.get("pid") or 0) == pid:
                raise protocol.AgentError("ours", "pid %d is already the server dsv4tui runs "
                                          "on this host" % pid, protocol.EXIT_FAILED)
            raise protocol.AgentError(
                "already_running", "a server started by dsv4tui is running (pid %s on port "
                "%s): stop it first; dsv4tui keeps track of one server per host"
                % (state.get("pid"), state.get("port")), protocol.EXIT_FAILED)
        owner = health.port_owner(port, health.probe_host(host))
        if owner is None or owner.get("pid") != pid:
            now = health.owner_text(owner) if owner else "nothing"
            raise protocol.AgentError(
                "changed", "port %d is no longer served by pid %d (now: %s); inspect it again"
                % (port, pid, now), protocol.EXIT_FAILED)
        facts = process(pid)
        if proc_start is not None and facts["proc_start"] != int(proc_start):
            raise protocol.AgentError("changed", "pid %d is not the process inspected (it "
                                      "restarted); inspect it again" % pid, protocol.EXIT_FAILED)
        if not facts["same_user"]:
            raise protocol.AgentError(
                "other_user", "pid %d runs as user %s: dsv4tui adopts only servers of its own "
                "user (it could not stop this one)" % (pid, facts.get("user") or "?"),
                protocol.EXIT_FAILED)
        leader = bool(facts["group_leader"])
        record = {
            "v": 1, "pid": pid,
            # its process group is its own only when it leads one (nohup ... & from an
            # interactive shell, setsid): else the group is the script's, never signalled
            "pgid": pid, "proc_start": facts["proc_start"], "argv": facts["argv"],
            "port": port, "host": host or "127.0.0.1", "log": facts["log"],
            "workdir": facts["cwd"], "started_at": facts["started_at"] or time.time(),
            "profile": profile, "api_key_env": api_key_env, "env": facts["env"],
            "stopped_at": None,
            # a server dsv4tui once started (its record lost) still carries its launch's id:
            # kept, a stop finds the daemons it left outside its tree too
            "launch_id": procs.launch_id(pid),
            "adopted": {"at": time.time(), "group_leader": leader, "pgid": facts["pgid"],
                        "sid": facts["sid"], "user": facts["user"]},
        }
        server_state.forget_exit()
        server_state.write_state(record)
    return {"pid": pid, "port": port, "log": facts["log"], "group_leader": leader,
            "pgid": facts["pgid"], "started_at": record["started_at"],
            "profile": (profile or {}).get("name")}


def run_inspect(args: Any) -> int:
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:  # the profile would name a key this host does not have
        raise protocol.AgentError("usage", "--api-key-env: %s is not set on this host (the "
                                  "variable must hold the server's API key here)"
                                  % args.api_key_env, protocol.EXIT_USAGE)
    protocol.emit("foreign_server", **inspect(args.port, args.host, key))
    return 0
