"""The README's exit codes, where a command could be read two ways: a host with no NVIDIA
driver is exit 3 where GPUs are read (``gpus``) and a reported fact for ``check`` (ABSENT,
exit 0: it checks the way to the host, README "Exit codes")."""

from __future__ import annotations

import pytest

from dsv4tui.agent.host.hello import nvml_gpus
from dsv4tui.main import main


@pytest.mark.skipif(bool(nvml_gpus().get("available")), reason="this machine has a driver")
def test_no_driver_is_3_for_gpus_and_absent_for_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "local", "--once"]) == 3
    err = capsys.readouterr().err.strip()
    assert "no NVIDIA driver" in err and len(err.splitlines()) == 1
    assert main(["check", "local"]) == 0
    out = capsys.readouterr().out
    assert "ABSENT  NVIDIA driver  no NVIDIA driver" in out and "FAILED" not in out
