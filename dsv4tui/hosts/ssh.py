"""SshSession: one asyncssh connection to a GPU host.

Host keys are always verified against ~/.ssh/known_hosts: an unknown key is refused with the
way to trust it (``dsv4tui trust HOST`` or ``--accept-new``), a changed key is refused always.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import socket
from pathlib import Path, PurePosixPath

import asyncssh

from dsv4tui.errors import AuthError, ConnectError, HostKeyError
from dsv4tui.hosts import ssh_target
from dsv4tui.hosts.session import CommandResult
from dsv4tui.hosts.ssh_target import ResolvedTarget, SshTarget

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


class SshSession:
    is_local = False

    def __init__(self, name: str, conn: asyncssh.SSHClientConnection,
                 resolved: ResolvedTarget) -> None:
        self.name = name
        self.resolved = resolved
        self._conn = conn
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @classmethod
    async def connect(cls, name: str, target: str, *, accept_new: bool = False,
                      connect_timeout: float = 10.0, keepalive_s: float = 15.0) -> SshSession:
        """Open the connection or raise a one-line UserError (ConnectError, AuthError...)."""
        parsed = SshTarget.parse(target)
        resolved = ssh_target.resolve(parsed)
        kwargs: dict[str, object] = {
            "keepalive_interval": keepalive_s, "keepalive_count_max": 3,
            "connect_timeout": connect_timeout,
        }
        if parsed.user:
            kwargs["username"] = parsed.user
        if parsed.port:
            kwargs["port"] = parsed.port
        try:
            conn = await asyncssh.connect(parsed.alias, **kwargs)  # type: ignore[arg-type]
        except asyncssh.HostKeyNotVerifiable:
            if accept_new and not ssh_target.known_keys(resolved):
                await trust_host_key(parsed, resolved)
                return await cls.connect(name, target, accept_new=False,
                                         connect_timeout=connect_timeout,
                                         keepalive_s=keepalive_s)
            raise await host_key_error(name, parsed, resolved) from None
        except asyncssh.PermissionDenied as exc:
            raise AuthError(f"{name}: authentication failed for {resolved.user}@"
                            f"{resolved.hostname}:{resolved.port} ({exc.reason}); check your "
                            "key, ssh-agent, or User/IdentityFile in ~/.ssh/config") from None
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise AuthError(f"{name}: cannot use your SSH key or config: {exc}") from None
        except socket.gaierror:
            raise ConnectError(f"{name}: cannot resolve host name {resolved.hostname!r}") from None
        except ConnectionRefusedError:
            raise ConnectError(f"{name}: connection refused by {resolved.hostname}:"
                               f"{resolved.port} (is sshd running?)") from None
        except TimeoutError:
            raise ConnectError(f"{name}: timed out after {connect_timeout:g} s connecting to "
                               f"{resolved.hostname}:{resolved.port}") from None
        except (OSError, asyncssh.Error) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
            raise ConnectError(f"{name}: cannot connect to {resolved.hostname}:{resolved.port}: "
                               f"{reason}") from None
        return cls(name, conn, resolved)

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

    async def close(self) -> None:
        self._closed = True
        self._conn.close()
        with contextlib.suppress(Exception):
            await self._conn.wait_closed()


async def fetch_host_key(parsed: SshTarget, resolved: ResolvedTarget) -> asyncssh.SSHKey:
    try:
        key = await asyncssh.get_server_host_key(resolved.hostname, resolved.port)
    except socket.gaierror:
        raise ConnectError(f"cannot resolve host name {resolved.hostname!r}") from None
    except (OSError, asyncssh.Error) as exc:
        raise ConnectError(f"cannot reach {resolved.hostname}:{resolved.port}: {exc}") from None
    if key is None:
        raise ConnectError(f"{resolved.hostname}:{resolved.port} sent no host key")
    return key


async def host_key_error(name: str, parsed: SshTarget, resolved: ResolvedTarget) -> HostKeyError:
    key = await fetch_host_key(parsed, resolved)
    fp = ssh_target.fingerprint(key)
    known = ssh_target.known_keys(resolved)
    where = ssh_target.known_hosts_name(resolved)
    if known:
        old = ", ".join(ssh_target.fingerprint(k) for k in known)
        return HostKeyError(
            f"{name}: HOST KEY CHANGED for {where}: known {old}, offered {fp}. Refusing to "
            f"connect; if the host was reinstalled, remove the old line from "
            f"{ssh_target.known_hosts_path()} (ssh-keygen -R '{where}')", changed=True,
            fingerprint=fp)
    return HostKeyError(
        f"{name}: unknown host key for {where} ({fp}); verify it, then run "
        f"`dsv4tui trust {name}` or pass --accept-new", changed=False, fingerprint=fp)


async def trust_host_key(parsed: SshTarget, resolved: ResolvedTarget) -> asyncssh.SSHKey:
    key = await fetch_host_key(parsed, resolved)
    ssh_target.append_known_host(resolved, key)
    return key
