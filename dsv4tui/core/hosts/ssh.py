"""SshSession: one asyncssh connection to a GPU host, through its jump hosts.

The path comes from ~/.ssh/config (``ProxyJump``, see :func:`ssh_target.hops`) and is opened hop
by hop, each hop tunnelled through the one before (as OpenSSH does), so every hop's host key is
verified against ~/.ssh/known_hosts on the path the connection really takes, and every error
names the hop it is about. An unknown key is refused with the way to trust it (``dsv4tui trust
HOST`` or ``--accept-new``, which learn the key of the hop that is unknown, fetched over the
path up to it); a changed or revoked key is refused always.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import asyncssh

from dsv4tui.core.errors import AuthError, ConfigError, ConnectError, HostKeyError
from dsv4tui.core.hosts import ssh_target
from dsv4tui.core.hosts.session import CommandResult
from dsv4tui.core.hosts.ssh_target import Hop, ResolvedTarget, SshTarget

_STDERR_KEEP = 4096


def _argv_command(argv: list[str], env: dict[str, str] | None) -> str:
    """One safely quoted command line; env goes through `env K=V` (sshd drops SendEnv)."""
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return shlex.join(prefix + list(argv))


class SshProcess:
    def __init__(self, proc: asyncssh.SSHClientProcess[str]) -> None:
        self._proc = proc
        self._stderr = ""
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            while chunk := await self._proc.stderr.read(4096):
                self._stderr = (self._stderr + chunk)[-_STDERR_KEEP:]

    async def readline(self) -> str:
        try:
            return await self._proc.stdout.readline()
        except (asyncssh.Error, OSError, asyncio.IncompleteReadError):
            return ""

    async def close_stdin(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            self._proc.stdin.write_eof()

    async def wait(self, timeout: float | None = None) -> int | None:
        try:
            done = await asyncio.wait_for(self._proc.wait(check=False), timeout)
        except (TimeoutError, asyncssh.Error, OSError):
            return None
        return done.exit_status if done.exit_status is not None and done.exit_status >= 0 else None

    def kill(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            self._proc.close()

    def stderr_tail(self) -> str:
        return self._stderr


class HopKeyError(HostKeyError):
    """A hop's host key is ``unknown``, ``changed`` or ``revoked`` (``state``); ``hop`` says
    which hop, ``key`` is the key it offered (None when it could not be fetched)."""

    def __init__(self, message: str, *, state: str, hop: Hop,
                 key: asyncssh.SSHKey | None) -> None:
        super().__init__(message, changed=state == "changed",
                         fingerprint=ssh_target.fingerprint(key) if key else None)
        self.state = state
        self.hop = hop
        self.key = key


class DnsError(ConnectError):
    """A host name that does not resolve (``hostname``)."""

    def __init__(self, message: str, hostname: str) -> None:
        super().__init__(message)
        self.hostname = hostname


Tunnel = asyncssh.SSHClientConnection | None


def parse_path(target: str) -> list[Hop]:
    try:
        parsed = SshTarget.parse(target)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return ssh_target.hops(parsed)


def _where(hop: Hop, path: list[Hop]) -> str:
    """The hop as errors name it: its address alone when there are no jump hosts."""
    return hop.label if len(path) > 1 else hop.address


async def _open_hop(name: str, hop: Hop, path: list[Hop], tunnel: Tunnel, *,
                    connect_timeout: float, keepalive_s: float) -> asyncssh.SSHClientConnection:
    """Connect one hop (through ``tunnel``, the hop before) with its own known_hosts check.

    Raises asyncssh.HostKeyNotVerifiable for the caller to explain, else a one-line UserError.
    """
    kwargs: dict[str, object] = {
        # always ours, never None: a `UserKnownHostsFile none` cannot switch checking off
        "known_hosts": ssh_target.read_known_hosts(),
        "keepalive_interval": keepalive_s, "keepalive_count_max": 3,
        "connect_timeout": connect_timeout,
        # explicit: the hop before, or no tunnel at all (the path already holds ProxyJump)
        "tunnel": tunnel,
    }
    if hop.user_given:
        kwargs["username"] = hop.user_given
    if hop.port_given:
        kwargs["port"] = hop.port_given
    where = _where(hop, path)
    try:
        return await asyncssh.connect(hop.alias, **kwargs)  # type: ignore[arg-type]
    except asyncssh.HostKeyNotVerifiable:
        raise
    except asyncssh.PermissionDenied as exc:
        who = (f"as {hop.user} on {hop.label}" if len(path) > 1
               else f"for {hop.user}@{hop.address}")
        raise AuthError(f"{name}: authentication failed {who} ({exc.reason}); check your key, "
                        "ssh-agent, or User/IdentityFile in ~/.ssh/config") from None
    except asyncssh.ChannelOpenError as exc:
        i = path.index(hop)  # the hop before opened the tunnel and could not go on
        via = path[i - 1].label if i > 0 else "the tunnel"
        raise ConnectError(f"{name}: {via} cannot reach {hop.label}: {exc.reason}") from None
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise AuthError(f"{name}: cannot use your SSH key or config: {exc}") from None
    except socket.gaierror:
        raise DnsError(f"{name}: cannot resolve host name {hop.hostname!r}"
                       + (f" ({hop.label})" if len(path) > 1 else ""), hop.hostname) from None
    except ConnectionRefusedError:
        raise ConnectError(f"{name}: connection refused by {where} (is sshd running?)") \
            from None
    except TimeoutError:
        raise ConnectError(f"{name}: timed out after {connect_timeout:g} s connecting to "
                           f"{where}") from None
    except (OSError, asyncssh.Error) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConnectError(f"{name}: cannot connect to {where}: {reason}") from None


async def _close_all(conns: list[asyncssh.SSHClientConnection]) -> None:
    for conn in reversed(conns):
        conn.close()
    for conn in reversed(conns):
        with contextlib.suppress(Exception):
            await conn.wait_closed()


async def open_path(name: str, path: list[Hop], *, accept_new: bool = False,
                    connect_timeout: float = 10.0, keepalive_s: float = 15.0
                    ) -> list[asyncssh.SSHClientConnection]:
    """Connect every hop of ``path`` in order, each through the one before; the connections.

    An unknown key of a hop is learnt (``accept_new``) from that hop, over the path to it, and
    only when known_hosts has no key for it; a changed or revoked key raises HopKeyError.
    """
    conns: list[asyncssh.SSHClientConnection] = []
    try:
        for hop in path:
            tunnel = conns[-1] if conns else None
            try:
                conn = await _open_hop(name, hop, path, tunnel, connect_timeout=connect_timeout,
                                       keepalive_s=keepalive_s)
            except asyncssh.HostKeyNotVerifiable as exc:
                err = await hop_key_error(name, hop, path, tunnel, exc,
                                          timeout=connect_timeout)
                if not (accept_new and err.state == "unknown" and err.key is not None):
                    raise err from None
                ssh_target.append_known_host(hop, err.key)
                try:
                    conn = await _open_hop(name, hop, path, tunnel,
                                           connect_timeout=connect_timeout,
                                           keepalive_s=keepalive_s)
                except asyncssh.HostKeyNotVerifiable as again:  # it changed under us
                    raise await hop_key_error(name, hop, path, tunnel, again,
                                              timeout=connect_timeout) from None
            conns.append(conn)
    except BaseException:
        await _close_all(conns)
        raise
    return conns


class SshSession:
    is_local = False

    def __init__(self, name: str, conn: asyncssh.SSHClientConnection,
                 resolved: ResolvedTarget,
                 jumps: list[asyncssh.SSHClientConnection] | None = None,
                 path: list[Hop] | None = None) -> None:
        self.name = name
        self.resolved = resolved
        self.path = list(path or [])
        self._conn = conn
        self._jumps = list(jumps or [])  # the jump hosts' connections, first hop first
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @classmethod
    async def connect(cls, name: str, target: str, *, accept_new: bool = False,
                      connect_timeout: float = 10.0, keepalive_s: float = 15.0) -> SshSession:
        """Open the connection or raise a one-line UserError (ConnectError, AuthError...)."""
        path = parse_path(target)
        conns = await open_path(name, path, accept_new=accept_new,
                                connect_timeout=connect_timeout, keepalive_s=keepalive_s)
        last = path[-1]
        return cls(name, conns[-1], ResolvedTarget(last.hostname, last.port, last.user),
                   conns[:-1], path)

    async def run(self, argv: list[str], *, env: dict[str, str] | None = None,
                  timeout: float | None = None) -> CommandResult:
        try:
            res = await asyncio.wait_for(
                self._conn.run(_argv_command(argv, env), check=False, stdin=asyncssh.DEVNULL),
                timeout)
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(f"{self.name}: connection lost ({exc})") from None
        code = res.exit_status if res.exit_status is not None and res.exit_status >= 0 else None
        if code is None and res.exit_signal is None:
            raise ConnectError(f"{self.name}: connection lost while running {argv[0]}")
        out = res.stdout if isinstance(res.stdout, str) else (res.stdout or b"").decode()
        err = res.stderr if isinstance(res.stderr, str) else (res.stderr or b"").decode()
        return CommandResult(code, out, err)

    async def start(self, argv: list[str], *, env: dict[str, str] | None = None) -> SshProcess:
        try:
            proc = await self._conn.create_process(_argv_command(argv, env))
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(f"{self.name}: connection lost ({exc})") from None
        return SshProcess(proc)

    async def upload(self, local: Path, remote: str) -> None:
        path = PurePosixPath(remote)
        tmp = str(path.with_name(path.name + ".part"))
        try:
            async with self._conn.start_sftp_client() as sftp:
                await sftp.makedirs(str(path.parent), exist_ok=True)
                await sftp.put(str(local), tmp)
                await sftp.posix_rename(tmp, remote)
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(f"{self.name}: upload of {local.name} failed: {exc}") from None

    async def remote_exists(self, remote: str) -> bool:
        try:
            async with self._conn.start_sftp_client() as sftp:
                return await sftp.exists(remote)
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(f"{self.name}: connection lost ({exc})") from None

    async def wait_closed(self) -> None:
        await self._conn.wait_closed()
        self._closed = True
        await _close_all(self._jumps)

    async def close(self) -> None:
        self._closed = True
        await _close_all([*self._jumps, self._conn])


async def fetch_hop_key(name: str, hop: Hop, tunnel: Tunnel, *, timeout: float = 10.0,
                        algs: list[str] | None = None) -> asyncssh.SSHKey:
    """The key ``hop`` offers, fetched over ``tunnel`` (the path up to it): no login."""
    kwargs: dict[str, object] = {"tunnel": tunnel}
    if hop.port_given:
        kwargs["port"] = hop.port_given
    if algs:
        kwargs["server_host_key_algs"] = algs
    try:
        key = await asyncio.wait_for(asyncssh.get_server_host_key(hop.alias, **kwargs),  # type: ignore[arg-type]
                                     timeout)
    except socket.gaierror:
        raise DnsError(f"{name}: cannot resolve host name {hop.hostname!r}"
                       + (f" ({hop.label})" if hop.jump else ""), hop.hostname) from None
    except TimeoutError:
        raise ConnectError(f"{name}: timed out after {timeout:g} s fetching the host key of "
                           f"{hop.label}") from None
    except asyncssh.KeyExchangeFailed:
        if algs:  # it no longer has a key of the known kind: take the one it offers
            return await fetch_hop_key(name, hop, tunnel, timeout=timeout)
        raise ConnectError(f"{name}: cannot fetch the host key of {hop.label}: key exchange "
                           "failed") from None
    except ConnectionRefusedError:
        raise ConnectError(f"{name}: connection refused by {hop.label} (is sshd running?)") \
            from None
    except (OSError, asyncssh.Error) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConnectError(f"{name}: cannot reach {hop.label}: {reason}") from None
    if key is None:
        raise ConnectError(f"{name}: {hop.label} sent no host key")
    return key


@dataclass(frozen=True)
class HopKey:
    """A hop's offered key and what known_hosts says of it: trusted, unknown, changed, revoked."""

    hop: Hop
    key: asyncssh.SSHKey
    state: str
    known: ssh_target.KnownKeys

    @property
    def fingerprint(self) -> str:
        return ssh_target.fingerprint(self.key)


async def judge_hop_key(name: str, hop: Hop, tunnel: Tunnel, *,
                        timeout: float = 10.0) -> HopKey:
    """Fetch the hop's key over the path and compare it with known_hosts."""
    known = ssh_target.known_for(hop)
    algs = [a.decode() for k in known.trusted for a in k.sig_algorithms]
    key = await fetch_hop_key(name, hop, tunnel, timeout=timeout,
                              algs=list(dict.fromkeys(algs)))
    if any(key == k for k in known.revoked):
        state = "revoked"
    elif any(key == k for k in known.trusted):
        state = "trusted"
    elif known.trusted or known.ca:
        state = "changed"
    else:
        state = "unknown"
    return HopKey(hop, key, state, known)


def _fps(keys: list[asyncssh.SSHKey]) -> str:
    return ", ".join(ssh_target.fingerprint(k) for k in keys)


def key_message(name: str, hk: HopKey, *, trust_hint: bool = True) -> str:
    hop, fp, kh = hk.hop, hk.fingerprint, ssh_target.known_hosts_path()
    what = f"{hop.label}" if hop.jump else f"host {hop.label}"
    if hk.state == "revoked":
        return (f"{name}: REVOKED host key offered by {what}: {fp} is marked @revoked in {kh}. "
                "Refusing to connect; ask the host's administrator")
    if hk.state == "changed":
        known = _fps(hk.known.trusted) or "a @cert-authority key"
        return (f"{name}: HOST KEY CHANGED for {what}: known {known}, offered {fp}. Refusing "
                f"to connect; if the host was reinstalled, remove the old line from {kh} "
                f"(ssh-keygen -R '{hop.known_hosts_name}')")
    hint = (f"; verify it, then run `dsv4tui trust {name}` or pass --accept-new"
            if trust_hint else "")
    return f"{name}: unknown host key for {what}: {hk.key.get_algorithm()} {fp}{hint}"


async def hop_key_error(name: str, hop: Hop, path: list[Hop], tunnel: Tunnel,
                        exc: asyncssh.HostKeyNotVerifiable, *,
                        timeout: float = 10.0) -> HopKeyError:
    """Why asyncssh refused ``hop``'s key, from the key it offers now and known_hosts."""
    hk = await judge_hop_key(name, hop, tunnel, timeout=timeout)
    if hk.state == "trusted":  # refused for a reason of its own (a certificate, an algorithm)
        return HopKeyError(f"{name}: the host key of {hop.label} could not be verified: "
                           f"{exc.reason}", state="unverifiable", hop=hop, key=hk.key)
    return HopKeyError(key_message(name, hk), state=hk.state, hop=hop, key=hk.key)


Decide = Callable[[HopKey], Awaitable[bool]]


async def learn_host_keys(name: str, target: str, decide: Decide, *,
                          connect_timeout: float = 10.0) -> list[HopKey]:
    """`dsv4tui trust`: walk the path hop by hop; an unknown key is fetched over the path to
    its hop and added when ``decide`` says so; a changed or revoked key raises HopKeyError.
    Jump hosts are logged into (to reach the next hop); the last hop is only asked its key.
    Returns each hop's key and state (``state`` ``learnt`` when added, ``declined`` when not).
    """
    path = parse_path(target)
    conns: list[asyncssh.SSHClientConnection] = []
    out: list[HopKey] = []
    try:
        for i, hop in enumerate(path):
            tunnel = conns[-1] if conns else None
            hk = await judge_hop_key(name, hop, tunnel, timeout=connect_timeout)
            if hk.state in ("changed", "revoked"):
                raise HopKeyError(key_message(name, hk, trust_hint=False), state=hk.state,
                                  hop=hop, key=hk.key)
            if hk.state == "unknown":
                if not await decide(hk):
                    out.append(HopKey(hop, hk.key, "declined", hk.known))
                    return out
                ssh_target.append_known_host(hop, hk.key)
                hk = HopKey(hop, hk.key, "learnt", hk.known)
            out.append(hk)
            if i < len(path) - 1:
                try:
                    conns.append(await _open_hop(name, hop, path, tunnel,
                                                 connect_timeout=connect_timeout,
                                                 keepalive_s=15.0))
                except asyncssh.HostKeyNotVerifiable as exc:
                    raise await hop_key_error(name, hop, path, tunnel, exc,
                                              timeout=connect_timeout) from None
    finally:
        await _close_all(conns)
    return out


async def probe_ssh(host: str, port: int, timeout: float = 2.0) -> str | None:
    """A cheap check that an SSH server answers at host:port: a TCP connect and its banner.

    No key exchange, no login: None when the ``SSH-`` line arrives within ``timeout``, else
    why not (one line). A link that swallows packets, or a relay that accepts and stays silent,
    fails here as it would fail a full connect, only sooner.
    """
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            for _ in range(16):  # RFC 4253 allows other lines before the version line
                line = await reader.readline()
                if not line:
                    return f"{host}:{port} closed the connection without an SSH banner"
                if line.startswith(b"SSH-"):
                    return None
            return f"{host}:{port} sent no SSH banner"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g} s"
    except socket.gaierror:
        return f"cannot resolve host name {host!r}"
    except ConnectionRefusedError:
        return f"connection refused by {host}:{port}"
    except OSError as exc:  # asyncio words a refusal "Connect call failed": say the errno
        return f"cannot reach {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc}"
    except ValueError as exc:
        return f"cannot reach {host}:{port}: {exc}"
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
