"""SSH targets: `user@host[:port]` or an ~/.ssh/config alias, resolved as OpenSSH would."""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from asyncssh.config import SSHClientConfig

_TARGET = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class SshTarget:
    """What the user typed, split; ``alias`` is the name looked up in ~/.ssh/config."""

    alias: str
    user: str | None
    port: int | None

    @classmethod
    def parse(cls, text: str) -> SshTarget:
        m = _TARGET.match(text.strip())
        if not m:
            raise ValueError(f"not an ssh target: {text!r} (expected an alias or user@host[:port])")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port out of range in {text!r}")
        return cls(alias=m["host"].strip("[]"), user=m["user"], port=port)


@dataclass(frozen=True)
class ResolvedTarget:
    hostname: str
    port: int
    user: str


def ssh_config_path() -> Path:
    return Path("~/.ssh/config").expanduser()


def known_hosts_path() -> Path:
    return Path("~/.ssh/known_hosts").expanduser()


def ssh_config_aliases() -> list[str]:
    """Concrete `Host` names in ~/.ssh/config (patterns with * or ? are skipped)."""
    path = ssh_config_path()
    if not path.exists():
        return []
    names: list[str] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for raw in text.splitlines():
        parts = raw.strip().split()
        if len(parts) >= 2 and parts[0].lower() == "host":
            names += [p for p in parts[1:] if not any(c in p for c in "*?!")]
    return list(dict.fromkeys(names))


def resolve(target: SshTarget) -> ResolvedTarget:
    """HostName/Port/User after ~/.ssh/config, as asyncssh.connect will see them."""
    local_user = getpass.getuser()
    path = ssh_config_path()
    cfg = SSHClientConfig.load(None, [path] if path.exists() else [], False, False, False,
                               local_user, target.user or (), target.alias,
                               target.port or ())
    hostname = str(cfg.get("Hostname", target.alias))
    port = int(cfg.get("Port", 22) or 22)  # type: ignore[call-overload]
    user = str(cfg.get("User", local_user))
    return ResolvedTarget(hostname=hostname, port=port, user=user)


def known_keys(resolved: ResolvedTarget) -> list[asyncssh.SSHKey]:
    """Keys ~/.ssh/known_hosts trusts for this host (empty: the host is unknown)."""
    path = known_hosts_path()
    if not path.exists():
        return []
    try:
        kh = asyncssh.read_known_hosts(str(path))
    except (OSError, ValueError):
        return []
    trusted, *_ = kh.match(resolved.hostname, "", resolved.port)
    return list(trusted)


def known_hosts_name(resolved: ResolvedTarget) -> str:
    return resolved.hostname if resolved.port == 22 else f"[{resolved.hostname}]:{resolved.port}"


def append_known_host(resolved: ResolvedTarget, key: asyncssh.SSHKey) -> Path:
    path = known_hosts_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{known_hosts_name(resolved)} {key.export_public_key('openssh').decode().strip()}\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line)
    path.chmod(0o600)
    return path


def fingerprint(key: asyncssh.SSHKey) -> str:
    return key.get_fingerprint("sha256")
