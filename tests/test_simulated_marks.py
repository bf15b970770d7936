"""SIMULATED goes with a simulated number wherever it goes (issue 23, point 7): ``runs compare``
as text, CSV, Markdown and JSON, a report's charts (their files travel alone), the dashboard's
compare view and its CSV export -- all from a real SQLite store with one run the simulator
served and one a real server did; and ``connect local`` to a profile that runs the simulator
shows the badge the demo shows, decided from what the server reports (not the host)."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dsv4tui.agent.bench import stats
from dsv4tui.core.store import RunStore
from dsv4tui.core.view import model as m
from dsv4tui.main import main


def _req(level: int, index: int, c: int, gap: float) -> dict[str, object]:
    return {"level": level, "concurrency": c, "index": index, "ok": True,
            "start_s": index * 0.5, "ttft_s": 0.05 + 0.01 * c, "ttfat_s": 0.05,
            "e2e_s": 0.1 + gap * 9 / 1000, "tpot_s": gap / 1000, "output_tokens": 10,
            "prompt_tokens": 5, "token_source": "usage", "chunks": 10,
            "chunk_gaps_ms": [gap] * 9, "status": 200}


def seed(store: RunStore, label: str, gap: float, simulated: bool) -> int:
    run_id = store.start_run(label=label, host="demo" if simulated else "ct200",
                             backend="triton", checkpoint="MXFP4", model="deepseek-v4-flash",
                             gpu_names=["NVIDIA H200"] * 8, simulated=simulated,
                             plan={"input_len": 5, "output_len": 10})
    for li, c in enumerate((1, 8)):
        reqs = [_req(li, i, c, gap) for i in range(4)]
        for r in reqs:
            store.add_request(run_id, r)
        store.add_level(run_id, {**stats.level_metrics(reqs, c, 4), "level": li,
                                 "started_at": 10.0, "finished_at": 20.0})
        store.set_level_gpus(run_id, li, [{"gpu": g, "frames": 5, "util_mean": 90.0,
                                           "tensor_mean": 2.0, "power_mean_w": 400.0}
                                          for g in range(8)])
    store.finish_run(run_id, "done")
    return run_id


@pytest.fixture
def real_and_sim() -> tuple[int, int]:
    with RunStore() as store:
        return seed(store, "real_triton", 40.0, False), seed(store, "demo_triton", 30.0, True)


def test_runs_compare_marks_the_simulated_run_in_every_format(
        real_and_sim: tuple[int, int], capsys: pytest.CaptureFixture[str]) -> None:
    """Before: text, CSV and Markdown carried no mark; JSON only under "runs"."""
    real, sim = real_and_sim
    ids = [str(real), str(sim)]
    assert main(["runs", "compare", *ids]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"SIMULATED: #{sim} measured the built-in simulator, not a real server"
    assert f"#{sim} = demo_triton (SIMULATED) (demo, triton/MXFP4)" in text
    assert f"#{real} = real_triton (ct200, triton/MXFP4)  <- baseline" in text
    rows = [line for line in text if re.match(r"^\d+ ", line)]
    assert len(rows) == 4
    assert all((f"#{sim} SIM" in line) == (f"#{sim}" in line) for line in rows)
    assert not any(f"#{real} SIM" in line for line in rows)

    assert main(["runs", "compare", *ids, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["run_id"], r["simulated"]) for r in table} == {(str(real), "0"), (str(sim), "1")}

    assert main(["runs", "compare", *ids, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith(f"**SIMULATED: \\#{sim} measured the built-in simulator")
    assert md.count("demo\\_triton (SIMULATED)") == 2 and "real\\_triton (SIMULATED)" not in md

    assert main(["runs", "compare", *ids, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["simulated"] is True
    assert {(r["run_id"], r["simulated"]) for r in data["rows"]} == {(real, False), (sim, True)}

    assert main(["runs", "export", str(sim), "--format", "md"]) == 0  # one run's Markdown
    assert capsys.readouterr().out.startswith(
        f"## Run {sim}: demo\\_triton (SIMULATED: the built-in simulator, not a real server)")
    assert main(["runs", "export", str(real), "--format", "md"]) == 0
    assert "SIMULATED" not in capsys.readouterr().out

    with RunStore() as store:  # only real runs: no mark anywhere
        other = seed(store, "real_marlin", 35.0, False)
    assert main(["runs", "compare", str(real), str(other)]) == 0
    assert "SIM" not in capsys.readouterr().out


def test_a_report_s_chart_files_say_simulated(
        real_and_sim: tuple[int, int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: the SVG charts beside a Markdown report (sent on their own) had no mark."""
    pytest.importorskip("matplotlib")
    real, sim = real_and_sim
    out = tmp_path / "r.md"
    assert main(["runs", "report", str(real), str(sim), "--out", str(out), "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"][1:]
    assert files
    for name in files:
        words = "".join(ET.parse(name).getroot().itertext())
        assert "· SIMULATED" in words, name  # the title
        assert "demo_triton (SIMULATED)" in words and "real_triton (SIMULATED)" not in words
    md = out.read_text()
    assert "demo\\_triton (SIMULATED)" in md  # the compare table's rows, too
    html = tmp_path / "r.html"
    assert main(["runs", "report", str(real), str(sim), "--out", str(html)]) == 0
    capsys.readouterr()
    page = html.read_text()
    assert page.count("per C · SIMULATED") >= 3
    # a report of real runs only: no mark on its charts
    with RunStore() as store:
        other = seed(store, "real_marlin", 35.0, False)
    assert main(["runs", "report", str(real), str(other), "--out", str(tmp_path / "x.md"),
                 "--json"]) == 0
    for name in json.loads(capsys.readouterr().out)["files"][1:]:
        assert "SIMULATED" not in "".join(ET.parse(name).getroot().itertext())


async def test_the_compare_view_and_its_export_mark_the_simulated_run(
        real_and_sim: tuple[int, int]) -> None:
    from plugins.pilot import until
    from textual.widgets import DataTable

    from dsv4tui.core import paths
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.screens.runs import CompareScreen
    from dsv4tui.tui.widgets.charts import Chart

    real, sim = real_and_sim
    store = RunStore()
    app = Dsv4App(store=store, start_mode="runs")
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            app.runs.load_compare([real, sim])
            await until(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "compare")
            screen = app.screen
            await until(pilot, lambda: screen.query_one("#cmp-table", DataTable).row_count == 4,
                        10, "the table")
            table = screen.query_one("#cmp-table", DataTable)
            names = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
            assert names.count("demo_triton SIM") == 2  # the box's title says SIMULATED
            assert names.count("real_triton (base)") == 2
            assert "SIMULATED" in str(screen.query_one("#cmp-table-box").border_title)
            assert all(chart.title.endswith("· SIMULATED") for chart in screen.query(Chart))
            await pilot.press("e")
            exports = paths.data_dir() / "exports"
            await until(pilot, lambda: exports.is_dir() and any(exports.glob("*.csv")), 10,
                        "the export")
            rows = list(csv.DictReader(next(exports.glob("*.csv")).open(encoding="utf-8")))
            assert {(r["run_id"], r["simulated"]) for r in rows} == {(str(real), "0"),
                                                                     (str(sim), "1")}
            data = json.loads(next(exports.glob("*.json")).read_text())
            assert data["simulated"] is True
    finally:
        store.close()


def test_a_server_that_reports_it_is_the_simulator_is_marked() -> None:
    """What the host reports decides: the simulator's /server_info, or the command line the
    agent launched (before it answers); a stopped server clears it; the host name never."""
    model = m.UiModel()
    model.conn = m.Connection(host="local")
    assert not model.shows_simulated
    m.apply_status(model, {"state": "starting", "argv": ["/py", "-m", "dsv4tui.sim.sglang",
                                                         "--port", "30000"]})
    assert model.shows_simulated and not model.simulated  # not the demo host
    m.apply_status(model, {"state": "ready", "server_info": {"version": "0.5.2",
                                                             "simulated": {"gpu": "H200"}}})
    assert model.shows_simulated
    m.apply_status(model, {"state": "stopped"})
    assert not model.shows_simulated
    m.apply_status(model, {"state": "ready", "argv": ["/py", "-m", "sglang.launch_server"],
                           "server_info": {"version": "0.5.2"}})
    assert not model.shows_simulated
    demo = m.UiModel()
    demo.conn = m.Connection(host="anything", simulated=True)  # the demo host kind
    assert demo.shows_simulated


@pytest.mark.timeout(180)
@pytest.mark.e2e
async def test_connect_local_to_a_simulator_profile_shows_simulated(
        isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``connect local`` (a plain local host, not the demo) whose profile runs the simulator:
    the host bar says SIMULATED as the demo's does, and the server panel's /metrics source
    says simulated. Before: no mark anywhere."""
    import os
    import subprocess
    import sys

    from plugins.pilot import until
    from plugins.sim import REPO, free_port, sim_profile

    from dsv4tui.core import paths
    from dsv4tui.core.config import HostConfig, Settings
    from dsv4tui.core.hosts.resolve import HostSpec, connect
    from dsv4tui.core.server.control import start as start_server
    from dsv4tui.tui.app import Dsv4App
    from dsv4tui.tui.widgets.host_bar import HostBar
    from dsv4tui.tui.widgets.server_panel import ServerPanel

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    config = HostConfig(profiles={"sim": sim_profile(free_port())}, default_profile="sim")
    home = paths.local_agent_state_dir()
    spec = HostSpec("local", config, "local", env={"DSV4TUI_AGENT_HOME": str(home)})
    assert not spec.simulated  # not the demo host: the server has to say it
    host = await connect(spec)
    try:
        await start_server(host, "sim")
        app = Dsv4App(spec, settings=Settings())
        async with app.run_test(size=(140, 44)) as pilot:
            bar = app.screen.query_one(HostBar)
            await until(pilot, lambda: app.model.server.state == "ready"
                        and "SIMULATED" in str(bar.render()), 60, "the SIMULATED badge")
            assert app.model.shows_simulated and not app.model.simulated
            panel = app.screen.query_one(ServerPanel)
            await until(pilot, lambda: panel.source_text().startswith("simulated /metrics"), 30,
                        "the /metrics source marked")
            await pilot.pause(1.0)  # the screens the app mounts at start are up before it ends
    finally:
        await host.session.close()
        subprocess.run([sys.executable, "-m", "dsv4tui.agent", "server", "stop", "--grace",
                        "3"], env=dict(os.environ, DSV4TUI_AGENT_HOME=str(home)),
                       capture_output=True, timeout=60)
