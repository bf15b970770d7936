"""Real SSH servers on 127.0.0.1 for the tests.

- ``ssh_server``: asyncssh's server in-process (pinned host key, SFTP rooted at a temporary
  remote home, each command run by ``/bin/sh -c`` in a real local subprocess, as sshd does).
  It can drop every live connection to test reconnects.
- ``sshd_server``: OpenSSH's ``sshd`` with a temporary config and keys. Skipped when sshd is
  missing, unless DSV4TUI_REQUIRE_SSHD=1 (set by .ci/run), where it fails instead.

Both write the client side into the test's temporary HOME: a key, ~/.ssh/config with an
alias, and ~/.ssh/known_hosts with the server's key.

- ``ssh_bastion``: a factory for a jump host in front of one of those: another in-process
  asyncssh server that only forwards TCP (direct-tcpip, as ``ProxyJump`` uses it) to 127.0.0.1
  and to the private names it is given (``gpu-node.internal`` -> 127.0.0.1, names only the
  bastion can resolve, as behind a real one). It rewrites ~/.ssh/config with ``Host bastion``
  and ``ProxyJump bastion`` for the target, and leaves ~/.ssh/known_hosts to the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest


@dataclass
class SshHost:
    alias: str
    port: int
    user: str
    home: Path  # the client's HOME
    remote_home: Path  # where commands run on the "remote" side
    host_key: asyncssh.SSHKey
    connections: list[asyncssh.SSHServerConnection] = field(default_factory=list)
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)
    agent_home: Path | None = None  # the agent's cache dir on the "remote" side, when set
    refusing: bool = False  # while set, new connections are aborted as they arrive (link down)

    def write_known_hosts(self, key: asyncssh.SSHKey | None = None) -> None:
        key = key or self.host_key
        line = f"[127.0.0.1]:{self.port} {key.export_public_key().decode().strip()}\n"
        (self.home / ".ssh" / "known_hosts").write_text(line)

    def forget_known_hosts(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.home / ".ssh" / "known_hosts").unlink()

    def route_through(self, port: int) -> None:
        """Point the client's alias at ``port`` (a relay in front of this server): its
        ~/.ssh/config Port and a known_hosts line for ``[127.0.0.1]:port``."""
        cfg = self.home / ".ssh" / "config"
        cfg.write_text(cfg.read_text().replace(f"  Port {self.port}\n", f"  Port {port}\n"))
        line = f"[127.0.0.1]:{port} {self.host_key.export_public_key().decode().strip()}\n"
        (self.home / ".ssh" / "known_hosts").write_text(line)

    def drop_connections(self) -> None:
        """Abort every live connection (like a network drop) and kill their commands."""
        for conn in self.connections:
            conn.abort()
        self.connections.clear()
        for proc in self.processes:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


def _client_setup(home: Path, alias: str, port: int, user: str) -> asyncssh.SSHKey:
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(ssh_dir / "id_ed25519"))
    (ssh_dir / "id_ed25519").chmod(0o600)
    key.write_public_key(str(ssh_dir / "id_ed25519.pub"))
    (ssh_dir / "config").write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
        f"  IdentityFile ~/.ssh/id_ed25519\n")
    return key


class _RootedSFTP(asyncssh.SFTPServer):
    root: Path

    def __init__(self, chan: asyncssh.SSHServerChannel) -> None:
        super().__init__(chan, chroot=str(self.root))


@pytest.fixture
async def ssh_server(isolated_env: Path, tmp_path: Path) -> AsyncIterator[SshHost]:
    async with serve_ssh(isolated_env, tmp_path / "remote-home") as host:
        yield host


@contextlib.asynccontextmanager
async def serve_ssh(home: Path, remote_home: Path) -> AsyncIterator[SshHost]:
    """The ``ssh_server`` fixture's server, for scripts too (benchmarks/reconnect.py): the
    client side is written into ``home`` (which must be $HOME), commands run in
    ``remote_home``."""
    remote_home.mkdir(parents=True, exist_ok=True)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client_key = _client_setup(home, "testbox", port, "tester")
    host = SshHost("testbox", port, "tester", home, remote_home, host_key)
    host.write_known_hosts()

    class Server(asyncssh.SSHServer):
        def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
            if host.refusing:
                conn.abort()
                return
            host.connections.append(conn)

    env = dict(os.environ)
    env["HOME"] = str(remote_home)
    for var in ("DSV4TUI_CONFIG", "DSV4TUI_DATA_DIR", "DSV4TUI_AGENT_HOME"):
        env.pop(var, None)

    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", process.command or "true", cwd=remote_home, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        host.processes.append(proc)
        assert proc.stdin and proc.stdout and proc.stderr

        async def pump_in() -> None:
            with contextlib.suppress(asyncssh.Error, OSError):
                while data := await process.stdin.read(65536):
                    proc.stdin.write(data)  # type: ignore[union-attr]
                    await proc.stdin.drain()  # type: ignore[union-attr]
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]

        async def pump_out(src: asyncio.StreamReader, dst: asyncssh.SSHWriter[bytes]) -> None:
            with contextlib.suppress(asyncssh.Error, OSError):
                while data := await src.read(65536):
                    dst.write(data)

        feeder = asyncio.create_task(pump_in())
        try:
            await asyncio.gather(pump_out(proc.stdout, process.stdout),
                                 pump_out(proc.stderr, process.stderr))
            code = await proc.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            feeder.cancel()
            with contextlib.suppress(Exception):
                proc.stdin.close()
        with contextlib.suppress(asyncssh.Error, OSError):
            process.exit(code)

    sftp_cls = type("SFTP", (_RootedSFTP,), {"root": remote_home})
    server = await asyncssh.listen(
        "127.0.0.1", port, server_factory=Server, server_host_keys=[host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(
            client_key.export_public_key().decode()),
        process_factory=handle, encoding=None, sftp_factory=sftp_cls, allow_scp=False)
    try:
        yield host
    finally:
        server.close()
        host.drop_connections()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)


def _sshd_binary() -> str | None:
    for cand in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if cand and os.path.exists(cand):
            return cand
    return None


@pytest.fixture
def sshd_server(isolated_env: Path, tmp_path: Path) -> Iterator[SshHost]:
    yield from run_sshd(isolated_env, tmp_path)


@pytest.fixture
def sshd_sim_server(isolated_env: Path, tmp_path: Path) -> Iterator[SshHost]:
    """``sshd_server`` whose commands also get a simulated GPU host of their own (8 GPUs, the
    simulator's state file in the test's directory): a second simulated node on this machine."""
    yield from run_sshd(isolated_env, tmp_path, {
        "DSV4TUI_SIM_STATE": str(tmp_path / "sshd-sim-state.json"), "DSV4TUI_SIM_GPUS": "8"})


def run_sshd(isolated_env: Path, tmp_path: Path,
             extra_env: dict[str, str] | None = None) -> Iterator[SshHost]:
    sshd = _sshd_binary()
    if sshd is None:
        if os.environ.get("DSV4TUI_REQUIRE_SSHD") == "1":
            pytest.fail("OpenSSH sshd is required (DSV4TUI_REQUIRE_SSHD=1) but not installed")
        pytest.skip("OpenSSH sshd not installed")
    home = isolated_env
    work = tmp_path / "sshd"
    work.mkdir()
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(work / "host_ed25519"))
    (work / "host_ed25519").chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    user = getpass.getuser()
    client_key = _client_setup(home, "sshdbox", port, user)
    # the agent's state (server.json, campaigns, journals) in this test's directory, not in
    # the real home of the user sshd runs commands as
    agent_home = tmp_path / "sshd-agent-home"
    agent_home.mkdir()
    env = {"DSV4TUI_AGENT_HOME": str(agent_home), **(extra_env or {})}
    (work / "authorized_keys").write_text(
        "".join(f'environment="{k}={v}",' for k, v in env.items()).rstrip(",") + " "
        + client_key.export_public_key().decode())
    (work / "authorized_keys").chmod(0o600)
    (work / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_ed25519'}\n"
        f"PidFile {work / 'sshd.pid'}\nAuthorizedKeysFile {work / 'authorized_keys'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
        f"PermitUserEnvironment {','.join(env)}\n"
        "Subsystem sftp internal-sftp\nLogLevel ERROR\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(work / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"sshd exited {proc.returncode}: {err.strip()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    remote_home = Path(os.path.expanduser(f"~{user}"))
    host = SshHost("sshdbox", port, user, home, remote_home, host_key, agent_home=agent_home)
    host.write_known_hosts()
    try:
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def known_hosts_line(name: str, port: int, key: asyncssh.SSHKey, marker: str = "") -> str:
    """One known_hosts line (``marker``: "" / "@revoked" / "@cert-authority")."""
    where = name if port == 22 else f"[{name}]:{port}"
    text = f"{where} {key.export_public_key().decode().strip()}\n"
    return f"{marker} {text}" if marker else text


@dataclass
class Bastion:
    alias: str
    port: int
    host_key: asyncssh.SSHKey
    target: SshHost
    target_name: str  # the target's HostName in ~/.ssh/config (resolvable by the bastion only)
    forwarded: list[tuple[str, int]] = field(default_factory=list)  # direct-tcpip requests
    connections: list[asyncssh.SSHServerConnection] = field(default_factory=list)

    def write_known_hosts(self, *lines: str) -> None:
        (self.target.home / ".ssh" / "known_hosts").write_text("".join(lines))

    def bastion_line(self, key: asyncssh.SSHKey | None = None, marker: str = "") -> str:
        return known_hosts_line("127.0.0.1", self.port, key or self.host_key, marker)

    def target_line(self, key: asyncssh.SSHKey | None = None, marker: str = "") -> str:
        return known_hosts_line(self.target_name, self.target.port, key or self.target.host_key,
                                marker)

    def known_hosts(self) -> str:
        path = self.target.home / ".ssh" / "known_hosts"
        return path.read_text() if path.exists() else ""


@pytest.fixture
async def ssh_bastion() -> AsyncIterator[Callable[..., Awaitable[Bastion]]]:
    servers: list[tuple[asyncssh.SSHAcceptor, Bastion]] = []

    async def make(target: SshHost, *, alias: str = "bastion",
                   target_name: str = "gpu-node.internal") -> Bastion:
        ssh_dir = target.home / ".ssh"
        client_pub = (ssh_dir / "id_ed25519.pub").read_text()
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        bastion = Bastion(alias, port, host_key, target, target_name)
        private = {target_name: "127.0.0.1"}

        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                self.conn = conn
                bastion.connections.append(conn)

            def connection_requested(self, dest_host: str, dest_port: int, orig_host: str,
                                     orig_port: int) -> object:
                bastion.forwarded.append((dest_host, dest_port))
                if dest_host in private:
                    return self.conn.forward_connection(private[dest_host], dest_port)
                return dest_host == "127.0.0.1"

        acceptor = await asyncssh.listen(
            "127.0.0.1", port, server_factory=Server, server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(client_pub))
        servers.append((acceptor, bastion))
        (ssh_dir / "config").write_text(
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User jumper\n"
            f"  IdentityFile ~/.ssh/id_ed25519\n\n"
            f"Host {target.alias}\n  HostName {target_name}\n  Port {target.port}\n"
            f"  User {target.user}\n  IdentityFile ~/.ssh/id_ed25519\n  ProxyJump {alias}\n")
        return bastion

    yield make
    for acceptor, bastion in servers:
        acceptor.close()
        for conn in bastion.connections:
            conn.abort()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(acceptor.wait_closed(), 5)
