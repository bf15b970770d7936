"""Host keys hop by hop through a jump host (ProxyJump), against real servers on 127.0.0.1.

The jump host is asyncssh's server in-process (TCP forwarding only); the target is the
in-process asyncssh server (commands in real subprocesses) or OpenSSH's sshd. The target's
HostName, ``gpu-node.internal``, resolves only on the bastion: its key can only be fetched, and
the target only reached, through the jump host, as behind a real one.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncssh
import pytest
from plugins.ssh_server import Bastion, SshHost

from dsv4tui.core import config
from dsv4tui.core.errors import EXIT_HOST_KEY, HostKeyError
from dsv4tui.core.hosts import resolve, ssh_target
from dsv4tui.core.hosts.ssh import HopKeyError

MakeBastion = Callable[..., Awaitable[Bastion]]


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsv4tui", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


async def connect(name: str = "testbox", accept_new: bool = False) -> resolve.Host:
    return await resolve.connect(resolve.host_spec(name, config.Settings(),
                                                   accept_new=accept_new))


async def refused(name: str = "testbox", accept_new: bool = False) -> HopKeyError:
    with pytest.raises(HostKeyError) as err:
        host = await connect(name, accept_new)
        await host.session.close()
    assert isinstance(err.value, HopKeyError)
    return err.value


def test_path_from_ssh_config(isolated_env: Path) -> None:
    cfg = isolated_env / ".ssh" / "config"
    cfg.write_text("Host bastion\n  HostName 127.0.0.1\n  Port 2222\n  User jumper\n"
                   "Host inner\n  HostName 10.0.0.2\n  ProxyJump bastion\n"
                   "Host gpu\n  HostName gpu-node.internal\n  User me\n"
                   "  ProxyJump inner,ops@relay2:2022\n"
                   "Host loop1\n  ProxyJump loop2\nHost loop2\n  ProxyJump loop1\n")
    path = ssh_target.hops(ssh_target.SshTarget.parse("gpu"))
    assert [(h.alias, h.hostname, h.port, h.user, h.jump) for h in path] == [
        ("bastion", "127.0.0.1", 2222, "jumper", True),
        ("inner", "10.0.0.2", 22, path[1].user, True),
        ("relay2", "relay2", 2022, "ops", True),
        ("gpu", "gpu-node.internal", 22, "me", False)]
    assert path[0].label == "jump host bastion (127.0.0.1:2222)"
    assert path[2].label == "jump host relay2:2022"
    assert path[-1].label == "gpu (gpu-node.internal:22)"
    from dsv4tui.core.errors import ConfigError

    with pytest.raises(ConfigError, match="a loop"):
        ssh_target.hops(ssh_target.SshTarget.parse("loop1"))


async def test_unknown_jump_key_names_the_jump_host(ssh_server: SshHost,
                                                    ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.target_line())  # the target is known, the jump host is not
    err = await refused()
    assert err.state == "unknown" and err.hop.jump and not err.changed
    assert err.message.startswith(
        f"testbox: unknown host key for jump host bastion (127.0.0.1:{b.port}): ssh-ed25519 "
        f"{ssh_target.fingerprint(b.host_key)}")
    assert "dsv4tui trust testbox" in err.message and "--accept-new" in err.message
    assert b.forwarded == []  # refused at the first hop: nothing went further


async def test_unknown_target_key_behind_known_jump_host(ssh_server: SshHost,
                                                         ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.bastion_line())
    err = await refused()
    assert err.state == "unknown" and not err.hop.jump
    assert (f"unknown host key for host testbox (gpu-node.internal:{ssh_server.port})"
            in err.message)
    assert err.fingerprint == ssh_target.fingerprint(ssh_server.host_key)
    assert ("gpu-node.internal", ssh_server.port) in b.forwarded  # fetched through the bastion


async def test_accept_new_learns_both_keys_over_the_path(ssh_server: SshHost,
                                                         ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(ssh_server)
    ssh_server.forget_known_hosts()
    host = await connect(accept_new=True)
    try:
        hello = await host.agent.call("hello")
        assert hello[0]["type"] == "hello"
    finally:
        await host.session.close()
    lines = b.known_hosts().splitlines(keepends=True)
    assert lines == [b.bastion_line(), b.target_line()]  # each under its own name, once
    assert ("gpu-node.internal", ssh_server.port) in b.forwarded
    host = await connect()  # and now without --accept-new
    await host.session.close()
    assert b.known_hosts().count("\n") == 2


async def test_changed_target_key_refused_naming_the_target(ssh_server: SshHost,
                                                            ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(ssh_server)
    old = asyncssh.generate_private_key("ssh-ed25519")
    b.write_known_hosts(b.bastion_line(), b.target_line(old))
    before = b.known_hosts()
    err = await refused(accept_new=True)
    assert err.state == "changed" and err.changed and not err.hop.jump
    new_fp, old_fp = ssh_target.fingerprint(ssh_server.host_key), ssh_target.fingerprint(old)
    assert err.message.startswith(
        f"testbox: HOST KEY CHANGED for host testbox (gpu-node.internal:{ssh_server.port}): "
        f"known {old_fp}, offered {new_fp}.")
    assert f"ssh-keygen -R '[gpu-node.internal]:{ssh_server.port}'" in err.message
    assert b.known_hosts() == before  # never learnt over a changed key


async def test_changed_jump_key_refused_naming_the_jump_host(ssh_server: SshHost,
                                                             ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.bastion_line(asyncssh.generate_private_key("ssh-ed25519")),
                        b.target_line())
    err = await refused(accept_new=True)
    assert err.state == "changed" and err.hop.jump
    old = ssh_target.fingerprint(asyncssh.import_public_key(b.known_hosts().split()[1] + " "
                                                            + b.known_hosts().split()[2]))
    assert err.message.startswith(f"testbox: HOST KEY CHANGED for jump host bastion "
                                  f"(127.0.0.1:{b.port}): known {old}, offered "
                                  f"{ssh_target.fingerprint(b.host_key)}.")


@pytest.mark.parametrize("with_trusted", [False, True])
async def test_revoked_key_is_reported_as_revoked(ssh_server: SshHost, ssh_bastion: MakeBastion,
                                                  with_trusted: bool) -> None:
    b = await ssh_bastion(ssh_server)
    lines = [b.bastion_line(marker="@revoked"), b.target_line()]
    if with_trusted:  # the file also trusts the same key: @revoked wins
        lines.append(b.bastion_line())
    b.write_known_hosts(*lines)
    before = b.known_hosts()
    err = await refused(accept_new=True)
    assert err.state == "revoked" and not err.changed and err.hop.jump
    assert err.message.startswith(f"testbox: REVOKED host key offered by jump host bastion "
                                  f"(127.0.0.1:{b.port}): "
                                  f"{ssh_target.fingerprint(b.host_key)} is marked @revoked")
    assert "CHANGED" not in err.message
    assert b.known_hosts() == before


async def test_revoked_direct_host(ssh_server: SshHost) -> None:
    line = f"@revoked [127.0.0.1]:{ssh_server.port} " \
        f"{ssh_server.host_key.export_public_key().decode()}"
    (ssh_server.home / ".ssh" / "known_hosts").write_text(line)
    err = await refused(accept_new=True)
    assert err.state == "revoked"
    assert err.message.startswith(f"testbox: REVOKED host key offered by host testbox "
                                  f"(127.0.0.1:{ssh_server.port})")


async def test_jump_host_auth_failure_names_the_jump_host(ssh_server: SshHost,
                                                         ssh_bastion: MakeBastion) -> None:
    from dsv4tui.core.errors import AuthError

    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.bastion_line(), b.target_line())
    cfg = ssh_server.home / ".ssh" / "config"
    other = asyncssh.generate_private_key("ssh-ed25519")
    other.write_private_key(str(ssh_server.home / ".ssh" / "other"))
    cfg.write_text(cfg.read_text().replace("User jumper\n  IdentityFile ~/.ssh/id_ed25519",
                                           "User jumper\n  IdentityFile ~/.ssh/other"))
    with pytest.raises(AuthError, match=f"authentication failed as jumper on jump host "
                                        rf"bastion \(127.0.0.1:{b.port}\)"):
        await connect()


async def test_cli_trust_learns_each_hop(ssh_server: SshHost, ssh_bastion: MakeBastion) -> None:
    # the in-process servers run on this test's event loop: the CLI runs from a thread
    b = await ssh_bastion(ssh_server)
    ssh_server.forget_known_hosts()
    res = await asyncio.to_thread(cli, "check", "testbox")
    assert res.returncode == EXIT_HOST_KEY, res.stdout + res.stderr
    assert "unknown host key for jump host bastion" in res.stdout
    res = await asyncio.to_thread(cli, "trust", "testbox")  # stdin is not a terminal
    assert res.returncode == 1 and "refusing to trust without confirmation" in res.stderr
    res = await asyncio.to_thread(cli, "trust", "testbox", "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout.splitlines()
    assert out[0] == (f"jump host bastion (127.0.0.1:{b.port}) offers ssh-ed25519 key "
                      f"{ssh_target.fingerprint(b.host_key)}")
    assert out[1].startswith(f"testbox (gpu-node.internal:{ssh_server.port}) offers "
                             "ssh-ed25519 key")
    assert b.known_hosts().splitlines(keepends=True) == [b.bastion_line(), b.target_line()]
    res = await asyncio.to_thread(cli, "trust", "testbox", "--yes")
    assert res.returncode == 0 and res.stdout.count("is already trusted") == 2
    res = await asyncio.to_thread(cli, "check", "testbox")
    assert res.returncode == 0, res.stdout + res.stderr
    b.write_known_hosts(b.bastion_line(), b.target_line(
        asyncssh.generate_private_key("ssh-ed25519")))
    res = await asyncio.to_thread(cli, "trust", "testbox", "--yes")
    assert res.returncode == EXIT_HOST_KEY and "HOST KEY CHANGED for host testbox" \
        in res.stderr and "Traceback" not in res.stderr


@pytest.mark.sshd
async def test_sshd_target_behind_asyncssh_jump_host(sshd_server: SshHost,
                                                     ssh_bastion: MakeBastion) -> None:
    b = await ssh_bastion(sshd_server)
    sshd_server.forget_known_hosts()
    res = await asyncio.to_thread(cli, "check", "sshdbox")
    assert res.returncode == EXIT_HOST_KEY
    assert f"unknown host key for jump host bastion (127.0.0.1:{b.port})" in res.stdout
    res = await asyncio.to_thread(cli, "check", "sshdbox", "--accept-new")
    assert res.returncode == 0, res.stdout + res.stderr
    assert b.known_hosts().splitlines(keepends=True) == [b.bastion_line(), b.target_line()]
    assert ("gpu-node.internal", sshd_server.port) in b.forwarded
    b.write_known_hosts(b.bastion_line(), b.target_line(
        asyncssh.generate_private_key("ssh-ed25519")))
    res = await asyncio.to_thread(cli, "check", "sshdbox", "--accept-new")
    assert res.returncode == EXIT_HOST_KEY
    assert f"HOST KEY CHANGED for host sshdbox (gpu-node.internal:{sshd_server.port})" \
        in res.stdout


async def test_jump_host_link_drop_is_a_lost_connection(ssh_server: SshHost,
                                                        ssh_bastion: MakeBastion) -> None:
    """The jump host's connection dying takes the tunnelled one with it; the supervisor sees
    the loss, probes the jump host (the first hop) and reconnects through it."""
    from dsv4tui.core.hosts.session import ConnectionState
    from dsv4tui.core.hosts.supervisor import HostSupervisor

    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.bastion_line(), b.target_line())
    states: list[str] = []
    sup = HostSupervisor(resolve.host_spec("testbox", config.Settings()), backoff_base=0.2,
                         on_state=lambda s: states.append(s.state.value))
    try:
        await sup.wait_connected(timeout=20)
        assert len(b.connections) == 1
        for conn in b.connections:
            conn.abort()
        deadline = asyncio.get_running_loop().time() + 20
        while not ("lost" in states and sup.state is ConnectionState.CONNECTED):
            assert asyncio.get_running_loop().time() < deadline, states
            await asyncio.sleep(0.05)
        assert len(b.connections) >= 2  # probed, then through the bastion again
        assert (await sup.host.agent.call("hello"))[0]["type"] == "hello"  # type: ignore[union-attr]
    finally:
        await sup.stop()


async def test_target_the_jump_host_cannot_reach(ssh_server: SshHost,
                                                 ssh_bastion: MakeBastion) -> None:
    from dsv4tui.core.errors import ConnectError

    b = await ssh_bastion(ssh_server)
    b.write_known_hosts(b.bastion_line(), b.target_line())
    cfg = ssh_server.home / ".ssh" / "config"
    cfg.write_text(cfg.read_text().replace("HostName gpu-node.internal", "HostName gone.internal"))
    with pytest.raises(ConnectError) as err:
        await connect()
    assert err.value.message == (f"testbox: jump host bastion (127.0.0.1:{b.port}) cannot reach "
                                 f"testbox (gone.internal:{ssh_server.port}): Connection refused")
    assert ("gone.internal", ssh_server.port) in b.forwarded
