"""Two tiers: ``pytest -m "not e2e"`` runs the fast one (no server, sshd, simulator or
subprocess), plain ``pytest`` runs everything.

A test is e2e when it uses a fixture that starts something real (``E2E_FIXTURES``), lives in a
scenario module (``E2E_MODULES``), or says ``@pytest.mark.e2e`` itself (it starts a process or a
server with a helper such as ``start_sim`` or ``subprocess.run``).

The fast tier checks itself: while a test of it runs (setup, call, teardown), starting a
subprocess (``subprocess.Popen``, so also ``subprocess.run`` and
``asyncio.create_subprocess_exec``), forking, starting a multiprocessing process or listening
on a socket (any server; a bind alone, as ``free_port`` does, is fine) raises, and the test
fails saying it belongs to the e2e tier, also when it caught the error. The guard is on when
the mark expression is ``not e2e`` or ``DSV4TUI_FAST_GUARD=1``.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable, Generator, Iterable
from typing import Any

import pytest

# fixtures that start a real server, sshd, simulator, relay or agent subprocess
E2E_FIXTURES = frozenset({
    "sims", "agent_env", "script_server", "known_server", "relay",
    "ssh_server", "sshd_server", "sshd_sim_server", "ssh_bastion",
    "slurm_cluster", "slurm",
})
# scenario modules: (nearly) every test in them drives real processes end to end
E2E_MODULES = frozenset({
    "test_app_attention_adopt", "test_app_campaign", "test_app_demo", "test_app_reconnect",
    "test_bench_agent", "test_busy_exit", "test_campaign", "test_campaign_ssh",
    "test_local_session", "test_reach", "test_runner_slow_metrics", "test_serve",
    "test_server_agent", "test_server_cli", "test_server_metrics_cli", "test_server_tree",
    "test_sim", "test_sim_metrics", "test_sim_nodes", "test_ssh_hosts", "test_ssh_jump",
    "test_supervisor_reconnect", "test_sweep_honesty", "test_telemetry_cli",
    "test_telemetry_reconnect", "test_sweep_identity", "test_cli_startup", "test_exit_codes",
    "test_canary", "test_campaign_repeats", "test_sim_noise",
})

MARK = "e2e"
ENV = "DSV4TUI_FAST_GUARD"


class StartedInFastTier(RuntimeError):
    """A test of the fast tier started a process or a server."""


_running: list[str] = []  # the node id of the test now running, when the guard is on
_hits: dict[str, list[str]] = {}


def _is_e2e(item: pytest.Item) -> bool:
    if item.get_closest_marker(MARK):
        return True
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return module in E2E_MODULES or bool(E2E_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(items: Iterable[pytest.Item]) -> None:
    for item in items:
        if _is_e2e(item) and not item.get_closest_marker(MARK):
            item.add_marker(MARK)


def _guarded(what: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _running:
            _hits.setdefault(_running[-1], []).append(what)
            raise StartedInFastTier(
                f"{what} in the fast tier: mark the test e2e (@pytest.mark.e2e, or its "
                f"fixture or module in tests/plugins/tiers.py)")
        return real(*args, **kwargs)
    return call


def _armed(config: pytest.Config) -> bool:
    expr = (config.getoption("markexpr", "") or "").replace(" ", "")
    return os.environ.get(ENV) == "1" or expr == f"not{MARK}"


_GUARDED = (
    (subprocess.Popen, "__init__", "a subprocess"),
    (socket.socket, "listen", "a listening socket (a server)"),
    (os, "fork", "a fork"),
    (multiprocessing.process.BaseProcess, "start", "a multiprocessing process"),
)
_ARMED = pytest.StashKey[list]()  # what the guarded names were bound to before (None: inherited)


def pytest_configure(config: pytest.Config) -> None:
    if not _armed(config):
        return
    config.stash[_ARMED] = [vars(owner).get(name) for owner, name, _ in _GUARDED]
    for owner, name, what in _GUARDED:
        setattr(owner, name, _guarded(what, getattr(owner, name)))
    # matplotlib lists the fonts with fc-list the first time a process draws a chart: that
    # subprocess is the library's, once per process, not a test's
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


def pytest_unconfigure(config: pytest.Config) -> None:
    if _ARMED not in config.stash:
        return
    for (owner, name, _), before in zip(_GUARDED, config.stash[_ARMED], strict=True):
        if before is None:
            delattr(owner, name)
        else:
            setattr(owner, name, before)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    armed = _ARMED in item.config.stash and not _is_e2e(item)
    if armed:
        _running.append(item.nodeid)
    try:
        yield
    finally:
        if armed:
            _running.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    hits = _hits.pop(item.nodeid, None)
    if hits and report.passed:  # the test caught the error: still not a fast test
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} started {', '.join(hits)} in the fast tier: mark it e2e"
