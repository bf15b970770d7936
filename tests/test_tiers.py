"""The fast tier's guard (tests/plugins/tiers.py): a test that starts a process or a server
fails in ``-m "not e2e"``, even one that catches the error; marked ones are left out."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e  # it runs pytest in a subprocess

INNER = '''
import socket, subprocess, sys
import pytest

@pytest.fixture
def sims():
    yield []

def test_spawns():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_swallows_the_error():
    try:
        subprocess.run([sys.executable, "-c", "pass"])
    except Exception:
        pass

def test_serves():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()

def test_picks_a_free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))

@pytest.mark.e2e
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_by_its_fixture(sims):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''


def test_the_fast_tier_fails_what_starts_a_process_or_a_server(
        pytester: pytest.Pytester) -> None:
    from pathlib import Path

    tests = Path(__file__).parent
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(tests)!r})\n"
                          "pytest_plugins = ['plugins.tiers']\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-m", "not e2e", "-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=1, failed=3, deselected=2)
    out = result.stdout.str()
    assert "test_swallows_the_error started a subprocess in the fast tier: mark it e2e" in out
    assert "a listening socket (a server) in the fast tier" in out
    # the full run leaves every test alone
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0").assert_outcomes(
        passed=6)
