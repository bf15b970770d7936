"""Campaign runners outlive the commands that start them (that is their point), so every test
reaps what its campaigns left: runners (by pid, checked against their start time) and the
servers they started (by process group), anywhere under the test's temporary directory.

``campaign_dirs(root)`` lists the campaign directories under ``root``; ``wait_ended(cdir)``
waits until a campaign's runner has finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4tui.agent.host import procs
from plugins.sim import reap_server


def runner_alive(cdir: Path) -> bool:
    """The runner's process is still there: its pid, not a zombie, and started when its
    runner.json says (not a reused pid). Whatever ``state`` the file says: a runner that
    wrote ``done`` may still be on its way out."""
    try:
        rec = json.loads((cdir / "runner.json").read_text())
    except (OSError, ValueError):
        return False
    return rec.get("proc_start") is not None and procs.alive(rec.get("pid"), rec["proc_start"])


def campaign_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("campaigns/*/spec.json"))


def wait_ended(cdir: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while runner_alive(cdir):
        assert time.monotonic() < deadline, f"campaign runner of {cdir.name} still running"
        time.sleep(0.05)


def reap(root: Path) -> None:
    for cdir in campaign_dirs(root):
        if runner_alive(cdir):
            rec = json.loads((cdir / "runner.json").read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(rec["pid"]), signal.SIGKILL)
    for state in root.rglob("server.json"):
        reap_server(state.parent)


@pytest.fixture(autouse=True)
def reap_campaigns(tmp_path: Path) -> Iterator[None]:
    yield
    reap(tmp_path)
