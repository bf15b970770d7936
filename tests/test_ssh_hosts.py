"""SSH hosts against real servers: asyncssh in-process and OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import asyncssh
import pytest
from plugins.ssh_server import SshHost

from dsv4tui.core import config
from dsv4tui.core.errors import AuthError, ConnectError, HostKeyError, RemoteError
from dsv4tui.core.hosts import resolve
from dsv4tui.core.hosts.session import ConnectionState
from dsv4tui.core.hosts.supervisor import HostSupervisor


def cli(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsv4tui", *args], capture_output=True,
                          text=True, input=stdin, timeout=timeout)


async def test_alias_connect_deploy_and_hello(ssh_server: SshHost) -> None:
    settings = config.Settings()
    async with resolve.open_host("testbox", settings) as host:
        assert host.uploaded  # first connect uploads the bundle
        events = await host.agent.call("hello")
        assert events[0]["type"] == "hello"
        assert events[0]["hostname"]
    uploaded = list((ssh_server.remote_home / ".cache" / "dsv4tui").glob("agent-*.pyz"))
    assert len(uploaded) == 1
    async with resolve.open_host("testbox", settings) as host:
        assert not host.uploaded  # same hash: reused


async def test_user_at_host_port_form(ssh_server: SshHost) -> None:
    settings = config.Settings()
    async with resolve.open_host(f"{ssh_server.user}@127.0.0.1:{ssh_server.port}", settings) as host:
        assert (await host.agent.call("hello"))[0]["type"] == "hello"


async def test_unknown_host_key_refused_then_accept_new(ssh_server: SshHost) -> None:
    ssh_server.forget_known_hosts()
    spec = resolve.host_spec("testbox", config.Settings())
    with pytest.raises(HostKeyError) as err:
        await resolve.connect(spec)
    assert not err.value.changed
    assert "dsv4tui trust testbox" in err.value.message
    assert "SHA256:" in err.value.message
    spec = resolve.host_spec("testbox", config.Settings(), accept_new=True)
    host = await resolve.connect(spec)
    await host.session.close()
    assert f"[127.0.0.1]:{ssh_server.port}" in (ssh_server.home / ".ssh/known_hosts").read_text()


async def test_changed_host_key_always_refused(ssh_server: SshHost) -> None:
    ssh_server.write_known_hosts(asyncssh.generate_private_key("ssh-ed25519"))
    spec = resolve.host_spec("testbox", config.Settings(), accept_new=True)
    with pytest.raises(HostKeyError) as err:
        await resolve.connect(spec)
    assert err.value.changed
    assert "HOST KEY CHANGED" in err.value.message
    assert err.value.fingerprint and err.value.fingerprint in err.value.message


async def test_auth_failure(ssh_server: SshHost) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519")
    other.write_private_key(str(ssh_server.home / ".ssh" / "id_ed25519"))
    other.write_public_key(str(ssh_server.home / ".ssh" / "id_ed25519.pub"))
    with pytest.raises(AuthError, match="authentication failed"):
        await resolve.connect(resolve.host_spec("testbox", config.Settings()))


async def test_remote_python_missing(ssh_server: SshHost) -> None:
    settings = config.Settings(hosts={"box": config.HostConfig(ssh="testbox",
                                                               python="/nope/python3")})
    with pytest.raises(RemoteError, match="not found on the host"):
        await resolve.connect(resolve.host_spec("box", settings))


async def test_connection_refused_and_dns() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError, match="connection refused"):
        await resolve.connect(resolve.host_spec(f"me@127.0.0.1:{port}", config.Settings()))
    with pytest.raises(ConnectError, match="cannot resolve"):
        await resolve.connect(resolve.host_spec("me@no-such-host.invalid", config.Settings()))


async def test_connect_timeout() -> None:
    import socket

    # A listener that never answers the SSH banner: the connect timeout must fire.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    settings = config.Settings(hosts={"slow": config.HostConfig(
        ssh=f"me@127.0.0.1:{port}", connect_timeout_s=0.5)})
    try:
        with pytest.raises(ConnectError, match="timed out"):
            await resolve.connect(resolve.host_spec("slow", settings))
    finally:
        srv.close()


async def test_supervisor_reconnects_and_restarts_streams(ssh_server: SshHost) -> None:
    states: list[ConnectionState] = []
    hellos: list[dict] = []
    spec = resolve.host_spec("testbox", config.Settings())
    sup = HostSupervisor(spec, on_state=lambda s: states.append(s.state), backoff_base=0.1)
    # `logs --follow` of a file that keeps growing is a long-lived stream; hello is one-shot,
    # so use it through add_stream and count restarts after the drop.
    sup.add_stream("hello", ["hello"], hellos.append)
    try:
        await sup.wait_connected(timeout=20)
        for _ in range(100):
            if hellos:
                break
            await asyncio.sleep(0.05)
        assert hellos
        before = len(hellos)
        ssh_server.drop_connections()
        for _ in range(200):
            if ConnectionState.LOST in states and sup.state is ConnectionState.CONNECTED \
                    and len(hellos) > before:
                break
            await asyncio.sleep(0.05)
        assert ConnectionState.LOST in states
        assert sup.state is ConnectionState.CONNECTED
        assert len(hellos) > before
    finally:
        await sup.stop()


async def test_supervisor_fails_fast_on_host_key(ssh_server: SshHost) -> None:
    ssh_server.forget_known_hosts()
    sup = HostSupervisor(resolve.host_spec("testbox", config.Settings()), backoff_base=0.1)
    with pytest.raises(ConnectError, match="unknown host key"):
        await sup.wait_connected(timeout=20)
    assert sup.state is ConnectionState.FAILED
    await sup.stop()


async def test_bare_ip_is_an_ssh_target(ssh_server: SshHost) -> None:
    """`check 127.0.0.1` as `ssh 127.0.0.1` would: User and Port from `Host 127.0.0.1`."""
    cfg = ssh_server.home / ".ssh" / "config"
    cfg.write_text(cfg.read_text() + f"\nHost 127.0.0.1\n  Port {ssh_server.port}\n"
                   "  User tester\n  IdentityFile ~/.ssh/id_ed25519\n")
    spec = resolve.host_spec("127.0.0.1", config.Settings())
    assert spec.kind == "ssh" and spec.target == "127.0.0.1"
    res = await asyncio.to_thread(cli, "check", "127.0.0.1", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    steps = {s["step"]: s for s in json.loads(res.stdout)["steps"]}
    assert steps["ssh"]["ok"] and steps["agent hello"]["ok"]
    # no config for it: port 22 and the local user, as ssh; nothing listens there (or no key)
    cfg.write_text("")
    from dsv4tui.core.hosts import ssh_target

    assert ssh_target.resolve(ssh_target.SshTarget.parse("127.0.0.1")).port == 22


async def test_unresolvable_typo_suggests_the_configured_host(ssh_server: SshHost) -> None:
    settings = config.Settings(hosts={"gpubox": config.HostConfig(ssh="testbox")})
    with pytest.raises(ConnectError) as err:
        await resolve.connect(resolve.host_spec("testbx", settings))
    assert err.value.exit_code == 4
    assert err.value.message == (
        "testbx: cannot resolve host name 'testbx': unknown host, not in the config's [hosts] "
        "nor an alias in ~/.ssh/config (known: local, demo, gpubox, testbox); did you mean "
        "testbox?")


@pytest.mark.sshd
def test_cli_check_against_openssh_sshd(sshd_server: SshHost) -> None:
    res = cli("check", "sshdbox", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    steps = {s["step"]: s for s in report["steps"]}
    for name in ("ssh", "python", "agent upload", "agent hello"):
        assert steps[name]["ok"], steps[name]
    text = cli("check", "sshdbox")
    assert text.returncode == 0
    assert "ok      agent hello" in text.stdout


@pytest.mark.sshd
def test_cli_errors_against_openssh_sshd(sshd_server: SshHost) -> None:
    sshd_server.forget_known_hosts()
    res = cli("check", "sshdbox")
    assert res.returncode == 6
    assert "unknown host key" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    res = cli("trust", "sshdbox", "--yes")
    assert res.returncode == 0, res.stderr
    assert "SHA256:" in res.stdout
    assert cli("check", "sshdbox").returncode == 0
    sshd_server.write_known_hosts(asyncssh.generate_private_key("ssh-ed25519"))
    res = cli("check", "sshdbox", "--accept-new")
    assert res.returncode == 6
    assert "HOST KEY CHANGED" in res.stdout + res.stderr


def test_cli_unknown_host_and_bad_config(tmp_path: Path) -> None:
    res = cli("check", "nosuchhost.invalid")  # a host name like any other: DNS says no
    assert res.returncode == 4
    assert res.stdout.startswith("FAILED  ssh            nosuchhost.invalid: cannot resolve "
                                 "host name 'nosuchhost.invalid': unknown host, not in the "
                                 "config's [hosts] nor an alias in ~/.ssh/config (known: "
                                 "local, demo)\n")
    assert len(res.stdout.splitlines()) == 1 and "Traceback" not in res.stderr
    res = cli("server", "status", "nosuchhost.invalid")
    assert res.returncode == 4 and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("dsv4tui: error: nosuchhost.invalid: cannot resolve host name")
    res = cli("check", "bad host")
    assert res.returncode == 2 and "not an ssh target" in res.stderr
    cfg = Path(tmp_path / "config.toml")
    cfg.write_text('[hosts.a.profiles.p]\nmodel_path = "/m"\nmoe_runner_backend = "marlinx"\n')
    res = cli("config", "check")
    assert res.returncode == 2
    assert "hosts.a.profiles.p.moe_runner_backend" in res.stderr
    assert "Traceback" not in res.stderr
