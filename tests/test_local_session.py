"""The local host (used by ``dsv4tui demo`` and the tests' hosts): commands run as real
subprocesses, and a command whose caller gives up does not outlive it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from dsv4tui.core.hosts.local import LocalSession


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("how", ["cancel", "timeout"])
async def test_a_command_given_up_on_is_stopped_and_reaped(tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "pid"
    script = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
              "time.sleep(60)")
    session = LocalSession()
    task = asyncio.create_task(session.run([sys.executable, "-c", script],
                                           timeout=None if how == "cancel" else 5.0))
    for _ in range(250):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    assert pid_file.exists(), "the command did not start within 5 s"
    pid = int(pid_file.read_text())
    if how == "cancel":
        task.cancel()
    with pytest.raises(asyncio.CancelledError if how == "cancel" else TimeoutError):
        await task
    assert not _alive(pid)  # killed and reaped (a zombie would still answer kill 0)


async def test_a_command_runs_with_its_output_and_exit_code() -> None:
    result = await LocalSession().run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); "
                               "sys.exit(3)"])
    assert (result.exit_code, result.stdout.strip(), result.stderr.strip()) == (3, "out", "err")


async def test_a_command_that_cannot_run_is_an_exit_code_not_a_traceback(tmp_path: Path) -> None:
    result = await LocalSession().run([str(tmp_path)])  # a directory
    assert result.exit_code == 126 and str(tmp_path) in result.stderr
    result = await LocalSession().run([str(tmp_path / "nope")])
    assert result.exit_code == 127 and "command not found" in result.stderr
