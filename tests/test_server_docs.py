"""The README's command table and the CLI agree for ``dsv4tui server ...``: every option a row
lists for a command is one that command accepts (issue 23, point 23: ``server stop`` was listed
with ``--profile``, which it has not -- it stops what dsv4tui started)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsv4tui import main as cli

README = Path(__file__).resolve().parents[1] / "README.md"


def server_rows() -> list[tuple[list[str], list[str]]]:
    """(sub-commands, options) of each ``| `dsv4tui server ...` |`` row of the table."""
    rows = []
    for line in README.read_text().splitlines():
        m = re.match(r"\| `dsv4tui server ([a-z|\\]+) ([^`]*)`", line)
        if m:
            rows.append(([c for c in m.group(1).split("\\|") if c],
                         re.findall(r"--[a-z][a-z-]*", m.group(2))))
    return rows


def accepted(capsys: pytest.CaptureFixture[str], command: str) -> set[str]:
    with pytest.raises(SystemExit):
        cli.main(["server", command, "--help"])
    return set(re.findall(r"--[a-z][a-z-]*", capsys.readouterr().out))


def test_every_option_the_readme_lists_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    rows = server_rows()
    assert {"status", "start", "stop", "restart"} <= {c for cmds, _ in rows for c in cmds}
    wrong = [f"server {c} {opt}" for cmds, opts in rows for c in cmds
             for opt in opts if opt not in accepted(capsys, c)]
    assert wrong == []


def test_stop_takes_no_profile(capsys: pytest.CaptureFixture[str]) -> None:
    """It stops what dsv4tui started, whichever profile that was: ``--profile`` is refused."""
    code = cli.main(["server", "stop", "local", "--profile", "sim", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "--profile" in err and len(err.strip().splitlines()) == 1
