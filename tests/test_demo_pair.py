"""The two-node demo host (``demo-pair``, ``dsv4tui demo --nodes 2``): two simulated nodes of
8 H200 on this machine, one launch at TP 16 across both, through the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugins.sim import REPO, free_port, group_alive, reap_server

from dsv4tui import main as cli
from dsv4tui.core import paths
from dsv4tui.core.nodes import watch as group_watch


@pytest.fixture
def demo_pair(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    extra = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + extra if extra else ""))
    monkeypatch.setenv("DSV4TUI_DEMO_PORT", str(free_port()))
    yield
    group_watch.end("demo-pair")
    for node in ("demo-node0", "demo-node1"):
        reap_server(paths.data_dir() / "demo" / node / "agent")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.e2e
def test_demo_pair_starts_both_nodes_and_stops_them(demo_pair: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "server", "start", "demo-pair", "--json")
    assert code == 0, out
    res = json.loads(out)
    assert res["ready"] and [n["node"] for n in res["nodes"]] == ["demo-node0", "demo-node1"]
    code, out = run(capsys, "server", "status", "demo-pair", "--json")
    st = json.loads(out)
    assert st["state"] == "ready" and [n["state"] for n in st["nodes"]] == ["ready", "ready"]
    for node in ("demo-node0", "demo-node1"):  # each node: its own simulated 8 H200
        sim = json.loads(Path(paths.data_dir() / "demo" / node / "sim-state.json").read_text())
        assert sim["gpu_name"] == "NVIDIA H200" and len(sim["gpu_ids"]) == 8
    pids = [n["pid"] for n in st["nodes"]]
    # a sweep targets node 0's endpoint; its GPU summary covers both nodes' 16 GPUs
    code, out = run(capsys, "sweep", "demo-pair", "--label", "pair", "--levels", "4:8",
                    "--output-len", "32", "--input-len", "16", "--no-sanity", "--json")
    assert code == 0, out
    code, out = run(capsys, "runs", "show", "1", "--json")
    [level] = json.loads(out)["levels"]
    assert [g["gpu"] for g in level["gpus"]] == list(range(16))
    assert all(g["frames"] >= 1 for g in level["gpus"])
    # a second start is refused by the nodes and leaves the running group alone
    code, out = run(capsys, "server", "start", "demo-pair")
    assert code != 0 and "already running" in out and "nothing was started" in out
    code, out = run(capsys, "server", "status", "demo-pair", "--json")
    assert json.loads(out)["state"] == "ready"
    code, out = run(capsys, "server", "stop", "demo-pair", "--grace", "10")
    assert code == 0, out
    assert "node demo-node0 (rank 0): stopped pid" in out
    assert "node demo-node1 (rank 1): stopped pid" in out
    assert not any(group_alive(p) for p in pids)
    assert group_watch.last_failure("demo-pair") is None  # a stop is not a failure


def test_demo_names_are_reserved(capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file().write_text('[hosts.demo-pair]\nssh = "x"\n')
    code, out = run(capsys, "server", "status", "demo-pair", "--dry-run")
    assert code == 2 and "'demo-pair' is a built-in host name" in out


def test_campaigns_on_a_host_made_of_nodes_are_refused(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    paths.config_file().write_text('[campaigns.c]\nhost = "demo-pair"\n'
                                   'variants = [{name = "a"}]\n')
    code, out = run(capsys, "campaign", "start", "c", "--dry-run")
    assert code == 2 and "demo-pair is a host made of nodes" in out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.e2e
def test_a_node_that_cannot_be_reached_is_its_state(capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file().write_text(
        '[hosts.b]\nssh = "127.0.0.1:1"\nconnect_timeout_s = 3\n'
        '[hosts.pair]\nnodes = ["local", "b"]\n'
        '[hosts.pair.profiles.p]\nmodel_path = "/m"\ntp_size = 16\n')
    code, out = run(capsys, "server", "status", "pair", "--json")
    assert code == 0, out
    st = json.loads(out)
    assert st["state"] == "partial"
    assert [(n["node"], n["state"]) for n in st["nodes"]] == [("local", "stopped"),
                                                              ("b", "unreachable")]
    assert "connection refused" in st["nodes"][1]["error"]
    code, out = run(capsys, "hosts", "--json")
    rows = {r["name"]: r for r in json.loads(out)["hosts"]} if out.lstrip().startswith("{") \
        else {r["name"]: r for r in json.loads(out)}
    assert rows["pair"]["nodes"] == ["local", "b"] and rows["demo-pair"]["nodes"]


@pytest.mark.e2e
def test_logs_of_a_host_made_of_nodes_show_every_node(demo_pair: None,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "server", "start", "demo-pair", "--json")
    assert code == 0, out
    try:
        code, out = run(capsys, "logs", "demo-pair", "--lines", "50")
        assert code == 0, out
        tagged = [line for line in out.splitlines() if " │ " in line]
        assert {line.split(" │ ")[0].strip() for line in tagged} == {"demo-node0", "demo-node1"}
        assert any("node_rank=1" in line or "rank 1" in line for line in tagged
                   if line.startswith("demo-node1"))
        code, out = run(capsys, "logs", "demo-pair", "--node", "demo-node1", "--lines", "5",
                        "--json")
        assert code == 0, out
        events = [json.loads(line) for line in out.splitlines()]
        assert events and {e["node"] for e in events} == {"demo-node1"}
        code, out = run(capsys, "logs", "demo-pair", "--node", "nope")
        assert code == 2 and "demo-node0, demo-node1" in out and "Traceback" not in out
    finally:
        code, out = run(capsys, "server", "stop", "demo-pair", "--grace", "10")
        assert code == 0, out
