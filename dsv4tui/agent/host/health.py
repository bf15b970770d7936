"""What is on a port: HTTP probes of the server on loopback, and which process listens.

HTTP uses ``http.client`` directly (no proxies, no env), short timeouts. ``/server_info`` and
``/model_info`` fall back to the deprecated ``/get_`` forms. The listener owner comes from
``/proc/net/tcp{,6}`` (inode, uid) and ``/proc/PID/fd`` (Linux).
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import re
import socket
from typing import Any, Dict, List, Optional, Tuple


def probe_host(bind_host: Optional[str]) -> str:
    """Where to reach a server bound to ``bind_host`` from this machine."""
    if not bind_host or bind_host in ("0.0.0.0", "localhost"):
        return "127.0.0.1"
    if bind_host in ("::", "[::]"):
        return "::1"
    return bind_host.strip("[]")


def http_get(port: int, path: str, host: str = "127.0.0.1", timeout: float = 2.0,
             api_key: Optional[str] = None) -> Tuple[Optional[int], Optional[bytes], Optional[str]]:
    """``(status, body, error)``; status None when nothing answered."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Authorization": "Bearer " + api_key} if api_key else {}
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(1 << 20), None
    except (OSError, http.client.HTTPException) as exc:
        return None, None, str(exc) or type(exc).__name__
    finally:
        conn.close()


def health(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> Dict[str, Any]:
    status, _, error = http_get(port, "/health", host, timeout)
    return {"status": status, "error": error}


def _json_get(port: int, paths: Tuple[str, ...], host: str, api_key: Optional[str],
              timeout: float) -> Optional[Dict[str, Any]]:
    for path in paths:
        status, body, _ = http_get(port, path, host, timeout, api_key)
        if status == 200 and body:
            try:
                data = json.loads(body.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
        if status is None:
            return None
    return None


def server_info(port: int, host: str = "127.0.0.1", api_key: Optional[str] = None,
                timeout: float = 3.0) -> Optional[Dict[str, Any]]:
    return _json_get(port, ("/server_info", "/get_server_info"), host, api_key, timeout)


def model_info(port: int, host: str = "127.0.0.1", api_key: Optional[str] = None,
               timeout: float = 3.0) -> Optional[Dict[str, Any]]:
    return _json_get(port, ("/model_info", "/get_model_info"), host, api_key, timeout)


_SECRET_ARG = re.compile(r"(--(?:admin-)?api-key)(=|\s+)(?:'[^']*'|\"[^\"]*\"|\S+)")


def redact_command(command: str) -> str:
    """A command line as text with its ``--api-key`` / ``--admin-api-key`` values hidden
    (SGLang's ``launch_command`` keeps them)."""
    return _SECRET_ARG.sub(lambda m: m.group(1) + m.group(2) + "***", command)


def summarize_server_info(info: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The fields of /server_info worth showing (the full dict is large)."""
    if not info:
        return None
    keys = ("version", "model_path", "served_model_name", "tp_size", "dp_size", "ep_size",
            "quantization", "moe_runner_backend", "attention_backend", "dsv4_attn_backend",
            "dsv4_prefill_backend", "kv_cache_dtype", "launch_command", "status", "simulated")
    out = {k: info.get(k) for k in keys if k in info}
    command = out.get("launch_command")
    if isinstance(command, str):
        out["launch_command"] = redact_command(command)
    return out


# Keys of /server_info that are not launch arguments (they change while it runs) or are secret.
_VOLATILE = ("internal_states", "startup_time", "status", "last_gen_throughput", "api_key",
             "admin_api_key", "kv_events")


def server_args(info: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The launch arguments SGLang reports (``/server_info`` less its live state and
    secrets): what a run records so two runs can be told apart later."""
    if not info:
        return None
    out = {k: v for k, v in info.items() if k not in _VOLATILE}
    if isinstance(out.get("launch_command"), str):
        out["launch_command"] = redact_command(out["launch_command"])
    return out


# -- who listens on a port -------------------------------------------------------------------

def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """Does anything accept TCP connections on host:port?"""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _listening_inodes(port: int) -> List[Tuple[int, int, str]]:
    """``[(inode, uid, local address)]`` of LISTEN sockets on ``port`` (any address)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                next(fh, None)
                for row in fh:
                    cols = row.split()
                    if len(cols) < 10 or cols[3] != "0A":
                        continue
                    addr, _, hex_port = cols[1].rpartition(":")
                    if int(hex_port, 16) == port:
                        found.append((int(cols[9]), int(cols[7]), addr))
        except OSError:
            continue
    return found


def _socket_owners(inodes: List[int]) -> Dict[int, int]:
    """inode -> pid, scanning /proc/*/fd (only processes we may read)."""
    wanted = {"socket:[%d]" % i: i for i in inodes}
    owners: Dict[int, int] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return owners
    for pid in pids:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd_dir + "/" + fd)
            except OSError:
                continue
            if target in wanted:
                owners.setdefault(wanted[target], pid)
        if len(owners) == len(wanted):
            break
    return owners


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def describe_pid(pid: int) -> Dict[str, Any]:
    """pid, command line (shortened), user of a process."""
    info: Dict[str, Any] = {"pid": pid, "command": None, "user": None}
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            parts = [p.decode("utf-8", "replace") for p in fh.read().split(b"\0") if p]
        cmd = redact_command(" ".join(" ".join(p.split()) for p in parts))  # one line
        info["command"] = cmd if len(cmd) <= 300 else cmd[:297] + "..."
    except OSError:
        pass
    try:
        info["user"] = _user(os.stat("/proc/%d" % pid).st_uid)
    except OSError:
        pass
    return info


def port_owner(port: int, host: str = "127.0.0.1") -> Optional[Dict[str, Any]]:
    """Who listens on ``port``: ``{"pid", "command", "user", "address"}`` (pid None when the
    process is not visible to us, e.g. another user's), or None when nothing listens."""
    entries = _listening_inodes(port)
    if not entries:
        if os.path.exists("/proc/net/tcp"):
            return None
        return {"pid": None, "command": None, "user": None, "address": host} \
            if port_open(port, host) else None
    owners = _socket_owners([inode for inode, _, _ in entries])
    for inode, _uid, addr in entries:
        pid = owners.get(inode)
        if pid is not None:
            info = describe_pid(pid)
            info["address"] = addr
            return info
    _, uid, addr = entries[0]
    return {"pid": None, "command": None, "user": _user(uid), "address": addr}


def owner_text(owner: Dict[str, Any]) -> str:
    """One line: ``pid 123 (python3 -m sglang...) of user bob``."""
    who = "pid %s" % owner["pid"] if owner.get("pid") else "a process we cannot see"
    if owner.get("command"):
        who += " (%s)" % owner["command"]
    if owner.get("user"):
        who += " of user %s" % owner["user"]
    return who
