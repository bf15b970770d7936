"""Campaigns over a real SSH link that fails: OpenSSH sshd on 127.0.0.1 behind a TCP relay
that cuts the link silently (no RST) for 16 s in the middle of a sweep (more than twice the 6 s the
console's keepalive needs to notice: 3 unanswered probes, 2 s apart).

The runner on the host goes on; the console notices (keepalive), reconnects when the link is
back and collects what it missed: every request the server streamed is in the store once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from plugins.bench_server import KnownServer
from plugins.campaigns import campaign_dirs, wait_ended
from plugins.relay import Relay
from plugins.sim import REPO
from plugins.ssh_server import SshHost

from dsv4tui.core import paths
from dsv4tui.core.store import RunStore

pytestmark = pytest.mark.sshd

CUT_S = 16.0  # > keepalive_s 2 s x 3 missed answers: the console notices the loss


@pytest.fixture(autouse=True)
def _agent_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))


def _stored(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=10) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM requests").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def test_a_silent_link_cut_mid_sweep_loses_and_doubles_nothing(
        sshd_server: SshHost, relay: Callable[[int], Relay],
        known_server: Callable[..., KnownServer]) -> None:
    n = 24
    srv = known_server(ttft_ms=20, itl_ms=20, tokens=40)  # ~0.8 s a request
    link = relay(sshd_server.port)
    sshd_server.route_through(link.port)
    Path(os.environ["DSV4TUI_CONFIG"]).write_text(
        '[hosts.box]\nssh = "sshdbox"\nkeepalive_s = 2\nconnect_timeout_s = 5\n'
        f'[hosts.box.profiles.p]\nmodel_path = "/m"\nport = {srv.port}\n'
        'served_model_name = "known-timing"\n')
    console = subprocess.Popen(
        [sys.executable, "-m", "dsv4tui", "sweep", "box", "--label", "flaky", "--levels",
         f"2:{n}", "--output-len", "40", "--no-sanity", "--json"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = paths.store_file()
    deadline = time.monotonic() + 60
    while _stored(db) < 3:
        assert time.monotonic() < deadline and console.poll() is None, console.stderr
        time.sleep(0.1)
    link.cut()  # silently: no RST, nothing closed, bytes swallowed
    t_cut = time.monotonic()
    before_cut = _stored(db)
    assert sshd_server.agent_home is not None
    [cdir] = campaign_dirs(sshd_server.agent_home)
    wait_ended(cdir, timeout=CUT_S)  # the runner finishes on the host during the outage
    time.sleep(max(0.0, t_cut + CUT_S - time.monotonic()))
    during = _stored(db)
    link.restore()
    out, err = console.communicate(timeout=120)
    assert console.returncode == 0, err
    assert "link lost" in err and "the sweep goes on on box" in err
    result = json.loads(out)
    assert result["status"] == "done"
    with RunStore() as store:
        [run] = store.runs()
        reqs = store.requests(run.id)
        assert run.status == "done" and len(reqs) == n
        assert sorted(r["index"] for r in reqs) == list(range(n))
        [level] = store.levels(run.id)
        assert level.stats["completed"] == n and level.stats["status"] == "done"
    # the server's own count: the n requests and the warm-up, each once
    assert srv.served(min_tokens=40) == n + 1
    assert before_cut < n and during < n  # the console really missed them, then caught up
