"""What the dashboard decides without Textual: the run list and what compares or reports
(dsv4tui.core.view.runs), the files it writes for the user (dsv4tui.core.outputs), its first
steps on a host and what quitting leaves there (dsv4tui.core.hosts.visit), the adopt offer,
the host's profiles as the model shows them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from plugins.sim import sim_profile

from dsv4tui.core import outputs
from dsv4tui.core.campaign.view import CampaignView, VariantView
from dsv4tui.core.config import HostConfig, Settings
from dsv4tui.core.errors import UserError
from dsv4tui.core.hosts import visit
from dsv4tui.core.server import adopt
from dsv4tui.core.store import RunStore
from dsv4tui.core.view import profiles
from dsv4tui.core.view.model import RunRow, RunsView
from dsv4tui.core.view.runs import Newest, baseline_of, latest_runs, run_rows


def row(run_id: int) -> RunRow:
    return RunRow(run_id, f"run{run_id}", 0.0, "h", None, None, None, "done")


def test_the_run_list_is_the_stores_newest_runs(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite3") as store:
        first = store.start_run(label="MXFP4_triton", host="demo", backend="triton")
        second = store.start_run(label="NVFP4_marlin", host="demo", simulated=True)
        store.finish_run(first, "done")
        rows = run_rows(store)
    assert [(r.run_id, r.label, r.status) for r in rows] == [
        (second, "NVFP4_marlin", "running"), (first, "MXFP4_triton", "done")]
    assert rows[0].simulated and rows[1].backend == "triton"


def test_a_slow_older_read_of_the_run_list_never_wins() -> None:
    reads = Newest()
    older, newer = reads.ask(), reads.ask()
    assert reads.show(newer)
    assert not reads.show(older)
    assert reads.show(0)  # a read that did not ask: always shown


def test_a_fresh_read_drops_the_marks_of_runs_that_are_gone() -> None:
    runs = RunsView(rows=[row(1), row(2), row(3)], marked=[3, 1], loading=True)
    runs.set_rows([row(2), row(3)])
    assert runs.marked == [3] and not runs.loading


def test_the_baseline_counts_only_among_the_compared_runs() -> None:
    runs = RunsView(baseline=2)
    assert baseline_of(runs, [1, 2]) == 2 and baseline_of(runs, [1, 3]) is None


def test_the_campaign_compares_each_variants_latest_run() -> None:
    cv = CampaignView(variants=[VariantView("a", "a", run_ids=[1, 4]), VariantView("b", "b"),
                                VariantView("c", "c", run_ids=[5])])
    assert latest_runs(cv) == [4, 5]


def test_a_screenshot_goes_to_the_data_dirs_screenshots(isolated_env: Path) -> None:
    name = outputs.screenshot_name("bench")
    assert name.startswith("dsv4tui-bench-") and name.endswith(".svg")
    notice = outputs.write_screenshot("<svg/>", name)
    path = Path(os.environ["DSV4TUI_DATA_DIR"]) / "screenshots" / name
    assert path.read_text() == "<svg/>" and str(path) in notice.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_screenshot_that_cannot_be_written_is_a_one_line_error(isolated_env: Path) -> None:
    folder = Path(os.environ["DSV4TUI_DATA_DIR"]) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(UserError, match="cannot write"):
            outputs.write_screenshot("<svg/>", "x.svg")
    finally:
        folder.chmod(stat.S_IRWXU)


def test_nothing_compared_is_nothing_to_export(isolated_env: Path) -> None:
    with pytest.raises(UserError, match="compare 2\\+ runs first"):
        outputs.export_compare(None)


def test_arriving_at_a_host_watches_what_runs_there() -> None:
    running = {"id": "c2", "state": "running", "kind": "sweep"}
    last = {"id": "c1", "state": "done", "kind": "campaign"}
    step = visit.arrival({"state": "stopped"}, [last, running], autostart=True, ours=False)
    assert step.attach == running and step.show_last is None and not step.restart


def test_arriving_at_a_stopped_demo_host_starts_its_server_and_shows_the_last_campaign() -> None:
    last = {"id": "c1", "state": "done", "kind": "campaign"}
    step = visit.arrival({"state": "stopped"}, [last], autostart=True, ours=False)
    assert step.restart and step.show_last == last and not step.sanity


def test_arriving_at_our_ready_server_checks_it_is_still_sane() -> None:
    assert visit.arrival({"state": "ready"}, [], autostart=False, ours=True).sanity
    assert not visit.arrival({"state": "ready"}, [], autostart=False, ours=False).sanity
    assert visit.arrival({"state": "stopped"}, [], autostart=False, ours=True) == visit.Arrival()


def test_quitting_says_what_goes_on_on_the_host() -> None:
    assert "keeps starting" in visit.quit_warning("restart", simulated=True, watched=None,
                                                  own=None)
    ours = visit.quit_warning("sweep", simulated=True, watched="c1", own="c1")
    assert "cancels it with the simulated server" in ours
    theirs = visit.quit_warning("campaign", simulated=False, watched="c2", own="c1")
    assert "(started elsewhere)" in theirs and "campaign attach HOST" in theirs
    mine = visit.quit_warning("sweep", simulated=False, watched="c1", own="c1")
    assert "goes on without this console" in mine and "elsewhere" not in mine


def test_a_server_we_did_not_start_is_offered_for_adoption_once() -> None:
    status = {"state": "foreign", "port": 30000, "foreign": {"pid": 4242}}
    offered: set[object] = set()
    text = adopt.offer(status, offered, simulated=False, key="A")
    assert text is not None and "pid 4242" in text and "press A to adopt it" in text
    assert adopt.offer(status, offered, simulated=False, key="A") is None
    assert adopt.offer({"state": "ready"}, set(), simulated=False, key="A") is None
    assert adopt.offer(status, set(), simulated=True, key="A") is None  # built-in profiles


def test_adopted_profiles_replace_the_hosts_in_place() -> None:
    cfg = HostConfig(profiles={"mine": sim_profile(1)}, default_profile="mine")
    written = Settings(hosts={"local": HostConfig(profiles={"mine": sim_profile(1),
                                                            "adopted": sim_profile(2)},
                                                  default_profile="adopted")})
    same = cfg.profiles
    adopt.take_profiles(cfg, written, "local")
    assert cfg.profiles is same and list(same) == ["mine", "adopted"]
    assert cfg.default_profile == "adopted"


def test_a_hosts_model_lists_its_profiles_with_the_fields_they_set() -> None:
    cfg = HostConfig(profiles={"a": sim_profile(31000, checkpoint="MXFP4"),
                               "b": sim_profile(31001, "--x", checkpoint="NVFP4")},
                     default_profile="b")
    model = profiles.model_for("box", cfg, simulated=True)
    assert [p.name for p in model.profiles] == ["a", "b"] and model.active_profile == "b"
    assert model.conn.host == "box" and model.simulated and model.telemetry is not None
    fields = dict(model.profiles[1].fields)
    assert fields["port"] == "31001" and "--x" in fields["extra args"]


def test_a_stored_capture_says_what_it_measured_and_its_run() -> None:
    from dsv4tui.core.campaign.kernels import ServerContext, Taken, progress_text

    ctx = ServerContext(host="demo", profile_name="mxfp4", server_pid=7, launch_id=3,
                        backend="triton", checkpoint="MXFP4", simulated=True,
                        server_started_at=None)
    assert Taken(5, 9, ctx, "mxfp4", 16).text() == (
        "stored capture #5 of triton/MXFP4 at C=16 (launch 3), with run 9")
    lonely = Taken(6, None, ServerContext(host="demo"), "mxfp4", 4).text()
    assert "of mxfp4 at C=4 (launch unknown)" in lonely and "not linked to a run" in lonely
    assert progress_text({"type": "kernels_phase", "message": "warming up"}) == "warming up"
    assert progress_text({"type": "kernels_target", "url": "http://h:1"}) == (
        "capturing kernels of http://h:1 ...")
    assert progress_text({"type": "request"}) is None
