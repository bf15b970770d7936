"""``dsv4tui --version`` and ``--help`` answer without importing the heavy libraries (asyncssh,
pydantic, textual, httpx): a real interpreter, what it had imported when the answer was printed.
(The time itself: benchmarks/cli_startup.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from plugins.sim import subprocess_env

from dsv4tui.main import COMMANDS, command_named

HEAVY = ("asyncssh", "pydantic", "textual", "httpx")
PROBE = """
import json, sys
from dsv4tui.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1].split(",")))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _probe(*argv: str) -> tuple[dict[str, object], str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, ",".join(HEAVY), *argv], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc.stdout


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"], []])
def test_version_and_help_import_nothing_heavy(argv: list[str]) -> None:
    got, out = _probe(*argv)
    assert got["heavy"] == [], got
    if argv == ["--version"]:
        assert got["code"] == 0 and out.startswith("dsv4tui ")
    elif argv:
        assert got["code"] == 0
        for name, _, _ in COMMANDS:  # every command listed with its line
            assert f"    {name} " in out, name
        assert "list, show, compare, export and delete saved runs" in out
    else:
        assert got["code"] == 2  # no command: the help, as a usage error


def test_a_command_gets_its_own_arguments() -> None:
    got, out = _probe("runs", "--help")
    assert got["code"] == 0 and "ACTION" in out and "compare" in out
    got, _ = _probe("nosuch")
    assert got["code"] == 2 and got["heavy"] == []


@pytest.mark.parametrize(("argv", "command"), [
    (["runs", "list"], "runs"), (["--config", "x.toml", "runs"], "runs"),
    (["--config=runs", "sweep"], "sweep"), (["--conf", "server", "check"], "check"),
    (["--version"], None), (["nosuch", "runs"], None), (["--", "demo"], "demo"), ([], None),
])
def test_the_command_is_found_past_top_level_options(argv: list[str],
                                                     command: str | None) -> None:
    assert command_named(argv) == command
