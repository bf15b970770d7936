"""SSH targets: `user@host[:port]`, a bare host name or IP, or an ~/.ssh/config alias, resolved
as OpenSSH would, including the path to it: the jump hosts of ``ProxyJump``, hop by hop."""

from __future__ import annotations

import getpass
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import asyncssh
from asyncssh.config import SSHClientConfig

from dsv4tui.core.errors import ConfigError

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


def _config(alias: str, user: str | None, port: int | None) -> SSHClientConfig:
    path = ssh_config_path()
    try:
        return cast(SSHClientConfig, SSHClientConfig.load(
            None, [path] if path.exists() else [], False, False, False, getpass.getuser(),
            user or (), alias, port or ()))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def resolve(target: SshTarget) -> ResolvedTarget:
    """HostName/Port/User after ~/.ssh/config, as asyncssh.connect will see them."""
    hop = _hop(target, jump=False, first=True)
    return ResolvedTarget(hostname=hop.hostname, port=hop.port, user=hop.user)


@dataclass(frozen=True)
class Hop:
    """One SSH server on the path to a host: the host itself, or a jump host (ProxyJump).

    ``given`` is what the user (or ProxyJump) wrote; ``user_given``/``port_given`` the parts
    of it that override ~/.ssh/config. ``key_name`` is the name its key is filed under in
    known_hosts (HostKeyAlias, else HostName).
    """

    given: str
    alias: str
    hostname: str
    port: int
    user: str
    user_given: str | None = None
    port_given: int | None = None
    host_key_alias: str | None = None
    jump: bool = False
    proxy_command: bool = False  # reached by a ProxyCommand: not a TCP address of ours

    @property
    def key_name(self) -> str:
        return self.host_key_alias or self.hostname

    @property
    def address(self) -> str:
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"

    @property
    def label(self) -> str:
        """How messages name it: ``jump host bastion (127.0.0.1:2222)``, ``ct200 (10.0.0.5:22)``."""
        name = self.alias if self.alias != self.hostname else ""
        text = f"{name} ({self.address})" if name else self.address
        return f"jump host {text}" if self.jump else text

    @property
    def known_hosts_name(self) -> str:
        return self.key_name if self.port == 22 else f"[{self.key_name}]:{self.port}"

    def known_hosts_addr(self) -> str:
        """The address asyncssh also matches known_hosts lines against (an IP literal only)."""
        try:
            ipaddress.ip_address(self.hostname)
        except ValueError:
            return ""
        return self.hostname


MAX_HOPS = 8


def _hop(target: SshTarget, *, jump: bool, first: bool) -> Hop:
    cfg = _config(target.alias, target.user, target.port)
    port = int(cfg.get("Port", 22) or 22)  # type: ignore[call-overload]
    alias_key = cfg.get("HostKeyAlias")
    return Hop(given=target.alias if not (target.user or target.port) else
               _target_text(target), alias=target.alias,
               hostname=str(cfg.get("Hostname", target.alias)), port=port,
               user=str(cfg.get("User", getpass.getuser())), user_given=target.user,
               port_given=target.port, host_key_alias=str(alias_key) if alias_key else None,
               jump=jump, proxy_command=first and bool(cfg.get("ProxyCommand")))


def _target_text(t: SshTarget) -> str:
    host = f"[{t.alias}]" if ":" in t.alias else t.alias
    return (f"{t.user}@" if t.user else "") + host + (f":{t.port}" if t.port else "")


def _jump_specs(target: SshTarget) -> list[SshTarget]:
    value = _config(target.alias, target.user, target.port).get("ProxyJump")
    specs = []
    for raw in str(value or "").split(","):
        text = raw.strip()
        if text.startswith("ssh://"):
            text = text[len("ssh://"):].rstrip("/")
        if not text:
            continue
        try:
            specs.append(SshTarget.parse(text))
        except ValueError as exc:
            raise ConfigError(f"ProxyJump of {target.alias} in {ssh_config_path()}: {exc}") \
                from None
    return specs


def hops(target: SshTarget) -> list[Hop]:
    """The path to ``target`` as OpenSSH takes it: the jump hosts of ProxyJump in order (the
    first jump host's own ProxyJump first, recursively), then the host itself."""
    return _hops(target, jump=False, depth=0)


def _hops(target: SshTarget, *, jump: bool, depth: int) -> list[Hop]:
    if depth > MAX_HOPS:
        raise ConfigError(f"ProxyJump in {ssh_config_path()} goes more than {MAX_HOPS} hops deep "
                          f"at {target.alias} (a loop?)")
    jumps = _jump_specs(target)
    if not jumps:
        return [_hop(target, jump=jump, first=True)]
    path = _hops(jumps[0], jump=True, depth=depth + 1)
    path += [_hop(j, jump=True, first=False) for j in jumps[1:]]
    if len(path) >= MAX_HOPS:
        raise ConfigError(f"ProxyJump in {ssh_config_path()} makes more than {MAX_HOPS} hops "
                          f"to {target.alias}")
    return [*path, _hop(target, jump=jump, first=False)]


@dataclass(frozen=True)
class KnownKeys:
    """What known_hosts says about one hop."""

    trusted: list[asyncssh.SSHKey]
    revoked: list[asyncssh.SSHKey]
    ca: bool  # a @cert-authority line applies (certificates; we cannot judge a plain key)


def read_known_hosts() -> asyncssh.SSHKnownHosts:
    """~/.ssh/known_hosts (empty when missing); ConfigError when it cannot be parsed."""
    path = known_hosts_path()
    try:
        return asyncssh.import_known_hosts(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return asyncssh.import_known_hosts("")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def known_for(hop: Hop) -> KnownKeys:
    kh = read_known_hosts()
    port = hop.port if hop.port != 22 else None
    addr = hop.known_hosts_addr()
    trusted, ca, revoked, *_ = kh.match(hop.key_name, addr, port)
    revoked = list(revoked)
    if port:
        # match() drops the port's @revoked lines when only port-less lines trust the host
        # (its fallback), so look the exact "[host]:port" name up once more for them.
        _, _, exact_revoked, *_ = kh.match(f"[{hop.key_name}]:{port}", "", None)
        revoked += [k for k in exact_revoked if k not in revoked]
    return KnownKeys(_unique(trusted), _unique(revoked), bool(ca))


def _unique(keys: Sequence[asyncssh.SSHKey]) -> list[asyncssh.SSHKey]:
    out: list[asyncssh.SSHKey] = []
    for k in keys:  # the same line matches by name and by address
        if k not in out:
            out.append(k)
    return out


def known_hosts_name(resolved: ResolvedTarget | Hop) -> str:
    if isinstance(resolved, Hop):
        return resolved.known_hosts_name
    return resolved.hostname if resolved.port == 22 else f"[{resolved.hostname}]:{resolved.port}"


def append_known_host(resolved: ResolvedTarget | Hop, key: asyncssh.SSHKey) -> Path:
    path = known_hosts_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{known_hosts_name(resolved)} {key.export_public_key('openssh').decode().strip()}\n"
    prefix = ""
    if path.exists() and path.stat().st_size:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            prefix = "" if fh.read(1) == b"\n" else "\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(prefix + line)
    path.chmod(0o600)
    return path


def fingerprint(key: asyncssh.SSHKey) -> str:
    return key.get_fingerprint("sha256")
